#!/usr/bin/env python3
"""Fit the host model's driver factors (runtimes/hosts/_model.yaml) on one workstation measured under
three operating systems, and score them leave-one-model-out.

The data (tools/hosts/matrixsp-rtx5090.csv): MatrixSP/pytorch-gpu-benchmark at commit 7aca843, one
RTX 5090 workstation (32 logical CPUs, 4.3 GHz base, 5.8 GHz max) under Windows 11 (WDDM), WSL2 and
Fedora 42; torchvision models, batch 12, PyTorch 2.7 eager, CUDA 12.8, cuDNN 9.7.1; each time is the
median of 50 timed forward passes (`model(img.to("cuda"))` between two synchronizes, so the input's
copy to the device is inside). `extract` rebuilds the CSV from a clone of that repository.

How: for each model and precision, gpusim predicts the pass (`--runtime pytorch-eager --gpu
nvidia-rtx-5090 --dim batch=12`, the timm graph of the same architecture from ../shared/truth/timm-e2e)
with the runtime's per-call host time scaled by a factor f, over a grid of f. The factor at which the
prediction equals the measurement is that row's host factor; a row whose prediction hardly moves with
f (its kernels, not the host, set its time) says nothing about the host and is left out. Each
system's factor is the median over its rows. The CPU is the same under all three, so

    driver_factor[wddm] = f(Windows) / f(Fedora),  driver_factor[wsl2] = f(WSL2) / f(Fedora)

and f(Fedora) itself is this CPU's factor against the reference hosts the runtime was fitted on
(reported, and compared with what the host model's CPU term says for it; not fitted into it).
Leave-one-model-out: each model's times predicted from the factors of the other models.

  tools/hosts/fit_hosts.py extract --repo PATH/pytorch-gpu-benchmark > tools/hosts/matrixsp-rtx5090.csv
  tools/hosts/fit_hosts.py neusight --truth ../shared/truth     # how much NeuSight's unnamed hosts differ
  tools/hosts/fit_hosts.py fit --gpusim build/bin/gpusim --truth ../shared/truth \
      [--write runtimes/hosts/_model.yaml] [--json bench/validate/hosts.json] [--check runtimes/hosts/_model.yaml]
"""
import argparse
import concurrent.futures
import csv
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "matrixsp-rtx5090.csv")
SOURCE = "github.com/MatrixSP/pytorch-gpu-benchmark@7aca8438887d1b3f7e80632acd8bfc26595d69a2 results/5090"
SYSTEMS = {"Fedora": "linux", "Win11": "wddm", "WSL": "wsl2"}
PRECISIONS = {"float": "fp32", "half": "fp16"}
# torchvision name -> the timm-e2e graph of the same architecture
GRAPHS = {
    "resnet18": "resnet18_224", "resnet34": "resnet34_224", "resnet50": "resnet50_224",
    "resnet101": "resnet101_224", "resnet152": "resnet152_224", "resnext50_32x4d": "resnext50_32x4d_224",
    "resnext101_32x8d": "resnext101_32x8d_224", "wide_resnet50_2": "wide_resnet50_2_224",
    "densenet121": "densenet121_224", "densenet169": "densenet169_224", "vgg11": "vgg11_224",
    "vgg16": "vgg16_224", "vgg16_bn": "vgg16_bn_224", "mobilenet_v3_large": "mobilenetv3_large_100_224",
    "mobilenet_v3_small": "mobilenetv3_small_100_224", "mnasnet1_0": "mnasnet_100_224",
}
# The workstation's CPU, inferred from its system_info.txt (32 logical CPUs, 4.3 GHz base, 5.8 GHz
# max: AMD Ryzen 9 9950X), and its Geekbench 6 single-core score (topcpu.net's aggregate as mirrored
# in github.com/lainbo/cpu-mark@48c7b975 src/assets/staticData/gb6SData.json).
WORKSTATION_ST = 3419
CPU_EXPONENT = 1.0  # assumed, not fitted: no published table changes only the CPU (README of runtimes/hosts)
MODEL_TEMPLATE = """\
# The host model (include/gpusim/host.h): how a described host scales a framework runtime's per-call
# host time. Written by the command in `fit`; do not edit the fitted figures by hand.
schema: gpusim.host-model/1
default_host: linux-reference
reference_single_thread: {reference}
cpu_exponent: 1
driver_factor: {{linux: 1, wddm: {wddm:.3f}, wsl2: {wsl2:.3f}, tcc: 1, macos: 1}}
fit: "tools/hosts/fit_hosts.py fit --gpusim build/bin/gpusim --truth ../shared/truth --write runtimes/hosts/_model.yaml --json bench/validate/hosts.json"
sources:
  reference_single_thread: "fitted, in-sample on one host: the Geekbench 6 single-core score at which a forward pass's op calls take the runtimes' fitted per-call figures; the RTX 5090 workstation of tools/hosts/matrixsp-rtx5090.csv (AMD Ryzen 9 9950X, GB6 {st}) under Fedora 42 takes {lin:.3f} of them (median over its {n} host-bound rows), and {lin:.3f} x {st} = {reference}. The runtimes' figures themselves were fitted on NeuSight's unnamed Linux hosts, timed op by op with CUDA events, which costs more a call than a forward pass"
  cpu_exponent: "assumed, not fitted: per-call host time inversely proportional to single-thread speed (the dispatch runs on one thread). No published table changes only the CPU under one GPU and software build; ExLlama's RTX 4090 figures (160 t/s on an i9-12900K, 75 t/s on a Ryzen 9 3900X, different harnesses) suggest at least this sensitivity"
  driver_factor: "wddm and wsl2 fitted on one workstation under three systems (tools/hosts/fit_hosts.py): factors {lin:.3f} (Fedora), {win:.3f} (Windows 11), {wsl:.3f} (WSL2) of the runtime's figures, so wddm = {win:.3f}/{lin:.3f}, wsl2 = {wsl:.3f}/{lin:.3f}; leave-one-model-out MAPE {mape_lin:.1f}% / {mape_win:.1f}% / {mape_wsl:.1f}% (bench/validate/hosts.json). tcc 1: NVIDIA's claim that TCC launches as Linux does (forums.developer.nvidia.com/t/kernel-launch-latency/62455), not measured. macos 1: no data (the PyTorch runtimes here are CUDA's)"
"""
GRID = [0.12 * (1.25 ** i) for i in range(19)]  # 0.12 .. 6.9
REF = 1000.0  # the scratch host model's reference: single_thread = REF / f gives factor f


