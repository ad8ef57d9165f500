#!/usr/bin/env python3
# onednn_profile.py — where a training step's time goes, by oneDNN primitive, from
# ONEDNN_VERBOSE=1 output (oneDNN 2.x "exec" lines; the time is the last field, in ms).
# The output holds several identical steps (nn_bench --train-only --warmup 1 --steps 1):
# it is cut into steps where the first exec line's primitive and shapes recur, and the
# last step is summarised (the first pays page faults and primitive creation).
# Usage: ONEDNN_VERBOSE=1 nn_bench ... --train-only | onednn_profile.py [--markdown]
import sys
from collections import defaultdict


def main():
    md = "--markdown" in sys.argv[1:]
    lines = [l.rstrip("\n").split(",") for l in sys.stdin if l.startswith("onednn_verbose,exec,")]
    if not lines:
        sys.exit("onednn_profile.py: no 'onednn_verbose,exec' lines on stdin (run with ONEDNN_VERBOSE=1)")
    key = lambda f: tuple(f[3:-1])
    first = key(lines[0])
    starts = [i for i, f in enumerate(lines) if key(f) == first]
    step = lines[starts[-1]:]
    by = defaultdict(lambda: [0.0, 0])
    total = 0.0
    for f in step:
        kind, impl, prop = f[3], f[4], f[5]
        descs = f[6]
        types = "bf16" if "_bf16" in descs else "f32"
        if kind == "reorder":
            src, dst = descs.split(" ")[:2]
            types = src.split("_")[1].split(":")[0] + "->" + dst.split("_")[1].split(":")[0]
        name = f"{kind} {prop if prop != 'undef' else ''}".strip()
        k = (name, types, impl)
        t = float(f[-1])
        by[k][0] += t
        by[k][1] += 1
        total += t
    rows = sorted(by.items(), key=lambda kv: -kv[1][0])
    if md:
        print(f"| primitive | types | oneDNN kernel | calls | ms | share |")
        print("|---|---|---|---|---|---|")
        for (name, types, impl), (t, n) in rows:
            print(f"| {name} | {types} | `{impl}` | {n} | {t:.0f} | {100 * t / total:.1f} % |")
        print(f"| **all** | | | {len(step)} | **{total:.0f}** | 100 % |")
    else:
        print(f"{'primitive':34} {'types':12} {'kernel':30} {'calls':>5} {'ms':>8} {'share':>6}")
        for (name, types, impl), (t, n) in rows:
            print(f"{name:34} {types:12} {impl:30} {n:5d} {t:8.1f} {100 * t / total:5.1f}%")
        print(f"{'all':34} {'':12} {'':30} {len(step):5d} {total:8.1f} 100.0%")
    kinds = defaultdict(float)
    for (name, _, _), (t, _) in rows:
        kinds[name.split(" ")[0]] += t
    print(("\n" if not md else "\n") + "by kind: " + ", ".join(f"{k} {100 * v / total:.1f} %" for k, v in
                                                            sorted(kinds.items(), key=lambda kv: -kv[1])))


if __name__ == "__main__":
    main()
