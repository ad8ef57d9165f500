#!/usr/bin/env python3
# conformance.py — ONNX's own operator conformance cases (Debian's libonnx-testdata:
# data/node/test_*/model.onnx with test_data_set_0/{input,output}_K.pb) as `--model FILE.onnx`
# inputs, for tests/nn/onnx_conformance.sh.
#   conformance.py prepare NODE_DIR OUT_DIR   writes OUT_DIR/CASE/{model.onnx,x.f32,want.f32,meta}
#     for every case whose op cnnscale's importer reads (src/nn/onnx_import.hpp), made into
#     what the importer takes: the first input is the images (N×C×H×W; an element-wise op's
#     input of another rank is fed as 1 × size × 1 × 1, a Gemm's N × K as N × K × 1 × 1 through
#     a Flatten), every other input becomes an initializer (a Conv's
#     weight and bias named conv.weight / conv.bias, as a state_dict names them; a Gemm's
#     fc.weight / fc.bias; a BatchNormalization's bn.*), and a Flatten is appended where the
#     output is not N×K. meta: "N C H W K". A case cnnscale cannot take even so (two image
#     inputs, integer data, 1-D/3-D/5-D convolutions) is listed in OUT_DIR/not-applicable.txt
#     with the reason.
#   conformance.py compare OUT_DIR            prints "ok CASE" / "FAIL CASE" for the cases whose
#     import ran (OUT_DIR/CASE/got.f32: cnnscale's eval output), within 1e-5 of ONNX's
#     expected output relative to its largest value (1e-4 for GELU's Erf form), and "refused
#     CASE: MESSAGE" for the rest (OUT_DIR/CASE/refused: the importer's error).
import os
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper

OPS = {"Conv", "BatchNormalization", "Relu", "Clip", "Sigmoid", "HardSigmoid", "HardSwish", "MaxPool",
       "AveragePool", "GlobalAveragePool", "ReduceMean", "Flatten", "Gemm", "Dropout", "Add", "Concat", "Mul",
       "Identity", "Pad"}
ELEMENTWISE = {"Relu", "Clip", "Sigmoid", "HardSigmoid", "HardSwish", "Dropout", "Identity"}
NAMES = {"Conv": ["conv.weight", "conv.bias"], "Gemm": ["fc.weight", "fc.bias"],
         "BatchNormalization": ["bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"]}


