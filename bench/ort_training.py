#!/usr/bin/env python3
# ort_training.py — ONNX Runtime training's side of bench/compare-ort-training.sh: the ONNX
# Runtime training API (onnxruntime-training-cpu from PyPI) on the same ONNX file cnnscale
# trains. generate_artifacts adds the cross-entropy loss, the gradient graph and SGD (the
# anchor of issue 49: ORT's "export the forward graph, then it adds loss, gradients and the
# optimizer"); then Module/Optimizer train on one fixed random batch, as cnnscale --synthetic.
#   ort_training.py FILE.onnx --batch B --steps N --threads T --out RESULT.json
# images/s = batch / median step time over the steps after the first min(5, N/5) (warm-up).
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.append("/usr/lib/python3/dist-packages")  # Debian's torch: generate_artifacts imports it

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402

ort.set_default_logger_severity(3)
from onnxruntime.training import artifacts  # noqa: E402
from onnxruntime.training.api import CheckpointState, Module, Optimizer  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("model")
ap.add_argument("--batch", type=int, default=16)
ap.add_argument("--steps", type=int, default=12)
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--classes", type=int, default=1000)
ap.add_argument("--out", required=True)
a = ap.parse_args()

m = onnx.load(a.model)
frozen = [t.name for t in m.graph.initializer if t.name.endswith(("running_mean", "running_var", "num_batches_tracked"))]
grads = [t.name for t in m.graph.initializer if t.name not in frozen]
dims = [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim[1:]]
with tempfile.TemporaryDirectory() as art:
    t0 = time.time()
    artifacts.generate_artifacts(m, requires_grad=grads, frozen_params=frozen, loss=artifacts.LossType.CrossEntropyLoss,
                                 optimizer=artifacts.OptimType.SGD, artifact_directory=art)
    gen_s = time.time() - t0
    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = 1
    state = CheckpointState.load_checkpoint(os.path.join(art, "checkpoint"))
    # No eval model: generate_artifacts' eval graph keeps the training-mode batch norms' extra
    # outputs with training_mode 0, which ORT 1.19 then refuses to load; training needs none.
    try:
        module = Module(os.path.join(art, "training_model.onnx"), state, session_options=so)
    except TypeError:
        module = Module(os.path.join(art, "training_model.onnx"), state)
    opt = Optimizer(os.path.join(art, "optimizer_model.onnx"), module)
    opt.set_learning_rate(0.01)
    module.train()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((a.batch, *dims), dtype=np.float32)
    y = rng.integers(0, a.classes, a.batch).astype(np.int64)
    times, losses = [], []
    for _ in range(a.steps):
        t = time.perf_counter()
        loss = module(x, y)
        opt.step()
        module.lazy_reset_grad()
        times.append(time.perf_counter() - t)
        losses.append(float(np.asarray(loss)))
warm = min(5, a.steps // 5)
med = statistics.median(times[warm:])
res = {"peer": "onnxruntime-training", "version": ort.__version__, "batch": a.batch, "steps": a.steps,
       "threads": a.threads, "images_per_s": a.batch / med, "step_s_median": med, "artifacts_s": gen_s,
       "first_loss": losses[0], "last_loss": losses[-1]}
json.dump(res, open(a.out, "w"))
print(json.dumps(res))
