#!/usr/bin/env python3
"""Markdown table of `gpusim validate --json` reports, side by side (bench/RESULTS.md).

Usage: tools/validate-table.py LABEL=FILE.json [LABEL=FILE.json ...]
Each report adds MAPE, bias and Kendall tau columns per (GPU, op class); the first also gives n
and its roofline MAPE. Standard library only.
"""
import json
import sys


def main(args):
    reports = []
    for a in args:
        label, path = a.split("=", 1)
        with open(path) as f:
            reports.append((label, json.load(f)))
    keys = []
    for _, r in reports:
        for g in r["groups"] + r["per_gpu"]:
            k = (g["gpu"], g["class"])
            if k not in keys:
                keys.append(k)
    keys.sort(key=lambda k: (k[1] == "all", k[0], k[1]))
    head = "| GPU | class | n |"
    rule = "|---|---|---:|"
    for label, _ in reports:
        head += f" {label} MAPE | bias | tau |"
        rule += "---:|---:|---:|"
    head += " roofline MAPE |"
    rule += "---:|"
    print(head)
    print(rule)
    for gpu, cls in keys:
        row = None
        cells = ""
        roof = ""
        for i, (_, r) in enumerate(reports):
            g = next((x for x in r["groups"] + r["per_gpu"] if x["gpu"] == gpu and x["class"] == cls), None)
            if g is None:
                cells += " – | – | – |"
                continue
            m = g["model"]
            if row is None:
                row = m["n"]
                roof = f" {g['roofline']['mape']:.1f}% |"
            cells += f" {m['mape']:.1f}% | {m['bias']:+.1f}% | {m['kendall_tau']:.3f} |"
        print(f"| {gpu} | {cls} | {row} |{cells}{roof}")


if __name__ == "__main__":
    main(sys.argv[1:])
