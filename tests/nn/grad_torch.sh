#!/usr/bin/env bash
# grad_torch.sh — one training step of mnist_cnn, lenet5 and one-line spec models (two of
# them with grouped and depthwise convolutions and the activations relu6, sigmoid, silu,
# hardswish, gelu, one with leaky ReLU, one with transposed convolutions, one with up-sampling, one with concatenations and ceil-mode max-pools, one with hard-sigmoid,
# stochastic depth, layer norm and layer scale) against
# PyTorch (issue 47): for each model at two input sizes (odd ones, strided convolutions and
# padded pools over odd inputs), `cnnscale train --synthetic` takes 2 SGD steps (weights no
# longer at their initialisation, running statistics updated), then one training
# forward/backward of a batch of 3 from that checkpoint (cnnscale_resnet_tool grad --capture)
# is recomputed by tests/nn/torch_reference.py with torch's functional ops in float64 and in
# float32 (dropout and stochastic-depth masks recomputed from their definition): the loss (1e-5), every gradient
# as close to float64's as torch fp32's (per tensor, 3× + 1e-4), the running statistics
# (1e-4), and cnnscale's ReLU and max-pool decisions equal to float64's wherever float64 is
# not within 1e-4 of a tie (at a tie the reference follows cnnscale: torch_reference.py says
# why). Everything runs twice: with oneDNN's kernels for this CPU and with
# ONEDNN_MAX_CPU_ISA forcing another family (AVX2 on AVX-512, SSE4.1 on AVX2: lib.sh,
# onednn_isas), and the forced ISA is checked to be the one oneDNN ran.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
TOOL="$CNNSCALE_BUILD/tests/cnnscale_resnet_tool"
require_python "torch, h5py" "python3-torch python3-h5py"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
onednn_isas

check() {  # check ISA NAME MODEL C H W CLASSES
  local isa=$1 name=$2 m=$3 c=$4 h=$5 w=$6 k=$7 d="$TMP/$1-$2"
  mkdir -p "$d/cap"
  with_isa "$isa" "$CNNSCALE" train --synthetic --model "$m" --image-size "${h}x$w" --channels "$c" --classes "$k" \
    --batch-size 4 --synthetic-samples 16 --max-steps 2 --lr 0.05 --momentum 0.9 --seed 3 --run-dir "$d/run" \
    >"$d/train.log" 2>&1
  expect_eq "$isa $name: cnnscale train --synthetic 2 steps" 0 "$?"
  cp "$d/run/checkpoints/step-00000002.h5" "$d/ckpt.h5"
  "$PY" -c "import numpy as np; np.random.seed(11); np.random.randn(3, $c, $h, $w).astype(np.float32).tofile('$d/x.f32')"
  "$PY" -c "import numpy as np; np.random.seed(12); np.random.randint(0, $k, 3).astype(np.int32).tofile('$d/y.i32')"
  with_isa "$isa" "$TOOL" grad "$m" "$c" "$h" "$w" "$k" "$d/ckpt.h5" "$d/x.f32" 3 "$d/grad.f32" "$d/y.i32" \
    --capture "$d/cap" >"$d/grad.txt" 2>"$d/grad.err"
  expect_eq "$isa $name: training step with --capture" 0 "$?"
  "$PY" "$CNNSCALE_SOURCE/tests/nn/torch_reference.py" graph "$m" "$c" "$h" "$w" "$k" "$d" >"$d/result" 2>&1
  expect_eq "$isa $name: torch reference ran" 0 "$?"
  report_lines "$d/result" "$isa $name: "
  [ "$_fail" -eq 0 ] || { tail -n 3 "$d/train.log" "$d/grad.err" | sed 's/^/    | /'; }
}

