#!/usr/bin/env bash
# onnx_import.sh — `--model FILE.onnx` with a user's own CNN (tests/nn/onnx/user_cnn.py:
# depthwise convs, squeeze-and-excitation with SiLU, GELU as torch decomposes it, hard-swish,
# ReLU6, concatenation, a residual add, LeakyReLU(0.1) in a second export; a small U-Net
# (tests/nn/onnx/small_unet.py) with each up path: ConvTranspose2d, bilinear up-sampling with
# align_corners False and True, nearest: ONNX ConvTranspose and Resize, x.mean over H×W, dropout, a linear head registered
# first), exported by scripts/export-onnx.py as a user would, and every refusal the importer
# promises (issue 49 item 3):
# - `cnnscale train --model user.onnx` runs; its initial and 2-step checkpoints load STRICTLY into
#   the user's module, with cnnscale's eval logits equal to the module's (≤ 1e-4 × max |logit|);
# - one training step against the user's own module in float64 (dropout 0 for that export):
#   loss, and every gradient as close to float64's as torch float32's (3× + 1e-4), at 32×32 and
#   at 27×35 (the file's height and width are dynamic);
# - with dropout: one step against torch's functional ops over cnnscale's graph, following its
#   dropout masks (tests/nn/torch_reference.py graph);
# - one `cnnscale: error:` naming the cause and the way out for: an eval-mode export (batch norms
#   folded), an op cnnscale does not read (ELU: the node and op named, the supported list
#   given), a file that is not ONNX, a truncated file, a missing file, other channels than the
#   data's, other classes, a fixed size other than the data's, and hand-made hostile files (stride 0, a
#   weight of the wrong shape, negative padding, a drop ratio of 1.5, a foreign operator set, a
#   weight of 10^13 values with no data); never a crash;
# - a run of a moved file resumes and exports (--model); of an edited file (SHA-256) neither.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
TOOL="$CNNSCALE_BUILD/tests/cnnscale_resnet_tool"
require_python "torch, onnx, h5py" "python3-torch python3-onnx python3-h5py"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
EXPORT="$CNNSCALE_SOURCE/scripts/export-onnx.py"
USER_CNN="$CNNSCALE_SOURCE/tests/nn/onnx/user_cnn.py:UserCNN"
d="$TMP/user"
mkdir -p "$d"
"$PY" "$EXPORT" "$USER_CNN" "$d/user.onnx" --input-shape 3,32,32 --seed 5 >"$d/export.log" 2>&1
expect_eq "export-onnx.py user_cnn.py:UserCNN" 0 "$?"
"$PY" "$EXPORT" "$USER_CNN" "$d/user0.onnx" --kwargs '{"drop": 0.0}' --input-shape 3,32,32 --seed 5 \
  >>"$d/export.log" 2>&1
expect_eq "export-onnx.py user_cnn.py:UserCNN (dropout 0)" 0 "$?"
"$PY" "$EXPORT" "$USER_CNN" "$d/leaky0.onnx" --kwargs '{"drop": 0.0, "act": "leaky"}' --input-shape 3,32,32 --seed 5 \
  >>"$d/export.log" 2>&1
expect_eq "export-onnx.py user_cnn.py:UserCNN (LeakyReLU(0.1), dropout 0)" 0 "$?"
for up in deconv bilinear bilinear_ac nearest; do  # U-Net's up paths (tests/nn/onnx/small_unet.py)
  "$PY" "$EXPORT" "$CNNSCALE_SOURCE/tests/nn/onnx/small_unet.py:SmallUNet" "$d/unet-$up.onnx" --kwargs "{\"up\": \"$up\"}" \
    --input-shape 3,16,16 --seed 5 >>"$d/export.log" 2>&1
  expect_eq "export-onnx.py small_unet.py:SmallUNet (up path $up)" 0 "$?"
done
"$CNNSCALE" train --synthetic --model "$d/user.onnx" --image-size 32 --channels 3 --classes 4 --batch-size 4 \
  --synthetic-samples 16 --max-steps 2 --lr 0.05 --momentum 0.9 --seed 3 --run-dir "$d/run" >"$d/train.log" 2>&1
