#!/usr/bin/env bash
# cli-doc.sh — writes docs/cli.md, the reference of every cnnscale command and option, from
# the binary's own `--help` texts, so that the two cannot disagree (tests/cli/cli_doc.sh
# fails when docs/cli.md is not what this script writes for the build under test).
# Usage: scripts/cli-doc.sh [PATH/TO/cnnscale] > docs/cli.md   (default build/bin/cnnscale)
set -euo pipefail
C=${1:-build/bin/cnnscale}
[ -x "$C" ] || { echo "cli-doc.sh: $C is not an executable cnnscale (build it: scripts/build.sh)" >&2; exit 2; }
COMMANDS=$("$C" --help | awk '/^Commands:/ {on = 1; next} on && /^  [a-z]/ {print $1} on && /^$/ {on = 0}')
cat <<'HEAD'
# Command-line reference

Every `cnnscale` command and option, as `cnnscale COMMAND --help` prints it (this page is
written from those texts by `scripts/cli-doc.sh`; a test checks that it is current). `train`
also takes its options from a file: `--config FILE` (`key = value`, keys without the dashes; the
command line wins). The other pages explain the work behind each command: training and the
launchers in [launch.md](launch.md) and [slurm.md](slurm.md), data sets in [data.md](data.md),
models in [models.md](models.md), checkpoints and run directories in
[checkpoints.md](checkpoints.md), reports in [report.md](report.md), watching a run in
[watching.md](watching.md), GPUs in [gpu.md](gpu.md).

HEAD
echo '## cnnscale'
echo
echo '```'
"$C" --help
echo '```'
for cmd in $COMMANDS; do
  echo
  echo "## cnnscale $cmd"
  echo
  echo '```'
  "$C" "$cmd" --help
  echo '```'
done
