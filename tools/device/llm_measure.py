#!/usr/bin/env python3
"""Measure language-model work on a lent NVIDIA GPU with PyTorch: the kernels of a decode step.

Modes (each writes one file; tools/device/README.md has the whole session):
  gemv      y = x W^T for Llama's projection shapes at 1-512 rows (fp16, bf16), the weights cold: each
            call reads another copy of W, the copies together 4x the L2, as a decode step's layers do.
            Kernel time: a CUDA graph of at least 24 calls, median of 5 replays / calls. Written as
            NeuSight-style linear rows (b, m, n = in features, k = out features) plus dtype and bias.
  rates     matrix-unit rates of large GEMMs: fp16, bf16, int8 (torch._int_mm), fp8 e4m3
            (torch._scaled_mm) and int4 weight-only (torch._weight_int4pack_mm), timed as gemv is.
  generate  a Llama-shaped decoder from its config (transformers, random weights, fp16, sdpa attention,
            nothing downloaded) generating in eager PyTorch: the prompt's pass (time to first token),
            then each token's step across the growing cache (host wall time to torch.cuda.synchronize),
            and the kernels one decode step and one prompt pass launch (torch.profiler).
  csv       (here, no GPU) gemv's JSON as a NeuSight-style linear.csv that `gpusim truth import` and
            `gpusim validate --truth` read: the dtype, runtime (cuda-graph: kernel time, no host
            dispatch), statistic and warm_cache (0: cold weights) columns say how each row differs
            from NeuSight's own.
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_measure import kernel_times  # noqa: E402  (beside this script)

SHAPES = [(4096, 4096), (11008, 4096), (4096, 11008), (1024, 4096), (14336, 4096), (4096, 14336), (32000, 4096)]
ROWS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]

LLAMA = {
    "llama-2-7b": dict(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
                       num_key_value_heads=32, vocab_size=32000, max_position_embeddings=4096, rms_norm_eps=1e-5),
    "llama-3-8b": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                       num_key_value_heads=8, vocab_size=128256, max_position_embeddings=8192, rms_norm_eps=1e-5,
                       rope_theta=500000.0),
}


def graph_time_us(torch, fns, min_calls=24):
    """Kernel time of one call: a CUDA graph over the calls fns (repeated to min_calls), median of 5."""
    reps = max(1, math.ceil(min_calls / len(fns)))
    calls = fns * reps
    for f in fns:
        f()
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for f in fns:
            f()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for f in calls:
            f()
    g.replay()
    torch.cuda.synchronize()
    ts = []
    for _ in range(5):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) * 1e3 / len(calls))
    del g
    return statistics.median(ts)


def machine(torch):
    p = torch.cuda.get_device_properties(0)
    return {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda,
            "sms": p.multi_processor_count, "l2_bytes": getattr(p, "L2_cache_size", 0),
            "memory_bytes": p.total_memory}


def gemv(args):
    import torch
    F = torch.nn.functional
    torch.manual_seed(0)
    info = machine(torch)
    l2 = info["l2_bytes"] or 64 << 20
    deadline = time.time() + args.budget_s
    rows = []
    for dt_name in args.dtypes:
        dt = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[dt_name]
        es = torch.finfo(dt).bits // 8
        for n, k in SHAPES:
            if time.time() > deadline:
                break
            copies = max(2, math.ceil(4 * l2 / (n * k * es)))
            ws = [torch.randn(n, k, device="cuda", dtype=dt) * 0.02 for _ in range(copies)]
            for m in ROWS:
                if time.time() > deadline:
                    print("gemv: budget spent; stopping", file=sys.stderr)
                    break
                x = torch.randn(m, k, device="cuda", dtype=dt)
                fns = [(lambda w=w: F.linear(x, w)) for w in ws]
                us = graph_time_us(torch, fns)
                try:
                    ks = kernel_times(torch, fns[0])
                except Exception as e:  # the profiler is optional
                    ks = []
                    print(f"profiler: {e}", file=sys.stderr)
                main = max(ks)[1] if ks else ""
                bytes_ = (n * k + m * k + m * n) * es
                rows.append({"dtype": dt_name, "m": m, "n_out": n, "k_in": k, "us": us, "copies": copies,
                             "kernel": main, "kernels_launched": len(ks),
                             "gb_s": bytes_ / us / 1e3, "tflops": 2 * m * n * k / us / 1e6})
                print(f"{dt_name} m={m:4d} {n:6d}x{k:6d}: {us:8.2f} us {bytes_ / us / 1e3:7.0f} GB/s "
                      f"{2 * m * n * k / us / 1e6:7.1f} TFLOP/s  {main[:70]} x{len(ks)}", flush=True)
            del ws
            torch.cuda.empty_cache()
    info["method"] = ("CUDA graph of >= 24 calls cycling over `copies` distinct weight tensors (together >= 4x L2), "
                      "median of 5 replays / calls; F.linear without bias; torch default flags")
    json.dump({"machine": info, "rows": rows}, open(args.out, "w"), indent=0)


def rates(args):
    import torch
    torch.manual_seed(0)
    out = {"machine": machine(torch), "method": "CUDA graph of >= 24 calls, median of 5 replays / calls", "rows": []}

    def rec(kind, m, n, k, fn, note=""):
        try:
            us = graph_time_us(torch, [fn])
            ks = kernel_times(torch, fn)
            main = max(ks)[1] if ks else ""
            out["rows"].append({"kind": kind, "m": m, "n": n, "k": k, "us": us, "tops": 2 * m * n * k / us / 1e6,
                                "kernel": main, "note": note})
            print(f"{kind:10s} {m}x{n}x{k}: {us:9.1f} us {2 * m * n * k / us / 1e6:7.1f} TOP/s {main[:70]}",
                  flush=True)
        except Exception as e:
            out["rows"].append({"kind": kind, "m": m, "n": n, "k": k, "error": str(e)[:300]})
            print(f"{kind} {m}x{n}x{k}: {str(e)[:200]}", flush=True)

    for (m, n, k) in [(8192, 8192, 8192), (4096, 4096, 4096), (1, 4096, 4096), (16, 4096, 4096)]:
        for name, dt in (("fp16", torch.float16), ("bf16", torch.bfloat16)):
            a = torch.randn(m, k, device="cuda", dtype=dt)
            b = torch.randn(k, n, device="cuda", dtype=dt)
            rec(name, m, n, k, lambda a=a, b=b: a @ b)
        if m >= 32:
            a8 = torch.randint(-8, 8, (m, k), device="cuda", dtype=torch.int8)
            b8 = torch.randint(-8, 8, (n, k), device="cuda", dtype=torch.int8).t()
            rec("int8", m, n, k, lambda a8=a8, b8=b8: torch._int_mm(a8, b8), "torch._int_mm, B column-major")
        if m >= 16:
            try:
                af = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
                bf = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn).t()
                one = torch.tensor(1.0, device="cuda")
                rec("fp8e4m3", m, n, k, lambda af=af, bf=bf: torch._scaled_mm(af, bf, one, one,
                                                                             out_dtype=torch.bfloat16),
                    "torch._scaled_mm, per-tensor scales, bf16 out")
            except Exception as e:
                print(f"fp8: {e}", flush=True)
        try:
            gs = 128
            wq = torch.randint(0, 256, (n, k // 2), device="cuda", dtype=torch.uint8)
            packed = torch._convert_weight_to_int4pack(wq, 8)
            sz = torch.randn(k // gs, n, 2, device="cuda", dtype=torch.bfloat16)
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            rec("int4w-bf16", m, n, k, lambda x=x, packed=packed, sz=sz: torch._weight_int4pack_mm(x, packed, gs, sz),
                "torch._weight_int4pack_mm (tinygemm), group 128, weights warm in L2 where they fit")
        except Exception as e:
            print(f"int4: {e}", flush=True)
        torch.cuda.empty_cache()
    json.dump(out, open(args.out, "w"), indent=0)


def build_llama(torch, name):
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(**LLAMA[name])
    cfg._attn_implementation = "sdpa"
    torch.set_default_dtype(torch.float16)
    try:
        with torch.device("cuda"):
            model = LlamaForCausalLM(cfg)
    finally:
        torch.set_default_dtype(torch.float32)
    return model.half().eval(), cfg


def step_kernels(torch, fn):
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    agg = {}
    n = 0
    total = 0.0
    for e in prof.events():
        if str(getattr(e, "device_type", "")).endswith("CUDA"):
            t = getattr(e, "device_time", None)
            if t is None:
                t = getattr(e, "cuda_time", 0)
            a = agg.setdefault(e.name, [0, 0.0])
            a[0] += 1
            a[1] += float(t)
            n += 1
            total += float(t)
    top = sorted(([k, v[0], v[1]] for k, v in agg.items()), key=lambda r: -r[2])
    return {"kernels": n, "kernel_us": total, "by_name": top}


def generate(args):
    import torch
    import transformers
    torch.manual_seed(0)
    out = {"machine": machine(torch), "transformers": transformers.__version__,
           "method": ("eager PyTorch, fp16, sdpa attention, random weights from the config; a step's time is host "
                      "wall from before the call to after torch.cuda.synchronize() following argmax; the prompt "
                      "pass keeps the last position's logits; median over reps"),
           "runs": []}
    deadline = time.time() + args.budget_s
    for spec in args.models:
        name, batch = spec.split(":")
        batch = int(batch)
        if time.time() > deadline:
            break
        t0 = time.time()
        model, cfg = build_llama(torch, name)
        build_s = time.time() - t0
        ids = torch.randint(0, cfg.vocab_size, (batch, args.prompt), device="cuda")

        def prefill(i):
            try:
                return model(input_ids=i, use_cache=True, logits_to_keep=1)
            except TypeError:
                return model(input_ids=i, use_cache=True)

        res = {"model": name, "batch": batch, "prompt": args.prompt, "generate": args.generate,
               "build_s": build_s, "reps": []}
        with torch.inference_mode():
            o = prefill(ids[:, :32])  # warm-up: kernels, allocator
            c = o.past_key_values
            nxt = o.logits[:, -1:].argmax(-1)
            for _ in range(4):
                o = model(input_ids=nxt, past_key_values=c, use_cache=True)
                nxt = o.logits[:, -1:].argmax(-1)
            torch.cuda.synchronize()
            del o, c
            for rep in range(args.reps):
                torch.cuda.synchronize()
                t = time.perf_counter()
                o = prefill(ids)
                nxt = o.logits[:, -1:].argmax(-1)
                torch.cuda.synchronize()
                ttft = (time.perf_counter() - t) * 1e3
                c = o.past_key_values
                steps = []
                for i in range(args.generate):
                    t = time.perf_counter()
                    o = model(input_ids=nxt, past_key_values=c, use_cache=True)
                    nxt = o.logits[:, -1:].argmax(-1)
                    torch.cuda.synchronize()
                    steps.append((time.perf_counter() - t) * 1e3)
                res["reps"].append({"ttft_ms": ttft, "step_ms": steps})
                print(f"{name} b{batch}: TTFT {ttft:.2f} ms, steps first {steps[0]:.2f} median "
                      f"{statistics.median(steps):.2f} last {steps[-1]:.2f} ms", flush=True)
            try:
                res["decode_step_profile"] = step_kernels(
                    torch, lambda: model(input_ids=nxt, past_key_values=c, use_cache=True).logits[:, -1:].argmax(-1))
                res["prompt_pass_profile"] = step_kernels(torch, lambda: prefill(ids).logits[:, -1:].argmax(-1))
                d = res["decode_step_profile"]
                print(f"  decode step: {d['kernels']} kernels, {d['kernel_us']:.0f} us of kernel time; prompt pass: "
                      f"{res['prompt_pass_profile']['kernels']} kernels, "
                      f"{res['prompt_pass_profile']['kernel_us']:.0f} us", flush=True)
            except Exception as e:
                print(f"profiler: {e}", file=sys.stderr)
            del o, c
        out["runs"].append(res)
        del model
        torch.cuda.empty_cache()
        json.dump(out, open(args.out, "w"), indent=0)
    json.dump(out, open(args.out, "w"), indent=0)


def to_csv(args):
    import csv
    import os
    d = json.load(open(args.gemv))
    mach = d["machine"]
    tv = "p" + mach["torch"].split("+")[0]
    stat = "median of 5 replays of a CUDA graph of >= 24 calls / calls; each call reads a cold weight copy"
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "linear.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["op", "device", "torch", "latency_ms", "kernel", "kernels_launched", "grid", "block", "dtype",
                    "runtime", "statistic", "warm_cache", "b", "m", "n", "k", "bias"])
        for r in d["rows"]:
            w.writerow(["linear", mach["device"], tv, repr(r["us"] / 1e3), r["kernel"], r["kernels_launched"] or "",
                        "", "", r["dtype"], "cuda-graph", stat, 0, 1, r["m"], r["k_in"], r["n_out"], 0])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    p = sub.add_parser("gemv")
    p.add_argument("--out", required=True)
    p.add_argument("--dtypes", nargs="+", default=["fp16", "bf16"])
    p.add_argument("--budget-s", type=float, default=60)
    p = sub.add_parser("rates")
    p.add_argument("--out", required=True)
    p = sub.add_parser("generate")
    p.add_argument("--out", required=True)
    p.add_argument("--models", nargs="+", default=["llama-2-7b:1", "llama-3-8b:1", "llama-2-7b:8"])
    p.add_argument("--prompt", type=int, default=512)
    p.add_argument("--generate", type=int, default=128)
    p.add_argument("--reps", type=int, default=2)
    p.add_argument("--budget-s", type=float, default=120)
    p = sub.add_parser("csv")
    p.add_argument("--gemv", required=True, help="the gemv mode's JSON")
    p.add_argument("--out", required=True, help="folder for linear.csv")
    args = ap.parse_args()
    {"csv": to_csv, "gemv": gemv, "rates": rates, "generate": generate}[args.mode](args)


if __name__ == "__main__":
    main()