expect_eq "cnnscale train --model user.onnx, 2 steps" 0 "$?"
expect_grep "run.json names the model by its file" '"model": "user.onnx"' "$d/run/run.json"
"$TOOL" init "$d/user.onnx" 3 32 32 4 7 "$d/init" >"$d/init.log" 2>&1
expect_eq "init checkpoint" 0 "$?"
"$PY" -c "import numpy as np; np.random.seed(11); np.random.randn(3, 3, 32, 32).astype(np.float32).tofile('$d/x.f32')"
for ck in "$d/init/step-00000000.h5" "$d/run/checkpoints/step-00000002.h5"; do
  "$TOOL" eval "$d/user.onnx" 3 32 32 4 "$ck" "$d/x.f32" 3 "$ck.logits" >>"$d/eval.log" 2>&1
  expect_eq "eval of $(basename "$ck")" 0 "$?"
done
for case in user0:32x32 user0:27x35 leaky0:29x33 unet-deconv:20x28 unet-bilinear:20x28 unet-bilinear_ac:20x28 unet-nearest:20x28; do
  m=${case%%:*} sz=${case#*:}
  h=${sz%x*} w=${sz#*x} g="$TMP/step-$m-$sz"
  mkdir -p "$g/cap"
  "$TOOL" init "$d/$m.onnx" 3 "$h" "$w" 4 7 "$g/init" >/dev/null 2>&1
  cp "$g/init/step-00000000.h5" "$g/ckpt.h5"
  "$PY" -c "import numpy as np; np.random.seed(11); np.random.randn(4, 3, $h, $w).astype(np.float32).tofile('$g/x.f32'); np.random.seed(12); np.random.randint(0, 4, 4).astype(np.int32).tofile('$g/y.i32')"
  "$TOOL" grad "$d/$m.onnx" 3 "$h" "$w" 4 "$g/ckpt.h5" "$g/x.f32" 4 "$g/grad.f32" "$g/y.i32" >"$g/grad.txt" 2>"$g/grad.err"
  expect_eq "$sz: training step of $m.onnx" 0 "$?"
done
# With dropout: the step against torch over cnnscale's graph (its masks followed).
g="$TMP/drop"
mkdir -p "$g/cap"
cp "$d/run/checkpoints/step-00000002.h5" "$g/ckpt.h5"
cp "$d/x.f32" "$g/x.f32"
"$PY" -c "import numpy as np; np.random.seed(12); np.random.randint(0, 4, 3).astype(np.int32).tofile('$g/y.i32')"
"$TOOL" grad "$d/user.onnx" 3 32 32 4 "$g/ckpt.h5" "$g/x.f32" 3 "$g/grad.f32" "$g/y.i32" --capture "$g/cap" \
  >"$g/grad.txt" 2>"$g/grad.err"
expect_eq "training step of user.onnx with --capture" 0 "$?"
"$PY" "$CNNSCALE_SOURCE/tests/nn/torch_reference.py" graph user 3 32 32 4 "$g" >"$g/result" 2>&1
expect_eq "torch reference ran" 0 "$?"
report_lines "$g/result" "user.onnx with dropout: "

"$PY" - "$d" "$TMP" >"$d/result" 2>&1 <<'PYEOF'
import collections
import os
import sys

import numpy as np
import torch

d, tmp = sys.argv[1:3]
sys.path.insert(0, os.environ["CNNSCALE_SOURCE"] + "/tests/nn")
sys.path.insert(0, os.environ["CNNSCALE_SOURCE"] + "/tests/nn/onnx")
from torch_reference import _state as state, compare_grads  # noqa: E402
from user_cnn import UserCNN  # noqa: E402
from small_unet import SmallUNet  # noqa: E402


def report(name, good, detail=""):
    print(("ok " if good else "FAIL ") + name + (f" ({detail})" if detail else ""))


x = torch.from_numpy(np.fromfile(f"{d}/x.f32", np.float32).reshape(3, 3, 32, 32))
for tag, ck in (("init", f"{d}/init/step-00000000.h5"), ("2 steps", f"{d}/run/checkpoints/step-00000002.h5")):
    net = UserCNN()
    try:
        net.load_state_dict(collections.OrderedDict(state(ck)))
        report(f"{tag}: strict load_state_dict into the user's UserCNN", True)
    except RuntimeError as e:
        report(f"{tag}: strict load_state_dict into the user's UserCNN", False, str(e)[:300])
        continue
    with torch.no_grad():
        ref = net.eval()(x).numpy()
    ours = np.fromfile(ck + ".logits", np.float32).reshape(3, 4)
    err = float(np.abs(ours - ref).max() / max(np.abs(ref).max(), 1e-30))
    report(f"{tag}: eval logits equal the module's (max |diff| / max |logit| = {err:.2e} <= 1e-4)", err <= 1e-4)

for m, sz in (("user0", "32x32"), ("user0", "27x35"), ("leaky0", "29x33"), ("unet-deconv", "20x28"),
              ("unet-bilinear", "20x28"), ("unet-bilinear_ac", "20x28"), ("unet-nearest", "20x28")):
    h, w = map(int, sz.split("x"))
    g = f"{tmp}/step-{m}-{sz}"
    xs = torch.from_numpy(np.fromfile(f"{g}/x.f32", np.float32).reshape(4, 3, h, w))
    y = torch.from_numpy(np.fromfile(f"{g}/y.i32", np.int32).astype(np.int64))
    sd = state(f"{g}/ckpt.h5")
    grads, losses = {}, {}
    for dt in (torch.float64, torch.float32):
        net = (SmallUNet(up=m[5:]) if m.startswith("unet-") else
               UserCNN(drop=0.0, act="leaky" if m == "leaky0" else "gelu"))
        net.load_state_dict(collections.OrderedDict(sd))
        net = net.to(dt).train()
        loss = torch.nn.functional.cross_entropy(net(xs.to(dt)), y)
        loss.backward()
        losses[dt] = float(loss)
        grads[dt] = {k: p.grad.double() for k, p in net.named_parameters()}
    lines = open(f"{g}/grad.txt").read().split("\n")
    our_loss = float(next(line.split()[1] for line in lines if line.startswith("loss ")))
    sz = f"{m}.onnx {sz}"
    report(f"{sz}: loss equals the module's in float64 ({our_loss:.7f} vs {losses[torch.float64]:.7f})",
           abs(our_loss - losses[torch.float64]) <= 1e-5 * max(1.0, abs(losses[torch.float64])))
    flat = np.fromfile(f"{g}/grad.f32", np.float32).astype(np.float64)
    checked, bad, worst, worst_t = compare_grads(lines, flat, grads[torch.float64], grads[torch.float32])
    report(f"{sz}: gradients of all {checked} parameters as close to the module's float64 as torch fp32's "
           f"(worst {worst[0]:.1e} at {worst[1]}, torch fp32 {worst_t[0]:.1e})",
           checked == len(grads[torch.float64]) and not bad, "; ".join(bad[:4]))
PYEOF
expect_eq "python check ran" 0 "$?"
report_lines "$d/result" "user.onnx: "

# Refusals: one clear error each, exit status 2, never a crash.
e="$TMP/errors"
mkdir -p "$e"
"$PY" - "$e" "$CNNSCALE_SOURCE/tests/nn/onnx" >"$e/export.log" 2>&1 <<'PYEOF'
import sys

import torch

e = sys.argv[1]
sys.path.insert(0, sys.argv[2])
from user_cnn import UserCNN  # noqa: E402

torch.manual_seed(0)
# torch.onnx.export's default: eval mode, batch norms folded into the convs before them
torch.onnx.export(UserCNN().eval(), torch.randn(2, 3, 32, 32), f"{e}/eval.onnx", opset_version=14)
PYEOF
expect_eq "eval-mode export written" 0 "$?"
"$PY" "$EXPORT" "$USER_CNN" "$e/elu.onnx" --kwargs '{"act": "elu"}' --input-shape 3,32,32 >>"$e/export.log" 2>&1
"$PY" "$EXPORT" "$USER_CNN" "$e/fixed.onnx" --fixed-size --input-shape 3,32,32 >>"$e/export.log" 2>&1
echo "not a model" >"$e/text.onnx"
head -c 3000 "$d/user.onnx" >"$e/truncated.onnx"
refuse() {  # refuse NAME MODEL CHANNELS SIZE CLASSES PATTERN
  "$CNNSCALE" train --synthetic --model "$2" --channels "$3" --image-size "$4" --classes "$5" --batch-size 2 \
    --synthetic-samples 4 --max-steps 1 --run-dir "$e/run-$1" >"$e/$1.log" 2>&1
  expect_eq "$1: exit status 2" 2 "$?"
  expect_grep "$1: one clear error" "^cnnscale: error: .*$6" "$e/$1.log"
}
refuse eval-mode "$e/eval.onnx" 3 32 4 "eval-mode export .*export-onnx.py"
refuse unsupported "$e/elu.onnx" 3 32 4 "node '[^']*Elu' \\(Elu\\): is not supported; cnnscale reads: Conv, "
refuse not-onnx "$e/text.onnx" 3 32 4 "not an ONNX model, or a damaged one"
refuse truncated "$e/truncated.onnx" 3 32 4 "not an ONNX model, or a damaged one"
refuse missing "$e/none.onnx" 3 32 4 "none.onnx: no such file"
refuse channels "$d/user.onnx" 1 32 4 "takes inputs of 3xheightxwidth .* data set's are 1x32x32; export it for 1 input channels"
refuse classes "$d/user.onnx" 3 32 7 "has 4 outputs but the data set has 7 classes; export it with 7 outputs"
refuse size "$e/fixed.onnx" 3 48 4 "takes inputs of 3x32x32 .* data set's are 3x48x48"
# Hand-made hostile files (onnx.helper): values no PyTorch export has, each refused by name.
"$PY" - "$e" >"$e/hostile.log" 2>&1 <<'PYEOF'
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

e = sys.argv[1]


def model(name, nodes, inits, opset=14, domain_ops=()):
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])], initializer=inits)
    imports = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, 1) for d in domain_ops]
    onnx.save(helper.make_model(g, opset_imports=imports), f"{e}/{name}.onnx")


