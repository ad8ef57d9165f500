#!/usr/bin/env bash
# gpu-first-run.sh — prove the GPU path on one GPU node, from an unpacked GPU kit
# (scripts/gpu-kit.sh), in one command of under 9 minutes: the machine, `cnnscale env`,
# every `gpu` test (each with its own time limit; all run even when one fails; those that
# need 2 GPUs SKIP on one), 1-rank NCCL training of resnet20 (3×32×32, batch 256) and
# resnet50 (3×224×224, 1000 classes, batch 128) in fp32 (--tf32 off), TF32 and bf16 (and
# ResNet-50 bf16 with CNNSCALE_GPU_BF16_STORE=0: the per-convolution conversions that the
# bf16 activation store replaced, precision "bf16conv"; and with its batch-norm layers in
# cuDNN's persistent NHWC mode, CNNSCALE_GPU_BN_PERSISTENT=1, precision "bf16bnp"), and
# the same ResNet-50 in PyTorch on the same GPU (bench/pytorch_gpu_resnet.py: torchvision
# resnet50, synthetic batch, TF32 and autocast(bfloat16), NCHW and channels_last, same
# batch, same timing rule). Everything lands under --out DIR; DIR/summary.md says what
# passed and failed (with each log's last lines) and gives the images/s table with ratios.
#
#   cnnscale-kit/src/bench/gpu-first-run.sh --out DIR [--budget S] [--tests REGEX]
#       [--no-tests] [--no-bench] [--no-pytorch] [--python PY] [--steps N] [--kit DIR]
#       [--serial] [--test-limit S] [--benches LIST] [--pytorch-precisions fp32,tf32,bf16]
#       [--pytorch-formats contiguous,channels_last] [--data-threads N]
#
# Order: the machine, the kit, `cnnscale env`; then the gpu tests, all at once (one GPU has
# room for all of them; --serial runs them one by one), each stopped at --test-limit S
# (default 210) or its own smaller limit; then, with the GPU to themselves, the
# benchmarks one after another (ResNet-50 first: the comparison with PyTorch).
#   --budget S    stop starting checks once S seconds are gone (default 510); a check not
#                 started is listed as "not run (budget)". Each check has its own limit too.
#   --tests REGEX run only the gpu tests whose names match (grep -E)
#   --python PY   the Python with torch + torchvision for the PyTorch peer (default: the
#                 first of /opt/torch/.venv/bin/python3 and python3 that imports torch)
#   --steps N     steps per resnet50 run (default 40; resnet20: 1.5×)
#   --benches L   which benchmarks, in this order (default resnet50.tf32,resnet50.bf16,
#                 resnet50.bf16conv,pytorch,resnet50.bf16bnp,resnet50.fp32,resnet20.fp32,
#                 resnet20.tf32,resnet20.bf16,profile); profile: ResNet-50 in TF32, bf16,
#                 bf16conv and bf16bnp again, 12 steps, with CNNSCALE_GPU_PROFILE (device ms per layer and direction:
#                 profile.resnet50.<precision>.txt)
#   --data-threads N  threads making the synthetic batches (default 4: the GPU must not wait)
# Exit status: 0 every check that ran passed; 1 a check failed; 2 bad usage or no kit;
# 4 no usable GPU (summary.md says "no GPU: <reason>"; the gpu tests were still run and
# SKIP, the training benchmarks were not).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
KIT=${CNNSCALE_KIT:-}
OUT="" BUDGET=510 TEST_RE="" DO_TESTS=1 DO_BENCH=1 DO_TORCH=1 PY="" STEPS=40 SERIAL=0 TEST_CAP=210
BENCHES=resnet50.tf32,resnet50.bf16,resnet50.bf16conv,pytorch,resnet50.bf16bnp,resnet50.fp32,resnet20.fp32,resnet20.tf32,resnet20.bf16,profile
TORCH_PRECISIONS=fp32,tf32,bf16 TORCH_FORMATS=contiguous,channels_last DATA_THREADS=4
while [ $# -gt 0 ]; do
  case $1 in
    --out) OUT=$2; shift 2 ;;
    --budget) BUDGET=$2; shift 2 ;;
    --tests) TEST_RE=$2; shift 2 ;;
    --no-tests) DO_TESTS=0; shift ;;
    --no-bench) DO_BENCH=0; shift ;;
    --no-pytorch) DO_TORCH=0; shift ;;
    --python) PY=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --kit) KIT=$2; shift 2 ;;
    --serial) SERIAL=1; shift ;;
    --benches) BENCHES=$2; shift 2 ;;
    --pytorch-precisions) TORCH_PRECISIONS=$2; shift 2 ;;
    --pytorch-formats) TORCH_FORMATS=$2; shift 2 ;;
    --data-threads) DATA_THREADS=$2; shift 2 ;;
    --test-limit) TEST_CAP=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ {print; next} NR > 1 {exit}' "$0"; exit 0 ;;
    *) echo "gpu-first-run.sh: error: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ -n "$OUT" ] || { echo "gpu-first-run.sh: error: --out DIR is required (where the logs and summary.md go)" >&2; exit 2; }
