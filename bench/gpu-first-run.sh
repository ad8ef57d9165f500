#!/usr/bin/env bash
# gpu-first-run.sh — prove the GPU path on one GPU node, from an unpacked GPU kit
# (scripts/gpu-kit.sh), in one command of at most 9 minutes (the default --budget 540 s
# plus the summary; a GPU lease of 15 minutes also pays for the machine's start-up and
# the kit's copy): the machine, `cnnscale env`, 1-rank NCCL training of ResNet-50
# (3×224×224, 1000 classes, batch 128) in bf16, TF32 and fp32 (--tf32 off) beside the same
# ResNet-50 in PyTorch on the same GPU (bench/pytorch_gpu_resnet.py: torchvision resnet50,
# synthetic batch, autocast(bfloat16), TF32 and fp32, NCHW and channels_last, same batch,
# same timing rule), every `gpu` test of the kit but compute-sanitizer (each with its own
# time limit, all at once; all run even when one fails; those that need 2 GPUs SKIP on
# one), the ResNet-50 variants (bf16own: our fused NHWC batch norm, CNNSCALE_GPU_BN=own;
# tf32own: the fp32 NHWC store under TF32 with it, CNNSCALE_GPU_NHWC_STORE=1
# CNNSCALE_GPU_BN=own; bf16graph: bf16own's step replayed as CUDA graphs,
# CNNSCALE_GPU_GRAPH=1; and any added with --variant; bf16conv, the per-convolution
# conversions that the bf16 activation store replaced, only when asked for), the
# batch-norm kernels' development bench (bn_kernel_bench: cuDNN, naive and ours, and ours
# aiming at 256/1024/2048 blocks, on ResNet-50's 53 batch norms, checked and timed; its
# tables go into the summary), ResNet-50
# from JPEG files (jpeg: photo-like JPEGs made on the node by the kit's
# cnnscale_imagefolder_tool, `prep --store jpeg 320`, training with --augment rrc224,hflip
# and the default --data-threads, with the bf16own variant's switches; the summary sets its
# images/s beside the same variant's synthetic figure, with the input-bound share),
# ResNet-50 with 2 ranks sharing the one GPU over the host data plane (hostplane:
# --device cuda --backend mpi, TF32, batch 64 per rank; the summary sets its images/s
# beside the 1-rank TF32 run and gives run.json's exposed communication per step), a
# CNNSCALE_GPU_PROFILE run of each ResNet-50 precision and variant but the graph's (a
# profile runs without graphs), resnet20 (3×32×32, batch 256) in the three precisions and
# as bf16own and bf16graph (a short step, where launches count), and last, alone, the
# compute-sanitizer test
# (sanitizer_gpu) with what is left of the budget. Everything lands under --out DIR;
# DIR/summary.md says what passed and failed (with each log's last lines) and gives the
# images/s and memory table with the ratios to PyTorch and the GPU paths that ran.
#
#   cnnscale-kit/src/bench/gpu-first-run.sh --out DIR [--budget S] [--tests REGEX]
#       [--no-tests] [--no-bench] [--no-pytorch] [--python PY] [--steps N] [--kit DIR]
#       [--serial] [--test-limit S] [--benches LIST] [--variant NAME:ENV:ARGS]...
#       [--pytorch-precisions fp32,tf32,bf16] [--pytorch-formats contiguous,channels_last]
#       [--data-threads N] [--plan]
#
# The default order, most important first (--benches takes these names and groups):
#   resnet50.bf16 resnet50.tf32 pytorch.bf16 pytorch.tf32 resnet50.fp32 pytorch.fp32
#   tests (the gpu tests but the sanitizer, all at once) kernels (kernels.bn:
#   bn_kernel_bench) variants (resnet50.bf16own, resnet50.tf32own, resnet50.bf16graph, then
#   each --variant) jpeg (jpeg.photos, jpeg.prep, bench.resnet50.jpeg) hostplane
#   (allreduce.hostplane2, bench.resnet50.tf32.hostplane2) profile (profile.resnet50.<tf32, bf16 and
#   each resnet50 variant>, 12 steps) resnet20 (resnet20.fp32, .tf32, .bf16) sanitizer
# Each check has a limit sized to its work (--plan prints them): a cnnscale run 2×(8 s +
# steps × its measured step time) + 30 s; a PyTorch precision (one process per precision:
# a cut costs one row, not the rest) 2×(8 s import + per format: 2×steps−skip steps at its
# measured step time + 3 s cudnn.benchmark) + 60 s (a cold first import of torch took
# 30-66 s on the H100 and H200 nodes; torch is imported once in the background at the
# start to read it from disk while the cnnscale runs go, and the first PyTorch check
# waits for that); a gpu test its own limit (below, at most --test-limit); the sanitizer
# what is left of the budget. --budget S stops starting checks: one not started is
# "NOT RUN (budget)".
#
# Expected time of the default set, from the H100 run of 2026-11-27
# (docs/gpu-runs/2026-11-27-h100-call*.md; `--plan` computes it for the options given):
#   kit-check, version, env                            3 s
#   resnet50.bf16 / .tf32 / .fp32 (measured 30/12/13)  29 + 11 + 16 = 56 s
#   pytorch.bf16 / .tf32 / .fp32 (the 5 configurations took 46 s in one process on the
#     warm node; here per process 8 s import + the steps + 3 s per format)  19 + 22 + 21 = 62 s
#   the tests but the sanitizer, at once: on one GPU the 2-rank ones now run too, over
#   the host data plane (issue 38); the longest, host_plane_gpu (3 runs × 2 models and
#   2 resumes: ~90 s estimated), sets the phase; resume_gpu now 2 × its 30 s  90 s
#   kernels.bn (not yet run: estimated)                40 s
#   jpeg: 1280 photos (7 ms each here: 9 s), prep (16 threads: 3 s), 40 steps (as bf16own)
#                                                      9 + 3 + 12 = 24 s
#   variants bf16own, tf32own, bf16graph (not yet run: 100 ms steps assumed)
#                                                      12 + 12 + 12 = 36 s
#   profiles tf32 (9), bf16 (14), bf16own, tf32own (as 100 ms)
#                                                      9 + 15 + 9 + 9 = 42 s
#   resnet20 ×3, bf16own and bf16graph (H200: 2-3 s each)  10 s
#   hostplane: cnnscale allreduce, 2 ranks, GPU buffers over MPI, 8 B to 64 MiB, checked
#   (not yet run: 5 s); 2 ranks × 40 steps of batch 64 on one GPU (2 × 92 ms assumed)
#                                                      5 + 8 + 40 × 184 / 1000 = 20 s
#   = 383 s before the sanitizer, which gets the rest of the 540 s budget: 157 s (it
#   keeps to its own 150 s). A cold
#   first torch import (30-66 s) comes on top only where the cnnscale runs before it
#   were shorter than it.
#   --budget S    stop starting checks once S seconds are gone (default 540)
#   --tests REGEX run only the gpu tests whose names match (grep -E)
#   --test-limit S  at most S seconds for each gpu test but the sanitizer (default 120;
#                 their own limits: test_cuda_optimizer_gpu 60, bf16_gpu 90)
#   --python PY   the Python with torch + torchvision for the PyTorch peer (default: the
#                 first of /opt/torch/.venv/bin/python3 and python3 that imports torch)
#   --steps N     steps per resnet50 run and PyTorch configuration (default 40; resnet20:
#                 1.5×; profiles: 12); the limits follow
#   --variant NAME:ENV:ARGS  one more cnnscale benchmark (repeatable; also the
#                 ;-separated specs of CNNSCALE_FIRST_RUN_VARIANTS): NAME is
#                 resnet50.<label> or resnet20.<label>, ENV space-separated VAR=VALUE
#                 assignments for the rank (may be empty), ARGS train options, e.g.
#                 --variant 'resnet50.bf16own:CNNSCALE_GPU_BN=own:--precision bf16'.
#                 It runs in "variants" (and its profile in "profile")
#   --data-threads N  pass --data-threads N to cnnscale (default: cnnscale's own default,
#                 on a GPU rank its cores less one; run.json records it)
#   --plan        print the checks in order with their limits, expected seconds and
#                 environment, and the expected total against the budget; runs nothing
#                 (no GPU, no --out needed; the tests from --kit's tests.tsv if given)
# Exit status: 0 every check that ran passed; 1 a check failed; 2 bad usage or no kit;
# 4 no usable GPU (summary.md says "no GPU: <reason>"; the gpu tests were still run and
# SKIP, the training benchmarks were not).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
KIT=${CNNSCALE_KIT:-}
OUT="" BUDGET=540 TEST_RE="" DO_TESTS=1 DO_BENCH=1 DO_TORCH=1 PY="" STEPS=40 SERIAL=0 TEST_CAP=120 PLAN=0
BENCHES=resnet50.bf16,resnet50.tf32,pytorch.bf16,pytorch.tf32,resnet50.fp32,pytorch.fp32,tests,kernels,variants,jpeg,hostplane,profile,resnet20,sanitizer
# The switches and precision of the JPEG input run (a variant's name; the summary compares
# it with that variant's synthetic run).
JPEG_VARIANT=${CNNSCALE_FIRST_RUN_JPEG_VARIANT:-resnet50.bf16own}
TORCH_PRECISIONS=fp32,tf32,bf16 TORCH_FORMATS=contiguous,channels_last DATA_THREADS=""
ADDED=()
usage() { echo "gpu-first-run.sh: error: $* (see --help)" >&2; exit 2; }
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
    --variant) ADDED+=("$2"); shift 2 ;;
    --pytorch-precisions) TORCH_PRECISIONS=$2; shift 2 ;;
    --pytorch-formats) TORCH_FORMATS=$2; shift 2 ;;
    --data-threads) DATA_THREADS=$2; shift 2 ;;
    --test-limit) TEST_CAP=$2; shift 2 ;;
    --plan) PLAN=1; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ {print; next} NR > 1 {exit}' "$0"; exit 0 ;;
    *) usage "unknown option $1" ;;
  esac
