#!/usr/bin/env bash
# `cnnscale train` as a user meets it: option and config errors, --config merging,
# run.json and metrics.jsonl as SPEC fixes them, exact evaluation on 3 ranks.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
M="$MPIEXEC --allow-run-as-root --oversubscribe --bind-to none"
SMALL="conv(4,3) relu maxpool(2) flatten linear(10)"

"$CNNSCALE" train --synthetic --bogus >"$TMP/e1" 2>&1
expect_eq "unknown option exit status" 2 "$?"
expect_grep "unknown option named" "cnnscale: error: train: unrecognised option '--bogus'" "$TMP/e1"
"$CNNSCALE" train --synthetic --batch-size lots >"$TMP/e2" 2>&1
expect_eq "bad value exit status" 2 "$?"
expect_grep "bad value named" "cnnscale: error: train: .*batch-size.*invalid" "$TMP/e2"
# A value or option holding Boost's own %token% text: its message loop never ended (a hang,
# found by fuzz_train_config); the '%' is shown as \x25. In --config too.
timeout 20 "$CNNSCALE" train --synthetic --batch-size 'x%value%' >"$TMP/e2b" 2>&1
expect_eq "a value with %value%: exit status 2, no hang" 2 "$?"
expect_grep "... named, its % shown escaped" "cnnscale: error: train: the argument \\('x\\\\x25value\\\\x25'\\) for option '--batch-size' is invalid" "$TMP/e2b"
printf 'synthetic = true\nthreads = %%value%%\n' >"$TMP/pct.ini"
timeout 20 "$CNNSCALE" train --config "$TMP/pct.ini" >"$TMP/e2c" 2>&1
expect_eq "the same in --config: exit status 2, no hang" 2 "$?"
timeout 20 "$CNNSCALE" train '--x%canonical_option%' >"$TMP/e2d" 2>&1
expect_eq "an option named with %canonical_option%: exit status 2, no hang" 2 "$?"
"$CNNSCALE" train >"$TMP/e3" 2>&1
expect_eq "no input exit status" 2 "$?"
expect_grep "no input explained" 'cnnscale: error: no input: give --data DIR .* or --synthetic' "$TMP/e3"
"$CNNSCALE" train --synthetic --precision fp16 >"$TMP/e4" 2>&1
expect_grep "bad precision" 'cnnscale: error: --precision fp16 is not supported; use fp32 or bf16' "$TMP/e4"
"$CNNSCALE" train --synthetic --tf32 maybe >"$TMP/e4t" 2>&1
expect_eq "bad --tf32 exit status" 2 "$?"
expect_grep "bad --tf32 explained" "cnnscale: error: --tf32 takes on or off, not 'maybe'" "$TMP/e4t"
"$CNNSCALE" train --synthetic --cudnn-benchmark yes >"$TMP/e4b" 2>&1
expect_eq "bad --cudnn-benchmark exit status" 2 "$?"
expect_grep "bad --cudnn-benchmark explained" "cnnscale: error: --cudnn-benchmark takes on or off, not 'yes'" "$TMP/e4b"
"$CNNSCALE" train --synthetic --model "conv(8,3) relu linear(10" >"$TMP/e5" 2>&1
expect_eq "bad model spec exit status" 2 "$?"
expect_grep "bad model spec shows where" 'cnnscale: error: .*(column|position)' "$TMP/e5"
"$CNNSCALE" train --data "$TMP/nowhere" >"$TMP/e6" 2>&1
expect_eq "missing data dir exit status" 2 "$?"
expect_grep "missing data dir named" "cnnscale: error: .*$TMP/nowhere" "$TMP/e6"
"$CNNSCALE" train --synthetic --lr-scaling cubic >"$TMP/e7" 2>&1
expect_grep "bad lr scaling" 'cnnscale: error: --lr-scaling cubic is not supported' "$TMP/e7"
# --allow-gpu-sharing was removed (issue 28 item 4): an old script gets why and what instead.
for cmd in train env allreduce; do
  "$CNNSCALE" $cmd --allow-gpu-sharing >"$TMP/e8.$cmd" 2>&1
  expect_eq "$cmd --allow-gpu-sharing: exit status 2" 2 "$?"
  expect_grep "$cmd --allow-gpu-sharing: removed, and the ways out" \
    "cnnscale: error: $cmd: --allow-gpu-sharing was removed: .*NCCL, which cannot put two ranks on one GPU.*--backend mpi" \
    "$TMP/e8.$cmd"
