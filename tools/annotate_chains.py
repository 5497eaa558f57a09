#!/usr/bin/env python3
"""Adds each generated GEMM-like kernel's chain (tile.chain: include/gpusim/tile.h, KernelChain) to
`gpusim run --json` documents written by a gpusim that did not record it, from that gpusim's own
kernel texts and their SASS, so that `gpusim validate` prices the kernels that ran as they ran.

The measurements are not touched: only each GEMM-like kernel's "tile" gains a "chain" object. The
inputs are made with the gpusim build that ran (the same plan, the same kernel texts):

    OLD=path/to/that/build/bin/gpusim
    $OLD codegen report MODEL.onnx --gpu GPU [--dtype fp16 | --allow-tf32] [--dim ...] --no-store \\
        --sources SRC/RUN_NAME                   # one folder of INDEX_NAME.cu a run document
    gpusim codegen sass --arch sm_90 --json SRC/RUN_NAME/*.cu > SASS/x.json    # this gpusim: the SASS

How the chain of one kernel of gpusim's earlier generators follows from its text and its SASS:
  load_rounds     the operand-tile loops inside the k-loop, `for (int e = LID_X; e < N; e += T)`,
                  run ceil(N / T) loads a thread each; the SASS main loop's global loads over its
                  waits on them (one pass of its text) is the loads each wait covers; rounds = the
                  loads a k-step over that
  loads_ahead     0: those generators loaded a k-step's tiles before its products, not ahead
  epilogue_rounds a K split's arrival (two round trips) and, over the SASS epilogue's loads in
                  flight, the slices of every output value a thread sums
  epilogue_barriers  the SASS epilogue's block barriers (its fragment loops are unrolled)

Usage: tools/annotate_chains.py --sources SRC --sass SASS RUN.json.xz...
"""
import argparse
import glob
import json
import lzma
import math
import os
import re
import sys

LOOP = re.compile(r"for \(int e = LID_X; e < (\d+); e \+= (\d+)\)")


def chain_of(text, sass, tile):
    """The chain of one kernel from its text and its `codegen sass` entry; None without a main loop."""
    mc = sass.get("machine_code")
    if not mc or not mc.get("main_loop"):
        return None
    at = text.find("for (int kt = 0;")
    if at < 0:
        return None
    loop = text[at:]
    trips = [math.ceil(int(n) / int(t)) for n, t in LOOP.findall(text[at:])]
    m, e = mc["main_loop"], mc["epilogue"]
    per_wait = max(1.0, m["ld_global"] / max(1, m["load_waits"]))
    rounds = max(1, round(sum(trips) / per_wait))
    split = max(1, tile.get("split_k", 1))
    values = max(1, tile["block_m"] * tile["block_n"] // max(1, tile["threads"]))
    epi_rounds = 2 + math.ceil(values * split / max(1, e["loads_in_flight"])) if split > 1 else 0
    return {"load_rounds": rounds, "loads_ahead": 0, "epilogue_rounds": epi_rounds,
            "epilogue_barriers": e["barriers"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sources", required=True, help="folder of one folder of kernel texts per run (RUN_NAME/INDEX_NAME.cu)")
    ap.add_argument("--sass", required=True, help="folder of `gpusim codegen sass --json` outputs of those texts")
    ap.add_argument("runs", nargs="+", help="run documents (.json or .json.xz), rewritten in place")
    a = ap.parse_args()
    by_file = {}
    for f in glob.glob(os.path.join(a.sass, "*.json")):
        with open(f) as fh:
            text = fh.read()
        if not text.strip():
            continue
        for k in json.loads(text)["kernels"]:
            by_file[os.path.abspath(k["file"])] = k
    for path in a.runs:
        name = os.path.basename(path).split(".json")[0]
        opener = lzma.open if path.endswith(".xz") else open
        with opener(path, "rt") as fh:
            doc = json.load(fh)
        done = 0
        for k in doc["kernels"]:
            t = k.get("tile", {})
            if k.get("class") not in ("gemm", "conv") or t.get("block_m", 0) <= 0:
                continue
            src = glob.glob(os.path.join(a.sources, name, f"{k['kernel']}_*.cu"))
            if len(src) != 1 or os.path.abspath(src[0]) not in by_file:
                print(f"annotate_chains: {path}: kernel {k['kernel']}: no text or SASS under {a.sources}/{name}",
                      file=sys.stderr)
                return 1
            with open(src[0]) as fh:
                c = chain_of(fh.read(), by_file[os.path.abspath(src[0])], t)
            if c:
                t["chain"] = c
                done += 1
        with opener(path, "wt") as fh:
            json.dump(doc, fh, indent=2, sort_keys=True)
            fh.write("\n")
        print(f"{path}: {done} kernels' chains")
    return 0


if __name__ == "__main__":
    sys.exit(main())
