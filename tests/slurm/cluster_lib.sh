# shellcheck shell=bash
# tests/slurm/cluster_lib.sh — sourced by the slurm-label tests: a real 2-node Slurm
# cluster (scripts/local-slurm-cluster.sh) that is torn down when the test exits, pass
# or fail, unless it was already up before the test started.
source "$CNNSCALE_SOURCE/tests/lib.sh"
CLUSTER="$CNNSCALE_SOURCE/scripts/local-slurm-cluster.sh"
if [ "$(id -u)" -ne 0 ]; then echo "SKIP: the local Slurm cluster needs root (namespaces, a bridge)"; exit 77; fi
for t in slurmctld slurmd munged sbatch ip nsenter; do
  command -v "$t" >/dev/null || { echo "FAIL: $t missing: run scripts/install-deps.sh"; exit 1; }
done
eval "$("$CLUSTER" env)"     # SLURM_CONF of the local cluster
# Jobs must run in a directory every node sees: the nodes' /tmp is private.
WORK="$CNNSCALE_BUILD/slurm-tests/$(basename "$0" .sh)"
rm -rf "$WORK" && mkdir -p "$WORK"
_we_started=0
_teardown() {
  local rc=$?
  if [ "$_we_started" = 1 ]; then "$CLUSTER" down >/dev/null 2>&1 || echo "WARNING: cluster down failed"; fi
  rm -rf "$TMP"
  exit $rc
}
trap _teardown EXIT
trap 'exit 130' INT TERM
# The checkout and build tree may lie under /tmp (a CI clone): keep them visible on the nodes.
export CNNSCALE_SLURM_SHARE="$CNNSCALE_SOURCE:$CNNSCALE_BUILD${CNNSCALE_SLURM_SHARE:+:$CNNSCALE_SLURM_SHARE}"
cluster_up() {
  if "$CLUSTER" status >/dev/null 2>&1; then
    echo "note: using the local cluster that is already up (not torn down afterwards)"
  else
    _we_started=1
  fi
  local t0=$SECONDS
  if ! "$CLUSTER" up 2 >"$TMP/up.log" 2>&1; then
    cat "$TMP/up.log"; echo "FAIL: local-slurm-cluster.sh up 2"; exit 1
  fi
  echo "cluster up in $((SECONDS - t0)) s"
}
# job_field ID Field: one field of `scontrol show job` (works without accounting).
job_field() { scontrol show job -o "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1; }
# train_ready: does this build have `cnnscale train` (it arrives in another branch)?
train_ready() { "$CNNSCALE" train --help >/dev/null 2>&1; }
# show the output of a job on failure
show_out() { echo "    --- $1"; sed 's/^/    | /' "$1" | tail -30; }
