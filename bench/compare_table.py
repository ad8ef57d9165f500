#!/usr/bin/env python3
"""The table of bench/compare-pytorch.sh from its output directory (results.jsonl,
roofline.json, allreduce.json). Medians over rounds; [min..max] over rounds."""
import json
import os
import statistics
import sys

out = sys.argv[1]
rows = [json.loads(l) for l in open(os.path.join(out, "results.jsonl")) if l.strip()]


def key(r):
    impl = r["impl"]
    return ("pytorch" if impl.startswith("pytorch") else impl, r["precision"], r["world"])


groups = {}
for r in rows:
    groups.setdefault(key(r), []).append(r)


def med(k, field="images_per_s"):
    v = [r[field] for r in groups.get(k, [])]
    return statistics.median(v) if v else float("nan")


def spread(k, field="images_per_s"):
    v = [r[field] for r in groups.get(k, [])]
    return f"[{min(v):.0f}..{max(v):.0f}]" if v else ""


roof = json.load(open(os.path.join(out, "roofline.json")))
fps = roof["flop_per_sample"]
rooff = roof["roof_gflops"]
torch_v = next((r["impl"] for r in rows if r["impl"].startswith("pytorch")), "pytorch")
rounds = len(groups.get(("pytorch", "fp32", 1), []))

print(f"\nmnist_cnn, Fashion-MNIST, batch 64/rank, 1 thread/rank, {rounds} alternating round(s); "
      "images/s = median over rounds of each run's median [min..max over rounds]")
hdr = f"{'':28s}{'1 rank':>22s}{'2 ranks':>22s}{'eff 1->2':>10s}{'RSS/rank MiB':>14s}"
print(hdr)
print("-" * len(hdr))
lines = [("PyTorch DDP fp32 (" + torch_v + ")", ("pytorch", "fp32")), ("cnnscale fp32", ("cnnscale", "fp32")),
         ("cnnscale bf16", ("cnnscale", "bf16"))]
for name, (impl, prec) in lines:
    a, b = med((impl, prec, 1)), med((impl, prec, 2))
    rss = max((r["peak_rss_mib"] for w in (1, 2) for r in groups.get((impl, prec, w), [])), default=float("nan"))
    print(f"{name:28s}{a:9.0f} {spread((impl, prec, 1)):>12s}{b:9.0f} {spread((impl, prec, 2)):>12s}"
          f"{b / (2 * a) * 100:9.1f}%{rss:14.0f}")
print()
pt1, pt2 = med(("pytorch", "fp32", 1)), med(("pytorch", "fp32", 2))
for prec, target in (("fp32", 1.5), ("bf16", 2.5)):
    r1, r2 = med(("cnnscale", prec, 1)) / pt1, med(("cnnscale", prec, 2)) / pt2
    ok = "met" if min(r1, r2) >= target else "MISSED"
    print(f"ratio cnnscale {prec} / PyTorch fp32: 1 rank {r1:.2f}x, 2 ranks {r2:.2f}x (target >= {target}x: {ok})")
eff = med(("cnnscale", "fp32", 2)) / (2 * med(("cnnscale", "fp32", 1)))
bd = [r["breakdown_ms"] for r in groups.get(("cnnscale", "fp32", 2), [])]
if bd:
    steps = [r["step_ms"] for r in groups[("cnnscale", "fp32", 2)]]
    exp = statistics.median(b["comm_exposed"] for b in bd)
    print(f"cnnscale fp32 weak-scaling efficiency 1->2: {eff * 100:.1f}% (target >= 95%); "
          f"2-rank breakdown ms (median over rounds): " +
          ", ".join(f"{k} {statistics.median(b[k] for b in bd):.2f}" for k in ("data", "compute", "comm_exposed",
                                                                              "optimizer")) +
          f"; exposed comm (mean) {exp / statistics.median(steps) * 100:.1f}% of the median step (target < 5%)")
    bm = [r.get("breakdown_median_ms") for r in groups[("cnnscale", "fp32", 2)] if r.get("breakdown_median_ms")]
    if bm:
        expm = statistics.median(b["comm_exposed"] for b in bm)
        print("  2-rank breakdown medians over steps (ms, median over rounds): " +
              ", ".join(f"{k} {statistics.median(b[k] for b in bm):.2f}" for k in ("data", "compute", "comm_exposed",
                                                                                  "optimizer")) +
              f"; exposed comm (median step) {expm / statistics.median(steps) * 100:.1f}% of step")
    c1 = [r["breakdown_ms"]["compute"] for r in groups.get(("cnnscale", "fp32", 1), [])]
    if c1:
        print(f"  compute per step (mean): 1 rank {statistics.median(c1):.2f} ms, 2 ranks "
              f"{statistics.median(b['compute'] for b in bd):.2f} ms (same work per rank: the difference is the "
              "two busy cores sharing the machine, and the allreduce's CPU time on the same core)")
