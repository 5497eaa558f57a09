#!/usr/bin/env python3
"""Writes the GPU profiles listed in tools/profiles/cards.csv with `gpusim profiles new`.

Each row holds what a spec sheet gives for one card (units, clocks, memory, L2, power, host link)
and its source; the figures every chip of its architecture shares, and the peaks (units x rate per
clock x boost clock), come from the family the row names (gpu_profiles/families/). The rows were
transcribed from the TechPowerUp GPU database as scraped by reox007/RightNow-GPU-Database@77fae38
(data/all-gpus.json; each row's source names the card's page), with AMD's compute units taken as
stream processors / 64 (the scrape doubles RDNA's) and Intel's Xe-cores as shaders / 128; Apple's
from Apple's specifications and the pages each row names.

    python3 tools/profiles/make_cards.py --gpusim build/bin/gpusim [--only NAME ...] [--check]

--check writes nothing: it fails when a committed profile differs from what its row makes.
"""
import argparse
import csv
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def command(gpusim, row, out):
    cmd = [gpusim, "profiles", "new", row["name"], "--like", row["like"], "--units", row["units"],
           "--boost-mhz", row["boost_mhz"], "--memory-gb", row["memory_gb"], "--bandwidth-gbps", row["bandwidth_gbps"],
           "--l2-mb", row["l2_mb"] or "0", "--tdp-w", row["tdp_w"], "--display-name", row["display_name"],
           "--source", row["source"], "--out", out, "--force", "--dir", os.path.join(ROOT, "gpu_profiles")]
    for key, flag in [("base_mhz", "--base-mhz"), ("bus_bits", "--bus-bits"), ("memory_type", "--memory-type"),
                      ("llc_mb", "--last-level-cache-mb"), ("idle_w", "--idle-w"), ("architecture", "--architecture")]:
        if row.get(key):
            cmd += [flag, row[key]]
    if row["pcie"] == "unified":
        cmd.append("--unified")
    elif row["pcie"]:
        cmd += ["--pcie", row["pcie"]]
    for name in filter(None, row["device_names"].split("|")):
        cmd += ["--device-name", name]
    return cmd


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpusim", required=True)
    ap.add_argument("--cards", default=os.path.join(ROOT, "tools", "profiles", "cards.csv"))
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    rows = list(csv.DictReader(open(a.cards, newline="")))
    failed = 0
    for row in rows:
        if a.only and row["name"] not in a.only:
            continue
        vendor = row["like"].split("-")[0]
        target = os.path.join(ROOT, "gpu_profiles", vendor, row["name"] + ".yaml")
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, row["name"] + ".yaml")
            r = subprocess.run(command(a.gpusim, row, out), capture_output=True, text=True)
            if r.returncode != 0:
                print(f"FAIL {row['name']}: {r.stdout}{r.stderr}", file=sys.stderr)
                failed += 1
                continue
            text = open(out).read()
        if a.check:
            if not os.path.exists(target) or open(target).read() != text:
                print(f"DIFFERS {target}: run tools/profiles/make_cards.py to rewrite it", file=sys.stderr)
                failed += 1
            continue
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w") as f:
            f.write(text)
        print(f"wrote {os.path.relpath(target, ROOT)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
