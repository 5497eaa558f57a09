#!/usr/bin/env python3
"""Measure PyTorch (cuBLAS, cuDNN, its own kernels) on a lent GPU, in the formats gpusim reads.

Modes (each writes one file; see tools/device/README.md for the whole session):
  configs  (here, no GPU)  sample NeuSight-train shapes to sweep: --neusight DIR --gpu-row NAME --out sweep.json
  sweep    per-op latencies in NeuSight's CSV format and method (mean of the 5 fastest of 25
           back-to-back calls, CUDA events around the Python call; torch's default flags)
  nodes    every GEMM-like node of a model (tools/device/model_nodes.py) as the library runs it:
           fp32 (TF32 off), tf32 and fp16, kernel time from CUDA-graph replays of 20 calls
  timm     whole-model inference steps as timm's benchmark.py times them (batch, amp fp16, 10
           warm-up and 40 timed steps, host wall to torch.cuda.synchronize()), eager and compiled
"""
import argparse
import csv
import json
import lzma
import os
import random
import statistics
import sys
import time

OPS = {"linear": 14, "bmm": 10, "conv": 14, "add": 5, "addu": 3, "mul": 4, "relu": 4, "gelu": 4, "tanh": 3,
       "ln": 6, "softmax": 6}


def configs(args):
    rnd = random.Random(7)
    out = []
    for op, n in OPS.items():
        with lzma.open(os.path.join(args.neusight, f"{op}.csv.xz"), "rt") as f:
            allrows = list(csv.DictReader(f))
        gpu = args.gpu_row if any(r["device"] == args.gpu_row for r in allrows) else args.fallback_row
        rows = [r for r in allrows if r["device"] == gpu]
        rows.sort(key=lambda r: float(r["latency_ms"]))
        # spread over the latency range: one row from each of n equal slices
        for i in range(n):
            sl = rows[len(rows) * i // n: len(rows) * (i + 1) // n]
            r = rnd.choice(sl)
            dims = {k: int(v) for k, v in r.items()
                    if k not in ("op", "device", "torch", "latency_ms", "kernel", "kernels_launched", "grid", "block")}
            out.append({"op": op, "dims": dims, "ref_ms": float(r["latency_ms"]), "ref_gpu": gpu})
    with open(args.out, "w") as f:
        json.dump(out, f, indent=0)
    print(f"{len(out)} configs", file=sys.stderr)


def build_op(torch, c):
    d, op, dev = c["dims"], c["op"], "cuda"
    nn = torch.nn
    if op == "linear":
        m = nn.Linear(d["n"], d["k"], bias=True).to(dev)
        x = torch.randn(d["b"], d["m"], d["n"], device=dev)
        return lambda: m(x)
    if op == "bmm":
        x = torch.randn(d["b"], d["m"], d["n"], device=dev)
        y = torch.randn(d["b"], d["n"], d["k"], device=dev)
        return lambda: torch.bmm(x, y)
    if op == "conv":
        m = nn.Conv2d(d["input_channel"], d["output_channel"], d["kernel_szie"], d["stride"], d["padding"]).to(dev)
        x = torch.randn(d["b"], d["input_channel"], d["input_size"], d["input_size"], device=dev)
        return lambda: m(x)
    x = torch.randn(d["b"], d["h"], device=dev)
    y = torch.randn(d["b"], d["h"], device=dev)
    if op == "add":
        return lambda: x + y
    if op == "addu":
        return lambda: x + 0.5
    if op == "mul":
        return lambda: x * y
    if op == "relu":
        return lambda: torch.relu(x)
    if op == "gelu":
        return lambda: torch.nn.functional.gelu(x)
    if op == "tanh":
        return lambda: torch.tanh(x)
    if op == "ln":
        m = nn.LayerNorm(d["h"]).to(dev)
        return lambda: m(x)
    if op == "softmax":
        return lambda: torch.softmax(x, dim=-1)
    raise ValueError(op)


def kernel_times(torch, fn):
    """The kernels one call launches, through the profiler: [(device time, name)], copies left out."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    ks = []
    for e in prof.events():
        if str(getattr(e, "device_type", "")).endswith("CUDA") and not e.name.startswith(("Memset", "Memcpy")):
            t = getattr(e, "device_time", None)
            if t is None:
                t = getattr(e, "cuda_time", 0)
            ks.append((float(t), e.name))
    return ks


def kernels_of(torch, fn):
    """The kernels one call launches, through the profiler: (main kernel, count)."""
    ks = kernel_times(torch, fn)
    if not ks:
        return "", 0
    return max(ks)[1], len(ks)


def sweep(args):
    import torch
    torch.manual_seed(0)
    cfgs = json.load(open(args.configs))
    dev = torch.cuda.get_device_name(0)
    tv = "p" + torch.__version__.split("+")[0]
    deadline = time.time() + args.budget_s
    rows = {}
    with torch.no_grad():
        for c in cfgs:
            if time.time() > deadline:
                print("sweep: budget spent; stopping", file=sys.stderr)
                break
            fn = build_op(torch, c)
            for _ in range(3):
                fn()
            torch.cuda.synchronize()
            ts = []
            for _ in range(25):
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                fn()
                b.record()
                b.synchronize()
                ts.append(a.elapsed_time(b))
            ms = statistics.mean(sorted(ts)[:5])
            try:
                kname, nk = kernels_of(torch, fn)
            except Exception as e:  # the profiler is optional
                kname, nk = "", 0
                print(f"profiler: {e}", file=sys.stderr)
            rows.setdefault(c["op"], []).append((ms, kname, nk, c))
            print(f"{c['op']:8s} {c['dims']} {ms:.4f} ms ({c['ref_gpu']}: {c['ref_ms']:.4f}) {kname[:60]} x{nk}")
    os.makedirs(args.out, exist_ok=True)
    for op, rs in rows.items():
        dimk = list(rs[0][3]["dims"].keys())
        with open(os.path.join(args.out, f"{op}.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["op", "device", "torch", "latency_ms", "kernel", "kernels_launched", "grid", "block"] + dimk)
            for ms, kname, nk, c in rs:
                w.writerow([op, dev, tv, repr(ms), kname, nk if nk else "", "", ""] + [c["dims"][k] for k in dimk])


def node_fn(torch, n, dtype):
    F = torch.nn.functional
    dev = "cuda"
    r = lambda s: torch.randn(*s, device=dev, dtype=dtype)
    a = r(n["a"])
    if n["op"] == "Conv":
        w = r(n["b"])
        bias = r([n["b"][0]]) if n["bias"] else None
        p = n["pads"]
        if p[0] != p[2] or p[1] != p[3]:
            a = F.pad(a, (p[1], p[3], p[0], p[2]))
            pad = (0, 0)
        else:
            pad = (p[0], p[1])
        return lambda: F.conv2d(a, w, bias, tuple(n["strides"]), pad, tuple(n["dilations"]), n["group"])
    if n["op"] == "Gemm":
        b = r(n["b"])
        bias = r([n["b"][0] if n["trans_b"] else n["b"][1]]) if n["bias"] else None
        if n["trans_b"] and not n["trans_a"]:
            return lambda: F.linear(a, b, bias)
        aa = a.t() if n["trans_a"] else a
        bb = b.t() if n["trans_b"] else b
        return (lambda: torch.addmm(bias, aa, bb)) if bias is not None else (lambda: aa @ bb)
    b = r(n["b"])
    return lambda: torch.matmul(a, b)


def nodes(args):
    import torch
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = True
    spec = json.load(open(args.nodes))
    out = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
           "cudnn": torch.backends.cudnn.version(), "method": "CUDA graph of 20 calls, median of 5 timed replays / 20",
           "models": {}}
    deadline = time.time() + args.budget_s
    for model, ms in spec.items():
        res = {}
        for mode in ("fp32", "tf32", "fp16"):
            if time.time() > deadline:
                break
            torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"
            torch.backends.cudnn.allow_tf32 = mode == "tf32"
            dt = torch.float16 if mode == "fp16" else torch.float32
            for n in ms["nodes"]:
                fn = node_fn(torch, n, dt)
                with torch.no_grad():
                    for _ in range(3):
                        fn()
                    torch.cuda.synchronize()
                    s = torch.cuda.Stream()
                    s.wait_stream(torch.cuda.current_stream())
                    with torch.cuda.stream(s):
                        fn()
                    torch.cuda.current_stream().wait_stream(s)
                    g = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(g):
                        for _ in range(20):
                            fn()
                    g.replay()
                    torch.cuda.synchronize()
                    ts = []
                    for _ in range(5):
                        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                        a.record()
                        g.replay()
                        b.record()
                        b.synchronize()
                        ts.append(a.elapsed_time(b) * 1e3 / 20)
                res.setdefault(n["name"], {})[mode] = statistics.median(ts)
            print(f"{model} {mode}: {sum(v[mode] for v in res.values() if mode in v):.1f} us over {len(res)} nodes")
        out["models"][model] = res
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)


TIMM = [("resnet50", 224), ("resnet18", 224), ("efficientnet_b0", 224), ("mobilenetv3_large_100", 224),
        ("convnext_tiny", 224), ("regnety_032", 224), ("densenet121", 224), ("vit_base_patch16_224", 224),
        ("deit_small_patch16_224", 224), ("swin_tiny_patch4_window7_224", 224)]


def timm_bench(args):
    import timm
    import torch
    torch.backends.cudnn.benchmark = True
    dev = torch.cuda.get_device_name(0)
    tv = torch.__version__.split("+")[0]
    cu = (torch.version.cuda or "").replace(".", "")
    tag = dev.replace("NVIDIA ", "").lower().replace(" ", "")
    deadline = time.time() + args.budget_s
    rows = []

    def run(name, img, batch, compiled):
        m = timm.create_model(name, pretrained=False).cuda().eval()
        params = sum(p.numel() for p in m.parameters()) / 1e6
        if compiled:
            m = torch.compile(m)
        x = torch.randn(batch, 3, img, img, device="cuda")
        ts = []
        with torch.inference_mode(), torch.autocast("cuda", dtype=torch.float16):
            for i in range(50):
                t0 = time.perf_counter()
                m(x)
                torch.cuda.synchronize()
                if i >= 10:
                    ts.append((time.perf_counter() - t0) * 1e3)
        step = statistics.mean(ts)
        kind = "dynamo" if compiled else "nchw"
        f = f"gpusim-infer-amp-{kind}-torch{tv}-cuda{cu}-{tag}.csv"
        rows.append([f, name, img, f"{batch * 1e3 / step:.2f}", f"{step:.4f}", batch, f"{params:.2f}",
                     f"{statistics.median(ts):.4f}", f"{min(ts):.4f}", f"{max(ts):.4f}"])
        print(f"{name:32s} {'compiled' if compiled else 'eager':8s} batch {batch}: {step:.3f} ms/step "
              f"(median {statistics.median(ts):.3f}, min {min(ts):.3f}, max {max(ts):.3f})", flush=True)
        del m
        torch.cuda.empty_cache()

    for name, img in TIMM:
        if time.time() > deadline:
            break
        try:
            run(name, img, args.batch, False)
        except Exception as e:
            print(f"{name}: {e}", file=sys.stderr)
    for name in args.compile:
        if time.time() > deadline - 60:
            break
        img = dict(TIMM).get(name, 224)
        try:
            run(name, img, args.compile_batch, True)
        except Exception as e:
            print(f"{name} compiled: {e}", file=sys.stderr)
    with open(args.out, "w", newline="") as f:
        f.write(f"# measured by tools/device/torch_measure.py timm on {dev}; timm {timm.__version__}, torch "
                f"{torch.__version__}, cuDNN {torch.backends.cudnn.version()}\n")
        w = csv.writer(f)
        w.writerow(["file", "model", "infer_img_size", "infer_samples_per_sec", "infer_step_time", "infer_batch_size",
                    "param_count", "median_step_time", "min_step_time", "max_step_time"])
        w.writerows(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    p = sub.add_parser("configs")
    p.add_argument("--neusight", required=True)
    p.add_argument("--gpu-row", default="NVIDIA A100-PCIE-40GB")
    p.add_argument("--fallback-row", default="Tesla V100-PCIE-32GB", help="for ops without rows of --gpu-row (conv)")
    p.add_argument("--out", required=True)
    p = sub.add_parser("sweep")
    p.add_argument("--configs", required=True)
    p.add_argument("--out", required=True, help="folder for OP.csv")
    p.add_argument("--budget-s", type=float, default=90)
    p = sub.add_parser("nodes")
    p.add_argument("--nodes", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--budget-s", type=float, default=90)
    p = sub.add_parser("timm")
    p.add_argument("--out", required=True)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--compile", nargs="*", default=["resnet50", "vit_base_patch16_224"])
    p.add_argument("--compile-batch", type=int, default=256)
    p.add_argument("--budget-s", type=float, default=120)
    args = ap.parse_args()
    {"configs": configs, "sweep": sweep, "nodes": nodes, "timm": timm_bench}[args.mode](args)


if __name__ == "__main__":
    main()
