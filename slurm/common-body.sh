# ============ nothing below needs editing: cnnscale's common job body ============
# (the same in every cnnscale template: the build generates each from the source tree's
# slurm/<name>.slurm.in, slurm/common-settings.txt and this slurm/common-body.sh)
set -o pipefail
log() { echo "[cnnscale job ${SLURM_JOB_ID:-none} $(date +%H:%M:%S)] $*"; }
die() { echo "cnnscale: error: (job script) $*" >&2; exit 1; }
[ -n "${SLURM_JOB_ID:-}" ] || die "this is an sbatch script: submit it with 'sbatch $0'"

# Where the template was submitted from: sbatch runs a copy, Slurm keeps the original
# path. Its neighbours (../configs, the install's bin) are found relative to it.
template=$(scontrol show job "$SLURM_JOB_ID" 2>/dev/null | sed -n 's/^ *Command=//p' | head -n 1)
case $template in /*) ;; ?*) template=${SLURM_SUBMIT_DIR:-$PWD}/$template ;; esac
template_dir=""
if [ -n "$template" ] && [ -f "$template" ]; then template_dir=$(cd "$(dirname "$template")" && pwd); fi

# 1. The executable: CNNSCALE_BIN, else `module load cnnscale`, else $CNNSCALE_HOME/bin,
#    else the install this template belongs to, else the build tree it was generated
#    in (<build>/slurm → <build>/bin), else PATH.
how="CNNSCALE_BIN"
if [ -z "${CNNSCALE_BIN:-}" ]; then
  if ! type module >/dev/null 2>&1; then
    for f in ${LMOD_PKG:+"$LMOD_PKG/init/bash"} /usr/share/lmod/lmod/init/bash \
             ${MODULESHOME:+"$MODULESHOME/init/bash"} /usr/share/modules/init/bash /etc/profile.d/modules.sh; do
      # shellcheck disable=SC1090
      if [ -r "$f" ]; then . "$f" >/dev/null 2>&1; break; fi
    done
  fi
  if type module >/dev/null 2>&1 && module load "${CNNSCALE_MODULE:-cnnscale}" >/dev/null 2>&1 \
     && command -v cnnscale >/dev/null 2>&1; then
    CNNSCALE_BIN=$(command -v cnnscale); how="module load ${CNNSCALE_MODULE:-cnnscale}"
  elif [ -n "${CNNSCALE_HOME:-}" ] && [ -x "$CNNSCALE_HOME/bin/cnnscale" ]; then
    CNNSCALE_BIN=$CNNSCALE_HOME/bin/cnnscale; how="CNNSCALE_HOME"
  elif [ -n "$template_dir" ] && [ -x "$template_dir/../../../bin/cnnscale" ]; then
    CNNSCALE_BIN=$(cd "$template_dir/../../../bin" && pwd)/cnnscale; how="the install of $template"
  elif [ -n "$template_dir" ] && [ -x "$template_dir/../bin/cnnscale" ]; then
    CNNSCALE_BIN=$(cd "$template_dir/../bin" && pwd)/cnnscale; how="the build tree of $template"
  elif command -v cnnscale >/dev/null 2>&1; then
    CNNSCALE_BIN=$(command -v cnnscale); how="PATH"
  else
    die "cannot find cnnscale: no 'cnnscale' module, no \$CNNSCALE_HOME/bin/cnnscale, none on PATH; set CNNSCALE_BIN=/path/to/cnnscale (sbatch --export=ALL,CNNSCALE_BIN=...)"
  fi
fi
[ -x "$CNNSCALE_BIN" ] || die "CNNSCALE_BIN=$CNNSCALE_BIN is not an executable file"
prefix=$(cd "$(dirname "$CNNSCALE_BIN")/.." && pwd)

# 2. The config: CNNSCALE_CONFIG (a file, or "none"), else configs/mnist_cnn.ini next to
#    the template (the build tree's copy, or the install's), in $CNNSCALE_HOME, or in the
#    install of the executable.
if [ -z "${CNNSCALE_CONFIG:-}" ]; then
  for c in ${template_dir:+"$template_dir/../configs/mnist_cnn.ini"} \
           ${CNNSCALE_HOME:+"$CNNSCALE_HOME/share/cnnscale/configs/mnist_cnn.ini"} \
           "$prefix/share/cnnscale/configs/mnist_cnn.ini" "$prefix/../configs/mnist_cnn.ini"; do
    if [ -f "$c" ]; then CNNSCALE_CONFIG=$(cd "$(dirname "$c")" && pwd)/$(basename "$c"); break; fi
  done
  [ -n "${CNNSCALE_CONFIG:-}" ] || die "no configs/mnist_cnn.ini found next to $template or under $prefix/share/cnnscale; set CNNSCALE_CONFIG=/path/to/file.ini (or CNNSCALE_CONFIG=none)"
fi
if [ "$CNNSCALE_CONFIG" != none ] && [ ! -r "$CNNSCALE_CONFIG" ]; then
  die "CNNSCALE_CONFIG=$CNNSCALE_CONFIG is not a readable file"
fi

# 3. The run directory, one per job: a requeued job keeps its id, so it finds its own
#    checkpoints again (--resume auto). Array tasks get <array job>_<task>.
job_tag=$SLURM_JOB_ID
[ -z "${SLURM_ARRAY_JOB_ID:-}" ] || job_tag=${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}
run_name=${SLURM_JOB_NAME%.slurm}
run_dir=${CNNSCALE_RUN_DIR:-${SLURM_SUBMIT_DIR:-$PWD}/runs/$run_name-$job_tag}
mkdir -p "$run_dir" || die "cannot create the run directory $run_dir; set CNNSCALE_RUN_DIR"

# 4. The command. Threads per rank follow --cpus-per-task; srun is told explicitly
#    (since Slurm 22.05 srun does not inherit --cpus-per-task from sbatch).
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-${SLURM_CPUS_PER_TASK:-1}}
if [ -z "${SLURM_JOB_GPUS:-}${CUDA_VISIBLE_DEVICES:-}" ] && command -v nvidia-smi >/dev/null 2>&1 \
   && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  log "warning: this node has GPUs but the job was given none; add --gres=gpu:N (= --ntasks-per-node)"
fi
srun_cmd=(srun --mpi=pmix --kill-on-bad-exit=1 --cpus-per-task="${SLURM_CPUS_PER_TASK:-1}")
# shellcheck disable=SC2206  # word splitting of the *_ARGS variables is intended
srun_cmd+=(${CNNSCALE_SRUN_ARGS:-})
train_cmd=("$CNNSCALE_BIN" train)
[ "$CNNSCALE_CONFIG" = none ] || train_cmd+=(--config "$CNNSCALE_CONFIG")
train_cmd+=(--run-dir "$run_dir" --resume auto)
[ -z "${CNNSCALE_CHECKPOINT_EVERY:-}" ] || train_cmd+=(--checkpoint-every "$CNNSCALE_CHECKPOINT_EVERY")
# shellcheck disable=SC2206
train_cmd+=(${CNNSCALE_TRAIN_ARGS:-})

log "cnnscale: $CNNSCALE_BIN (from $how): $("$CNNSCALE_BIN" --version 2>&1 | head -n 1)"
log "nodes: ${SLURM_JOB_NODELIST:-?} (${SLURM_JOB_NUM_NODES:-?}), tasks: ${SLURM_NTASKS:-?}, cpus/task: ${SLURM_CPUS_PER_TASK:-1}, restarts: ${SLURM_RESTART_COUNT:-0}"
log "run directory: $run_dir"
# 4b. The network, measured in this allocation for `cnnscale report` (CNNSCALE_ALLREDUCE_DIR):
#     the two levels of the hierarchical gradient sum training does, once per job (not
#     again after a requeue). A failed measurement is logged and training goes on.
if [ -n "${CNNSCALE_ALLREDUCE_DIR:-}" ] && [ "${SLURM_RESTART_COUNT:-0}" = 0 ]; then
  mkdir -p "$CNNSCALE_ALLREDUCE_DIR" || die "cannot create CNNSCALE_ALLREDUCE_DIR=$CNNSCALE_ALLREDUCE_DIR"
  nn=${SLURM_JOB_NUM_NODES:-1} nt=${SLURM_NTASKS:-1}
  levels=""  # a plain word list: the levels are cross and node
  [ "$nn" -le 1 ] || levels="$levels cross"
  [ "$nt" -le "$nn" ] || levels="$levels node"
  for lv in $levels; do
    # shellcheck disable=SC2206
    ar_cmd=("$CNNSCALE_BIN" allreduce --level "$lv" ${CNNSCALE_ALLREDUCE_ARGS:--b 8 -e 32M -f 4 -w 3 -n 10}
            --json "$CNNSCALE_ALLREDUCE_DIR/allreduce-$lv.json")
    log "measuring the network: ${srun_cmd[*]} ${ar_cmd[*]}"
    "${srun_cmd[@]}" "${ar_cmd[@]}" || log "warning: the --level $lv allreduce measurement failed (status $?); the report goes without it"
  done
fi

log "running: ${srun_cmd[*]} ${train_cmd[*]}"

# 5. Signals. --signal=B:USR1@120 sends USR1 to this shell 120 s before the time limit;
#    it is forwarded to srun, which forwards it to every task: all ranks checkpoint at
#    the next step boundary and stop, and this job requeues itself. TERM (scancel,
#    preemption) is forwarded the same way, and this shell waits for the checkpoint
#    instead of dying first (which would kill the step before it is written).
signalled=""
# shellcheck disable=SC2317  # called from the traps
forward() {
  signalled=$1
  log "received SIG$1: forwarding to the training tasks (checkpoint and stop)"
  [ -z "${srun_pid:-}" ] || kill -s "$1" "$srun_pid" 2>/dev/null || true
}
trap 'forward USR1' USR1
trap 'forward TERM' TERM
"${srun_cmd[@]}" "${train_cmd[@]}" &
srun_pid=$!
while kill -0 "$srun_pid" 2>/dev/null; do wait "$srun_pid" 2>/dev/null || true; done
wait "$srun_pid"
rc=$?
log "training ended with status $rc"

# 6. Requeue after a USR1 stop (time limit ahead), or when the tasks report the
#    documented "checkpointed on a signal" status (CNNSCALE_PREEMPT_STATUS), unless
#    CNNSCALE_REQUEUE=0 or CNNSCALE_MAX_RESTARTS is reached. The requeued job runs this
#    script again with the same job id and run directory; --resume auto continues.
if [ "${CNNSCALE_REQUEUE:-1}" = 1 ] && [ "$signalled" != TERM ] \
   && { [ "$signalled" = USR1 ] || [ "$rc" = "${CNNSCALE_PREEMPT_STATUS:-75}" ]; }; then
  if [ "${SLURM_RESTART_COUNT:-0}" -ge "${CNNSCALE_MAX_RESTARTS:-20}" ]; then
    log "not requeueing: restarted ${SLURM_RESTART_COUNT:-0} times already (CNNSCALE_MAX_RESTARTS=${CNNSCALE_MAX_RESTARTS:-20})"
  else
    log "requeueing job $SLURM_JOB_ID; the next start resumes from $run_dir/checkpoints"
    scontrol requeue "$SLURM_JOB_ID" && exit 0
    log "warning: scontrol requeue failed; resubmit with: cd $SLURM_SUBMIT_DIR && CNNSCALE_RUN_DIR=$run_dir sbatch $template"
  fi
fi
[ ! -f "$run_dir/run.json" ] || log "summary: $run_dir/run.json (cnnscale report $run_dir)"
exit "$rc"
