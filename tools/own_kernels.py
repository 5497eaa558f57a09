#!/usr/bin/env python3
"""gpusim's own Conv, Gemm and MatMul kernels against the vendor libraries on a lent GPU, per model
and mode, from the committed measurements: the kernels gpusim generated (`gpusim run --backend cuda`
of an earlier build, event-timed around each launch) against cuBLAS/cuDNN through PyTorch (a CUDA
graph: kernel time), summed over every Conv, Gemm and MatMul node both timed (batch 1). The launch
inside gpusim's event-timed kernels (`gpusim validate --fit` on the runs fits it) is subtracted a
kernel in the "less launch" column, which the ratio uses.

With --gpusim, also what the cost model predicts for the kernels that build's generator writes for
the same nodes on the GPU (`gpusim codegen report --gpu nvidia-h200 --json`: each kernel's
predicted_us.built, a GEMM-like kernel priced by the chain of the kernel as built, less the same
launch), so that the next loan of the GPU checks the model and the generator's fixes at once. It
compiles every kernel of the three models in three modes (NVRTC, no GPU: about 10 minutes on 2 cores).

Usage: tools/own_kernels.py [--data bench/gpu/h200-2026-11-27] [--launch-us 2.58] [--json FILE]
                            [--gpusim build/bin/gpusim [--gpu nvidia-h200]]
"""
import argparse
import json
import lzma
import subprocess
import sys

MODELS = ["resnet50", "mobilenet_v2", "vit_b_16"]
MODES = ["fp16", "tf32", "fp32"]
OPS = ("Conv", "Gemm", "MatMul")


def built_us(gpusim, gpu, model, mode):
    """Each kernel's predicted_us.built from `gpusim codegen report`, by its first node's name."""
    cmd = [gpusim, "codegen", "report", f"models/{model}.onnx", "--gpu", gpu, "--dim", "batch=1", "--json", "--no-store"]
    cmd += ["--dtype", "fp16"] if mode == "fp16" else ["--allow-tf32"] if mode == "tf32" else []
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"own_kernels: {' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()[:2000]}")
    return {k["node"]: k["predicted_us"]["built"] for k in json.loads(p.stdout)["kernels"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="bench/gpu/h200-2026-11-27")
    ap.add_argument("--launch-us", type=float, default=2.58,
                    help="the launch inside each event-timed kernel (gpusim validate --fit on the runs)")
    ap.add_argument("--json", default=None, help="also write the table as JSON here")
    ap.add_argument("--gpusim", default=None, help="predict this build's kernels for the same nodes (codegen report)")
    ap.add_argument("--gpu", default="nvidia-h200", help="the profile the prediction is for")
    a = ap.parse_args()
    with open(f"{a.data}/library/library_nodes.json") as f:
        lib = json.load(f)["models"]
    rows = []
    pred_head = " predicted for this build (less launch) | predicted ratio |" if a.gpusim else ""
    print("| model | mode | nodes | library (us) | gpusim, measured (us) | less launch | ratio |" + pred_head)
    print("|---|---|---:|---:|---:|---:|---:|" + ("---:|---:|" if a.gpusim else ""))
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
            row = {"model": m, "mode": mode, "nodes": len(names), "library_us": libsum, "measured_us": meas,
                   "measured_less_launch_us": less}
            tail = ""
            if a.gpusim:
                predicted = built_us(a.gpusim, a.gpu, m, mode)
                missing = [n for n in names if n not in predicted]
                if missing:
                    print(f"own_kernels: {m} {mode}: the report has no kernel for {missing[:3]}", file=sys.stderr)
                    return 1
                pred = sum(max(0.0, predicted[n] - a.launch_us) for n in names)
                row["predicted_less_launch_us"] = pred
                tail = f" {pred:.0f} | {pred / libsum:.1f}x |"
            rows.append(row)
            print(f"| {m} | {mode} | {len(names)} | {libsum:.0f} | {meas:.0f} | {less:.0f} | {less / libsum:.1f}x |" + tail,
                  flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"data": a.data, "launch_us": a.launch_us, "gpu": a.gpu if a.gpusim else None, "rows": rows}, f,
                      indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
