#!/usr/bin/env python3
"""Does the simulator's top K hold the best tile of an exhaustive sweep? (issue 17's target: in >= 95 %
of kernels for K = 8.)

Tunes each model with --top-k 20 (the most a tune measures), no cache, and keeps the kernels whose
whole generated tile space is 20 tiles or fewer: for those every tile ran, so the fastest is the best of
an exhaustive sweep. Reports, per model, the share of those kernels whose exhaustive best is in the
simulator's top 1, 3 and 8, the share whose top 8's fastest is within 3 % of it, and the median
space size.

    bench/tune/exhaustive.py build/bin/gpusim [--backend vulkan] [--dim batch=1] MODEL [MODEL ...]

Figures go to bench/RESULTS.md with the machine noted.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def sweep(gpusim, backend, model, work, dims):
    out = os.path.join(work, "t.json")
    cmd = [gpusim, "tune", model, "--backend", backend, "--top-k", "20", "--no-cache", "--repeat", "0", "--quiet",
           "--json"] + [x for d in dims for x in ("--dim", d)]
    with open(out, "w") as f:
        subprocess.run(cmd, stdout=f, check=True)
    with open(out) as f:
        return json.load(f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("gpusim")
    ap.add_argument("models", nargs="+")
    ap.add_argument("--backend", default="vulkan")
    ap.add_argument("--dim", action="append", default=[], help="NAME=VALUE for symbolic dims (batch=1), every model")
    a = ap.parse_args()
    print("| model | kernels swept whole / tuned | median tiles a kernel | exhaustive best in sim top 1 / 3 / 8 "
          "| top 8's best within 3 % of it | kernels of more than 8 tiles: best in top 8 | tune s |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as work:
        os.environ["GPUSIM_KERNEL_CACHE_DIR"] = os.path.join(work, "kernels")
        for m in a.models:
            d = sweep(a.gpusim, a.backend, m, work, a.dim)
            swept, space = [], []
            tuned = 0
            for k in d["kernels"]:
                ran = [c for c in k["candidates"] if c.get("measured_us", 0) > 0]
                if k["how"] != "measured" or len(ran) < 2:
                    continue
                tuned += 1
                if k["space"] > 20 or len(ran) < k["space"]:
                    continue  # not every tile ran: not an exhaustive sweep
                best = min(ran, key=lambda c: c["measured_us"])
                top8 = [c for c in ran if c["predicted_rank"] < 8]
                swept.append((best["predicted_rank"], min(c["measured_us"] for c in top8) / best["measured_us"] - 1,
                              k["space"]))
                space.append(k["space"])
            n = len(swept)
            big = [s for s in swept if s[2] > 8]
            big_in = sum(1 for s in big if s[0] < 8)
            share = lambda f: 100.0 * sum(1 for s in swept if f(s)) / n if n else 0.0
            print(f"| {os.path.basename(m)} | {n} / {tuned} | {statistics.median(space) if space else 0:.0f} | "
                  f"{share(lambda s: s[0] < 1):.0f} % / {share(lambda s: s[0] < 3):.0f} % / {share(lambda s: s[0] < 8):.0f} % | "
                  f"{share(lambda s: s[1] <= 0.03):.0f} % | {big_in} of {len(big)} | {d['total_s']:.1f} |")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