done

# Synthetic input shape (--image-size S|HxW, --channels, --classes) and the torchvision
# ResNets: errors name the option; a 2-step resnet18 on 3×32×48, 7 classes runs and
# run.json records that shape.
"$CNNSCALE" train --synthetic --image-size 32y >"$TMP/e10" 2>&1
expect_eq "bad --image-size exit status" 2 "$?"
expect_grep "bad --image-size explained" 'cnnscale: error: --image-size 32y is not an image size; give S .* or HxW' "$TMP/e10"
"$CNNSCALE" train --data "$TMP/nowhere" --classes 5 >"$TMP/e11" 2>&1
expect_grep "--classes without --synthetic" 'cnnscale: error: --classes applies to --synthetic data' "$TMP/e11"
"$CNNSCALE" train --synthetic --classes 1 >"$TMP/e12" 2>&1
expect_grep "--classes 1" 'cnnscale: error: --classes must be at least 2' "$TMP/e12"
"$CNNSCALE" train --synthetic --zero-init-residual --max-steps 1 >"$TMP/e13" 2>&1
expect_grep "--zero-init-residual on mnist_cnn" 'cnnscale: error: --zero-init-residual applies to the torchvision ResNets' "$TMP/e13"
"$CNNSCALE" train --synthetic --model resnet50 --image-size 28 --channels 3 --max-steps 1 >"$TMP/e14" 2>&1
expect_grep "resnet50 on 28x28" 'cnnscale: error: resnet50 needs images of at least 32x32' "$TMP/e14"
"$CNNSCALE" train --synthetic --model resnet18 --image-size 32x48 --channels 3 --classes 7 --batch-size 4 \
  --synthetic-samples 8 --max-steps 2 --zero-init-residual --run-dir "$TMP/rn18" >"$TMP/rn18.out" 2>&1
expect_eq "resnet18 synthetic 3x32x48 exit status" 0 "$?"
# torchvision's 11,689,512 at 1000 classes, less fc's 513 per class, plus 9,620 batch-norm buffers
expect_grep "resnet18 parameter count (7 classes, with buffers)" "model resnet18 \\($((11689512 - 513 * 993 + 9620)) parameters\\)" "$TMP/rn18.out"
expect_grep "run.json records the synthetic shape" '"data": "synthetic 3x32x48, 7 classes' "$TMP/rn18/run.json"
expect_grep "run.json records --zero-init-residual" '"zero_init_residual": "true"' "$TMP/rn18/run.json"

# --config: INI keys are the long options; the command line wins; unknown keys are errors.
cat >"$TMP/ok.ini" <<INI
# a comment
synthetic = true
model = $SMALL
max-steps = 5
batch-size = 8
lr = 0.1
log-every = 1
INI
"$CNNSCALE" train --config "$TMP/ok.ini" --max-steps 3 --run-dir "$TMP/cfg" >"$TMP/cfg.out" 2>&1
expect_eq "config run exit status" 0 "$?"
python3 - "$TMP/cfg/run.json" <<'PY' >"$TMP/cfg.txt" 2>&1
import json, sys
j = json.load(open(sys.argv[1]))
print("steps", j["steps"], "batch", j["batch_per_rank"], "lr", j["lr"]["base"])
PY
expect_grep "config values used, command line wins" '^steps 3 batch 8 lr 0.1$' "$TMP/cfg.txt"
printf 'synthetic = true\nlearning-rate = 3\n' >"$TMP/bad.ini"
"$CNNSCALE" train --config "$TMP/bad.ini" >"$TMP/e8" 2>&1
expect_eq "unknown config key exit status" 2 "$?"
expect_grep "unknown config key named with the file" "cnnscale: error: in --config file '$TMP/bad.ini': .*learning-rate" "$TMP/e8"
"$CNNSCALE" train --config "$TMP/none.ini" >"$TMP/e9" 2>&1
expect_grep "missing config file" "cnnscale: error: cannot read --config file '$TMP/none.ini'" "$TMP/e9"