done
case $BUDGET$STEPS$TEST_CAP$DATA_THREADS in *[!0-9]*) usage "--budget, --steps, --test-limit and --data-threads take whole numbers" ;; esac
[ "$STEPS" -ge 1 ] || usage "--steps must be at least 1"

# --- the benchmark variants --------------------------------------------------------------
# NAME:ENV:ARGS (see --variant). The model's shape arguments come from NAME's model.
VARIANTS=(
  "resnet50.bf16::--precision bf16"
  "resnet50.tf32::--precision fp32 --tf32 on"
  "resnet50.fp32::--precision fp32 --tf32 off"
  "resnet50.bf16own:CNNSCALE_GPU_BN=own:--precision bf16"          # our fused NHWC batch norm (not yet run on a GPU)
  "resnet50.tf32own:CNNSCALE_GPU_NHWC_STORE=1 CNNSCALE_GPU_BN=own:--precision fp32 --tf32 on"  # fp32 NHWC store + ours
  "resnet50.bf16graph:CNNSCALE_GPU_BN=own CNNSCALE_GPU_GRAPH=1:--precision bf16"  # bf16own as CUDA graphs (not yet run)
  "resnet50.bf16conv:CNNSCALE_GPU_BF16_STORE=0:--precision bf16"   # the design before the bf16 store (only when asked)
  "resnet20.fp32::--precision fp32 --tf32 off"
  "resnet20.tf32::--precision fp32 --tf32 on"
  "resnet20.bf16::--precision bf16"
  "resnet20.bf16own:CNNSCALE_GPU_BN=own:--precision bf16"                          # bf16graph's step as is
  "resnet20.bf16graph:CNNSCALE_GPU_BN=own CNNSCALE_GPU_GRAPH=1:--precision bf16"  # a short step as CUDA graphs
)
if [ -n "${CNNSCALE_FIRST_RUN_VARIANTS:-}" ]; then
  IFS=';' read -r -a from_env <<<"$CNNSCALE_FIRST_RUN_VARIANTS"
  for v in "${from_env[@]}"; do [ -n "${v// /}" ] && ADDED+=("$v"); done