case $BUDGET$STEPS$TEST_CAP$DATA_THREADS in *[!0-9]*) echo "gpu-first-run.sh: error: --budget, --steps and --test-limit take whole numbers" >&2; exit 2 ;; esac
# The kit: given, or the one this script sits in (KIT/src/bench/gpu-first-run.sh).
[ -z "$KIT" ] && [ -f "$HERE/../../kit-env.sh" ] && KIT=$(cd "$HERE/../.." && pwd)
if [ -z "$KIT" ] || [ ! -f "$KIT/kit-env.sh" ]; then
  echo "gpu-first-run.sh: error: no GPU kit here: run the copy inside an unpacked kit (cnnscale-kit/src/bench/), or pass --kit DIR; make one with scripts/gpu-kit.sh" >&2
  exit 2
fi
mkdir -p "$OUT" || exit 2
OUT=$(cd "$OUT" && pwd)
[ -z "$(ls -A "$OUT")" ] || { echo "gpu-first-run.sh: error: $OUT is not empty (give a new folder: results are never mixed)" >&2; exit 2; }
# shellcheck source=/dev/null
source "$KIT/kit-env.sh" 2>"$OUT/kit-env.txt"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
T0=$(date +%s)
elapsed() { echo $(($(date +%s) - T0)); }
SUMMARY=$OUT/summary.md RESULTS=$OUT/results.tsv
: >"$RESULTS"
say() { echo "[$(elapsed)s] $*"; }
# check NAME LIMIT_S COMMAND...: runs it with its log in $OUT/NAME.log; records
# name, status (PASS FAIL SKIP TIMEOUT), seconds. Status 77 is a SKIP.
check() {
  local name=$1 limit=$2 t rc st; shift 2
  if [ $(($(elapsed) + 5)) -gt "$BUDGET" ]; then
    printf '%s\tNOT RUN (budget)\t0\n' "$name" >>"$RESULTS"; say "$name: not run (budget of ${BUDGET}s spent)"; return 0
  fi
  local left=$((BUDGET - $(elapsed))); [ "$limit" -gt "$left" ] && limit=$left
  t=$(date +%s)
  timeout -k 10 "$limit" "$@" >"$OUT/$name.log" 2>&1 </dev/null
  rc=$?
  case $rc in 0) st=PASS ;; 77) st=SKIP ;; 124|137) st="TIMEOUT (${limit}s)" ;; *) st="FAIL (exit $rc)" ;; esac
  printf '%s\t%s\t%s\n' "$name" "$st" $(($(date +%s) - t)) >>"$RESULTS"
  say "$name: $st in $(($(date +%s) - t))s"
  return 0
}

# --- the machine and the kit -------------------------------------------------------------
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)  host: $(hostname)  cores: $(nproc)  load: $(cut -d' ' -f1-3 /proc/loadavg)"
  grep -m1 PRETTY_NAME /etc/os-release 2>/dev/null
  cat "$KIT/KIT.txt"
  echo "CUDA libraries from: ${CNNSCALE_KIT_CUDA_DIRS:-none}${CNNSCALE_KIT_CUDA_MISSING:+ (missing: $CNNSCALE_KIT_CUDA_MISSING)}"
} >"$OUT/machine.txt" 2>&1
cat "$OUT/kit-env.txt" >>"$OUT/machine.txt"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.sm,power.limit,temperature.gpu,utilization.gpu \
    --format=csv >>"$OUT/machine.txt" 2>&1
else
  echo "nvidia-smi: not on PATH" >"$OUT/nvidia-smi.txt"
fi
check kit-check 60 "$KIT/kit-check.sh"
check version 30 cnnscale --version
check env 60 cnnscale env
cat "$OUT/version.log" >>"$OUT/machine.txt"

# A usable GPU? nvidia-smi must list one and cnnscale env must bind rank 0 to it.
NOGPU=""
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if grep -q 'device=cuda:' "$OUT/env.log"; then
  :
elif grep -q '^no GPU on rank' "$OUT/env.log"; then
  NOGPU=$(grep -m1 '^no GPU on rank' "$OUT/env.log" | sed 's/^no GPU on rank [0-9]*: //')