# Real data on 3 ranks (10000 test samples do not split evenly): exact evaluation,
# run.json with every SPEC field, metrics.jsonl one JSON object per line.
"$CNNSCALE" prep --format idx --input /usr/share/datasets/fashion-mnist --output "$TMP/fm" --shards 3 --test-shards 2 >"$TMP/prep.out" 2>&1
expect_eq "prep exit status" 0 "$?"
timeout 300 $M -n 3 "$CNNSCALE" train --data "$TMP/fm" --model "$SMALL" --batch-size 16 --max-steps 4 --log-every 2 \
  --run-dir "$TMP/run3" >"$TMP/run3.out" 2>&1
expect_eq "3-rank run exit status" 0 "$?"
expect_grep "progress line" '^epoch 1/1 step 2/4 loss [0-9.]+ lr [0-9.e-]+ [0-9.]+ img/s slowest rank [0-9.]+ ms/step( input-bound [0-9]+%)? ETA [0-9:]+$' "$TMP/run3.out"
expect_grep "every test sample once on 3 ranks" 'test accuracy 0\.[0-9]+ loss [0-9.]+ \(10000 samples\)' "$TMP/run3.out"
python3 - "$TMP/run3" <<'PY' >"$TMP/fields.txt" 2>&1
import json, sys
d = sys.argv[1]
j = json.load(open(d + "/run.json"))
need = ["world_size", "nodes", "ranks_per_node", "backend", "device", "model", "precision", "batch_per_rank",
        "global_batch", "steps", "images_per_s", "step_ms", "breakdown_ms", "train_loss", "test_accuracy"]
missing = [k for k in need if k not in j]
missing += ["step_ms." + k for k in ("median", "p10", "p90") if k not in j["step_ms"]]
missing += ["breakdown_ms." + k for k in ("data", "compute", "comm_exposed", "optimizer") if k not in j["breakdown_ms"]]
print("missing", missing)
print("world", j["world_size"], "global", j["global_batch"], "steps", j["steps"], "acc_is_number", isinstance(j["test_accuracy"], float))
print("tf32", j.get("tf32"))  # the CPU model never uses TF32, whatever --tf32 says
print("cudnn_benchmark", j.get("cudnn_benchmark"))  # nor cuDNN
print("gpu object", "gpu" in j)  # a device model's paths and memory only (docs/gpu.md)
print("data_threads", j.get("data_threads"))  # the CPU default stays 1 (its cores go to --threads)
lines = [json.loads(l) for l in open(d + "/metrics.jsonl")]
steps = [l["step"] for l in lines if "event" not in l]
print("metric steps", steps, "eval events", sum(1 for l in lines if l.get("event") == "eval"))
PY
expect_grep "run.json has every SPEC field" '^missing \[\]$' "$TMP/fields.txt"
expect_grep "run.json values" '^world 3 global 48 steps 4 acc_is_number True$' "$TMP/fields.txt"
expect_grep "run.json records tf32 (false on the CPU)" '^tf32 False$' "$TMP/fields.txt"
expect_grep "run.json records cudnn_benchmark (false on the CPU)" '^cudnn_benchmark False$' "$TMP/fields.txt"
expect_grep "run.json has no gpu object on the CPU" '^gpu object False$' "$TMP/fields.txt"
expect_grep "run.json: --data-threads defaults to 1 on the CPU" '^data_threads 1$' "$TMP/fields.txt"
expect_grep "the start-up line gives the data threads" '^cnnscale train: 3 rank\(s\) .* 16/rank = 48 global, 1 data thread\(s\)/rank, ' "$TMP/run3.out"
expect_grep "metrics.jsonl: one object per logged step, one eval" '^metric steps \[2, 4\] eval events 1$' "$TMP/fields.txt"
finish
