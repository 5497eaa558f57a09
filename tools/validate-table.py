#!/usr/bin/env python3
"""Markdown table of `gpusim validate --json` reports, side by side (bench/RESULTS.md).

Usage: tools/validate-table.py [--models] LABEL=FILE.json [LABEL=FILE.json ...]
Each report adds MAPE, bias and Kendall tau columns per (GPU, op class), or with --models per
whole-model group (GPU, runtime, layout, family) and the compile speed-up's tau; the first also
gives n and its roofline MAPE. Standard library only.
"""
import json
import sys


def table(reports, key_names, key_of, groups_of):
    """One row per key (the first report's n and roofline MAPE), MAPE, bias and tau per report."""
    keys = []
    for _, r in reports:
        for g in groups_of(r):
            if key_of(g) not in keys:
                keys.append(key_of(g))
    head = "| " + " | ".join(key_names) + " | n |"
    rule = "|" + "---|" * len(key_names) + "---:|"
    for label, _ in reports:
        head += f" {label} MAPE | bias | tau |"
        rule += "---:|---:|---:|"
    print(head + " roofline MAPE |")
    print(rule + "---:|")
    for key in sorted(keys, key=lambda k: (k[0] == "all", k[-1] == "all", k)):
        n, cells, roof = None, "", ""
        for _, r in reports:
            g = next((x for x in groups_of(r) if key_of(x) == key), None)
            if g is None:
                cells += " – | – | – |"
                continue
            m = g["model"]
            if n is None:
                n = m["n"]
                roof = f" {g['roofline']['mape']:.1f}% |"
            cells += f" {m['mape']:.1f}% | {m['bias']:+.1f}% | {m['kendall_tau']:.3f} |"
        print(f"| {' | '.join(key)} | {n} |{cells}{roof}")


def main(args):
    models = bool(args) and args[0] == "--models"
    if models:
        args = args[1:]
    reports = []
    for a in args:
        label, path = a.split("=", 1)
        with open(path) as f:
            reports.append((label, json.load(f)))
    if not models:
        table(reports, ["GPU", "class"], lambda g: (g["gpu"], g["class"]), lambda r: r["groups"] + r["per_gpu"])
        return
    # Whole models: per (GPU, runtime, layout, family), then the compile speed-up's tau.
    table(reports, ["GPU", "runtime", "layout", "family"],
          lambda g: (g["gpu"], g["runtime"], g["layout"], g["family"]), lambda r: r.get("models", {}).get("groups", []))
    print()
    for label, r in reports:
        for s in r.get("models", {}).get("speedups", []):
            st = s["stats"]
            print(f"- {label}: speed-up of {s['faster']} over {s['base']} (NCHW) on {s['gpu']}: {st['n']} models, "
                  f"tau {st['kendall_tau']:.3f}, MAPE {st['mape']:.1f}%, bias {st['bias']:+.1f}%")


if __name__ == "__main__":
    main(sys.argv[1:])
