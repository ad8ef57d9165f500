#!/usr/bin/env bash
# onnx_export.sh — `cnnscale export RUN_DIR --onnx OUT.onnx` (issue 49 item 4) for models that
# together use every layer cnnscale has (resnet18: conv, bn, ReLU, max-pool, add, global pool,
# linear; mobilenet_v2: ReLU6; mobilenet_v3_large: hard-swish, hard-sigmoid, squeeze-and-
# excitation; efficientnet_b0: SiLU, stochastic depth, dropout; convnext_tiny: layer norm,
# layer scale, GELU, pointwise linears; shufflenet_v2_x1_0: channel slices and shuffles,
# concat; densenet121: concat, average pool; squeezenet1_1: ceil-mode pools; a spec with a
# padded average pool and an adaptive pool whose bins overlap; a spec with transposed
# convolutions, nearest and bilinear up-sampling (align_corners False and True) and leaky ReLUs,
# whose export is also imported back (ConvTranspose, Resize, LeakyRelu: the same logits from
# the same checkpoint); a user's CNN imported from ONNX):
# after 2 training steps (running statistics moved), the exported file
# - passes onnx.checker, has a dynamic batch dimension, and its initializers are the
#   checkpoint's tensors under their state_dict names, equal values;
# - run by ONNX Runtime (PyPI onnxruntime, the venv of scripts/python-venv.sh) at batch 3 and
#   batch 1 gives cnnscale's own evaluation logits (cnnscale_resnet_tool eval) to 1e-5 of the
#   largest logit;
# and export refuses what it must: no --onnx, an existing file without --force, a missing source.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
TOOL="$CNNSCALE_BUILD/tests/cnnscale_resnet_tool"
require_python "onnx, h5py" "python3-onnx python3-h5py"
ort_python
if [ -z "$ORT_PY" ]; then
  echo "SKIP: no python imports onnxruntime (scripts/python-venv.sh installs it; or set CNNSCALE_ORT_PYTHON)"
  exit 77
fi
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
"$PY" "$CNNSCALE_SOURCE/scripts/export-onnx.py" "$CNNSCALE_SOURCE/tests/nn/onnx/user_cnn.py:UserCNN" \
  "$TMP/user.onnx" --kwargs '{"classes": 5}' --input-shape 3,64,64 --seed 5 >"$TMP/export-user.log" 2>&1
expect_eq "user CNN exported for import" 0 "$?"
MODELS=(resnet18 mobilenet_v2 mobilenet_v3_large efficientnet_b0 convnext_tiny shufflenet_v2_x1_0 densenet121
  squeezenet1_1 "conv(16,3,2,1) bn relu6 avgpool(3,2,1) conv(24,3,1,1) relu adaptivepool(3,5) flatten dropout(0.3) linear(5)"
  "conv(8,3,2,1) leaky_relu(0.2) deconv(6,2,2) relu upsample(2) conv(6,3,2,1) bilinear(2) deconv(4,3,2,1) conv(8,3,2) bilinear(2,1) leaky_relu gap flatten linear(5)"
  "$TMP/user.onnx")
i=0
for M in "${MODELS[@]}"; do
  i=$((i + 1))
  d="$TMP/m$i"
  tag=$(basename "$M" | cut -c1-40)
  mkdir -p "$d"
  "$CNNSCALE" train --synthetic --model "$M" --image-size 64 --channels 3 --classes 5 --batch-size 4 \
    --synthetic-samples 16 --max-steps 2 --lr 0.002 --momentum 0.9 --seed 3 --run-dir "$d/run" >"$d/train.log" 2>&1
  expect_eq "$tag: 2 training steps" 0 "$?"
  "$CNNSCALE" export "$d/run" --onnx "$d/model.onnx" >"$d/export.log" 2>&1
  expect_eq "$tag: cnnscale export RUN_DIR --onnx" 0 "$?"
  "$PY" -c "import numpy as np; np.random.seed(11); np.random.randn(3, 3, 64, 64).astype(np.float32).tofile('$d/x.f32')"
  ck=$(ls "$d"/run/checkpoints/step-*.h5 | tail -1)
  "$TOOL" eval "$M" 3 64 64 5 "$ck" "$d/x.f32" 3 "$d/ours.f32" >"$d/eval.log" 2>&1
  expect_eq "$tag: cnnscale eval logits" 0 "$?"
  if [[ "$M" == *deconv* ]]; then  # the export read back by the importer: the same network
    # (init: a checkpoint of the file's own initializers, the exported checkpoint's values)
    "$TOOL" init "$d/model.onnx" 3 64 64 5 7 "$d/back" >"$d/back.log" 2>&1 &&
      "$TOOL" eval "$d/model.onnx" 3 64 64 5 "$d/back/step-00000000.h5" "$d/x.f32" 3 "$d/back.f32" >>"$d/back.log" 2>&1
    expect_eq "$tag: the export imported back evaluates" 0 "$?"
    cmp -s "$d/ours.f32" "$d/back.f32"
    expect_eq "$tag: imported back, bitwise the same logits" 0 "$?"
  fi
  "$ORT_PY" - "$d" >"$d/ort.txt" 2>&1 <<'PYEOF'