fi
declare -A V_ENV V_ARGS
V_NAMES=()
define_variant() {  # NAME:ENV:ARGS, checked
  local spec=$1 name env args a
  [[ $spec == *:*:* ]] || usage "variant '$spec' is not NAME:ENV:ARGS (e.g. 'resnet50.bf16own:CNNSCALE_GPU_BN=own:--precision bf16')"
  name=${spec%%:*}; env=${spec#*:}; args=${env#*:}; env=${env%%:*}
  [[ $name =~ ^resnet(50|20)\.[a-z0-9_]+$ ]] || usage "variant '$spec': NAME must be resnet50.<label> or resnet20.<label> (label: a-z, 0-9, _)"
  for a in $env; do
    [[ $a =~ ^[A-Za-z_][A-Za-z0-9_]*=[^[:space:]]*$ ]] || usage "variant '$spec': '$a' is not a VAR=VALUE assignment"
  done
  [ -n "${V_ARGS[$name]+x}" ] && usage "variant '$spec': $name is defined already (${V_ENV[$name]:-no env}: ${V_ARGS[$name]})"
  V_ENV[$name]=$env; V_ARGS[$name]=$args; V_NAMES+=("$name")
}
for v in "${VARIANTS[@]}" "${ADDED[@]}"; do define_variant "$v"; done
ADDED_NAMES=("${V_NAMES[@]:${#VARIANTS[@]}}")
# Every variable any variant sets is unset for the others: a run gets only its own
# switches, whatever the caller's environment holds.
SWITCHES=()
for n in "${V_NAMES[@]}"; do for a in ${V_ENV[$n]}; do
  case " ${SWITCHES[*]} " in *" ${a%%=*} "*) ;; *) SWITCHES+=("${a%%=*}") ;; esac
done; done

# --- expected seconds and limits (H100, 2026-11-27 unless said) ----------------------------
# ResNet-50 step ms at batch 128 (run.json median): tf32 92, bf16 528 (the batch norm on
# the activation store's bf16 NHWC tensors: profile 472 of 499 ms), fp32 202, bf16conv 78;
# bf16own and tf32own have not run: 100 ms assumed (the limit then allows 2×(8 + 4) + 30 s:
# a run at the old bf16's 528 ms would be cut, which the summary shows as TIMEOUT); an
# added variant is unknown: the slowest (528). resnet20 at batch
# 256: 12 ms (H200). A run adds about 8 s (start, cuDNN's algorithm timing).
step_ms() {
  case $1 in
    resnet50.tf32) echo 92 ;; resnet50.fp32) echo 202 ;; resnet50.bf16conv) echo 78 ;;
    resnet50.bf16own|resnet50.tf32own|resnet50.bf16graph) echo 100 ;;
    resnet20.*) echo 12 ;; *) echo 528 ;;
  esac
}
bench_steps() { case $1 in resnet20.*) echo $((STEPS * 3 / 2)) ;; *) echo "$STEPS" ;; esac; }
expect_bench() {  # NAME (start-up: resnet20 2 s)
  local start=8; [[ $1 == resnet20.* ]] && start=2
  echo $((start + $(bench_steps "$1") * $(step_ms "$1") / 1000))
}
expect_profile() { echo $((8 + 12 * $(step_ms "resnet50.$1") * 12 / 10000)); }   # LABEL (events: +20 %)
limit_of() { echo $((2 * $1 + 30)); }                                              # EXPECTED
# PyTorch ms per step (pytorch_gpu_resnet.py's median): fp32 NCHW 136, TF32 NCHW 72 and
# channels_last 52, bf16 channels_last 35; bf16 NCHW not brought back (est. 50). Each
# format runs steps + (steps − skip) steps (the median, then the window).
torch_ms() {
  case $1.$2 in
    fp32.*) echo 136 ;; tf32.contiguous) echo 72 ;; tf32.*) echo 52 ;; bf16.contiguous) echo 50 ;; *) echo 35 ;;
  esac
}
torch_formats() { [ "$1" = fp32 ] && echo contiguous || echo "${TORCH_FORMATS//,/ }"; }  # fp32 runs NCHW only
expect_torch() {  # PRECISION
  local f s=8 skip=$((STEPS <= 1 ? 0 : (STEPS / 10 < 1 ? 1 : (STEPS / 10 > 20 ? 20 : STEPS / 10))))
  for f in $(torch_formats "$1"); do s=$((s + 3 + (2 * STEPS - skip) * $(torch_ms "$1" "$f") / 1000)); done
  echo "$s"
}
limit_torch() { echo $((2 * $1 + 60)); }
# gpu tests (one GPU: the 2-GPU ones SKIP at once). Measured on the H100: resume_gpu 30 s,
# bf16_gpu 11, test_cuda_model_gpu 11 (stopped by a failure), test_cuda_optimizer_gpu 1.
declare -A LIMIT=([test_cuda_optimizer_gpu]=60 [bf16_gpu]=90)
# Not yet run (estimates): the host-plane forms of the 2-rank tests on one GPU, the new tests.
declare -A EXPECT=([resume_gpu]=60 [bf16_gpu]=22 [test_cuda_model_gpu]=30 [test_cuda_optimizer_gpu]=1
  [host_plane_gpu]=90 [resnet_torch_gpu]=60 [test_cuda_batchnorm_gpu]=20 [overlap_stress_gpu]=40 [rank_error_gpu]=20
  [bad_label_gpu]=20 [nccl_rendezvous_gpu]=40 [nan_weights_gpu]=30 [test_cuda_ddp_gpu_np2]=20 [graph_gpu]=40)