elif [ "${gpus:-0}" -lt 1 ]; then
  NOGPU="nvidia-smi lists no GPU ($(nvidia-smi -L 2>&1 | head -n 1 || true))"
else
  NOGPU="cnnscale env did not bind a GPU; see env.log: $(tail -n 2 "$OUT/env.log" | tr '\n' ' ')"
fi
[ -n "$NOGPU" ] && say "no GPU: $NOGPU"

# --- the gpu tests -----------------------------------------------------------------------
# tests.tsv: name, CTest timeout, skip code, environment, command (@KIT@ = the kit; '-': empty).
declare -A TLINE
if [ -f "$KIT/tests.tsv" ]; then
  while IFS=$'\t' read -r name tmo _skip envs cmd; do TLINE[$name]="$tmo"$'\t'"$envs"$'\t'"$cmd"; done <"$KIT/tests.tsv"
fi
# Order (--serial): the single-GPU ones first, then the 2-GPU ones (SKIP at once on one
# GPU), compute-sanitizer last. Limits (s) bound each test here, whatever CTest allows.
declare -A LIMIT=([test_cuda_optimizer_gpu]=60)
ORDER=(test_cuda_optimizer_gpu test_cuda_model_gpu bf16_gpu resume_gpu)
for n in $(printf '%s\n' "${!TLINE[@]}" | sort); do
  case " ${ORDER[*]} sanitizer_gpu " in *" $n "*) ;; *) ORDER+=("$n") ;; esac
