#!/usr/bin/env bash
# scaling-sweep.sh — run the same training at several node (or rank) counts and end
# with `cnnscale report` over the runs.
#
# Slurm:  scripts/scaling-sweep.sh --nodes 1,2,4,8 [--tasks-per-node N] [--mode strong|weak]
#             [--template FILE] [--out DIR] -- [cnnscale train options]
#   One sbatch job per node count, each into its own run directory OUT/nodes-N-job-JOBID,
#   then a report job with --dependency=afterany on all of them (it reports the runs that
#   finished: `cnnscale report --allow-missing`). The script returns after submitting.
#   Each job first measures the network in its own allocation (CNNSCALE_ALLREDUCE_DIR, see
#   the template): `cnnscale allreduce --level cross` across its nodes (N > 1) and
#   `--level node` within them (more than one task per node), into its run directory as
#   allreduce-{cross,node}.json; the report job (OUT/report-job.sh) passes every one it
#   finds as --allreduce, so the report's cross-node α₂, β₂ come from those measurements.
# Local:  scripts/scaling-sweep.sh --local --ranks 1,2,4 [--mode ...] [--out DIR] -- [train options]
#   Runs `mpirun --oversubscribe --allow-run-as-root -n R cnnscale train ...` for each count
#   on this machine (run directories OUT/ranks-R), then `cnnscale allreduce --level node`
#   at R > 1 ranks (OUT/ranks-R/allreduce-node.json: the intra-node α₁, β₁), then the
#   report, and waits for all. One machine has no cross-node level: the report says so.
#   Running it again with the same --out retrains nothing that finished (`cnnscale train`
#   says "nothing to train" and leaves run.json as it is) and reports the same runs; more
#   --max-steps/--epochs continue the runs; other training options are refused (a run
#   directory holds one configuration; docs/checkpoints.md) — use another --out.
#
# Batch size: strong scaling keeps the global batch (--global-batch, default 256), so each
# rank trains on global/ranks images (an error if that does not divide); weak scaling keeps
# the per-rank batch (--batch-per-rank, default 32). The script passes --batch-size and
# --run-dir itself; do not put them after `--`.
#
# What the sbatch templates are assumed to honour (SPEC "sbatch templates"):
#   CNNSCALE_TRAIN_ARGS  appended to the `cnnscale train` command line;
#   CNNSCALE_RUN_DIR     the run directory to pass as --run-dir (instead of their default).
# Both travel in the environment (sbatch --export=ALL), so train options may contain commas.
# As the job id is known only after submission, each job is submitted held, its directory
# nodes-N-job-JOBID is created, OUT/.slot-nodes-N (the CNNSCALE_RUN_DIR it was given) is
# pointed at it, and the job is released.
#
# Other options: --partition P, --time HH:MM:SS, --account A (passed to sbatch),
#   --cnnscale PATH (default: $CNNSCALE, `cnnscale` on PATH, or build/bin/cnnscale),
#   --template FILE (default: the CNN_CPU.slurm generated beside that executable, in its
#   install's share/cnnscale/slurm or its build tree's slurm/),
#   --no-allreduce (skip the network measurements), --allreduce-args "ARGS" (the
#   measurement's size sweep; default "-b 8 -e 32M -f 4 -w 3 -n 10"),
#   --dry-run (print the commands instead of running them).
# The report's training budget (docs/report.md "Training budget"): --epochs E (wall time
#   and node-hours of E epochs at every count: what an allocation request needs; the
#   sweep's runs themselves train what the options after -- say), --train-samples N (images
#   per epoch; needed with --synthetic runs), --node-hour-cost X, --target-accuracy A.
set -euo pipefail