# --- expand the order ------------------------------------------------------------------------
PLAN_LIST=()
for b in ${BENCHES//,/ }; do
  case $b in
    pytorch) for p in ${TORCH_PRECISIONS//,/ }; do PLAN_LIST+=("pytorch.$p"); done ;;
    pytorch.fp32|pytorch.tf32|pytorch.bf16) PLAN_LIST+=("$b") ;;
    variants) PLAN_LIST+=(resnet50.bf16own resnet50.tf32own resnet50.bf16graph "${ADDED_NAMES[@]}") ;;
    resnet20) PLAN_LIST+=(resnet20.fp32 resnet20.tf32 resnet20.bf16 resnet20.bf16own resnet20.bf16graph) ;;
    profile)
      for n in resnet50.tf32 resnet50.bf16 resnet50.bf16own resnet50.tf32own "${ADDED_NAMES[@]}"; do
        case $n in resnet50.*) PLAN_LIST+=("profile.${n#resnet50.}") ;; esac
      done ;;
    profile.*) [ -n "${V_ARGS[resnet50.${b#profile.}]+x}" ] || usage "unknown benchmark $b (--benches)"; PLAN_LIST+=("$b") ;;
    tests|sanitizer|kernels|jpeg|hostplane) PLAN_LIST+=("$b") ;;
    *) [ -n "${V_ARGS[$b]+x}" ] || usage "unknown benchmark $b (--benches; variants: ${V_NAMES[*]})"; PLAN_LIST+=("$b") ;;
  esac
done
# An old --benches list without them still runs the tests first and the sanitizer last.
case " ${PLAN_LIST[*]} " in *" tests "*) ;; *) PLAN_LIST=(tests "${PLAN_LIST[@]}") ;; esac
case " ${PLAN_LIST[*]} " in *" sanitizer "*) ;; *) PLAN_LIST+=(sanitizer) ;; esac

# --- the kit -----------------------------------------------------------------------------------
[ -z "$KIT" ] && [ -f "$HERE/../../kit-env.sh" ] && KIT=$(cd "$HERE/../.." && pwd)
if [ $PLAN = 0 ]; then
  [ -n "$OUT" ] || usage "--out DIR is required (where the logs and summary.md go)"
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
fi
T0=$(date +%s) VCLOCK=0 PLAN_NOT_RUN=0 PLAN_AT_ONCE=0 PLAN_BEFORE_SANITIZER=""
# --plan: a clock that each check advances by its expected seconds.
elapsed() { if [ $PLAN = 1 ]; then echo "$VCLOCK"; else echo $(($(date +%s) - T0)); fi; }
SUMMARY=$OUT/summary.md RESULTS=$OUT/results.tsv
[ $PLAN = 1 ] || : >"$RESULTS"
say() { echo "[$(elapsed)s] $*"; }
[ $PLAN = 1 ] && printf '%-28s %8s %10s  %s\n' check limit_s expected_s "environment; command"
# check NAME LIMIT EXPECTED COMMAND...: runs it with its log in $OUT/NAME.log; records
# name, status (PASS FAIL SKIP TIMEOUT), seconds. Status 77 is a SKIP. --plan: prints it.
check() {
  local name=$1 limit=$2 exp=$3 t rc st; shift 3
  if [ $(($(elapsed) + 5)) -gt "$BUDGET" ]; then
    if [ $PLAN = 1 ]; then printf '%-28s %8s %10s  NOT RUN (budget)\n' "$name" - -; PLAN_NOT_RUN=$((PLAN_NOT_RUN + 1)); return 0; fi
    printf '%s\tNOT RUN (budget)\t0\n' "$name" >>"$RESULTS"; say "$name: not run (budget of ${BUDGET}s spent)"; return 0
  fi
  local left=$((BUDGET - $(elapsed))); [ "$limit" -gt "$left" ] && limit=$left
  if [ $PLAN = 1 ]; then
    [ "$exp" -gt "$limit" ] && exp=$limit
    printf '%-28s %8s %10s  %s\n' "$name" "$limit" "$exp" "${PLAN_WHAT:-$*}"
    [ "$PLAN_AT_ONCE" = 1 ] || VCLOCK=$((VCLOCK + exp))
    PLAN_WHAT=""
    return 0
  fi
  t=$(date +%s)
  timeout -k 10 "$limit" "$@" >"$OUT/$name.log" 2>&1 </dev/null
  rc=$?
  case $rc in 0) st=PASS ;; 77) st=SKIP ;; 124|137) st="TIMEOUT (${limit}s)" ;; *) st="FAIL (exit $rc)" ;; esac
  printf '%s\t%s\t%s\n' "$name" "$st" $(($(date +%s) - t)) >>"$RESULTS"
  say "$name: $st in $(($(date +%s) - t))s"
  return 0
}

# --- the machine and the kit -------------------------------------------------------------
NOGPU=""
if [ $PLAN = 1 ]; then
  check kit-check 60 2 "$KIT/kit-check.sh"
  check version 30 0 cnnscale --version
  check env 60 1 cnnscale env
else
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
  check kit-check 60 2 "$KIT/kit-check.sh"
  check version 30 0 cnnscale --version
  check env 60 1 cnnscale env
  cat "$OUT/version.log" >>"$OUT/machine.txt"
  # A usable GPU? nvidia-smi must list one and cnnscale env must bind rank 0 to it.
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
fi

# --- PyTorch: the interpreter, and torch read from disk in the background -------------------
TORCH_WARM_PID=""
torch_wanted() { [ $DO_TORCH = 1 ] && [ $DO_BENCH = 1 ] && [ -z "$NOGPU" ] && [[ " ${PLAN_LIST[*]} " == *" pytorch."* ]]; }
if [ $PLAN = 0 ] && torch_wanted; then
  if [ -z "$PY" ]; then
    for c in /opt/torch/.venv/bin/python3 "$(command -v python3)"; do
      [ -x "$c" ] && env -u LD_LIBRARY_PATH "$c" -c 'import importlib.util as u, sys; sys.exit(not (u.find_spec("torch") and u.find_spec("torchvision")))' 2>/dev/null && { PY=$c; break; }
    done
  fi
  if [ -n "$PY" ]; then
    # The first import on a fresh node read torch's libraries from disk: 30-66 s more
    # than a warm one (H100 and H200 first calls). Done here, beside the cnnscale runs
    # (disk and one core, no GPU); the first PyTorch check waits for it.
    ( t=$(date +%s); timeout 180 env -u LD_LIBRARY_PATH "$PY" -c 'import torch, torchvision' >"$OUT/pytorch-import.log" 2>&1
      echo "exit $? after $(($(date +%s) - t))s" >>"$OUT/pytorch-import.log" ) &
    TORCH_WARM_PID=$!
  fi
fi

