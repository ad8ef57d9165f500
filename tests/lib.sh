# tests/lib.sh — tiny assertion helpers for shell-driven tests (sourced).
# Each test ends with `finish`, which prints "N passed, N failed" and sets the status.
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
TMP=$(mktemp -d /tmp/cnnscale-test.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
_pass=0
_fail=0
ok() { _pass=$((_pass + 1)); echo "ok: $1"; }
bad() { _fail=$((_fail + 1)); echo "FAIL: $1"; }
expect_eq() { if [ "$2" = "$3" ]; then ok "$1"; else bad "$1 (expected '$2', got '$3')"; fi; }
expect_ne() { if [ "$2" != "$3" ]; then ok "$1"; else bad "$1 (got '$3', expected something else)"; fi; }
expect_grep() {
  if grep -Eq -- "$2" "$3"; then ok "$1"; else bad "$1 (no line matching /$2/ in $3:)"; sed 's/^/    | /' "$3" | head -20; fi
}
# expect_ckpt_close LABEL A.h5 B.h5 [TOL]: tests/ckpt_diff of two checkpoints exits 0 and
# their largest relative difference is below TOL (1e-5); ckpt_diff's line is left in
# $CKPT_DIFF_OUT (field 6: max abs, field 8: relative).
# report_lines FILE [PREFIX]: a Python check's "ok …" / "FAIL …" lines as this test's
# checks (PREFIX before each name), any other line echoed indented.
report_lines() {
  local line
  while read -r line; do
    case $line in
      ok\ *) ok "${2:-}${line#ok }" ;;
      FAIL\ *) bad "${2:-}${line#FAIL }" ;;
      *) echo "    | $line" ;;
    esac
  done <"$1"
}
expect_ckpt_close() {
  local label=$1 tol=${4:-1e-5} st rel
  CKPT_DIFF_OUT=$("$CNNSCALE_BUILD/tests/ckpt_diff" "$2" "$3" 2>&1)
  st=$?
  expect_eq "ckpt_diff $label exit status" 0 "$st"
  rel=$(awk '{print $8}' <<<"$CKPT_DIFF_OUT")
  python3 -c "import sys; sys.exit(0 if float('${rel:-1}') < $tol else 1)" 2>/dev/null
  expect_eq "$label (rel diff ${rel:-?} < $tol)" 0 "$?"
}
# expect_refused NAME PATTERN CMD...: CMD ends with exit status 2 and a line
# "cnnscale: error: …PATTERN…" (an extended regex) — a user error, said as such.
expect_refused() {
  local name=$1 pattern=$2
  shift 2
  "$@" >"$TMP/refused.log" 2>&1
  expect_eq "$name: exit status 2" 2 "$?"
  expect_grep "$name: says why" "^cnnscale: error: .*$pattern" "$TMP/refused.log"
}
# expect_ckpt_bitwise LABEL A.h5 B.h5: h5diff finds /model and /optimizer bitwise equal
# (what h5diff says is appended to $TMP/h5diff.log).
expect_ckpt_bitwise() {
  echo "== $1: $2 vs $3" >>"$TMP/h5diff.log"
  h5diff -q "$2" "$3" /model /model >>"$TMP/h5diff.log" 2>&1
  expect_eq "$1: /model bitwise (h5diff)" 0 "$?"
  h5diff -q "$2" "$3" /optimizer /optimizer >>"$TMP/h5diff.log" 2>&1
  expect_eq "$1: /optimizer bitwise (h5diff)" 0 "$?"
}
# metrics_losses METRICS.jsonl: one "step loss" line per logged step, the loss at full
# precision (repr), for bitwise or tolerance comparisons between runs.
metrics_losses() {
  python3 -c '
import json, sys
for l in open(sys.argv[1]):
    j = json.loads(l)
    if "loss" in j and "step" in j: print(j["step"], repr(j["loss"]))' "$1"
}
# onednn_isas: the instruction sets the gradient cross-checks run oneDNN's CPU kernels
# with (issue 47: a wrong gradient must not hide behind one CPU's ISA), in $ISAS: this
# CPU's own (ONEDNN_MAX_CPU_ISA unset: "native") and a second one forced through
# ONEDNN_MAX_CPU_ISA: AVX2 on an AVX-512 CPU (the AMD EPYC Zen 2/3 class of nodes), SSE41 on
# an AVX2 one (oneDNN's other kernel family there). $ISA_NATIVE is what oneDNN runs here.
# with_isa ISA CMD...: CMD with that ISA ("native": the environment as it is).
onednn_isas() {
  ISA_NATIVE=$(env -u ONEDNN_MAX_CPU_ISA "$CNNSCALE_BUILD/tests/cnnscale_resnet_tool" isa)
  case $ISA_NATIVE in
    avx512*) ISAS=(native AVX2) ;;
    *) ISAS=(native SSE41) ;;
  esac
  echo "note: oneDNN's ISA here: $ISA_NATIVE; the cross-checks run with it and with ONEDNN_MAX_CPU_ISA=${ISAS[1]}"
}
with_isa() {
  local isa=$1
  shift
  if [ "$isa" = native ]; then env -u ONEDNN_MAX_CPU_ISA "$@"; else ONEDNN_MAX_CPU_ISA=$isa "$@"; fi
}
# bf16_runs [ISA]: whether cnnscale runs --precision bf16 with that oneDNN ISA ("native",
# the default: this CPU's): only on AVX512-BF16 or AMX; elsewhere it refuses, and the bf16
# tests check that refusal instead of skipping (issue 47).
bf16_runs() {
  case $(with_isa "${1:-native}" "$CNNSCALE_BUILD/tests/cnnscale_resnet_tool" isa) in
    avx512_core_bf16 | avx512_core_amx) return 0 ;;
    *) return 1 ;;
  esac
}
# expect_bf16_refused LABEL RUN_DIR CMD...: CMD (a `cnnscale train ... --precision bf16
# --run-dir RUN_DIR`) exits 2 with cnnscale's refusal, which names the ISA oneDNN runs
# and the fix, and leaves no checkpoint, run.json or metrics in RUN_DIR.
expect_bf16_refused() {
  local label=$1 dir=$2 out st
  shift 2
  out=$("$@" 2>&1)
  st=$?
  expect_eq "$label: --precision bf16 refused (exit 2)" 2 "$st"
  if grep -qE "^cnnscale: error: --precision bf16: this processor \(or ONEDNN_MAX_CPU_ISA\) lacks native bf16 support \(oneDNN runs [a-z0-9_]+ here; bf16 needs AVX512-BF16 or AMX\); use --precision fp32$" <<<"$out"; then
    ok "$label: the refusal names the ISA oneDNN runs and the fix"
  else
    bad "$label: the refusal names the ISA oneDNN runs and the fix (got: $(head -c 400 <<<"$out"))"
  fi
  expect_eq "$label: nothing trained or written" "" \
    "$(find "$dir" \( -name 'step-*.h5' -o -name run.json -o -name metrics.jsonl \) 2>/dev/null | head -3)"
}
# run NAME CMD...: runs CMD, its stdout and stderr in $TMP/NAME.out and $TMP/NAME.err, its
# status in $st. expect_error NAME REGEX: that run exited 2 with exactly one
# `cnnscale: error:` line, matching REGEX. (A test may define its own run, as prep_cli.sh.)
run() { local n=$1; shift; "$@" >"$TMP/$n.out" 2>"$TMP/$n.err"; st=$?; }
expect_error() {
  expect_eq "$1 exit status" 2 "$st"
  expect_grep "$1 message" "^cnnscale: error: .*$2" "$TMP/$1.err"
  expect_eq "$1 one error line" 1 "$(grep -c '^cnnscale: error:' "$TMP/$1.err")"
}
# photo_folder DIR: 30 PNG photos of 40-89 × 40-89 pixels in DIR/c0..c2 (an image folder).
photo_folder() {
  local i
  for i in $(seq 1 30); do
    mkdir -p "$1/c$((i % 3))"
    "$CNNSCALE_BUILD/tests/cnnscale_imagefolder_tool" png "$1/c$((i % 3))/$i.png" $((40 + i * 13 % 50)) \
      $((40 + i * 7 % 50)) 3 "$i"
  done
}
# small_run_json FILE: a run.json of one rank, 50 steps at 100 images/s: enough for report.
small_run_json() {
  python3 - "$1" <<'PY'
import json, sys
json.dump({"world_size": 1, "nodes": 1, "ranks_per_node": 1, "backend": "mpi", "device": "cpu", "model": "m",
           "precision": "fp32", "batch_per_rank": 8, "global_batch": 8, "steps": 50, "images_per_s": 100.0,
           "step_ms": {"median": 80, "p10": 70, "p90": 90},
           "breakdown_ms": {"data": 1, "compute": 70, "comm_exposed": 0, "optimizer": 9},
           "train_loss": 0.4, "test_accuracy": None}, open(sys.argv[1], "w"))
PY
}
expect_file() { if [ -s "$2" ]; then ok "$1"; else bad "$1 (missing or empty: $2)"; fi; }
# ort_python: $ORT_PY becomes the first python that imports onnxruntime and numpy
# ($CNNSCALE_ORT_PYTHON, then scripts/python-venv.sh's venv), "" when none does.
ort_python() {
  ORT_PY=""
  local p
  for p in ${CNNSCALE_ORT_PYTHON:-} /var/cache/cnnscale/pypi-venv/bin/python; do
    if [ -x "$p" ] && "$p" -c "import onnxruntime, numpy" 2>/dev/null; then ORT_PY=$p; return 0; fi
  done
}