import sys

import numpy as np
import onnxruntime as ort

d = sys.argv[1]
s = ort.InferenceSession(f"{d}/model.onnx", providers=["CPUExecutionProvider"])
x = np.fromfile(f"{d}/x.f32", np.float32).reshape(3, 3, 64, 64)
y3 = s.run(["logits"], {"input": x})[0]
y1 = s.run(["logits"], {"input": x[1:2]})[0]
ours = np.fromfile(f"{d}/ours.f32", np.float32).reshape(3, 5)
scale = float(np.abs(ours).max())
e3 = float(np.abs(y3 - ours).max()) / scale
e1 = float(np.abs(y1 - ours[1:2]).max()) / scale
print(("ok " if e3 <= 1e-5 else "FAIL ") + f"ONNX Runtime's logits at batch 3 equal cnnscale's eval (max |diff| / max |logit| = {e3:.1e} <= 1e-5)")
print(("ok " if e1 <= 1e-5 else "FAIL ") + f"at batch 1 too (dynamic batch; {e1:.1e})")
PYEOF
  expect_eq "$tag: ONNX Runtime ran" 0 "$?"
  report_lines "$d/ort.txt" "$tag: "
  "$PY" - "$d" "$ck" >"$d/names.txt" 2>&1 <<'PYEOF'
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper

d, ck = sys.argv[1:3]
sys.path.insert(0, os.environ["CNNSCALE_SOURCE"] + "/tests/nn")
from torch_reference import _state as state  # noqa: E402

m = onnx.load(f"{d}/model.onnx")
onnx.checker.check_model(m)
print("ok onnx.checker passes")
dim0 = m.graph.input[0].type.tensor_type.shape.dim[0]
print(("ok " if dim0.dim_param and not dim0.HasField("dim_value") else "FAIL ") + "the batch dimension is dynamic")
sd = state(ck)
bad = []
for t in m.graph.initializer:
    a = numpy_helper.to_array(t)
    if t.name not in sd or not np.array_equal(a.reshape(-1), sd[t.name].numpy().reshape(-1)):
        bad.append(t.name)
want = {k for k in sd if not k.endswith("num_batches_tracked")}
got = {t.name for t in m.graph.initializer}
print(("ok " if not bad and got == want else "FAIL ") + f"{len(got)} initializers: the checkpoint's tensors under "
      f"their state_dict names, equal values" + (f" (differ: {bad[:3]}; missing: {sorted(want - got)[:3]})"
                                                  if bad or got != want else ""))
PYEOF
  expect_eq "$tag: names check ran" 0 "$?"
  report_lines "$d/names.txt" "$tag: "
done

# Refusals
"$CNNSCALE" export "$TMP/m1/run" >"$TMP/e1.log" 2>&1
expect_eq "no --onnx: exit status 2" 2 "$?"
expect_grep "no --onnx: one clear error" "^cnnscale: error: export: --onnx OUT.onnx is required" "$TMP/e1.log"
"$CNNSCALE" export "$TMP/m1/run" --onnx "$TMP/m1/model.onnx" >"$TMP/e2.log" 2>&1
expect_eq "existing file: exit status 2" 2 "$?"
expect_grep "existing file: kept, --force named" "^cnnscale: error: export: --onnx .* exists; .* --force" "$TMP/e2.log"
"$CNNSCALE" export "$TMP/m1/run" --onnx "$TMP/m1/model.onnx" --force >"$TMP/e3.log" 2>&1
expect_eq "--force replaces it" 0 "$?"
"$CNNSCALE" export "$TMP/none" --onnx "$TMP/x.onnx" >"$TMP/e4.log" 2>&1
expect_eq "missing source: exit status 2" 2 "$?"
expect_grep "missing source: one clear error" "^cnnscale: error: export: .*none: no such run directory or checkpoint" "$TMP/e4.log"
# A checkpoint from before cnnscale recorded the model's input shape and classes: export asks
# for them, then writes the same file.
cp "$(ls "$TMP"/m1/run/checkpoints/step-*.h5 | tail -1)" "$TMP/old.h5"
"$PY" -c "
import h5py
with h5py.File('$TMP/old.h5', 'r+') as f:
    for a in ('input_channels', 'input_height', 'input_width', 'classes'):
        del f.attrs[a]"
"$CNNSCALE" export "$TMP/old.h5" --onnx "$TMP/old.onnx" >"$TMP/e5.log" 2>&1
expect_eq "old checkpoint: exit status 2" 2 "$?"
expect_grep "old checkpoint: asks for --input-shape and --classes" \
  "^cnnscale: error: export: .*old.h5 does not record .* give --input-shape C,H,W and --classes K" "$TMP/e5.log"
"$CNNSCALE" export "$TMP/old.h5" --onnx "$TMP/old.onnx" --input-shape 3,64,64 --classes 5 >"$TMP/e6.log" 2>&1
expect_eq "old checkpoint with --input-shape and --classes" 0 "$?"
cmp -s "$TMP/old.onnx" "$TMP/m1/model.onnx"
expect_eq "the same file as from the run directory" 0 "$?"
finish