# --- the checks ------------------------------------------------------------------------------
BENCH=$OUT/bench
[ $PLAN = 1 ] || { mkdir -p "$BENCH"; : >"$BENCH/results.jsonl"; }
bench_args() {  # NAME: the shape and schedule of its model
  case $1 in
    resnet20.*) echo "--model resnet20 --image-size 32 --channels 3 --classes 10 --batch-size 256" ;;
    resnet50.*) echo "--model resnet50 --image-size 224 --channels 3 --classes 1000 --batch-size 128" ;;
  esac
}
# run_cnnscale CHECK NAME STEPS LIMIT EXPECTED [VAR=VALUE...]: 1-rank NCCL training of variant NAME.
run_cnnscale() {
  local chk=$1 name=$2 steps=$3 limit=$4 exp=$5 dir a; shift 5
  local envs=() xs=() unset=()
  for a in "${SWITCHES[@]}"; do unset+=(-u "$a"); done
  for a in ${V_ENV[$name]} "$@"; do envs+=("$a"); xs+=(-x "${a%%=*}"); done
  dir=$BENCH/${chk#bench.}
  # shellcheck disable=SC2046,SC2086  # bench_args and V_ARGS are word lists
  PLAN_WHAT="${V_ENV[$name]:+${V_ENV[$name]} }cnnscale train $(bench_args "$name") ${V_ARGS[$name]} --max-steps $steps" \
    check "$chk" "$limit" "$exp" env "${unset[@]}" "${envs[@]}" mpiexec -n 1 --bind-to none "${xs[@]}" cnnscale train \
    --synthetic --backend nccl $(bench_args "$name") ${V_ARGS[$name]} --optimizer sgd --lr 0.01 --momentum 0.9 \
    --max-steps "$steps" --no-eval --no-tensorboard --log-every 10 ${DATA_THREADS:+--data-threads "$DATA_THREADS"} \
    --run-dir "$dir"
  [ $PLAN = 1 ] && return 0
  [ -f "$dir/run.json" ] && printf '{"impl": "cnnscale", "check": "%s", "name": "%s", "env": "%s", "run_json": "%s"}\n' \
    "$chk" "$name" "${V_ENV[$name]}" "$dir/run.json" >>"$BENCH/results.jsonl"
}
# ResNet-50 from JPEG files: photos made here, prepped as a JPEG store, trained with the
# augmentation a real ImageNet run uses and --data-threads' GPU default (the rank's cores
# less one), with JPEG_VARIANT's switches; the run joins results.jsonl as "jpeg".
run_jpeg() {
  [ -n "${V_ARGS[$JPEG_VARIANT]+x}" ] || { printf 'jpeg\tFAIL (no variant %s)\t0\n' "$JPEG_VARIANT" >>"$RESULTS"; return 0; }
  local photos=$OUT/photos data=$OUT/photos-data dir=$BENCH/resnet50.jpeg a envs=() xs=() unset=()
  local tool=$KIT/tests/cnnscale_imagefolder_tool
  PLAN_WHAT="cnnscale_imagefolder_tool photos (1280 JPEGs of about 400×300, 10 classes)" \
    check jpeg.photos 60 9 "$tool" photos "$photos" 1280 10 400 300
  PLAN_WHAT="cnnscale prep --format imagefolder --store jpeg 320 --threads \$(nproc)" \
    check jpeg.prep 60 3 cnnscale prep --format imagefolder --input "$photos" --store jpeg 320 --threads "$(nproc)" \
    --shards 8 --output "$data"
  for a in "${SWITCHES[@]}"; do unset+=(-u "$a"); done
  for a in ${V_ENV[$JPEG_VARIANT]}; do envs+=("$a"); xs+=(-x "${a%%=*}"); done
  local ex; ex=$(expect_bench "$JPEG_VARIANT")
  # shellcheck disable=SC2086  # V_ARGS is a word list
  PLAN_WHAT="${V_ENV[$JPEG_VARIANT]:+${V_ENV[$JPEG_VARIANT]} }cnnscale train --data (the JPEG store) --augment rrc224,hflip --model resnet50 --batch-size 128 ${V_ARGS[$JPEG_VARIANT]} --max-steps $STEPS" \
    check bench.resnet50.jpeg "$(limit_of "$ex")" "$ex" env "${unset[@]}" "${envs[@]}" mpiexec -n 1 --bind-to none "${xs[@]}" \
    cnnscale train --data "$data" --augment rrc224,hflip --model resnet50 --batch-size 128 ${V_ARGS[$JPEG_VARIANT]} \
    --backend nccl --optimizer sgd --lr 0.01 --momentum 0.9 --max-steps "$STEPS" --no-eval --no-tensorboard \
    --log-every 10 ${DATA_THREADS:+--data-threads "$DATA_THREADS"} --run-dir "$dir"
  [ $PLAN = 1 ] && return 0
  [ -f "$dir/run.json" ] && printf '{"impl": "cnnscale", "check": "bench.resnet50.jpeg", "name": "%s", "env": "%s", "jpeg": true, "run_json": "%s"}\n' \
    "$JPEG_VARIANT" "${V_ENV[$JPEG_VARIANT]}" "$dir/run.json" >>"$BENCH/results.jsonl"
  rm -rf "$photos"  # the prepped store stays (its size is in the summary)
}
# 2 ranks on the one GPU over the host data plane (issue 38): ResNet-50 in TF32 (the default
# path, so that only the plane differs from bench.resnet50.tf32), the global batch 128 as
# two halves; joins results.jsonl as "hostplane".
run_hostplane() {
  local dir=$BENCH/resnet50.tf32.hostplane2 a unset=() ex=$((8 + STEPS * 184 / 1000))
  for a in "${SWITCHES[@]}"; do unset+=(-u "$a"); done
  # The staged sums themselves, every size checked exactly (a wrong element fails).
  check allreduce.hostplane2 60 5 mpiexec -n 2 --oversubscribe --bind-to none cnnscale allreduce --device cuda \
    --backend mpi -b 8 -e 64M -f 4
  PLAN_WHAT="mpiexec -n 2 cnnscale train --device cuda --backend mpi --model resnet50 --batch-size 64 (per rank) --precision fp32 --tf32 on --max-steps $STEPS" \
    check bench.resnet50.tf32.hostplane2 "$(limit_of "$ex")" "$ex" env "${unset[@]}" mpiexec -n 2 --oversubscribe \
    --bind-to none cnnscale train --synthetic --device cuda --backend mpi --model resnet50 --image-size 224 \
    --channels 3 --classes 1000 --batch-size 64 --precision fp32 --tf32 on --optimizer sgd --lr 0.01 --momentum 0.9 \
    --max-steps "$STEPS" --no-eval --no-tensorboard --log-every 10 ${DATA_THREADS:+--data-threads "$DATA_THREADS"} \
    --run-dir "$dir"
  [ $PLAN = 1 ] && return 0
  [ -f "$dir/run.json" ] && printf '{"impl": "cnnscale", "check": "bench.resnet50.tf32.hostplane2", "name": "resnet50.tf32", "env": "2 ranks, --device cuda --backend mpi", "hostplane": true, "run_json": "%s"}\n' \
    "$dir/run.json" >>"$BENCH/results.jsonl"
}
bench_pytorch() {  # PRECISION
  local p=$1 exp; exp=$(expect_torch "$p")
  if [ $PLAN = 0 ] && [ -z "$PY" ]; then
    printf 'bench.pytorch.%s\tNOT RUN (no python with torch and torchvision; --python PY)\t0\n' "$p" >>"$RESULTS"
    return 0
  fi
  if [ -n "$TORCH_WARM_PID" ]; then wait "$TORCH_WARM_PID"; TORCH_WARM_PID=""; fi
  local formats; formats=$(torch_formats "$p")
  # PyTorch loads its own CUDA libraries: none of the kit's variables reach it.
  PLAN_WHAT="pytorch_gpu_resnet.py --precisions $p --formats ${formats// /,} --steps $STEPS" \
    check "bench.pytorch.$p" "$(limit_torch "$exp")" "$exp" env -u LD_LIBRARY_PATH "$PY" "$KIT/src/bench/pytorch_gpu_resnet.py" \
    --model resnet50 --batch-size 128 --steps "$STEPS" --precisions "$p" --formats "${formats// /,}"
  [ $PLAN = 1 ] || grep '^{' "$OUT/bench.pytorch.$p.log" >>"$BENCH/results.jsonl"
}

# The gpu tests: tests.tsv has name, CTest timeout, skip code, environment, command
# (@KIT@ = the kit; '-': empty).
declare -A TLINE=()
SANITIZER_BUDGET=""  # run_sanitizer sets it from what is left of --budget
if [ -n "$KIT" ] && [ -f "$KIT/tests.tsv" ]; then
  while IFS=$'\t' read -r name tmo _skip envs cmd; do TLINE[$name]="$tmo"$'\t'"$envs"$'\t'"$cmd"; done <"$KIT/tests.tsv"
fi
# The single-GPU ones first (--serial), then the rest (2-GPU ones SKIP at once on one GPU).
ORDER=(test_cuda_optimizer_gpu test_cuda_model_gpu bf16_gpu resume_gpu)
for n in $(printf '%s\n' "${!TLINE[@]}" | sort); do
  case " ${ORDER[*]} sanitizer_gpu " in *" $n "*) ;; *) ORDER+=("$n") ;; esac