w = numpy_helper.from_array(np.zeros((4, 3, 3, 3), np.float32), "conv.weight")
head = [helper.make_node("GlobalAveragePool", ["c"], ["g"]), helper.make_node("Flatten", ["g"], ["y"])]
model("stride0", [helper.make_node("Conv", ["x", "conv.weight"], ["c"], kernel_shape=[3, 3], strides=[0, 0])] + head, [w])
model("weightdims", [helper.make_node("Conv", ["x", "conv.weight"], ["c"], kernel_shape=[1, 1])] + head, [w])
model("negpad", [helper.make_node("Conv", ["x", "conv.weight"], ["c"], kernel_shape=[3, 3], pads=[-1] * 4)] + head, [w])
ratio = numpy_helper.from_array(np.array(1.5, np.float32), "r")
model("ratio", [helper.make_node("Conv", ["x", "conv.weight"], ["c0"], kernel_shape=[3, 3]),
                helper.make_node("Dropout", ["c0", "r"], ["c"])] + head, [w, ratio])
model("domain", [helper.make_node("Conv", ["x", "conv.weight"], ["c0"], kernel_shape=[3, 3]),
                 helper.make_node("Mystery", ["c0"], ["c"], domain="com.example")] + head, [w], domain_ops=["com.example"])
big = TensorProto()
big.name, big.data_type = "conv.weight", TensorProto.FLOAT
big.dims.extend([1 << 20, 1 << 20, 3, 3])
model("huge", [helper.make_node("Conv", ["x", "conv.weight"], ["c"], kernel_shape=[3, 3])] + head, [big])
PYEOF
expect_eq "hostile files written" 0 "$?"
refuse stride0 "$e/stride0.onnx" 3 8 4 "node .*\\(Conv\\): has stride 0"
refuse weightdims "$e/weightdims.onnx" 3 8 4 "\\(Conv\\): has a weight of 4x3x3x3 for 3 input channels in 1 groups and a 1x1 kernel"
refuse negpad "$e/negpad.onnx" 3 8 4 "\\(Conv\\): has padding -1"
refuse ratio "$e/ratio.onnx" 3 8 4 "\\(Dropout\\): has a drop ratio 1.5.* outside \\[0, 1\\)"
refuse domain "$e/domain.onnx" 3 8 4 "(operator set 'com.example'|not a valid ONNX model)"
refuse huge "$e/huge.onnx" 3 8 4 "(holds 0 values for its|weight of 1048576x1048576|dimensions no tensor has|not a valid ONNX model)"