def load_pb(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def prepare(node_dir, out):
    os.makedirs(out, exist_ok=True)
    na = open(f"{out}/not-applicable.txt", "w")
    for case in sorted(os.listdir(node_dir)):
        src = f"{node_dir}/{case}"
        if not os.path.isfile(f"{src}/model.onnx") or not os.path.isdir(f"{src}/test_data_set_0"):
            continue
        m = onnx.load(f"{src}/model.onnx")
        g = m.graph
        if len(g.node) != 1 or g.node[0].op_type not in OPS:
            continue
        node = g.node[0]
        ds = f"{src}/test_data_set_0"

        def skip(why):
            na.write(f"{case}: {why}\n")

        try:
            ins = [load_pb(f"{ds}/input_{k}.pb") for k in range(len(g.input))]
            outs = [load_pb(f"{ds}/output_{k}.pb") for k in range(len(g.output))]
        except (ValueError, onnx.onnx_cpp2py_export.checker.ValidationError, Exception):
            skip("inputs or outputs that are not tensors (sequences, optionals)")
            continue

        x = ins[0] if ins else None
        if x is None or x.dtype != np.float32:
            skip("its data input is not float32")
            continue
        if len(g.output) != 1 or outs[0].dtype != np.float32:
            skip("more than one output (a mask, indices, statistics), or not float32")
            continue
        pre = []
        if node.op_type == "Dropout" and len(ins) > 2 and bool(ins[2]):
            skip("dropout in training mode: the expected output is one random draw")
            continue
        if x.ndim != 4 and node.op_type in ELEMENTWISE:  # any shape: fed as 1 × size × 1 × 1
            x = x.reshape(1, x.size, 1, 1)
            outs[0] = outs[0].reshape(1, -1)
        if x.ndim == 2 and node.op_type == "Gemm":  # N × K fed as N × K × 1 × 1, then Flatten
            x = x.reshape(*x.shape, 1, 1)
            pre = [helper.make_node("Flatten", [g.input[0].name], [g.input[0].name + "_2d"], axis=1)]
            node.input[0] = g.input[0].name + "_2d"
        if x.ndim != 4:
            skip(f"a {x.ndim}-D data input (cnnscale feeds N×C×H×W images)")
            continue
        # Every input but the first: an initializer (state_dict names where the op has parameters).
        names = NAMES.get(node.op_type, [])
        rename = {}
        inits = []
        data_inputs = 1
        for k, vi in enumerate(g.input[1:], start=1):
            arr = ins[k]
            pos = list(node.input).index(vi.name)
            if node.op_type in ("Add", "Mul", "Concat") and arr.ndim == ins[0].ndim and arr.shape[2:] == ins[0].shape[2:]:
                data_inputs += 1  # a second image-shaped operand: two data inputs
            new = names[pos - 1] if 0 < pos <= len(names) else vi.name
            rename[vi.name] = new
            inits.append(numpy_helper.from_array(arr, new))
        if data_inputs > 1:
            skip("two image-shaped data inputs (cnnscale feeds one)")
            continue
        for i, name in enumerate(node.input):
            if name in rename:
                node.input[i] = rename[name]
        y = outs[0]
        xin = helper.make_tensor_value_info(g.input[0].name, onnx.TensorProto.FLOAT, list(x.shape))
        nodes = pre + [node]
        out_name = node.output[0]
        if y.ndim != 2:
            nodes.append(helper.make_node("Flatten", [out_name], ["flat"], axis=1))
            out_name = "flat"
        k = int(np.prod(y.shape[1:]))
        if k < 2:
            skip("fewer than 2 outputs per sample (cnnscale's models end in classes ≥ 2)")
            continue
        yout = helper.make_tensor_value_info(out_name, onnx.TensorProto.FLOAT, [y.shape[0], k])
        graph = helper.make_graph(nodes, case, [xin], [yout], initializer=inits)
        model = helper.make_model(graph, opset_imports=m.opset_import, producer_name="conformance.py")
        model.ir_version = m.ir_version
        d = f"{out}/{case}"
        os.makedirs(d, exist_ok=True)
        onnx.save(model, f"{d}/model.onnx")
        np.ascontiguousarray(x, np.float32).tofile(f"{d}/x.f32")
        np.ascontiguousarray(y.reshape(y.shape[0], k), np.float32).tofile(f"{d}/want.f32")
        with open(f"{d}/meta", "w") as f:
            f.write(f"{x.shape[0]} {x.shape[1]} {x.shape[2]} {x.shape[3]} {k} {node.op_type}\n")


def compare(out):
    for case in sorted(os.listdir(out)):
        d = f"{out}/{case}"
        if not os.path.isfile(f"{d}/meta"):
            continue
        op = open(f"{d}/meta").read().split()[5]
        if os.path.isfile(f"{d}/refused"):
            print(f"refused {case} ({op}): {open(f'{d}/refused').read().strip()}")
            continue
        want = np.fromfile(f"{d}/want.f32", np.float32).astype(np.float64)
        got = np.fromfile(f"{d}/got.f32", np.float32).astype(np.float64) if os.path.isfile(f"{d}/got.f32") else None
        if got is None or got.size != want.size:
            print(f"FAIL {case} ({op}): no output of the expected size")
            continue
        err = float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))
        print(("ok " if err <= 1e-5 else "FAIL ") + f"{case} ({op}): max |diff| / max |want| = {err:.1e}")


if __name__ == "__main__":
    if sys.argv[1] == "prepare":
        prepare(sys.argv[2], sys.argv[3])
    else:
        compare(sys.argv[2])