done
test_selected() { [ -n "${TLINE[$1]:-}" ] && { [ -z "$TEST_RE" ] || grep -qE -- "$TEST_RE" <<<"$1"; }; }
run_test() {  # run_test NAME LIMIT
  local n=$1 lim=$2 tmo envs cmd e dir x
  IFS=$'\t' read -r tmo envs cmd <<<"${TLINE[$n]}"
  [ "$tmo" -lt "$lim" ] && lim=$tmo
  local envv=()
  IFS=';' read -r -a e <<<"$envs"
  for x in "${e[@]}"; do [ -n "$x" ] && [ "$x" != - ] && envv+=("${x//@KIT@/$KIT}"); done
  # compute-sanitizer's cases and budget are sanitizer_gpu.sh's own (a small subset within
  # 150 s); CNNSCALE_SANITIZER_MODEL_FILTER, when set, chooses others.
  [ "$n" = sanitizer_gpu ] && [ -n "${CNNSCALE_SANITIZER_MODEL_FILTER:-}" ] &&
    envv+=("CNNSCALE_SANITIZER_MODEL_FILTER=$CNNSCALE_SANITIZER_MODEL_FILTER")
  [ "$n" = sanitizer_gpu ] && [ -n "$SANITIZER_BUDGET" ] && envv+=("CNNSCALE_SANITIZER_BUDGET=$SANITIZER_BUDGET")
  if [ $PLAN = 1 ]; then dir=TMPDIR; else dir=$(mktemp -d "${TMPDIR:-/tmp}/gpu-first-run.$n.XXXXXX"); fi
  check "test.$n" "$lim" "${EXPECT[$n]:-2}" env "${envv[@]}" bash -c "cd '$dir' && KIT='$KIT' && eval \"\$0\"" "${cmd//@KIT@/\$KIT}"
  [ $PLAN = 1 ] || rm -rf "$dir"
}
run_tests() {
  local n lim phase=0 sel=()
  [ $DO_TESTS = 1 ] || return 0
  if [ ${#TLINE[@]} -eq 0 ]; then
    if [ $PLAN = 1 ]; then
      check "test.* (the kit's)" "$TEST_CAP" 90 "every gpu test of tests.tsv but sanitizer_gpu, all at once (--kit DIR lists them; the longest, host_plane_gpu, ~90 s)"
    else
      printf 'tests.tsv\tFAIL (the kit lists no gpu test)\t0\n' >>"$RESULTS"
    fi
    return 0
  fi
  for n in "${ORDER[@]}"; do test_selected "$n" && sel+=("$n"); done
  [ $PLAN = 1 ] || say "gpu tests: ${#sel[@]} ($([ $SERIAL = 1 ] && echo 'one by one' || echo 'all at once'), each at most ${TEST_CAP}s)"
  for n in "${sel[@]}"; do
    lim=${LIMIT[$n]:-$TEST_CAP}; [ "$lim" -gt "$TEST_CAP" ] && lim=$TEST_CAP
    if [ $PLAN = 1 ]; then
      # At once: the phase takes its longest test; --plan charges that once.
      local te=${EXPECT[$n]:-2}
      [ "$te" -gt "$phase" ] && phase=$te
      PLAN_AT_ONCE=$((1 - SERIAL)) run_test "$n" "$lim"
    elif [ $SERIAL = 1 ]; then run_test "$n" "$lim"
    else run_test "$n" "$lim" & fi
  done
  wait
  [ $PLAN = 1 ] && [ $SERIAL = 0 ] && { VCLOCK=$((VCLOCK + phase)); printf '%-28s %8s %10s  %s\n' "(the tests at once)" "" "$phase" "the longest of them"; }
  return 0
}
run_sanitizer() {
  [ $DO_TESTS = 1 ] || return 0
  if [ $PLAN = 1 ] && [ -z "${TLINE[sanitizer_gpu]:-}" ]; then
    TLINE[sanitizer_gpu]=$'3600\t-\ttests/nn/sanitizer_gpu.sh'
  fi
  test_selected sanitizer_gpu || return 0
  local left=$((BUDGET - $(elapsed)))
  [ "$left" -lt 1 ] && left=1
  PLAN_BEFORE_SANITIZER=$(elapsed)
  # Its runs share CNNSCALE_SANITIZER_BUDGET (150 s by default); here they get what is left
  # less 10 s for the tool's start and exit, so that sanitizer_gpu.sh itself names a run
  # it could not start instead of the whole check being cut. Under 60 s left (a
  # --budget of 7 minutes: 420 s leaves ~37 s) it is not started: NOT RUN (budget), and
  # `--benches sanitizer --tests sanitizer` runs it alone in a second call.
  if [ "$left" -lt 60 ]; then
    if [ $PLAN = 1 ]; then
      printf '%-28s %8s %10s  NOT RUN (budget: %s s left, needs 60)\n' test.sanitizer_gpu - - "$left"
      PLAN_NOT_RUN=$((PLAN_NOT_RUN + 1))
    else
      printf 'test.sanitizer_gpu\tNOT RUN (budget: %s s left, needs 60; --benches sanitizer --tests sanitizer runs it alone)\t0\n' "$left" >>"$RESULTS"
      say "test.sanitizer_gpu: not run ($left s of the budget left, it needs 60)"
    fi
    return 0
  fi
  SANITIZER_BUDGET=$((left - 10)); [ "$SANITIZER_BUDGET" -gt 150 ] && SANITIZER_BUDGET=150
  EXPECT[sanitizer_gpu]=$left
  PLAN_WHAT="compute-sanitizer, alone: the rest of the budget (its runs: $SANITIZER_BUDGET s)" run_test sanitizer_gpu "$left"
}

if [ -n "$NOGPU" ]; then
  # No GPU: the tests still run (each SKIPs, saying why); no benchmark.
  run_tests
  run_sanitizer
  [ $DO_BENCH = 1 ] && printf 'benchmarks\tNOT RUN (no GPU)\t0\n' >>"$RESULTS"
else
  for b in "${PLAN_LIST[@]}"; do
    case $b in
      tests) run_tests ;;
      sanitizer) run_sanitizer ;;
      jpeg) [ $DO_BENCH = 1 ] && run_jpeg ;;
      hostplane) [ $DO_BENCH = 1 ] && run_hostplane ;;
      kernels)  # the kernels' development benches (bench/kernels/): their own checks and timings
        [ $DO_BENCH = 1 ] || continue
        PLAN_WHAT="bn_kernel_bench --iters 10 (ResNet-50's batch norms: cuDNN, naive, ours at 512/256/1024/2048 blocks; bf16 and fp32)" \
          check kernels.bn 150 40 "$KIT/bin/bn_kernel_bench" --iters 10 ;;
      pytorch.*) [ $DO_BENCH = 1 ] && [ $DO_TORCH = 1 ] && bench_pytorch "${b#pytorch.}" ;;
      profile.*)
        [ $DO_BENCH = 1 ] || continue
        ex=$(expect_profile "${b#profile.}")
        run_cnnscale "profile.resnet50.${b#profile.}" "resnet50.${b#profile.}" 12 "$(limit_of "$ex")" "$ex" \
          CNNSCALE_GPU_PROFILE="$OUT/profile.resnet50.${b#profile.}.txt" ;;
      *)
        [ $DO_BENCH = 1 ] || continue
        ex=$(expect_bench "$b")
        run_cnnscale "bench.$b" "$b" "$(bench_steps "$b")" "$(limit_of "$ex")" "$ex" ;;
    esac
  done
