"""Train a small learned cost model on a GPU Dojo dataset and test it on GPUs it never saw.

    python examples/python/dojo_ranker.py [--out DIR] [--holdout GPU_FAMILY] [--executor ray|local]

Generates a dataset with gpusim.dojo (ResNet-50, MobileNetV2 and BERT-base at batch 1 and 4 on five
GPU families, each with virtual GPUs around it; reused when DIR already holds it), trains a
gradient-boosted tree (scikit-learn) to predict each kernel's time from the kernel's work, tile and
GPU figures on every family but the held-out one, and ranks the held-out family's plans by the sum of
its predicted kernel times. Reports, over the held-out GPUs' tasks:
  - Kendall's tau between the learned ranking and the simulator's (the labels), and the top-1
    regret: how much slower (by the simulator) the learned model's pick is than the best plan;
  - the same for a roofline ranking (max of FLOPs / peak and bytes / bandwidth per kernel), as a
    floor any learned model should beat;
  - where the store gave measured kernel times (--store), tau of the learned and the simulator's
    kernel times against the measured ones.
Needs pyarrow, scikit-learn and (for --executor ray) ray from PyPI.
"""
import argparse
import math
import os
import sys

import numpy as np

from gpusim import dojo

FEATURES = ["ops", "batch", "m", "n", "k", "window", "kv_seq", "head_dim", "elements", "rows", "row_elements",
            "fma_flops", "transcendental_flops", "compare_flops", "bytes_read", "bytes_written", "block_m", "block_n",
            "block_k", "threads", "stages", "split_k", "vector_width", "items_per_thread", "units", "clock_mhz",
            "fp32_tflops", "matrix_tflops", "dram_gbps", "l2_mb", "l2_gbps", "smem_per_unit_kb"]
CLASSES = ["gemm", "conv", "attention", "elementwise", "reduction", "normalization", "data-movement"]


def features(t):
    cols = {c: np.asarray(t.column(c).to_numpy(zero_copy_only=False), dtype=float) for c in FEATURES}
    x = [np.log1p(np.maximum(cols[c], 0)) for c in FEATURES]
    cls = t.column("class").to_pylist()
    x += [np.array([1.0 if c == k else 0.0 for c in cls]) for k in CLASSES]
    # Roofline terms: what a first-principles model would compute.
    flops = cols["fma_flops"] + cols["transcendental_flops"] + cols["compare_flops"]
    peak = np.maximum(cols["matrix_tflops"], cols["fp32_tflops"]) * 1e6  # FLOP/us
    bw = cols["dram_gbps"] * 1e3  # B/us
    roof = np.maximum(flops / np.maximum(peak, 1e-9), (cols["bytes_read"] + cols["bytes_written"]) / np.maximum(bw, 1e-9))
    x.append(np.log1p(roof))
    return np.stack(x, axis=1), roof


def kendall_tau(a, b):
    from scipy.stats import kendalltau

    if len(a) < 2:
        return float("nan")
    return kendalltau(a, b).statistic


def plan_scores(table, per_kernel):
    """Sum of per-kernel values by (task, plan)."""
    keys = list(zip(table.column("task").to_pylist(), table.column("plan").to_pylist()))
    out = {}
    for key, v in zip(keys, per_kernel):
        out[key] = out.get(key, 0.0) + float(v)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="dojo-ranker-data")
    ap.add_argument("--holdout", default="nvidia-a10")
    ap.add_argument("--executor", default="ray", choices=["ray", "local"])
    ap.add_argument("--plans", type=int, default=24)
    ap.add_argument("--virtual-gpus", type=int, default=3)
    ap.add_argument("--store", default="")
    a = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    models = [os.path.join(root, "models", m) for m in ("resnet50.onnx", "mobilenet_v2.onnx", "bert_base_seq128.onnx")]
    cfg = dojo.Config(models=models, dim_sets=[{"batch": 1}, {"batch": 4}],
                      gpus=["nvidia-t4", "nvidia-rtx-3060", "nvidia-a10", "nvidia-l40s", "amd-mi100"],
                      virtual_gpus=a.virtual_gpus, plans=a.plans, seed=1, store=a.store)
    info = dojo.generate(cfg, a.out, executor=a.executor, progress=False)
    kernels = dojo.read(a.out, "kernels")
    plans = dojo.read(a.out, "plans")
    print(f"dataset   {a.out}: {info['tasks']} tasks, {kernels.num_rows} kernel rows, {plans.num_rows} plans "
          f"({info['skipped']} of {info['shards']} shards reused) in {info['seconds']:.1f} s")
    train, test = dojo.split(kernels, by="gpu_family", holdout=[a.holdout])
    from sklearn.ensemble import HistGradientBoostingRegressor

    xtr, _ = features(train)
    ytr = np.log(np.asarray(train.column("predicted_us").to_numpy(), dtype=float))
    model = HistGradientBoostingRegressor(max_iter=300, learning_rate=0.1, random_state=0).fit(xtr, ytr)
    xte, roof = features(test)
    learned = np.exp(model.predict(xte))
    sim = np.asarray(test.column("predicted_us").to_numpy(), dtype=float)
    err = np.abs(learned - sim) / sim
    print(f"train     {train.num_rows} kernels on {len(set(train.column('gpu').to_pylist()))} GPUs; "
          f"test: {test.num_rows} kernels on {len(set(test.column('gpu').to_pylist()))} unseen GPUs "
          f"(family {a.holdout})")
    print(f"kernels   learned vs simulator time: median error {100 * np.median(err):.1f} %, "
          f"tau {kendall_tau(learned, sim):.3f}; roofline tau {kendall_tau(roof, sim):.3f}")
    # Plans, per task: rank by the sum of kernel times.
    truth = plan_scores(test, sim)
    scores = {"learned": plan_scores(test, learned), "roofline": plan_scores(test, roof)}
    tasks = sorted({t for t, _ in truth})
    for name, s in scores.items():
        taus, regrets, top1 = [], [], 0
        for task in tasks:
            ps = sorted(p for t, p in truth if t == task)
            ys = [truth[(task, p)] for p in ps]
            xs = [s[(task, p)] for p in ps]
            tau = kendall_tau(xs, ys)
            if not math.isnan(tau):
                taus.append(tau)
            pick = int(np.argmin(xs))
            regrets.append(ys[pick] / min(ys) - 1)
            top1 += ys[pick] == min(ys)
        print(f"plans     {name:9s} ranking over {len(tasks)} held-out tasks: mean tau {np.mean(taus):.3f}, "
              f"top-1 regret median {100 * np.median(regrets):.2f} % (max {100 * np.max(regrets):.1f} %), "
              f"picks the simulator's best in {100 * top1 / len(tasks):.0f} %")
    measured = test.column("measured_us").to_numpy(zero_copy_only=False)
    have = ~np.isnan(np.asarray(measured, dtype=float))
    if have.any():
        m = np.asarray(measured, dtype=float)[have]
        print(f"measured  {int(have.sum())} kernels with measured times: tau learned {kendall_tau(learned[have], m):.3f}, "
              f"simulator {kendall_tau(sim[have], m):.3f}")
    else:
        print("measured  no measured kernel times in the held-out split (give --store with measurements of these GPUs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
