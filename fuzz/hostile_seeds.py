#!/usr/bin/env python3
"""Depth and overflow seeds for the fuzzers, made from real inputs (fuzz/run.sh calls it).

For a plan document (gpusim.plan/1), every field at the top, in the first kernel and in its tile
gets variants whose value is nested DEPTH levels deep, or an extreme number (2^63 - 1, -2^63,
2^64, 1e308, -1, 0, 0.5): the shapes of the 18 stack overflows and the silent NaNs issue 31 found.
Mutations of real files rarely reach those values; starting from them, the fuzzer explores around
them.
  fuzz/hostile_seeds.py plan PLAN.json OUT_DIR [--depth N]
"""
import argparse
import copy
import json
import pathlib

EXTREMES = [2**63 - 1, -(2**63), 2**64, 1e308, -1, 0, 0.5]


def deep(depth):
    v = []
    for _ in range(depth - 1):
        v = [v]
    return v


def variants(doc, depth):
    """(name, document) pairs: each field replaced in turn."""
    paths = [(k,) for k in doc]
    kernels = doc.get("kernels") or []
    if kernels and isinstance(kernels[0], dict):
        paths += [("kernels", 0, k) for k in kernels[0]]
        tile = kernels[0].get("tile")
        if isinstance(tile, dict):
            paths += [("kernels", 0, "tile", k) for k in tile]
    for path in paths:
        name = "_".join(str(p) for p in path)
        for label, value in [("deep", deep(depth))] + [(f"num{i}", x) for i, x in enumerate(EXTREMES)]:
            d = copy.deepcopy(doc)
            node = d
            for p in path[:-1]:
                node = node[p]
            node[path[-1]] = value
            yield f"{name}_{label}", d


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("edge", choices=["plan"])
    ap.add_argument("source")
    ap.add_argument("out")
    ap.add_argument("--depth", type=int, default=2000)
    a = ap.parse_args()
    doc = json.loads(pathlib.Path(a.source).read_text())
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    n = 0
    for name, d in variants(doc, a.depth):
        # json.dumps recurses: write the deep value's brackets by hand past Python's recursion limit.
        text = json.dumps(d, default=str) if a.depth < 900 or "deep" not in name else dump_deep(d)
        (out / f"hostile_{name}.json").write_text(text)
        n += 1
    print(f"hostile_seeds: {n} {a.edge} seeds in {out}")


def dump_deep(d):
    """json.dumps for a document whose deep values are lists of one list: brackets written out."""
    def enc(v):
        depth = 0
        while isinstance(v, list) and len(v) <= 1:
            depth += 1
            if not v:
                return "[" * depth + "]" * depth
            v = v[0]
        if depth:
            return "[" * depth + enc(v) + "]" * depth
        if isinstance(v, dict):
            return "{" + ", ".join(json.dumps(k) + ": " + enc(x) for k, x in v.items()) + "}"
        if isinstance(v, list):
            return "[" + ", ".join(enc(x) for x in v) + "]"
        return json.dumps(v)
    return enc(d)


if __name__ == "__main__":
    main()