fi
# (bounded by its own 180 s from the start; waited for only when no PyTorch check did)
[ -n "$TORCH_WARM_PID" ] && wait "$TORCH_WARM_PID" 2>/dev/null

if [ $PLAN = 1 ]; then
  before=${PLAN_BEFORE_SANITIZER:-$VCLOCK}
  echo "expected before the sanitizer: ${before} s of the ${BUDGET} s budget (H100 2026-11-27 step times, --steps $STEPS);" \
    "the sanitizer's limit: $((VCLOCK - before)) s; not run (budget): $PLAN_NOT_RUN"
  exit 0
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
  [ -s "$OUT/pytorch-import.log" ] && { echo; echo "PyTorch's first import (in the background): $(tail -n 1 "$OUT/pytorch-import.log")"; }
  echo
  if [ -s "$BENCH/results.jsonl" ] && PYT=$(command -v python3 || echo "$PY") && [ -n "$PYT" ]; then
    env -u LD_LIBRARY_PATH "$PYT" - "$BENCH/results.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
runs = {}  # check → (row, run.json)
for r in rows:
    if r["impl"] != "cnnscale": continue
    try: runs[r["check"]] = (r, json.load(open(r["run_json"])))
    except (OSError, ValueError): pass
def gib(v): return f"{v:.2f}" if isinstance(v, (int, float)) and v >= 0 else "–"
pt = {}  # (model, precision) → the faster format's row
for r in rows:
    if r["impl"] != "pytorch": continue
    r["best"] = max(r["images_per_s"], r.get("images_per_s_window", 0))
    k = (r["model"], r["precision"])
    if r["best"] > pt.get(k, {"best": 0})["best"]: pt[k] = r
