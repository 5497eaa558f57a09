#!/usr/bin/env python3
"""The hand-written profiles (those without `family:`) against their architecture family's rates:
for every peak a family has a rate for, units x rate per clock x boost clock against the stated
figure, as the loader checks a family profile's stated peaks (within 2%).

    python3 tools/profiles/check_rates.py --gpusim build/bin/gpusim

Prints one line per profile and the peaks off by more than 2%; exits 0 (a report, not a gate:
a hand-written profile may follow its datasheet's convention, such as a peak quoted at a clock
other than the boost clock).
"""
import argparse
import json
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Each hand-written profile and the family whose chips it belongs to.
FAMILY = {
    "nvidia-gtx-1080-ti": "nvidia-pascal", "nvidia-tesla-p4": "nvidia-pascal", "nvidia-tesla-p40": "nvidia-pascal",
    "nvidia-v100": "nvidia-volta", "nvidia-v100-pcie-32gb": "nvidia-volta",
    "nvidia-t4": "nvidia-turing", "nvidia-rtx-2080-ti": "nvidia-turing-geforce",
    "nvidia-a100-40gb": "nvidia-ampere-ga100", "nvidia-a100-80gb": "nvidia-ampere-ga100",
    "nvidia-a100-pcie-40gb": "nvidia-ampere-ga100", "nvidia-a100-pcie-80gb": "nvidia-ampere-ga100",
    "nvidia-a10": "nvidia-ampere", "nvidia-rtx-a6000": "nvidia-ampere",
    "nvidia-rtx-3060": "nvidia-ampere-geforce", "nvidia-rtx-3090": "nvidia-ampere-geforce",
    "nvidia-l4": "nvidia-ada", "nvidia-l40s": "nvidia-ada", "nvidia-rtx-4060": "nvidia-ada-geforce",
    "nvidia-rtx-4060-laptop": "nvidia-ada-geforce", "nvidia-rtx-4070": "nvidia-ada-geforce",
    "nvidia-rtx-4090": "nvidia-ada-geforce", "nvidia-rtx-5090": "nvidia-blackwell-geforce",
    "amd-mi300x": "amd-cdna3", "amd-rx-6800-xt": "amd-rdna2", "amd-rx-7900-xtx": "amd-rdna3",
    "intel-arc-a770": "intel-xe-hpg", "apple-m1-max-24": "apple-m1", "apple-m1-max-32": "apple-m1",
    "apple-m2-max-30": "apple-m2", "apple-m2-max": "apple-m2", "apple-m3-max": "apple-m3",
}


def families(gpusim):
    """Rates per clock by family, from `gpusim profiles families`."""
    out = subprocess.run([gpusim, "profiles", "families", "--dir", os.path.join(ROOT, "gpu_profiles")],
                         capture_output=True, text=True, check=True).stdout
    rates, name = {}, None
    for line in out.splitlines():
        if not line.startswith(" "):
            name = line.split()[0]
            rates[name] = {}
            continue
        kind, _, items = line.strip().partition(": ")
        for item in items.split(", "):
            key, value = item.rsplit(" ", 1)
            rates[name][("vector " if kind.startswith("vector") else "") + key] = float(value)
    return rates


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpusim", required=True)
    a = ap.parse_args()
    rates = families(a.gpusim)
    agree = 0
    for name, fam in sorted(FAMILY.items()):
        show = subprocess.run([a.gpusim, "profiles", "show", name, "--json", "--dir", os.path.join(ROOT, "gpu_profiles")],
                              capture_output=True, text=True, check=True).stdout
        c = json.loads(show)["compute"]
        per = c["units"] * c["boost_clock_mhz"] * 1e-6
        stated = {f"vector {d}": v for d, v in c["vector_tflops"].items()}
        stated.update({f"{m['dtype']}/{m['accumulate']}": m["tflops"] for m in c["matrix_tflops"]})
        checked = [(k, v, rates[fam][k] * per) for k, v in stated.items() if k in rates[fam]]
        off = [f"{k} {v:g} against {want:.4g}" for k, v, want in checked if abs(v / want - 1) > 0.02]
        agree += not off
        print(f"{name:24} {fam:25} {len(checked):2} peaks checked; {'; '.join(off) if off else 'all agree'}")
    print(f"{agree} of {len(FAMILY)} hand-written profiles agree with their family on every peak checked")


if __name__ == "__main__":
    main()