pair = groups.get(("cnnscale-independent-pair", "fp32", 2), [])
if pair:
    pm = statistics.median(r["images_per_s"] for r in pair)
    per = [p for r in pair for p in r["per_process"]]
    print(f"  control: two independent 1-rank cnnscale runs at once (no communication): {pm:.0f} img/s summed "
          f"({min(per):.0f}..{max(per):.0f} per process) = {pm / (2 * med(('cnnscale', 'fp32', 1))) * 100:.1f}% of "
          f"2x the lone 1-rank run; 2-rank DDP reaches {med(('cnnscale', 'fp32', 2)) / pm * 100:.1f}% of this pair")
rss_pt = max((r["peak_rss_mib"] for w in (1, 2) for r in groups.get(("pytorch", "fp32", w), [])), default=0)
rss_c = max((r["peak_rss_mib"] for w in (1, 2) for r in groups.get(("cnnscale", "fp32", w), [])), default=0)
print(f"peak RSS per rank: cnnscale {rss_c:.0f} MiB vs PyTorch {rss_pt:.0f} MiB (target: no larger)")
print()
print(f"roofline: single-core sgemm roof {rooff:.1f} GFLOP/s (best rate measured below); mnist_cnn training = {fps:,.0f} FLOP/sample ({fps * 64 / 1e9:.2f} GFLOP/step at 64)")
for s in roof["sgemm"]:
    ob = s.get("openblas_gflops")
    print(f"  sgemm {s['shape']:50s} oneDNN {s['onednn_gflops']:6.1f}  OpenBLAS "
          + (f"{ob:6.1f}" if ob is not None else "   n/a"))
fb = roof["fwd_bwd"]
print(f"  cnnscale fwd+bwd only (roofline, 1 thread): {fb['step_ms']:.1f} ms/step = {fb['gflops']:.1f} GFLOP/s "
      f"= {fb['fraction_of_roof'] * 100:.0f}% of roof")
for w in (1, 2):
    g = fps * med(("cnnscale", "fp32", w)) / w / 1e9
    print(f"  cnnscale train fp32, {w} rank(s), whole step: {g:.1f} GFLOP/s per rank = {g / rooff * 100:.0f}% of roof"
          " (target >= 70%)")
for w in (1, 2):
    g = fps * med(("pytorch", "fp32", w)) / w / 1e9
    print(f"  PyTorch fp32, {w} rank(s): {g:.1f} GFLOP/s per rank = {g / rooff * 100:.0f}% of roof")
print()
mc = {m["bytes"]: m["gbps"] for m in roof.get("memcpy", [])}
print("memcpy, 1 thread: " + ", ".join(f"{b / 1e6:.1f} MB {g:.1f} GB/s" for b, g in mc.items()))
try:
    ar = json.load(open(os.path.join(out, "allreduce.json")))
    res = ar.get("results", ar) if isinstance(ar, dict) else ar
    print("cnnscale allreduce, 2 ranks (float, in place):")
    for r in res:
        if r.get("size", 0) >= 1 << 20:
            print(f"  {r['size']:>10d} B  time {r.get('time_us', r.get('time', 0)):9.1f} us  "
                  f"algbw {r.get('algbw_gbs', 0):6.2f} GB/s  busbw {r.get('busbw_gbs', 0):6.2f} GB/s")
except (OSError, ValueError, KeyError, TypeError) as e:
    print(f"(allreduce.json not readable: {e})")