print("## images/s and device memory (one GPU, one rank; cnnscale: run.json median and gpu.peak_memory_gib; "
      "PyTorch: the faster of its formats and timings, torch.cuda.max_memory_allocated)")
print()
print("| model | precision | cnnscale | cnnscale peak GiB | PyTorch (format) | PyTorch max GiB | cnnscale / PyTorch |")
print("|---|---|---|---|---|---|---|")
for m in ("resnet50", "resnet20"):
    for p in ("bf16", "tf32", "fp32"):
        run = runs.get("bench.%s.%s" % (m, p), (None, {}))[1]
        c = run.get("images_per_s"); t = pt.get((m, p))
        cs = "%.0f" % c if c else "–"
        ts = "%.0f (%s)" % (t["best"], t["format"]) if t else "–"
        tm = gib(t.get("max_memory_gib")) if t else "–"
        rs = "%.2f×" % (c / t["best"]) if c and t else "–"
        print("| %s | %s | %s | %s | %s | %s | %s |" % (m, p, cs, gib((run.get("gpu") or {}).get("peak_memory_gib")), ts, tm, rs))
print()
print("## Every cnnscale run: the paths that ran (run.json gpu) and its step")
print()
print("| check | env | images/s | step ms (median) | data threads | peak GiB | device used GiB | gpu paths |")
print("|---|---|---|---|---|---|---|---|")
for chk, (r, j) in runs.items():
    g = j.get("gpu") or {}
    paths = ("bn " + str(g.get("bn")) + "".join(", " + k for k in ("nhwc_store32", "bf16_store", "tf32_nhwc", "cuda_graph") if g.get(k))
             + (" (graph: " + g["cuda_graph_note"].replace("|", "/") + ")" if g.get("cuda_graph_note") else "")
             if g else "– (no gpu object: not a device model, or a cnnscale before it)")
    ips = j.get("images_per_s")
    print("| %s | %s | %s | %.1f | %s | %s | %s | %s |" % (chk, r["env"] or "–", "%.0f" % ips if ips else "–",
          (j.get("step_ms") or {}).get("median", 0), j.get("data_threads", "–"), gib(g.get("peak_memory_gib")),
          gib(g.get("device_used_gib")), paths))
print()
base = {p: runs.get(f"bench.resnet50.{p}", (None, {}))[1].get("images_per_s") for p in ("bf16", "tf32", "fp32")}
if base["bf16"] and base["tf32"] and base["fp32"]:
    print("cnnscale resnet50: TF32/fp32 %.2f×, bf16/TF32 %.2f×  " % (base["tf32"] / base["fp32"], base["bf16"] / base["tf32"]))
for chk, (r, j) in runs.items():
    if not r.get("hostplane"): continue
    one = runs.get("bench.resnet50.tf32", (None, {}))[1].get("images_per_s")
    ips = j.get("images_per_s"); bd = j.get("breakdown_median_ms") or {}; step = (j.get("step_ms") or {}).get("median")
    print("ResNet-50 TF32, 2 ranks on one GPU over the host data plane (%s): %s images/s%s; exposed communication "
          "%.1f ms of a %.1f ms step (breakdown comm_exposed)  " % (j.get("backend", "?"), "%.0f" % ips if ips else "–",
          ", %.2f× the 1-rank %.0f" % (ips / one, one) if ips and one else "", bd.get("comm_exposed", 0), step or 0))
for chk, (r, j) in runs.items():
    if not r.get("jpeg"): continue
    syn = runs.get("bench." + r["name"], (None, {}))[1].get("images_per_s")
    ips = j.get("images_per_s"); bd = j.get("breakdown_median_ms") or {}; step = (j.get("step_ms") or {}).get("median")
    share = "%.0f %%" % (100 * bd.get("data", 0) / step) if step else "–"
    print("ResNet-50 from JPEG files (%s, --augment rrc224,hflip, %s data threads): %s images/s%s; input wait %s of the "
          "step (breakdown data)  " % (r["env"] or "no env", j.get("data_threads", "–"), "%.0f" % ips if ips else "–",
          ", %.0f %% of its synthetic %.0f" % (100 * ips / syn, syn) if ips and syn else "", share))
for chk, (r, j) in runs.items():
    name = r["name"]
    if r.get("jpeg") or r.get("hostplane") or not chk.startswith("bench.resnet50.") or name.split(".")[1] in ("bf16", "tf32", "fp32"): continue
    ips = j.get("images_per_s"); prec = j.get("precision", "")
    ref = base.get("bf16" if prec == "bf16" else ("tf32" if j.get("tf32") else "fp32"))
    if ips and ref:
        print("cnnscale %s (%s): %.0f images/s, %.2f× the default %s  " % (name, r["env"] or "no env", ips, ips / ref, prec))
for g_name, as_is in (("resnet50.bf16graph", "resnet50.bf16own"), ("resnet20.bf16graph", "resnet20.bf16own")):
    g_j = runs.get("bench." + g_name, (None, {}))[1]; a_j = runs.get("bench." + as_is, (None, {}))[1]
    gi, ai = g_j.get("images_per_s"), a_j.get("images_per_s")
    if gi and ai:
        note = (g_j.get("gpu") or {}).get("cuda_graph_note") or "no note"
        print("CUDA graphs: %s %.0f images/s, %.2f× %s as is (%.0f); %s  " % (g_name, gi, gi / ai, as_is, ai, note))
print()
PY
    echo "Step breakdown of the cnnscale runs (run.json breakdown_median_ms):"
    echo
    for d in "$BENCH"/resnet*/run.json; do
      [ -f "$d" ] || continue
      echo "    $(basename "$(dirname "$d")"): $(tr -d '\n ' <"$d" | grep -o '"breakdown_median_ms":{[^}]*}' | head -n 1)"
    done
    echo
  fi
  if [ -s "$OUT/kernels.bn.log" ]; then
    echo "## Batch-norm kernels (bn_kernel_bench)"
    echo
    grep -E '^(##|###|\||[a-z0-9]+ totals|all versions|\*\*a version)' "$OUT/kernels.bn.log" | sed 's/^## /### /'
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
