#!/usr/bin/env bash
# cross-node.sh — weak scaling 1 → 2 nodes on the local Slurm cluster, cnnscale beside
# PyTorch DDP (gloo) on the same two network namespaces, one rank per node.
#
# For each configuration and repetition, interleaved (so load from other processes
# falls on both sides alike): cnnscale -N1, -N2, PyTorch -N1, -N2, and a "pair": two
# independent 1-node cnnscale runs at once, one per node, with no communication at all:
# the step time a 2-node run would have if the sum cost nothing (on a 2-core machine
# the two ranks also share the cores with TCP and everything else). Then the standalone
# `cnnscale allreduce` time between the two nodes for the gradient's bytes.
# Prints a markdown table of medians over repetitions (each run's value is itself a
# median over its steps) and the machine load before and after.
#
#   sudo scripts/local-slurm-cluster.sh up 2
#   bench/cross-node.sh [--reps 3] [--steps 120] [--configs mnist32,mnist64,resnet18,resnet50] [--out DIR]
#   sudo scripts/local-slurm-cluster.sh down
#
# Needs build/bin/cnnscale and /usr/bin/python3 with torch (torchvision for resnets;
# the PyTorch mnist side reads Fashion-MNIST from /usr/share/datasets/fashion-mnist,
# cnnscale trains on synthetic data of the same shape: both keep their data in memory).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
CNNSCALE=${CNNSCALE:-$ROOT/build/bin/cnnscale}
PY=/usr/bin/python3
REPS=3 STEPS=120 CONFIGS=mnist32,mnist64,resnet18,resnet50 OUT=""
while [ $# -gt 0 ]; do
  case $1 in
    --reps) REPS=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --configs) CONFIGS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    *) echo "cross-node.sh: error: unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
eval "$("$ROOT/scripts/local-slurm-cluster.sh" env)"
"$ROOT/scripts/local-slurm-cluster.sh" status >/dev/null 2>&1 ||
  { echo "cross-node.sh: error: the local Slurm cluster is not up; run: sudo scripts/local-slurm-cluster.sh up 2" >&2; exit 1; }
[ -x "$CNNSCALE" ] || { echo "cross-node.sh: error: $CNNSCALE not built (cmake --build build)" >&2; exit 1; }
$PY -c "import torch" 2>/dev/null || { echo "cross-node.sh: error: $PY cannot import torch (apt-get install python3-torch)" >&2; exit 1; }
# Outside /tmp: the nodes have private /tmp directories.
OUT=${OUT:-/var/tmp/cnnscale-cross-node.$$}
mkdir -p "$OUT"
: >"$OUT/results.jsonl"
echo "load before: $(uptime)" | tee "$OUT/load.txt"

cfg_args() {  # CONFIG -> sets CN (cnnscale train args), PT (python script + args), STEPS_C
  local samples
  case $1 in
    mnist32 | mnist64)
      local b=${1#mnist}
      STEPS_C=$STEPS
      CN=(--synthetic --model mnist_cnn --batch-size "$b")
      PT=("$HERE/pytorch_ddp_mnist.py" --batch-size "$b") ;;
    resnet18 | resnet50)
      # 32x32 images, 10 classes, batch 16 per rank: resnet50 at 224 is too slow on this CPU.
      STEPS_C=$((STEPS / 4 > 12 ? STEPS / 4 : 12))
      samples=$((16 * 2 * (STEPS_C + 1)))
      CN=(--synthetic --model "$1" --image-size 32 --channels 3 --classes 10 --batch-size 16
          --synthetic-samples "$samples")
      PT=("$HERE/pytorch_ddp_resnet.py" --model "$1" --image-size 32 --classes 10 --batch-size 16) ;;
    *) echo "cross-node.sh: error: unknown configuration $1 (mnist32, mnist64, resnet18, resnet50)" >&2; exit 2 ;;
  esac
}

record() {  # CONFIG IMPL NODES REP RUNJSON|PYOUT
  $PY - "$@" <<'EOF' >>"$OUT/results.jsonl"
import json, sys
cfg, impl, nodes, rep, path = sys.argv[1:6]
if impl == "pytorch":
    j = json.loads([l for l in open(path) if l.startswith("{")][-1])
    r = {"images_per_s": j["images_per_s"], "step_ms": j["step_ms"]}
else:
    j = json.load(open(path))
    b, c = j["breakdown_median_ms"], j.get("comm_ms") or {}
    r = {"images_per_s": j["images_per_s"], "step_ms": j["step_ms"]["median"], "compute_ms": b["compute"],
         "exposed_ms": b["comm_exposed"], "comm_total_ms": c.get("total_median"), "grad_bytes": j["grad_bytes"]}
r.update(config=cfg, impl=impl, nodes=int(nodes), rep=int(rep))
print(json.dumps(r))
EOF
}

run_cnnscale() {  # CONFIG NODES REP
  local d="$OUT/$1-cnnscale-n$2-r$3"
  rm -rf "$d"
  timeout 900 srun --mpi=pmix -N"$2" --ntasks-per-node=1 "$CNNSCALE" train "${CN[@]}" --max-steps "$STEPS_C" \
    --no-eval --run-dir "$d" >"$d.log" 2>&1 || { echo "cross-node.sh: error: cnnscale run failed (see $d.log)" >&2; exit 1; }
  record "$1" cnnscale "$2" "$3" "$d/run.json"
}