die() { echo "scaling-sweep: error: $*" >&2; exit 2; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
NODES="" RANKS="" LOCAL=0 TPN=1 MODE=strong TEMPLATE="" OUT="" DRY=0
GLOBAL_BATCH=256 BATCH_PER_RANK=32 CNN="${CNNSCALE:-}" ALLREDUCE=1 AR_ARGS="-b 8 -e 32M -f 4 -w 3 -n 10"
SBATCH_EXTRA=() REPORT_EXTRA=()
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) NODES=${2:?--nodes needs a list like 1,2,4}; shift 2 ;;
    --ranks) RANKS=${2:?--ranks needs a list like 1,2,4}; shift 2 ;;
    --local) LOCAL=1; shift ;;
    --tasks-per-node) TPN=${2:?}; shift 2 ;;
    --mode) MODE=${2:?}; shift 2 ;;
    --global-batch) GLOBAL_BATCH=${2:?}; shift 2 ;;
    --batch-per-rank) BATCH_PER_RANK=${2:?}; shift 2 ;;
    --template) TEMPLATE=${2:?}; shift 2 ;;
    --out) OUT=${2:?}; shift 2 ;;
    --partition|--time|--account) SBATCH_EXTRA+=("$1=${2:?$1 needs a value}"); shift 2 ;;
    --cnnscale) CNN=${2:?}; shift 2 ;;
    --dry-run) DRY=1; shift ;;
    --epochs|--train-samples|--node-hour-cost|--target-accuracy) REPORT_EXTRA+=("$1" "${2:?$1 needs a value}"); shift 2 ;;
    --no-allreduce) ALLREDUCE=0; shift ;;
    --allreduce-args) AR_ARGS=${2:?--allreduce-args needs a value}; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    *) die "unknown option '$1' (train options go after --; see --help)" ;;
  esac
done
TRAIN_ARGS=("$@")

is_count() { [[ "$1" =~ ^[1-9][0-9]*$ ]]; }
parse_list() {  # "1,2,4" → validated, ascending, unique
  local list=$1 name=$2 x vals=()
  IFS=, read -r -a items <<<"$list"
  [ ${#items[@]} -gt 0 ] || die "$name is empty"
  for x in "${items[@]}"; do is_count "$x" || die "$name: '$x' is not a positive integer"; vals+=("$x"); done
  printf '%s\n' "${vals[@]}" | sort -n -u | tr '\n' ' '
}

case "$MODE" in strong|weak) ;; *) die "--mode $MODE: use strong or weak" ;; esac
is_count "$TPN" || die "--tasks-per-node must be a positive integer, got '$TPN'"
is_count "$GLOBAL_BATCH" || die "--global-batch must be a positive integer, got '$GLOBAL_BATCH'"
is_count "$BATCH_PER_RANK" || die "--batch-per-rank must be a positive integer, got '$BATCH_PER_RANK'"
for a in "${TRAIN_ARGS[@]+"${TRAIN_ARGS[@]}"}"; do
  case "$a" in
    --batch-size|--batch-size=*) die "do not pass --batch-size after --: the sweep sets it (--global-batch G for strong scaling, --batch-per-rank B for weak)" ;;
    --run-dir|--run-dir=*) die "do not pass --run-dir after --: the sweep gives each run its own directory under --out" ;;
  esac
done

if [ "$LOCAL" = 1 ]; then
  [ -n "$RANKS" ] || die "--local needs --ranks LIST (e.g. --ranks 1,2,4)"
  [ -z "$NODES" ] || die "--nodes is for Slurm sweeps; with --local use --ranks"
  COUNTS=$(parse_list "$RANKS" --ranks)
else
  [ -n "$NODES" ] || die "give --nodes LIST for a Slurm sweep, or --local --ranks LIST"
  [ -z "$RANKS" ] || die "--ranks is for --local sweeps; with Slurm use --nodes and --tasks-per-node"
  COUNTS=$(parse_list "$NODES" --nodes)
fi

# Per-rank batch for every count, checked before anything runs.
declare -A BATCH
for c in $COUNTS; do
  if [ "$LOCAL" = 1 ]; then r=$c; else r=$((c * TPN)); fi
  if [ "$MODE" = strong ]; then
    [ $((GLOBAL_BATCH % r)) -eq 0 ] ||
      die "strong scaling: global batch $GLOBAL_BATCH is not divisible by $r ranks; choose --global-batch as a multiple of every rank count"
    BATCH[$c]=$((GLOBAL_BATCH / r))
  else
    BATCH[$c]=$BATCH_PER_RANK
  fi
done

if [ -z "$CNN" ]; then
  if command -v cnnscale >/dev/null 2>&1; then CNN=$(command -v cnnscale)
  elif [ -x "$SRC/build/bin/cnnscale" ]; then CNN="$SRC/build/bin/cnnscale"
  else CNN=cnnscale; fi
fi
[ "$DRY" = 1 ] || [ -x "$CNN" ] || command -v "$CNN" >/dev/null 2>&1 ||
  die "cannot find the cnnscale executable ('$CNN'); build it or pass --cnnscale PATH"

