#!/usr/bin/env python3
# export-onnx.py — exports a PyTorch CNN as the ONNX file `cnnscale train --model FILE.onnx`
# trains (docs/models.md, "Your own PyTorch model"). The export that keeps a model trainable:
#   - training mode (model.train(), TrainingMode.TRAINING): BatchNormalization nodes keep
#     their weight, bias, running_mean and running_var under the module's state_dict names
#     (an eval-mode export folds every batch norm into the conv before it, even with
#     do_constant_folding=False: a different network, which cnnscale refuses);
#   - do_constant_folding=False, export_params=True: every initializer is a parameter or
#     buffer under its state_dict name, so a cnnscale checkpoint loads back into the module
#     with load_state_dict(strict=True);
#   - torchvision's StochasticDepth with p = 0 for the export only (torch cannot export its
#     Bernoulli draw); the file then has none, and cnnscale says so at start-up;
#   - a dynamic batch dimension, and dynamic height and width unless --fixed-size (the model
#     then trains on any image size its layers allow);
#   - the initializers are the module's weights from before the export: tracing a model in
#     training mode runs its forward once, which moves the batch norms' running statistics;
#     the script writes the values it had before.
# Usage:
#   scripts/export-onnx.py torchvision:NAME --classes K --input-shape C,H,W OUT.onnx
#   scripts/export-onnx.py my_model.py:MyNet [--kwargs '{"width": 32}'] --input-shape 1,64,64 OUT.onnx
#   (a 3-D model: --input-shape C,D,H,W, e.g. 4,128,128,128)
#   options: --weights STATE_DICT.pt (load these first; a fine-tuning start), --seed S,
#            --opset 13..17 (default 14), --fixed-size
import argparse
import importlib.util
import json
import os
import sys


def fail(msg):
    print(f"export-onnx: error: {msg}", file=sys.stderr)
    sys.exit(2)


def build(source, kwargs, classes):
    import torch
    if source.startswith("torchvision:"):
        import torchvision
        name = source.split(":", 1)[1]
        ctor = getattr(torchvision.models, name, None)
        if ctor is None or not callable(ctor):
            fail(f"torchvision.models has no model '{name}'")
        if classes is not None:
            kwargs = dict(kwargs, num_classes=classes)
        return ctor(**kwargs)
    if ":" not in source:
        fail(f"'{source}': give torchvision:NAME or FILE.py:CLASS")
    path, cls = source.rsplit(":", 1)
    if not os.path.isfile(path):
        fail(f"'{path}': no such file (the Python file that defines {cls})")
    spec = importlib.util.spec_from_file_location("user_model", path)
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    spec.loader.exec_module(mod)
    ctor = getattr(mod, cls, None)
    if ctor is None:
        fail(f"{path} defines no '{cls}'")
    net = ctor(**kwargs)
    if not isinstance(net, torch.nn.Module):
        fail(f"{source} did not give a torch.nn.Module")
    return net


def main():
    ap = argparse.ArgumentParser(description="Export a PyTorch CNN for cnnscale train --model FILE.onnx")
    ap.add_argument("source", help="torchvision:NAME or FILE.py:CLASS")
    ap.add_argument("out", help="the .onnx file to write")
    ap.add_argument("--input-shape", required=True,
                    help="C,H,W of one sample, e.g. 3,224,224 (a volume's C,D,H,W, e.g. 4,128,128,128)")
    ap.add_argument("--classes", type=int, help="num_classes for a torchvision model")
    ap.add_argument("--kwargs", default="{}", help="JSON keyword arguments of the constructor")
    ap.add_argument("--weights", help="a state_dict (torch.save) to load before the export")
    ap.add_argument("--seed", type=int, default=0, help="torch.manual_seed before construction")
    ap.add_argument("--opset", type=int, default=14)
    ap.add_argument("--fixed-size", action="store_true", help="height and width fixed as --input-shape")
    a = ap.parse_args()
    try:
        shape = [int(v) for v in a.input_shape.replace("x", ",").split(",")]
    except ValueError:
        shape = []
    if len(shape) not in (3, 4) or min(shape) < 1:
        fail(f"--input-shape '{a.input_shape}': give C,H,W, e.g. 3,224,224, or a volume's C,D,H,W, e.g. 4,128,128,128")
    if not 13 <= a.opset <= 17:
        fail(f"--opset {a.opset}: cnnscale reads opsets 13 to 17")
    if not a.out.endswith(".onnx"):
        fail(f"'{a.out}': the output file name must end in .onnx")
    import warnings
    import torch
    # torch 1.13's exporter warns once per batch norm that it drops num_batches_tracked's update
    # (cnnscale keeps its own count): not the user's concern
    warnings.filterwarnings("ignore", message=".*num_batches_tracked.*")
    torch.manual_seed(a.seed)
    net = build(a.source, json.loads(a.kwargs), a.classes)
    if a.weights:
        net.load_state_dict(torch.load(a.weights, map_location="cpu"), strict=True)
    dropped = 0
    try:
        from torchvision.ops import StochasticDepth
        for m in net.modules():
            if isinstance(m, StochasticDepth) and m.p > 0:
                m.p = 0.0
                dropped += 1
    except ImportError:
        pass
    # An adaptive pool to k×k (k > 1) exports as a pool whose window is fixed by the traced size
    # (torch refuses sizes that k does not divide): such a file is right only at that size.
    fixed = a.fixed_size or any(
        isinstance(m, (torch.nn.AdaptiveAvgPool2d, torch.nn.AdaptiveMaxPool2d)) and
        torch.nn.modules.utils._pair(m.output_size) != (1, 1) for m in net.modules())
    if fixed and not a.fixed_size:
        print(f"export-onnx: note: the model has an adaptive pool to more than 1x1, which ONNX fixes to the traced "
              f"size: exported for {shape[1]}x{shape[2]} only (train at that size, or export again for another)")
    before = {k: v.detach().clone() for k, v in net.state_dict().items()}
    net.train()
    x = torch.randn(2, *shape)
    axes = {"input": {0: "batch"}, "logits": {0: "batch"}}
    if not fixed:
        axes["input"].update({2: "height", 3: "width"} if len(shape) == 3 else {2: "depth", 3: "height", 4: "width"})
    tmp = a.out + ".tmp"
    torch.onnx.export(net, x, tmp, training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      export_params=True, opset_version=a.opset, input_names=["input"], output_names=["logits"],
                      dynamic_axes=axes)
    import onnx
    from onnx import numpy_helper
    model = onnx.load(tmp)
    if dropped:  # read by cnnscale, which says so at start-up (nn/onnx_import.cpp)
        meta = model.metadata_props.add()
        meta.key, meta.value = "cnnscale.stochastic_depth_removed", str(dropped)
    restored = 0
    for init in model.graph.initializer:
        if init.name in before:
            want = before[init.name].numpy()
            if want.dtype == numpy_helper.to_array(init).dtype:
                init.CopyFrom(numpy_helper.from_array(want, init.name))
                restored += 1
    onnx.save(model, tmp)
    os.replace(tmp, a.out)
    print(f"export-onnx: wrote {a.out} ({a.source}, opset {a.opset}, input N×{'×'.join(map(str, shape))}"
          f"{'' if fixed else ' (any height and width)'}, {restored} initializers)")
    if dropped:
        print(f"export-onnx: note: {dropped} StochasticDepth layers exported with p = 0 (torch cannot export their "
              f"draw); the file trains without stochastic depth")


if __name__ == "__main__":
    main()
