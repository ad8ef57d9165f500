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
expect_file() { if [ -s "$2" ]; then ok "$1"; else bad "$1 (missing or empty: $2)"; fi; }
finish() {
  echo "$_pass passed, $_fail failed"
  [ "$_fail" -eq 0 ]
  exit $?
}