[ -n "$OUT" ] || OUT="sweep-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$OUT/logs"
OUT=$(cd "$OUT" && pwd)

q() { printf '%q ' "$@"; }  # shell-quoted echo of a command
run() { if [ "$DRY" = 1 ]; then echo "+ $(q "$@")"; else "$@"; fi; }

if [ "$LOCAL" = 1 ]; then
  MPI=${MPIEXEC:-mpirun}
  DIRS=()
  for r in $COUNTS; do
    dir="$OUT/ranks-$r"
    DIRS+=("$dir")
    cmd=("$MPI" --oversubscribe --allow-run-as-root -n "$r" "$CNN" train "${TRAIN_ARGS[@]+"${TRAIN_ARGS[@]}"}"
         --batch-size "${BATCH[$r]}" --run-dir "$dir")
    echo "scaling-sweep: $r rank(s), batch ${BATCH[$r]} per rank → $dir"
    if [ "$DRY" = 1 ]; then run "${cmd[@]}"; continue; fi
    if ! "${cmd[@]}" >"$OUT/logs/ranks-$r.log" 2>&1; then
      tail -20 "$OUT/logs/ranks-$r.log" >&2
      die "training at $r rank(s) failed; full log: $OUT/logs/ranks-$r.log"
    fi
  done
  AR=()
  if [ "$ALLREDUCE" = 1 ]; then
    for r in $COUNTS; do
      [ "$r" -gt 1 ] || continue
      f="$OUT/ranks-$r/allreduce-node.json"
      # shellcheck disable=SC2206  # AR_ARGS is a list of options
      acmd=("$MPI" --oversubscribe --allow-run-as-root -n "$r" "$CNN" allreduce --level node $AR_ARGS --json "$f")
      echo "scaling-sweep: $r rank(s): measuring the intra-node allreduce → $f"
      if [ "$DRY" = 1 ]; then run "${acmd[@]}"; AR+=(--allreduce "$f"); continue; fi
      if "${acmd[@]}" >"$OUT/logs/allreduce-$r.log" 2>&1; then AR+=(--allreduce "$f")
      else echo "scaling-sweep: warning: the allreduce measurement at $r ranks failed ($OUT/logs/allreduce-$r.log); the report goes without it" >&2; fi
    done
  fi
  run "$CNN" report "${DIRS[@]}" --mode "$MODE" --output "$OUT/report" "${AR[@]+"${AR[@]}"}" \
    "${REPORT_EXTRA[@]+"${REPORT_EXTRA[@]}"}"
  [ "$DRY" = 1 ] || echo "scaling-sweep: report in $OUT/report/report.md and report.html"
  exit 0
fi

# ---- Slurm ----
if [ -z "$TEMPLATE" ]; then
  # The CNN_CPU template generated beside the executable: its install's share/cnnscale/slurm,
  # or the build tree's slurm/ (<build>/bin/cnnscale → <build>/slurm), else this tree's build/.
  cnn_path=$(command -v "$CNN" 2>/dev/null || echo "$CNN")
  cnn_prefix=$(cd "$(dirname "$cnn_path")/.." 2>/dev/null && pwd || echo "")
  for t in ${cnn_prefix:+"$cnn_prefix/share/cnnscale/slurm/CNN_CPU.slurm" "$cnn_prefix/slurm/CNN_CPU.slurm"} \
           "$SRC/build/slurm/CNN_CPU.slurm"; do
    if [ -f "$t" ]; then TEMPLATE=$t; break; fi
  done
  [ -n "$TEMPLATE" ] || TEMPLATE="$SRC/build/slurm/CNN_CPU.slurm"
fi
if [ ! -f "$TEMPLATE" ]; then
  [ "$DRY" = 1 ] || die "sbatch template '$TEMPLATE' not found; pass --template FILE"
  echo "scaling-sweep: note: template '$TEMPLATE' does not exist (dry run goes on)"