done
ORDER+=(sanitizer_gpu)
run_test() {  # run_test NAME
  local n=$1 tmo envs cmd e dir
  [ -n "${TLINE[$n]:-}" ] || return 0
  [ -n "$TEST_RE" ] && ! grep -qE -- "$TEST_RE" <<<"$n" && return 0
  IFS=$'\t' read -r tmo envs cmd <<<"${TLINE[$n]}"
  local lim=${LIMIT[$n]:-$TEST_CAP}
  [ "$tmo" -lt "$lim" ] && lim=$tmo
  local envv=()
  IFS=';' read -r -a e <<<"$envs"
  for x in "${e[@]}"; do [ -n "$x" ] && [ "$x" != - ] && envv+=("${x//@KIT@/$KIT}"); done
  # The first run keeps compute-sanitizer to a small subset (sanitised kernels are slow);
  # set CNNSCALE_SANITIZER_MODEL_FILTER to choose another.
  [ "$n" = sanitizer_gpu ] && envv+=("CNNSCALE_SANITIZER_MODEL_FILTER=${CNNSCALE_SANITIZER_MODEL_FILTER:-CudaLayers.ConvStridePaddingBiasRelu:CudaLayers.BatchNormTrainingRunningStatsAndEval:CudaBf16.ConversionsRoundToNearestEvenAndTranspose:CudaBf16.StoreKernelsRoundOnce:CudaModels.Lenet5}")
  dir=$(mktemp -d "${TMPDIR:-/tmp}/gpu-first-run.$n.XXXXXX")
  check "test.$n" "$lim" env "${envv[@]}" bash -c "cd '$dir' && KIT='$KIT' && eval \"\$0\"" "${cmd//@KIT@/\$KIT}"
  rm -rf "$dir"
}
if [ $DO_TESTS = 1 ]; then
  [ ${#TLINE[@]} -gt 0 ] || { printf 'tests.tsv\tFAIL (the kit lists no gpu test)\t0\n' >>"$RESULTS"; }
  say "gpu tests: ${#TLINE[@]} ($([ $SERIAL = 1 ] && echo 'one by one' || echo 'all at once'), each at most ${TEST_CAP}s)"
  for n in "${ORDER[@]}"; do
    if [ $SERIAL = 1 ]; then run_test "$n"; else run_test "$n" & fi
  done
  wait
fi

# --- training benchmarks: cnnscale, then PyTorch, on the same GPU ---------------------------
BENCH=$OUT/bench
mkdir -p "$BENCH"
: >"$BENCH/results.jsonl"
# A benchmark precision: its train options (PREC_ARGS) and the model's switches (PREC_ENV,
# passed to the rank by mpiexec -x).
precision_setup() {  # PRECISION
  local store=1 bnp=0
  case $1 in
    fp32) PREC_ARGS=(--precision fp32 --tf32 off) ;;
    tf32) PREC_ARGS=(--precision fp32 --tf32 on) ;;
    bf16) PREC_ARGS=(--precision bf16) ;;
    bf16conv) PREC_ARGS=(--precision bf16); store=0 ;;  # the design before the bf16 activation store
    bf16bnp) PREC_ARGS=(--precision bf16); bnp=1 ;;     # batch-norm in cuDNN's persistent NHWC mode
  esac
  PREC_ENV=(CNNSCALE_GPU_BF16_STORE=$store CNNSCALE_GPU_BN_PERSISTENT=$bnp)
}
PREC_X=(-x CNNSCALE_GPU_BF16_STORE -x CNNSCALE_GPU_BN_PERSISTENT)
bench_cnnscale() {  # CONFIG PRECISION
  local cfg=$1 prec=$2 args steps=$STEPS
  case $cfg in
    resnet20) args=(--model resnet20 --image-size 32 --channels 3 --classes 10 --batch-size 256); steps=$((STEPS * 3 / 2)) ;;
    resnet50) args=(--model resnet50 --image-size 224 --channels 3 --classes 1000 --batch-size 128) ;;
  esac
  precision_setup "$prec"
  check "bench.$cfg.$prec" 90 env "${PREC_ENV[@]}" mpiexec -n 1 --bind-to none "${PREC_X[@]}" cnnscale train \
    --synthetic --backend nccl "${args[@]}" "${PREC_ARGS[@]}" --optimizer sgd --lr 0.01 --momentum 0.9 \
    --max-steps "$steps" --no-eval --no-tensorboard --log-every 10 --data-threads "$DATA_THREADS" --run-dir "$BENCH/$cfg.$prec"
  local ips
  ips=$(grep -o '"images_per_s": *[0-9.eE+-]*' "$BENCH/$cfg.$prec/run.json" 2>/dev/null | head -n 1 | sed 's/.*: *//')
  [ -n "$ips" ] && echo "{\"impl\": \"cnnscale\", \"model\": \"$cfg\", \"precision\": \"$prec\", \"images_per_s\": $ips}" >>"$BENCH/results.jsonl"
}
bench_pytorch() {
  if [ -z "$PY" ]; then
    for c in /opt/torch/.venv/bin/python3 "$(command -v python3)"; do
      [ -x "$c" ] && env -u LD_LIBRARY_PATH "$c" -c 'import torch, torchvision' 2>/dev/null && { PY=$c; break; }
    done
  fi
  if [ -z "$PY" ]; then
    printf 'bench.pytorch\tNOT RUN (no python with torch and torchvision; --python PY)\t0\n' >>"$RESULTS"
    return 0
  fi
  # PyTorch loads its own CUDA libraries: none of the kit's variables reach it.
  check bench.pytorch 150 env -u LD_LIBRARY_PATH "$PY" "$KIT/src/bench/pytorch_gpu_resnet.py" --model resnet50 \
    --batch-size 128 --steps "$STEPS" --precisions "$TORCH_PRECISIONS" --formats "$TORCH_FORMATS"
  grep '^{' "$OUT/bench.pytorch.log" >>"$BENCH/results.jsonl"
}
if [ -n "$NOGPU" ]; then
  [ $DO_BENCH = 1 ] && printf 'benchmarks\tNOT RUN (no GPU)\t0\n' >>"$RESULTS"
elif [ $DO_BENCH = 1 ]; then
  for b in ${BENCHES//,/ }; do
    case $b in
      resnet20.fp32|resnet20.tf32|resnet20.bf16|resnet20.bf16conv|resnet20.bf16bnp|resnet50.fp32|resnet50.tf32|resnet50.bf16|resnet50.bf16conv|resnet50.bf16bnp)
        bench_cnnscale "${b%.*}" "${b#*.}" ;;
      pytorch) [ $DO_TORCH = 1 ] && bench_pytorch ;;
      profile)
        for prec in tf32 bf16 bf16conv bf16bnp; do
          precision_setup "$prec"
          check "profile.resnet50.$prec" 60 env CNNSCALE_GPU_PROFILE="$OUT/profile.resnet50.$prec.txt" \
            "${PREC_ENV[@]}" mpiexec -n 1 --bind-to none -x CNNSCALE_GPU_PROFILE "${PREC_X[@]}" cnnscale train \
            --synthetic --backend nccl --model resnet50 \
            --image-size 224 --channels 3 --classes 1000 --batch-size 128 "${PREC_ARGS[@]}" --optimizer sgd --lr 0.01 \
            --momentum 0.9 --max-steps 12 --no-eval --no-tensorboard --log-every 4 --data-threads "$DATA_THREADS" \
            --run-dir "$BENCH/profile.$prec"
        done ;;
      *) echo "gpu-first-run.sh: warning: unknown benchmark $b (--benches)" >&2 ;;
    esac
  done