SPEC_A="conv(8,3,2,1) bn relu maxpool(3,2,1) conv(16,3,2) bn relu res(conv(16,3,1,1) bn relu conv(16,3,1,1) bn) relu avgpool(2) flatten dropout(0.3) linear(6)"
SPEC_B="conv(12,5,2,2) relu conv(12,3,2) bn relu maxpool(2) conv(10,1,1) relu gap flatten linear(4)"
# Grouped and depthwise convolutions (issue 49: MobileNet's depthwise 3×3 + pointwise 1×1,
# a grouped strided 3×3, a depthwise one inside a residual block).
SPEC_C="conv(16,3,2,1) bn relu conv(16,3,1,1,16) bn relu conv(24,1) relu conv(24,3,2,1,4) bn relu res(conv(24,3,1,1,24) bn relu conv(24,1)) relu gap flatten linear(5)"
# The activations of the CNN zoo (issue 49): SiLU, ReLU6, hard-swish, GELU, sigmoid (on flat
# features too), after batch norms, depthwise and strided convolutions; squeeze-and-excitation
# (se: x · sigmoid(fc2(relu(fc1(gap(x)))))) after a depthwise conv and after GELU.
SPEC_D="conv(16,3,2,1) bn silu conv(16,3,1,1,16) bn relu6 se(4) conv(24,1) hardswish conv(24,3,2,1) gelu se(6) gap flatten linear(8) sigmoid linear(5)"
# CosmoFlow's activation (issue 50): leaky ReLU, slope 0.3 after a strided conv, PyTorch's
# default 0.01 on flat features, and after a max-pool.
SPEC_G="conv(12,3,2,1) leaky_relu(0.3) maxpool(2) conv(16,2) bn leaky_relu(0.3) gap flatten linear(8) leaky_relu linear(5)"
# U-Net's up path (issue 50): transposed convolutions (ConvTranspose2d) of kernel 2 stride 2,
# kernel 3 stride 2 padding 1 and kernel 3 stride 1 over odd inputs, with batch norm and a
# concatenation of the up-sampled map with an encoder map of the same size.
SPEC_H="conv(8,3,1,1) bn relu cat(| maxpool(2) conv(12,3,1,1) relu deconv(8,2,2) relu) conv(8,3,1,1) deconv(6,3,2,1) relu deconv(4,3) conv(4,3,2) flatten linear(5)"
# Concatenation and ceil-mode max-pool (issue 49: a SqueezeNet Fire module, a DenseNet dense
# block with its transition, a branch that is the input itself); 39×33 puts clipped last
# windows on the ceil-mode pools.
SPEC_E="conv(16,3,2) relu maxpool(3,2,0,1) conv(8,1) relu cat(conv(12,1) relu | conv(12,3,1,1) relu) maxpool(3,2,0,1) cat(| bn relu conv(16,1) bn relu conv(8,3,1,1)) bn relu conv(16,1) avgpool(2) gap flatten linear(5)"
# MobileNetV3's, EfficientNet's and ConvNeXt's pieces (issue 49): hard-sigmoid, batch norm, a depthwise
# conv inside residual branches that stochastic depth drops or scales per sample (the checked
# step draws with seed 0, step 0, samples 0..2: the first branch drops sample 0, the second
# sample 2, the others are scaled by 2); then a ConvNeXt block (depthwise 7×7, LayerNorm over
# the channels, pointwise convs with GELU, layer scale) after a LayerNorm; a ShuffleNetV2 unit
# (halves, a branch, concat, channel shuffle) and VGG's adaptive pool (9×8 and 3×3 outputs).
SPEC_F="conv(16,3,2,1) bn hardswish res(conv(16,1) bn relu conv(16,3,1,1,16) bn hardsigmoid stochastic_depth(0.5)) res(conv(16,3,1,1) bn silu stochastic_depth(0.5)) layernorm res(conv(16,7,1,3,16) layernorm conv(32,1) gelu conv(16,1) layerscale(0.25)) cat(slice(0,8) | slice(8,16) conv(8,1) bn relu conv(8,3,1,1,8)) shuffle(2) adaptivepool(9,8) conv(16,3,2) adaptivepool(3,3) flatten linear(5)"
# U-Net's other up path: nearest and bilinear up-sampling (align_corners False, PyTorch's
# default, and True, nn.UpsamplingBilinear2d's), by 2 and 3, on odd sizes.
SPEC_I="conv(6,3,1,1) relu upsample(2) conv(6,3,2,1) bilinear(2) relu conv(6,3,1,1) bilinear(3,1) conv(4,3,2) gap flatten linear(5)"
for isa in "${ISAS[@]}"; do
  if [ "$isa" != native ]; then
    got=$(with_isa "$isa" "$TOOL" isa)
    expect_eq "ONEDNN_MAX_CPU_ISA=$isa: oneDNN runs that ISA" "$(tr '[:upper:]' '[:lower:]' <<<"$isa")" "$got"
  fi
  check "$isa" mnist_cnn-28x28 mnist_cnn 1 28 28 10
  check "$isa" mnist_cnn-31x23 mnist_cnn 1 31 23 10
  check "$isa" lenet5-33x29 lenet5 1 33 29 10
  check "$isa" specA-37x29 "$SPEC_A" 3 37 29 6
  check "$isa" specB-45x33 "$SPEC_B" 3 45 33 4
  check "$isa" specC-41x35 "$SPEC_C" 3 41 35 5
  check "$isa" specD-39x33 "$SPEC_D" 3 39 33 5
  check "$isa" specE-39x33 "$SPEC_E" 3 39 33 5
  check "$isa" specF-37x31 "$SPEC_F" 3 37 31 5
  check "$isa" specG-35x29 "$SPEC_G" 3 35 29 5
  check "$isa" specH-16x12 "$SPEC_H" 3 16 12 5
  check "$isa" specI-13x11 "$SPEC_I" 3 13 11 5
done
finish
