#!/usr/bin/env python3
"""check_budget.py REPORT.json EPOCHS TRAIN_SAMPLES — the training budget in report.json,
recomputed from the run.json files of the runs it names (wall = epochs x samples / images_per_s; node-hours =
wall x nodes): prints 'measured rows ok N' when every measured row agrees (1e-9 relative),
'projected K nodes True' for each projected row whose node-hours are its wall x nodes."""
import json
import sys

rep, epochs, samples = json.load(open(sys.argv[1])), float(sys.argv[2]), float(sys.argv[3])
g = rep["groups"][0]
b = g["budget"]
# Each run's own run.json (not the report's copy of it).
runs = {r["ranks"]: json.load(open(r["dir"] + "/run.json")) for r in g["runs"]}
for r in runs.values():
    r.setdefault("nodes", 1)
ok = 0
for row in b["rows"]:
    wall = epochs * samples / row["images_per_s"] / 3600
    close = abs(row["wall_hours"] / wall - 1) < 1e-9 and abs(row["node_hours"] / (wall * row["nodes"]) - 1) < 1e-9
    if row["projected"]:
        print("projected %g nodes %s" % (row["nodes"], close))
        continue
    run = runs.get(row["ranks"])
    if run and close and abs(row["images_per_s"] / run["images_per_s"] - 1) < 1e-9 and row["nodes"] == run["nodes"]:
        ok += 1
    else:
        print("row at", row["ranks"], "ranks disagrees:", row, "run:", run and run["images_per_s"])
print("measured rows ok", ok)
print("request:", b["request"])