run_pair() {  # CONFIG REP: two 1-node runs at once, one per node
  local d="$OUT/$1-pair-r$2" pids=() k
  for k in 1 2; do
    rm -rf "$d$k"
    timeout 900 srun --mpi=pmix -N1 -w "cn$k" "$CNNSCALE" train "${CN[@]}" --max-steps "$STEPS_C" --no-eval \
      --run-dir "$d$k" >"$d$k.log" 2>&1 &
    pids+=($!)
  done
  for k in "${pids[@]}"; do wait "$k" || { echo "cross-node.sh: error: pair run failed (see $d*.log)" >&2; exit 1; }; done
  record "$1" pair 1 "$2" "${d}1/run.json"
}

run_pytorch() {  # CONFIG NODES REP
  local f="$OUT/$1-pytorch-n$2-r$3.out"
  # One process per node; rank and world from Slurm, the rendezvous on the first node.
  # shellcheck disable=SC2016  # expanded by the task shell on each node
  timeout 900 srun --mpi=none -N"$2" --ntasks-per-node=1 bash -c '
    export RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS GLOO_SOCKET_IFNAME=eth0
    export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -1) MASTER_PORT=29517
    exec "$@"' pt "$PY" "${PT[@]}" --steps "$STEPS_C" --threads 1 >"$f" 2>&1 ||
    { echo "cross-node.sh: error: PyTorch run failed (see $f)" >&2; exit 1; }
  record "$1" pytorch "$2" "$3" "$f"
}

IFS=, read -r -a CFGS <<<"$CONFIGS"
for ((rep = 1; rep <= REPS; rep++)); do
  for c in "${CFGS[@]}"; do
    cfg_args "$c"
    echo "== rep $rep/$REPS $c ($(uptime | sed 's/.*load/load/'))"
    run_cnnscale "$c" 1 "$rep"
    run_cnnscale "$c" 2 "$rep"
    run_pair "$c" "$rep"
    run_pytorch "$c" 1 "$rep"
    run_pytorch "$c" 2 "$rep"
  done
done

# The standalone sum between the two nodes for each configuration's gradient bytes.
for c in "${CFGS[@]}"; do
  bytes=$($PY -c "import json,sys;print(max(json.loads(l)['grad_bytes'] for l in open('$OUT/results.jsonl') if '\"$c\"' in l and 'grad_bytes' in l))")
  timeout 600 srun --mpi=pmix -N2 --ntasks-per-node=1 "$CNNSCALE" allreduce -b "$bytes" -e "$bytes" -n 20 \
    >"$OUT/$c-allreduce.txt" 2>&1
  us=$(awk '!/^#/ && NF >= 4 {print $4}' "$OUT/$c-allreduce.txt" | tail -1)
  echo "{\"config\": \"$c\", \"impl\": \"allreduce\", \"bytes\": $bytes, \"time_ms\": $($PY -c "print($us/1000)")}" >>"$OUT/results.jsonl"
done
echo "load after: $(uptime)" | tee -a "$OUT/load.txt"

$PY - "$OUT/results.jsonl" <<'EOF' | tee "$OUT/table.md"
import json, statistics as st, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def med(cfg, impl, nodes, key):
    v = [r[key] for r in rows if r["config"] == cfg and r["impl"] == impl and r.get("nodes") == nodes and r.get(key) is not None]
    return st.median(v) if v else float("nan")
print("| config | cnnscale img/s 1 node | 2 nodes | weak scaling | pair bound | exposed / total comm ms | allreduce ms | exposed / allreduce | PyTorch img/s 1 node | 2 nodes | weak scaling | cnnscale / PyTorch at 2 nodes |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for cfg in dict.fromkeys(r["config"] for r in rows):
    c1, c2 = med(cfg, "cnnscale", 1, "images_per_s"), med(cfg, "cnnscale", 2, "images_per_s")
    p1, p2 = med(cfg, "pytorch", 1, "images_per_s"), med(cfg, "pytorch", 2, "images_per_s")
    pair = med(cfg, "cnnscale", 1, "step_ms") / med(cfg, "pair", 1, "step_ms")
    exp, tot = med(cfg, "cnnscale", 2, "exposed_ms"), med(cfg, "cnnscale", 2, "comm_total_ms")
    ar = [r["time_ms"] for r in rows if r["config"] == cfg and r["impl"] == "allreduce"]
    ar = ar[0] if ar else float("nan")
    print(f"| {cfg} | {c1:.0f} | {c2:.0f} | {c2 / (2 * c1):.0%} | {pair:.0%} | {exp:.2f} / {tot:.1f} | {ar:.2f} | "
          f"{exp / ar:.0%} | {p1:.0f} | {p2:.0f} | {p2 / (2 * p1):.0%} | {c2 / p2:.2f}x |")
EOF
echo "results: $OUT (results.jsonl, table.md, load.txt, run directories and logs)"
