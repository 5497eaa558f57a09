#!/usr/bin/env python3
"""GPU Dojo at scale (issue 18): about 10 M kernel rows through gpusim.dojo on a local Ray with both
cores, written as Parquet; reports wall time, rows per second and Parquet bytes per million rows.

    PYTHONPATH=build/python python bench/dojo/ray_10m.py [--plans 640] [--cpus 2] [--shards 40] [--out DIR]

The dataset: ResNet-50, MobileNetV2, ViT-B/16 and BERT-base at batch 1 and 8 on the T4, RTX 3060, A10
and L40S profiles with 4 virtual GPUs each (20 GPUs): 100 tasks, each with eager, best and PLANS random
plans. Needs pyarrow and ray (apps/python/requirements-dojo.txt). The output directory is removed at the end
unless --keep.
"""
import argparse
import glob
import os
import shutil
import tempfile
import time

from gpusim import dojo


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--plans", type=int, default=640)
    ap.add_argument("--cpus", type=int, default=2)
    ap.add_argument("--shards", type=int, default=40)
    ap.add_argument("--out", default="")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = a.out or tempfile.mkdtemp(prefix="dojo-10m-")
    models = [os.path.join(root, "models", m) for m in ("resnet50.onnx", "mobilenet_v2.onnx", "vit_b_16.onnx",
                                                        "bert_base_seq128.onnx")]
    cfg = dojo.Config(models=models, dim_sets=[{"batch": 1}, {"batch": 8}],
                      gpus=["nvidia-t4", "nvidia-rtx-3060", "nvidia-a10", "nvidia-l40s"], virtual_gpus=4,
                      plans=a.plans, seed=1)
    t0 = time.time()
    info = dojo.generate(cfg, out, shards=a.shards, executor="ray", num_cpus=a.cpus, progress=False)
    wall = time.time() - t0
    size = sum(os.path.getsize(f) for f in glob.glob(os.path.join(out, "kernels-*.parquet")))
    rows = info["kernel_rows"]
    print("| kernel rows | plans | shards | Ray CPUs | wall s (incl. Ray start) | rows/s | Parquet MB per M kernel rows |")
    print("|---|---|---|---|---|---|---|")
    print(f"| {rows:,} | {info['plans']:,} | {info['shards']} | {a.cpus} | {wall:.1f} | {rows / wall:,.0f} | "
          f"{size / rows:.1f} |")
    if not a.keep and not a.out:
        shutil.rmtree(out)


if __name__ == "__main__":
    main()