fi
if [ "$DRY" = 0 ]; then command -v sbatch >/dev/null 2>&1 || die "sbatch not found: this is not a Slurm login node (use --local --ranks LIST)"; fi
JOBS=() DIRS=()
ARDIR=""; [ "$ALLREDUCE" = 0 ] || ARDIR=1
: >"$OUT/sweep.txt"
for n in $COUNTS; do
  slot="$OUT/.slot-nodes-$n"
  args="${TRAIN_ARGS[*]+"${TRAIN_ARGS[*]}"} --batch-size ${BATCH[$n]}"
  args=${args# }
  cmd=(sbatch --parsable --hold --nodes="$n" --ntasks-per-node="$TPN" --job-name="cnnscale-sweep-n$n"
       --output="$OUT/logs/nodes-$n-%j.out" --export=ALL "${SBATCH_EXTRA[@]+"${SBATCH_EXTRA[@]}"}" "$TEMPLATE")
  echo "scaling-sweep: $n node(s) x $TPN task(s), batch ${BATCH[$n]} per rank"
  if [ "$DRY" = 1 ]; then
    echo "+ CNNSCALE_TRAIN_ARGS=$(q "$args")CNNSCALE_RUN_DIR=$(q "$slot")${ARDIR:+CNNSCALE_ALLREDUCE_DIR=$(q "$slot")}$(q "${cmd[@]}")"
    jid="JOB_n$n"
  else
    out=$(CNNSCALE_TRAIN_ARGS="$args" CNNSCALE_RUN_DIR="$slot" CNNSCALE_ALLREDUCE_DIR="${ARDIR:+$slot}" \
          CNNSCALE_ALLREDUCE_ARGS="$AR_ARGS" "${cmd[@]}") ||
      die "sbatch failed for $n node(s)${JOBS[*]+; already submitted: ${JOBS[*]} (scancel them if unwanted)}"
    jid=${out%%;*}
    [[ "$jid" =~ ^[0-9]+$ ]] || die "unexpected sbatch output '$out'"
  fi
  dir="$OUT/nodes-$n-job-$jid"
  run mkdir -p "$dir"
  run ln -sfn "nodes-$n-job-$jid" "$slot"
  run scontrol release "$jid"
  JOBS+=("$jid") DIRS+=("$dir")
  echo "nodes=$n ranks=$((n * TPN)) batch_per_rank=${BATCH[$n]} job=$jid dir=$dir" >>"$OUT/sweep.txt"
done
dep=$(IFS=:; echo "afterany:${JOBS[*]}")
report_cmd="$(q "$CNN") report --allow-missing $(q "${DIRS[@]}")--mode $MODE --output $(q "$OUT/report")"
[ ${#REPORT_EXTRA[@]} -eq 0 ] || report_cmd+=" $(q "${REPORT_EXTRA[@]}")"
# The report job's script: every network measurement the jobs wrote becomes an --allreduce.
{
  echo '#!/bin/bash'
  echo '# report-job.sh — written by scaling-sweep.sh: cnnscale report over the sweep'"'"'s runs and the'
  echo '# allreduce measurements their jobs took (allreduce-{cross,node}.json in each run directory).'
  echo 'ar=()'
  echo "for f in $(for d in "${DIRS[@]}"; do printf '%q/allreduce-cross.json %q/allreduce-node.json ' "$d" "$d"; done); do"
  echo '  if [ -f "$f" ]; then ar+=(--allreduce "$f"); fi'
  echo 'done'
  echo "echo \"+ $report_cmd\" \"\${ar[*]}\""
  echo "exec $report_cmd \"\${ar[@]}\""
} >"$OUT/report-job.sh"
chmod +x "$OUT/report-job.sh"
[ "$DRY" = 0 ] || sed 's/^/    | /' "$OUT/report-job.sh"
rcmd=(sbatch --parsable --dependency="$dep" --nodes=1 --ntasks=1 --job-name=cnnscale-sweep-report
      --output="$OUT/logs/report-%j.out" --export=ALL "${SBATCH_EXTRA[@]+"${SBATCH_EXTRA[@]}"}" "$OUT/report-job.sh")
if [ "$DRY" = 1 ]; then
  run "${rcmd[@]}"
  rjid=JOB_report
else
  out=$("${rcmd[@]}") || die "sbatch of the report job failed"
  rjid=${out%%;*}
fi
echo "report job=$rjid output=$OUT/report" >>"$OUT/sweep.txt"
echo "scaling-sweep: submitted ${#JOBS[@]} training job(s) (${JOBS[*]}) and report job $rjid (after all of them)"
echo "scaling-sweep: the report will be in $OUT/report/report.md and report.html; jobs in $OUT/sweep.txt"