def extract(repo):
    print("# source: " + SOURCE + " (MIT licence); median of each model's 50 timed passes, ms")
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(["system", "driver", "precision", "model", "median_ms", "runs"])
    for sysname, driver in SYSTEMS.items():
        for prec in PRECISIONS:
            path = os.path.join(repo, "results", "5090", sysname,
                                f"NVIDIA GeForce RTX 5090_1_gpus__{prec}_model_inference_benchmark.csv")
            with open(path) as f:
                rows = list(csv.reader(f))
            names = rows[0]
            for j, name in enumerate(names):
                if name not in GRAPHS:
                    continue
                v = [float(r[j]) for r in rows[1:] if j < len(r) and r[j]]
                out.writerow([sysname, driver, PRECISIONS[prec], name, f"{statistics.median(v):.4f}", len(v)])


def predict_ms(gpusim, graph, dtype, f, env):
    cmd = [gpusim, "predict", graph, "--gpu", "nvidia-rtx-5090", "--runtime", "pytorch-eager", "--dim", "batch=12",
           "--dtype", dtype, "--host", f"single_thread={REF / f:.6g}", "--json"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: {r.stderr.strip()}")
    doc = json.loads(r.stdout)
    return doc["total_us"] / 1e3


def solve(curve, measured):
    """The factor at which the curve (f -> ms, increasing) equals `measured`, log-interpolated; None
    outside the grid."""
    for (f0, t0), (f1, t1) in zip(curve, curve[1:]):
        if t0 <= measured <= t1 and t1 > t0:
            a = (math.log(measured) - math.log(t0)) / (math.log(t1) - math.log(t0))
            return math.exp(math.log(f0) + a * (math.log(f1) - math.log(f0)))
    return None


def at(curve, f):
    """The curve's time at factor f, log-interpolated."""
    for (f0, t0), (f1, t1) in zip(curve, curve[1:]):
        if f0 <= f <= f1:
            a = (math.log(f) - math.log(f0)) / (math.log(f1) - math.log(f0))
            return math.exp(math.log(t0) + a * (math.log(t1) - math.log(t0)))
    return curve[0][1] if f < curve[0][0] else curve[-1][1]


def fit(args):
    rows = []
    with open(DATA) as f:
        for r in csv.DictReader(line for line in f if not line.startswith("#")):
            rows.append(r)
    scratch = tempfile.mkdtemp(prefix="gpusim-hosts-")
    with open(os.path.join(scratch, "_model.yaml"), "w") as f:
        f.write("schema: gpusim.host-model/1\ndefault_host: scratch\nreference_single_thread: %g\ncpu_exponent: 1\n"
                "driver_factor: {linux: 1, wddm: 1, tcc: 1, wsl2: 1, macos: 1}\n"
                "sources: {reference_single_thread: fit, cpu_exponent: fit, driver_factor: fit}\n" % REF)
    env = dict(os.environ, GPUSIM_HOST_PATH=scratch)
    pairs = sorted({(r["model"], r["precision"]) for r in rows})
    models_dir = os.path.join(args.truth, "timm-e2e", "models")
    if not os.path.isdir(models_dir):
        print(f"{models_dir} is absent: nothing to fit on (skipped)")
        sys.exit(77)
    # The scratch host model is the one in effect: factor 1 prices as no host at all.
    probe = os.path.join(models_dir, GRAPHS[pairs[0][0]] + ".onnx")
    plain = subprocess.run([args.gpusim, "predict", probe, "--gpu", "nvidia-rtx-5090", "--runtime", "pytorch-eager",
                            "--dim", "batch=12", "--dtype", pairs[0][1], "--json"], capture_output=True, text=True)
    if plain.returncode != 0:
        raise SystemExit(plain.stderr.strip())
    at_one = predict_ms(args.gpusim, probe, pairs[0][1], 1.0, env)
    if abs(at_one / (json.loads(plain.stdout)["total_us"] / 1e3) - 1) > 1e-9:
        raise SystemExit(f"the scratch host model in {scratch} is not the one gpusim used (factor 1 gave {at_one} ms)")
    curves = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as ex:
        futs = {}
        for model, prec in pairs:
            graph = os.path.join(args.truth, "timm-e2e", "models", GRAPHS[model] + ".onnx")
            for f in GRID:
                futs[ex.submit(predict_ms, args.gpusim, graph, prec, f, env)] = (model, prec, f)
        for fut, key in futs.items():
            curves.setdefault(key[:2], []).append((key[2], fut.result()))
    for k in curves:
        curves[k].sort()
    # Rows whose time the host decides: the prediction at least 1.5x longer at the grid's top than at
    # its bottom.
    host_bound = {k for k, c in curves.items() if c[-1][1] / c[0][1] >= 1.5}
    solved = {}
    for r in rows:
        key = (r["model"], r["precision"])
        if key in host_bound:
            solved[(r["driver"],) + key] = solve(curves[key], float(r["median_ms"]))

    def system_factor(driver, leave=None):
        v = [x for (d, m, p), x in solved.items() if d == driver and m != leave and x is not None]
        return statistics.median(v) if v else None

    factors = {d: system_factor(d) for d in SYSTEMS.values()}
    drivers = {d: factors[d] / factors["linux"] for d in ("wddm", "wsl2")}
    # Leave one model out: each row predicted from the other models' factors.
    errors = {d: [] for d in SYSTEMS.values()}
    table = []
    for r in rows:
        key = (r["model"], r["precision"])
        f = system_factor(r["driver"], leave=r["model"])
        pred = at(curves[key], f)
        meas = float(r["median_ms"])
        err = pred / meas - 1
        if key in host_bound:
            errors[r["driver"]].append(err)
        table.append({"system": r["system"], "driver": r["driver"], "precision": r["precision"], "model": r["model"],
                      "measured_ms": meas, "predicted_ms": round(pred, 4), "error": round(err, 4),
                      "host_bound": key in host_bound, "row_factor": solved.get((r["driver"],) + key)})
    report = {
        "source": SOURCE,
        "command": "tools/hosts/fit_hosts.py fit --gpusim build/bin/gpusim --truth ../shared/truth",
        "system_factor": {d: round(v, 4) for d, v in factors.items()},
        "driver_factor": {d: round(v, 4) for d, v in drivers.items()},
        "host_bound_rows": {d: len(v) for d, v in errors.items()},
        "leave_one_model_out": {
            d: {"mape": round(statistics.mean(abs(e) for e in v), 4), "bias": round(statistics.mean(v), 4),
                "median_ape": round(statistics.median(abs(e) for e in v), 4)}
            for d, v in errors.items() if v},
        "rows": table,
    }
    print(f"system factors (per-call host time against the reference hosts): "
          + ", ".join(f"{d} {v:.3f}" for d, v in factors.items()))
    print("driver factors: " + ", ".join(f"{d} {v:.3f}" for d, v in drivers.items()))
    for d, v in report["leave_one_model_out"].items():
        print(f"leave one model out, {d}: {report['host_bound_rows'][d]} host-bound rows, MAPE {100 * v['mape']:.1f}%, "
              f"bias {100 * v['bias']:+.1f}%, median {100 * v['median_ape']:.1f}%")
    print(f"{'system':<7} {'prec':<5} {'model':<20} {'meas ms':>8} {'pred ms':>8} {'err':>7} {'row f':>6}")
    for t in table:
        rf = f"{t['row_factor']:.2f}" if t["row_factor"] else "-"
        print(f"{t['system']:<7} {t['precision']:<5} {t['model']:<20} {t['measured_ms']:>8.2f} {t['predicted_ms']:>8.2f} "
              f"{100 * t['error']:>+6.1f}% {rf:>6}{'' if t['host_bound'] else '  (kernel-bound)'}")
    # The reference: the single-thread score at which a forward pass's calls take the runtime's
    # fitted figures, from this workstation's Linux factor under the model's CPU term (exponent 1).
    reference = factors["linux"] ** (1 / CPU_EXPONENT) * WORKSTATION_ST
    report["reference_single_thread"] = round(reference)
    print(f"reference single-thread score: {reference:.0f} (this workstation's {WORKSTATION_ST} x its Linux factor "
          f"{factors['linux']:.3f})")
    if args.write:
        with open(args.write, "w") as f:
            f.write(MODEL_TEMPLATE.format(reference=round(reference), wddm=drivers["wddm"], wsl2=drivers["wsl2"],
                                          lin=factors["linux"], win=factors["wddm"], wsl=factors["wsl2"],
                                          st=WORKSTATION_ST,
                                          n=report["host_bound_rows"]["linux"],
                                          mape_lin=100 * report["leave_one_model_out"]["linux"]["mape"],
                                          mape_win=100 * report["leave_one_model_out"]["wddm"]["mape"],
                                          mape_wsl=100 * report["leave_one_model_out"]["wsl2"]["mape"]))
    if args.check:
        # The committed host model and report are what this data and this cost model fit.
        with open(args.check) as f:
            text = f.read()
        committed = {}
        for line in text.splitlines():
            if line.startswith("reference_single_thread:"):
                committed["reference"] = float(line.split(":")[1])
            if line.startswith("driver_factor:"):
                for kv in line.split("{")[1].split("}")[0].split(","):
                    k, v = kv.split(":")
                    committed[k.strip()] = float(v)
        bad = []
        for key, now in (("reference", reference), ("wddm", drivers["wddm"]), ("wsl2", drivers["wsl2"])):
            was = committed.get(key)
            if was is None or abs(now / was - 1) > args.tolerance:
                bad.append(f"{key}: committed {was}, fitted now {now:.4g}")
        if bad:
            sys.exit(f"{args.check} is stale ({'; '.join(bad)}); refit with the command in its `fit`")
        print(f"{args.check}: the committed coefficients are what the data fit now (within {100 * args.tolerance:.0f}%)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2, sort_keys=True)
            f.write("\n")


TRIVIAL_OPS = ["add", "addu", "div", "divu", "gelu", "ln", "mul", "mulu", "pow", "powu", "relu", "softmax", "tanh"]


def neusight(args):
    """How much unnamed hosts differ: each NeuSight GPU's host (torch 2.1 on NVIDIA, 2.4.1 on AMD; CPUs
    not named) by the median time of its trivial rows (at most 1 MiB moved: the host's time a call),
    and each predicted by the median of the other hosts of its vendor, as the default host would."""
    import lzma
    floors = {}
    for op in TRIVIAL_OPS:
        path = os.path.join(args.truth, "neusight-train", op + ".csv.xz")
        if not os.path.exists(path):
            continue
        with lzma.open(path, "rt") as f:
            for r in csv.DictReader(f):
                if int(r["b"]) * int(r["h"]) * 4 * 3 <= 1 << 20:
                    floors.setdefault(r["device"], []).append(float(r["latency_ms"]) * 1e3)
    if not floors:
        print(f"{args.truth}/neusight-train is absent (skipped)")
        sys.exit(77)
    med = {g: statistics.median(v) for g, v in floors.items()}
    print(f"{'host (by its GPU)':<26} {'rows':>5} {'us a call':>9} {'others':>7} {'error':>7}")
    errs = {}
    for g in sorted(med):
        vendor = g.split()[0] == "AMD"
        others = [v for h, v in med.items() if h != g and (h.split()[0] == "AMD") == vendor]
        pred = statistics.median(others)
        err = pred / med[g] - 1
        errs.setdefault("amd" if vendor else "nvidia", []).append(err)
        print(f"{g:<26} {len(floors[g]):>5} {med[g]:>9.2f} {pred:>7.2f} {100 * err:>+6.1f}%")
    for v, e in errs.items():
        if len(e) > 1:
            print(f"leave one host out, {v}: {len(e)} hosts, MAPE {100 * statistics.mean(abs(x) for x in e):.1f}%")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("extract")
    e.add_argument("--repo", required=True)
    f = sub.add_parser("fit")
    f.add_argument("--gpusim", default="build/bin/gpusim")
    f.add_argument("--truth", default="../shared/truth")
    f.add_argument("--json")
    f.add_argument("--write", help="write the host model (runtimes/hosts/_model.yaml)")
    f.add_argument("--check", help="fail unless this host model's coefficients are what the data fit now")
    f.add_argument("--tolerance", type=float, default=0.03)
    f.add_argument("--jobs", type=int, default=2)
    n = sub.add_parser("neusight")
    n.add_argument("--truth", default="../shared/truth")
    a = ap.parse_args()
    if a.cmd == "extract":
        extract(a.repo)
    elif a.cmd == "neusight":
        neusight(a)
    else:
        fit(a)


if __name__ == "__main__":
    main()