fi

# --- summary --------------------------------------------------------------------------------
{
  echo "# cnnscale GPU first run"
  echo
  sed 's/^/    /' "$OUT/machine.txt"
  echo
  [ -n "$NOGPU" ] && { echo "**no GPU: $NOGPU**"; echo; }
  echo "| check | result | seconds |"
  echo "|---|---|---|"
  awk -F'\t' '{printf "| %s | %s | %s |\n", $1, $2, $3}' "$RESULTS"
  echo
  if [ -s "$BENCH/results.jsonl" ] && PYT=$(command -v python3 || echo "$PY") && [ -n "$PYT" ]; then
    echo "## images/s (one GPU, one rank; cnnscale: run.json median; PyTorch: the better of its formats and timings)"
    echo
    env -u LD_LIBRARY_PATH "$PYT" - "$BENCH/results.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
cn = {(r["model"], r["precision"]): r["images_per_s"] for r in rows if r["impl"] == "cnnscale"}
pt = {}
for r in rows:
    if r["impl"] != "pytorch": continue
    v = max(r["images_per_s"], r.get("images_per_s_window", 0))
    k = (r["model"], r["precision"])
    if v > pt.get(k, (0, ""))[0]: pt[k] = (v, r["format"])
print("| model | precision | cnnscale | PyTorch (format) | cnnscale / PyTorch |")
print("|---|---|---|---|---|")
for m in ("resnet20", "resnet50"):
    for p in ("fp32", "tf32", "bf16"):
        c = cn.get((m, p)); t = pt.get((m, p))
        cs = f"{c:.0f}" if c else "–"
        ts = f"{t[0]:.0f} ({t[1]})" if t else "–"
        rs = f"{c / t[0]:.2f}×" if c and t else "–"
        print(f"| {m} | {p} | {cs} | {ts} | {rs} |")
print()
for m in ("resnet20", "resnet50"):
    b = cn.get((m, "bf16")); t = cn.get((m, "tf32")); f = cn.get((m, "fp32"))
    if b and t and f: print(f"cnnscale {m}: TF32/fp32 {t / f:.2f}×, bf16/TF32 {b / t:.2f}×  ")
    c = cn.get((m, "bf16conv")); q = cn.get((m, "bf16bnp"))
    if b and c:
        print(f"cnnscale {m} bf16: activation store {b:.0f} images/s vs per-convolution conversions "
              f"(CNNSCALE_GPU_BF16_STORE=0) {c:.0f}: {b / c:.2f}×  ")
    if b and q:
        print(f"cnnscale {m} bf16: batch-norm persistent NHWC (CNNSCALE_GPU_BN_PERSISTENT=1) {q:.0f} images/s: "
              f"{q / b:.2f}× the default  ")
PY
    echo
    echo "Step breakdown of the cnnscale runs (run.json breakdown_median_ms):"
    echo
    for d in "$BENCH"/resnet*/run.json; do
      [ -f "$d" ] || continue
      echo "    $(basename "$(dirname "$d")"): $(tr -d '\n ' <"$d" | grep -o '"breakdown_median_ms":{[^}]*}' | head -n 1)"
    done
    echo
  fi
  for f in "$OUT"/profile.*.txt; do
    [ -f "$f" ] || continue
    echo "## Where a ResNet-50 step's device time goes: $(basename "$f")"
    echo
    head -n 24 "$f" | sed 's/^/    /'
    echo
  done
  echo "## The last lines of each check that did not pass"
  while IFS=$'\t' read -r name st _; do
    case $st in PASS|SKIP|"NOT RUN"*) continue ;; esac
    echo
    echo "### $name: $st"
    tail -n 25 "$OUT/$name.log" 2>/dev/null | sed 's/^/    /'
  done <"$RESULTS"
  echo
  echo "## Skipped, with their reason"
  while IFS=$'\t' read -r name st _; do
    [ "$st" = SKIP ] || continue
    echo "- $name: $(awk 'prev ~ /: Skipped$/ {print; exit} /^SKIP/ {print; exit} {prev = $0}' "$OUT/$name.log" | head -c 300)"
  done <"$RESULTS"
  echo
  echo "total: $(elapsed)s of a ${BUDGET}s budget"
} >"$SUMMARY"
cat "$SUMMARY"
if awk -F'\t' '$2 ~ /^(FAIL|TIMEOUT)/ {bad = 1} END {exit !bad}' "$RESULTS"; then exit 1; fi
[ -n "$NOGPU" ] && exit 4
exit 0
