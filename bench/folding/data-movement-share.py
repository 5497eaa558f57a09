#!/usr/bin/env python3
"""How much of gpusim's best plan is spent in data-movement (copy) kernels, per model.

For each graph: `gpusim plan` (beam scheduler, fp16, batch 256, the given GPU) and `gpusim predict
--plan` of the best plan. Prints, per model, the plan's predicted time, the time of its
data-movement kernels (copies, folded chains of copies included) and their share, and the time the
plan's fold-data-movement decisions save by the planner's own estimate (the saving each fold
showed when it was taken): the share "without folding" is (copies + savings) / (plan + savings).

Usage: bench/folding/data-movement-share.py GPUSIM MODELS_DIR [--gpu nvidia-rtx-4090] [--filter REGEX]
"""
import argparse
import json
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr}")
    return r.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("gpusim")
    ap.add_argument("models", type=pathlib.Path)
    ap.add_argument("--gpu", default="nvidia-rtx-4090")
    ap.add_argument("--batch", default="256")
    ap.add_argument("--scheduler", default="beam")
    ap.add_argument("--filter", default="swin|vit|deit|beit|maxvit|cait|xcit|levit|coat|twins|pit|mixer|convit|crossvit")
    a = ap.parse_args()
    graphs = sorted(p for p in a.models.glob("*.onnx") if re.search(a.filter, p.name))
    if not graphs:
        sys.exit(f"no graph in {a.models} matches --filter {a.filter!r}")
    saves = re.compile(r"^fold-data-movement: .*; saves [0-9.]+ [kMG]?B of traffic and ([0-9.]+) us")
    print(f"gpu {a.gpu}, fp16, batch {a.batch}, {a.scheduler} scheduler\n")
    print("| model | plan ms | copy kernels | copies ms | share | folds | folds save ms | share without folding |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    shares, before = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for g in graphs:
            plan = pathlib.Path(tmp) / "plan.json"
            out = json.loads(run([a.gpusim, "plan", str(g), "--gpu", a.gpu, "--dtype", "fp16", "--dim", f"batch={a.batch}",
                                  "--scheduler", a.scheduler, "--top", "1", "--json"]))
            best = out["plans"][0]
            plan.write_text(json.dumps(best["plan"]))
            pred = json.loads(run([a.gpusim, "predict", str(g), "--gpu", a.gpu, "--dim", f"batch={a.batch}", "--plan", str(plan),
                                   "--json"]))
            total = pred["kernels_us"]
            dm = [k for k in pred["kernels"] if k["class"] == "data-movement"]
            dm_us = sum(k["time_us"] for k in dm)
            fold_us = [float(m.group(1)) for d in best["decisions"] if (m := saves.match(d))]
            saved = sum(fold_us)
            share, share0 = dm_us / total, (dm_us + saved) / (total + saved)
            shares.append(share)
            before.append(share0)
            print(f"| {g.stem} | {total / 1e3:.2f} | {len(dm)} | {dm_us / 1e3:.2f} | {100 * share:.1f}% | {len(fold_us)} | "
                  f"{saved / 1e3:.2f} | {100 * share0:.1f}% |")
    print(f"\nmedian share {100 * statistics.median(shares):.1f}% (without folding {100 * statistics.median(before):.1f}%) "
          f"over {len(graphs)} models")


if __name__ == "__main__":
    main()