# The run's identity holds the file's content (SHA-256), not its path: the run resumes and exports
# from a moved file; a file edited since (one more metadata entry, the weights as they were) is
# refused by both, with both digests named. (The resumed run's checkpoints record the new path.)
m="$TMP/moved"
mkdir -p "$m"
mv "$d/user.onnx" "$m/user.onnx"
"$CNNSCALE" train --synthetic --model "$m/user.onnx" --image-size 32 --channels 3 --classes 4 --batch-size 4 \
  --synthetic-samples 16 --max-steps 3 --lr 0.05 --momentum 0.9 --seed 3 --run-dir "$d/run" >"$m/resume.log" 2>&1
expect_eq "resume from the moved file: exit status 0" 0 "$?"
expect_grep "resume from the moved file: resumed at step 2" "[Rr]esum.*step 2" "$m/resume.log"
expect_eq "resume from the moved file: step 3 written" 0 "$(test -f "$d/run/checkpoints/step-00000003.h5"; echo $?)"
"$CNNSCALE" export "$d/run/checkpoints/step-00000002.h5" --onnx "$m/out0.onnx" >"$m/export0.log" 2>&1
expect_eq "export of a checkpoint from before the move: exit status 2" 2 "$?"
expect_grep "export of a checkpoint from before the move: says --model" "^cnnscale: error: .*user.onnx.*give --model FILE.onnx" "$m/export0.log"
"$CNNSCALE" export "$d/run" --onnx "$m/out.onnx" --model "$m/user.onnx" >"$m/export.log" 2>&1
expect_eq "export --model MOVED.onnx: exit status 0" 0 "$?"
"$PY" -c "
import onnx, sys
m = onnx.load(sys.argv[1])
m.metadata_props.add(key='edited', value='yes')
onnx.save(m, sys.argv[2])" "$m/user.onnx" "$m/edited.onnx"
expect_eq "edited copy written" 0 "$?"
"$CNNSCALE" train --synthetic --model "$m/edited.onnx" --image-size 32 --channels 3 --classes 4 --batch-size 4 \
  --synthetic-samples 16 --max-steps 4 --lr 0.05 --momentum 0.9 --seed 3 --run-dir "$d/run" >"$m/edited.log" 2>&1
expect_eq "resume from an edited file: exit status 2" 2 "$?"
expect_grep "resume from an edited file: both digests named" "^cnnscale: error: .*onnx sha256:[0-9a-f]{64}.*onnx sha256:[0-9a-f]{64}" "$m/edited.log"
expect_eq "resume from an edited file: nothing written" 1 "$(test -f "$d/run/checkpoints/step-00000004.h5"; echo $?)"
"$CNNSCALE" export "$d/run" --onnx "$m/out2.onnx" --model "$m/edited.onnx" >"$m/export2.log" 2>&1
expect_eq "export --model EDITED.onnx: exit status 2" 2 "$?"
expect_grep "export --model EDITED.onnx: content changed" "^cnnscale: error: .*edited.onnx is not the file .* its content changed .*sha256:[0-9a-f]{64}.*sha256:[0-9a-f]{64}" "$m/export2.log"
expect_eq "export --model EDITED.onnx: nothing written" 1 "$(test -e "$m/out2.onnx"; echo $?)"
finish
