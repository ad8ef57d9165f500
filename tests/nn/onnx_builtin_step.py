"""onnx_builtin_step.py — "an imported ONNX model trains as the built-in model it exports" and
"the exported model runs in ONNX Runtime", the checks tests/nn/unet_torch.sh and
tests/nn/cosmoflow_torch.sh share, on what cnnscale_resnet_tool wrote into DIR:

  onnx_builtin_step.py map DIR NAME COUNT
      DIR/onnx-params.txt and DIR/builtin-params.txt (the tool's "param NAME OFFSET NUMEL" lines):
      the same COUNT parameter names and sizes; then the ONNX file's values (DIR/onnx.f32, its flat
      layout) written by name into the built-in's flat layout (from DIR/builtin0.f32) as
      DIR/builtin.f32, for `resnet_tool grad ... --params`.
  onnx_builtin_step.py compare DIR
      DIR/grad-onnx.{txt,f32} and DIR/grad-builtin.{txt,f32} (two `resnet_tool grad` runs): the same
      loss (rel 1e-6) and the same gradient of every parameter but the batch-norm buffers (rel 1e-6
      of the largest).
  onnx_builtin_step.py ort OUT.onnx X_DIR IN_SHAPE OUT_SHAPE input|output
      (a python with onnxruntime) `cnnscale export`'s OUT.onnx run by ONNX Runtime on X_DIR/x.f32
      (N samples of IN_SHAPE, e.g. 3,32,48) gives X_DIR/eval.f32 (cnnscale's eval outputs, N of
      OUT_SHAPE) within rel 1e-5; and the file declares that input (or output) shape.
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


def ort_check(model, x, in_shape, out_shape, declared):
    import onnxruntime as ort
    s = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    xs = np.fromfile(f"{x}/x.f32", np.float32)
    n = xs.size // int(np.prod(in_shape))
    z = s.run(None, {s.get_inputs()[0].name: xs.reshape(n, *in_shape)})[0]
    ours = np.fromfile(f"{x}/eval.f32", np.float32).reshape(n, *out_shape)
    err = float(np.abs(z - ours).max() / np.abs(ours).max())
    io = s.get_inputs()[0] if declared == "input" else s.get_outputs()[0]
    want = in_shape if declared == "input" else out_shape
    print(("ok" if io.shape[1:] == want and z.shape == ours.shape else "FAIL")
          + f" the exported {declared} is N×{'×'.join(map(str, want))} (declared {io.shape})")
    print(("ok" if err <= 1e-5 else "FAIL") + f" ONNX Runtime's outputs are cnnscale's eval outputs (rel {err:.1e} <= 1e-5)")


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "map":
        map_params(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif len(sys.argv) == 3 and sys.argv[1] == "compare":
        compare(sys.argv[2])
    elif len(sys.argv) == 7 and sys.argv[1] == "ort" and sys.argv[6] in ("input", "output"):
        shape = lambda t: [int(v) for v in t.split(",")]  # noqa: E731
        ort_check(sys.argv[2], sys.argv[3], shape(sys.argv[4]), shape(sys.argv[5]), sys.argv[6])
    else:
        sys.exit("usage: onnx_builtin_step.py map DIR NAME COUNT | compare DIR | "
                 "ort OUT.onnx X_DIR IN_SHAPE OUT_SHAPE input|output")