# require_python "MODULES" "PACKAGES": $PY becomes the first of python3 and
# /usr/bin/python3 that runs `import MODULES` (comma-separated, as import takes them);
# neither: SKIP (exit 77) naming the modules and the Debian packages that bring them.
require_python() {
  PY=""
  local p
  for p in python3 /usr/bin/python3; do
    if "$p" -c "import $1" 2>/dev/null; then PY=$p; return 0; fi
  done
  echo "SKIP: python3 cannot import $1 (Debian: apt-get install $2)"
  exit 77
}
# The CUDA devices nvidia-smi lists (0 without a driver) in $gpus; fewer than $1: SKIP
# (exit 77) saying why ($2: what needs them).
require_gpus() {
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  [ "${gpus:-0}" -ge "$1" ] && return 0
  echo "SKIP: needs $1 CUDA device(s) (nvidia-smi lists ${gpus:-0})${2:+; $2}"
  exit 77
}
# gpu_plane: how a 2-rank GPU test's ranks sum their gradients here (issue 38), with
# require semantics: no CUDA device (nvidia-smi lists none) SKIPs (exit 77); else
#  - 2 or more devices: NCCL, one GPU per rank, as before (GPU_PLANE=nccl,
#    GPU_BACKEND=nccl, GPU_BACKEND_ARGS=(--backend nccl));
#  - exactly 1 (or CNNSCALE_TEST_GPU_PLANE=host with more): the host data plane, both
#    ranks on one GPU, gradients staged through pinned host memory and summed by MPI
#    (GPU_PLANE=host, GPU_BACKEND=mpi, GPU_BACKEND_ARGS=(--device cuda --backend mpi)):
#    NCCL refuses two ranks on one GPU.
# GPU_BACKEND is what the start line and run.json then say ("backend $GPU_BACKEND");
# GPU_PLANE_NAME words the choice for messages; $gpus is set as require_gpus sets it.
# Prints a note saying which plane and why.
# shellcheck disable=SC2034  # the GPU_* variables are for the test that sources this
gpu_plane() {
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  if [ "${gpus:-0}" -lt 1 ]; then
    echo "SKIP: needs a CUDA device (nvidia-smi lists ${gpus:-0}): 2 GPUs for NCCL, or 1 shared over the host data plane"
    exit 77
  fi
  if [ "$gpus" -ge 2 ] && [ "${CNNSCALE_TEST_GPU_PLANE:-}" != host ]; then
    GPU_PLANE=nccl GPU_BACKEND=nccl GPU_BACKEND_ARGS=(--backend nccl)
    GPU_PLANE_NAME="NCCL, one GPU per rank ($gpus GPUs)"
  else
    GPU_PLANE=host GPU_BACKEND=mpi GPU_BACKEND_ARGS=(--device cuda --backend mpi)
    GPU_PLANE_NAME="the host data plane (--device cuda --backend mpi), ranks sharing one GPU"
    [ "$gpus" -ge 2 ] && GPU_PLANE_NAME="the host data plane (--device cuda --backend mpi; CNNSCALE_TEST_GPU_PLANE=host)"
  fi
  echo "note: $gpus GPU(s): 2-rank runs over $GPU_PLANE_NAME"
}
# Running as the unprivileged user nobody (root only; the one place tests change user,
# tests/tools/closed_checkout.sh checks that). nobody cannot enter a checkout under /root
# (mode 700) or under any other closed folder, so nothing it runs or reads may live there:
# nobody_dir prints $TMP/nobody, made on first use, which anyone can reach ($TMP becomes
# mode 711: passable, not listable); nobody_copy PROG copies PROG there (the build's
# programs load no library from the build tree) and prints the copy's path;
# as_nobody CMD... runs CMD as nobody (uid and gid 65534, no groups) from / (the test's
# working folder, in the build, may be closed to it too); can_be_nobody: whether this
# test can (root, with setpriv).
can_be_nobody() { [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; }
nobody_dir() {
  [ -d "$TMP/nobody" ] || { mkdir -m 755 "$TMP/nobody" && chmod 711 "$TMP"; } || return 1
  echo "$TMP/nobody"
}
nobody_copy() {
  local d
  d=$(nobody_dir) && cp "$1" "$d/" && chmod 755 "$d/$(basename "$1")" && echo "$d/$(basename "$1")"
}
as_nobody() { (cd / && exec setpriv --reuid=65534 --regid=65534 --clear-groups "$@"); }
finish() {
  echo "$_pass passed, $_fail failed"
  [ "$_fail" -eq 0 ]
  exit $?
}
