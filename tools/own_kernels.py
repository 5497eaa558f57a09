#!/usr/bin/env python3
"""gpusim's own Conv, Gemm and MatMul kernels against the vendor libraries on a lent GPU, per model
and mode, from the committed measurements: the kernels gpusim generated (`gpusim run --backend cuda`
of an earlier build, event-timed around each launch) against cuBLAS/cuDNN through PyTorch (a CUDA
graph: kernel time), summed over every Conv, Gemm and MatMul node both timed (batch 1). The launch
inside gpusim's event-timed kernels (`gpusim validate --fit` on the runs fits it) is subtracted a
kernel in the "less launch" column, which the ratio uses.

Usage: tools/own_kernels.py [--data bench/gpu/h200-2026-11-27] [--launch-us 2.58] [--json FILE]
"""
import argparse
import json
import lzma
import sys

MODELS = ["resnet50", "mobilenet_v2", "vit_b_16"]
MODES = ["fp16", "tf32", "fp32"]
OPS = ("Conv", "Gemm", "MatMul")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="bench/gpu/h200-2026-11-27")
    ap.add_argument("--launch-us", type=float, default=2.58,
                    help="the launch inside each event-timed kernel (gpusim validate --fit on the runs)")
    ap.add_argument("--json", default=None, help="also write the table as JSON here")
    a = ap.parse_args()
    with open(f"{a.data}/library/library_nodes.json") as f:
        lib = json.load(f)["models"]
    rows = []
    print("| model | mode | nodes | library (us) | gpusim, measured (us) | less launch | ratio |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for m in MODELS:
        nodes = lib[f"models/{m}.onnx"]
        for mode in MODES:
            with lzma.open(f"{a.data}/truth/runs/{m}_{mode}.json.xz", "rt") as f:
                run = json.load(f)
            measured = {k["name"]: k["measured_us"] for k in run["kernels"]
                        if k.get("op_type", "").split("+")[0] in OPS and k["name"] in nodes}
            names = sorted(measured)
            libsum = sum(nodes[n][mode] for n in names)
            meas = sum(measured[n] for n in names)
            less = sum(max(0.0, measured[n] - a.launch_us) for n in names)
            rows.append({"model": m, "mode": mode, "nodes": len(names), "library_us": libsum, "measured_us": meas,
                         "measured_less_launch_us": less})
            print(f"| {m} | {mode} | {len(names)} | {libsum:.0f} | {meas:.0f} | {less:.0f} | {less / libsum:.1f}x |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"data": a.data, "launch_us": a.launch_us, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
