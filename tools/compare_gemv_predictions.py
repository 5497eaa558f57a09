#!/usr/bin/env python3
"""Predicted time of the GEMV-shaped kernels of the bundled models against another build's.

For each model, GPU and dtype, runs `gpusim predict MODEL --gpu G --dtype D --dim batch=1
--tiles generated --json` with two builds, finds the kernels the first build gives a GEMV-shaped
tile (more threads than block_m x block_n outputs: include/gpusim/tile.h, gemv_shaped), and sums
their predicted time in each build by kernel name, with both models' totals. Prints a Markdown
table (bench/RESULTS.md, "Session 6").

Usage: tools/compare_gemv_predictions.py --new build-test/bin/gpusim --old OLD/build/bin/gpusim
"""
import argparse
import json
import subprocess
import sys

MODELS = ["resnet50", "mobilenet_v2", "vit_b_16", "bert_base_seq128", "sd15_unet_64x64"]
GPUS = ["nvidia-h100-sxm", "nvidia-rtx-3060", "amd-mi300x", "apple-m3-max", "intel-arc-a770"]


def predict(gpusim: str, model: str, gpu: str, dtype: str) -> dict:
    out = subprocess.run([gpusim, "predict", f"models/{model}.onnx", "--gpu", gpu, "--dtype", dtype, "--dim",
                          "batch=1", "--tiles", "generated", "--json"], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"compare_gemv_predictions: {gpusim} predict {model} --gpu {gpu} failed:\n{out.stderr}")
    return json.loads(out.stdout)


def gemv_shaped(tile: dict) -> bool:
    return tile.get("block_m", 0) > 0 and tile["threads"] > tile["block_m"] * tile["block_n"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--new", required=True, help="the build with GEMV-shaped kernels")
    ap.add_argument("--old", required=True, help="the build to compare with")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--gpus", default=",".join(GPUS))
    a = ap.parse_args()
    print("| model | GPU | dtype | GEMV kernels | their time, old build, µs | new build, µs | ratio "
          "| model, old build, µs | new build, µs |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for m in a.models.split(","):
        for g in a.gpus.split(","):
            for dt in ("fp32", "fp16"):
                new, old = predict(a.new, m, g, dt), predict(a.old, m, g, dt)
                names = {k["name"] for k in new["kernels"] if gemv_shaped(k["tile"])}
                if not names:
                    continue
                tn = sum(k["time_us"] for k in new["kernels"] if k["name"] in names)
                to = sum(k["time_us"] for k in old["kernels"] if k["name"] in names)
                print(f"| {m} | {g} | {dt} | {len(names)} | {to:.1f} | {tn:.1f} | {tn / to:.2f} "
                      f"| {old['total_us']:.1f} | {new['total_us']:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
