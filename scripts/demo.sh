#!/usr/bin/env bash
# demo.sh — the main job on one machine, end to end:
#   install the Debian packages, build, convert Fashion-MNIST to sharded HDF5,
#   train mnist_cnn with 1 and 2 local MPI ranks (weak scaling: 64 images per rank),
#   and write a scaling report. Everything lands under ./runs/demo and ./data.
# Environment overrides: DEMO_EPOCHS (default 1), DEMO_RANKS (default 1,2).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh >/dev/null
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
BIN=build/bin/cnnscale
EPOCHS=${DEMO_EPOCHS:-1}
RANKS=${DEMO_RANKS:-1,2}
DATA=data/fashion-mnist
OUT=runs/demo

echo "== cnnscale env (2 local ranks)"
mpirun --oversubscribe -n 2 "$BIN" env

if [ ! -f "$DATA/dataset.json" ]; then
  echo "== prep: Fashion-MNIST IDX -> 8 train shards + 2 test shards"
  "$BIN" prep --format idx --input /usr/share/datasets/fashion-mnist --output "$DATA" --shards 8 --test-shards 2
fi

echo "== train mnist_cnn on ranks ${RANKS}, ${EPOCHS} epoch(s) each, then the scaling report"
rm -rf "$OUT"
scripts/scaling-sweep.sh --local --ranks "$RANKS" --mode weak --batch-per-rank 64 --out "$OUT" --cnnscale "$BIN" -- \
  --config configs/fashion-mnist.ini --data "$DATA" --epochs "$EPOCHS" --log-every 200

echo
echo "== results"
for f in "$OUT"/*/run.json; do
  python3 - "$f" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
acc = j.get("test_accuracy")
print(f"{j['world_size']} rank(s): {j['images_per_s']:.0f} images/s, step {j['step_ms']['median']:.1f} ms, "
      f"test accuracy {acc if acc is None else round(acc, 4)}")
PY
done
echo
cat "$OUT/report/report.md"
echo
echo "Open $OUT/report/report.html in a browser for the charts."
