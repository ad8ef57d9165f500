"""onnx_builtin_step.py — "an imported ONNX model trains as the built-in model it exports", the
two checks tests/nn/unet_torch.sh and tests/nn/cosmoflow_torch.sh share, on what
cnnscale_resnet_tool wrote into DIR:

  onnx_builtin_step.py map DIR NAME COUNT
      DIR/onnx-params.txt and DIR/builtin-params.txt (the tool's "param NAME OFFSET NUMEL" lines):
      the same COUNT parameter names and sizes; then the ONNX file's values (DIR/onnx.f32, its flat
      layout) written by name into the built-in's flat layout (from DIR/builtin0.f32) as
      DIR/builtin.f32, for `resnet_tool grad ... --params`.
  onnx_builtin_step.py compare DIR
      DIR/grad-onnx.{txt,f32} and DIR/grad-builtin.{txt,f32} (two `resnet_tool grad` runs): the same
      loss (rel 1e-6) and the same gradient of every parameter but the batch-norm buffers (rel 1e-6
      of the largest).
Prints "ok ..." / "FAIL ..." lines."""
import sys

import numpy as np


def params(f):
    return {l.split()[1]: (int(l.split()[2]), int(l.split()[3])) for l in open(f) if l.startswith("param ")}


def map_params(d, name, count):
    po, pb = params(f"{d}/onnx-params.txt"), params(f"{d}/builtin-params.txt")
    same = set(po) == set(pb) and all(po[k][1] == pb[k][1] for k in pb)
    print(("ok" if same and len(pb) == count else "FAIL") + f" the imported {name} has the built-in one's {len(pb)} "
          "parameter names and sizes")
    src, dst = np.fromfile(f"{d}/onnx.f32", np.float32), np.fromfile(f"{d}/builtin0.f32", np.float32)
    for k, (off, n) in pb.items():
        o = po.get(k, (0, 0))[0]
        dst[off:off + n] = src[o:o + n]
    dst.tofile(f"{d}/builtin.f32")


def compare(d):
    loss, g = {}, {}
    for t in ("onnx", "builtin"):
        lines = open(f"{d}/grad-{t}.txt").read().split("\n")
        loss[t] = float(next(l.split()[1] for l in lines if l.startswith("loss ")))
        flat = np.fromfile(f"{d}/grad-{t}.f32", np.float32)
        g[t] = {l.split()[1]: flat[int(l.split()[2]):int(l.split()[2]) + int(l.split()[3])] for l in lines
                if l.startswith("param ") and not l.split()[1].endswith(("running_mean", "running_var", "tracked"))}
    scale = max(float(np.abs(v).max()) for v in g["builtin"].values())
    err = max(float(np.abs(g["onnx"][k] - v).max()) for k, v in g["builtin"].items()) / scale
    print(("ok" if abs(loss["onnx"] - loss["builtin"]) <= 1e-6 * abs(loss["builtin"]) and err <= 1e-6 else "FAIL")
          + f" the same loss ({loss['onnx']:.9f} vs {loss['builtin']:.9f}) and gradients of {len(g['builtin'])} "
          f"parameters (rel {err:.1e} <= 1e-6)")


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "map":
        map_params(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif len(sys.argv) == 3 and sys.argv[1] == "compare":
        compare(sys.argv[2])
    else:
        sys.exit("usage: onnx_builtin_step.py map DIR NAME COUNT | compare DIR")
