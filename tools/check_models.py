#!/usr/bin/env python3
"""Runs every documented command on every bundled model and reports any that fails.

For each models/*.onnx (symbolic dims set to 1, as the model's own error message asks): inspect, predict (fp32 and
fp16, text and --json, with a trace), compare, plan --out, the `gpusim predict ... --plan` command plan prints (run
as printed), and with --run BACKEND also `run --backend BACKEND --check --repeat 1` with the eager plan and with the
searched one, and `tune` (two candidates a kernel, a 60 s budget) with the tuned plan run and checked. Exits 1
naming each command that failed, with its output.

Usage:
    tools/check_models.py --gpusim build/bin/gpusim [--run vulkan|cuda|hip|cpu [--run-gpu PROFILE]] [--gpu nvidia-t4]
                          [--only NAME]

The planned run uses a plan made for --run-gpu, the profile of the device that runs it (default lavapipe for
--run vulkan; needed for cuda and hip, e.g. nvidia-h100-sxm): a plan's tiles are chosen for one GPU's limits.

Without --run it takes about a minute on two cores; --run vulkan on lavapipe takes hours (the SD UNet and VAE decoder
are hundreds of GFLOPs a run on a CPU), --run cuda on a GPU minutes.
"""
import argparse
import glob
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time


# Models whose weights are over this are not run (predicted, planned and inspected only): the
# reference checking a run would hold 4x their fp16 bytes in fp64 on the host.
RUN_MAX_PARAM_BYTES = 2e9


def inspect_json(gpusim, rel, dims, repo, env):
    r = subprocess.run([gpusim, "inspect", rel, "--json"] + dims, cwd=repo, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, text=True)
    try:
        return json.loads(r.stdout)
    except ValueError:
        return {}



def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpusim", required=True)
    ap.add_argument("--run", choices=["vulkan", "cuda", "hip", "cpu"], help="also run each model on this backend")
    ap.add_argument("--gpu", default="nvidia-t4", help="the profile predictions and plans use (default nvidia-t4)")
    ap.add_argument("--run-gpu", help="profile of the device --run uses, for the planned run (default: lavapipe "
                                      "for vulkan)")
    ap.add_argument("--only", action="append", help="only this model (file stem; repeatable)")
    args = ap.parse_args()
    if args.run == "vulkan" and not args.run_gpu:
        args.run_gpu = "lavapipe"
    if args.run in ("cuda", "hip") and not args.run_gpu:
        sys.exit(f"--run {args.run} needs --run-gpu PROFILE: the profile of the device, to plan for it")
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    gpusim = os.path.abspath(args.gpusim)
    if not os.access(gpusim, os.X_OK):
        sys.exit(f"--gpusim {args.gpusim}: not an executable program; build it first")
    models = sorted(glob.glob(os.path.join(repo, "models", "*.onnx")))
    if args.only:
        models = [m for m in models if os.path.splitext(os.path.basename(m))[0] in args.only]
    if not models:
        sys.exit("no models to check (models/*.onnx, --only)")
    tmp = tempfile.mkdtemp(prefix="gpusim-models-")
    env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(tmp, "config"))
    failures, ran = [], 0

    def run(cmd, timeout=None):
        nonlocal ran
        ran += 1
        t0 = time.time()
        r = subprocess.run(cmd, cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           errors="replace", timeout=timeout)
        line = " ".join(shlex.quote(c) for c in cmd)
        print(f"{'ok  ' if r.returncode == 0 else 'FAIL'} {time.time() - t0:7.1f} s  {line}", flush=True)
        if r.returncode != 0:
            failures.append((line, r.returncode, r.stdout[-3000:]))
        return r

    for path in models:
        name = os.path.splitext(os.path.basename(path))[0]
        rel = os.path.relpath(path, repo)
        probe = subprocess.run([gpusim, "inspect", rel], cwd=repo, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
        dims = []
        for d in sorted(set(re.findall(r"set it with --dim (\w+)=N", probe.stdout))):
            dims += ["--dim", f"{d}=1"]
        plan = os.path.join(tmp, name + ".plan.json")
        run([gpusim, "inspect", rel] + dims)
        run([gpusim, "inspect", rel, "--json"] + dims)
        run([gpusim, "predict", rel, "--gpu", args.gpu, "--trace", os.path.join(tmp, name + ".trace.json")] + dims)
        run([gpusim, "predict", rel, "--gpu", args.gpu, "--dtype", "fp16", "--json"] + dims)
        run([gpusim, "compare", rel, "--gpus", f"{args.gpu},nvidia-h100-sxm,amd-mi300x", "--dtype", "fp16"] + dims)
        r = run([gpusim, "plan", rel, "--gpu", args.gpu, "--dtype", "fp16", "--out", plan] + dims)
        # The command plan prints to score its plan must run as printed.
        hint = re.search(r"score it with:\n  (gpusim predict .*)", r.stdout)
        if r.returncode == 0:
            if not hint:
                failures.append((f"plan {rel}", 0, "plan --out printed no `gpusim predict ... --plan` command"))
            else:
                words = shlex.split(hint.group(1))
                run([gpusim] + words[1:])
        summary = inspect_json(gpusim, rel, dims, repo, env)
        # A decoder with a KV cache also predicts a generation, pass by pass.
        if any("past_key_values" in i.get("name", "") for i in summary.get("inputs", [])):
            run([gpusim, "predict", rel, "--gpu", args.gpu, "--prompt", "16", "--generate", "4"])
            run([gpusim, "predict", rel, "--gpu", args.gpu, "--prompt", "16", "--generate", "4", "--json"])
        params = summary.get("params", {}).get("bytes", 0)
        if args.run and params > RUN_MAX_PARAM_BYTES:
            print(f"skip run {rel}: {params / 1e9:.1f} GB of weights; the CPU reference that checks a run holds "
                  f"every weight in 8 bytes (fp64 or int64)", flush=True)
        elif args.run:
            backend = ["--backend", args.run]
            run([gpusim, "run", rel, "--check", "--repeat", "1", "--quiet"] + backend + dims)
            if args.run != "cpu":
                device_plan = os.path.join(tmp, name + ".device.plan.json")
                if run([gpusim, "plan", rel, "--gpu", args.run_gpu, "--out", device_plan] + dims).returncode == 0:
                    run([gpusim, "run", rel, "--check", "--repeat", "1", "--quiet", "--plan", device_plan,
                         "--gpu", args.run_gpu] + backend + dims)
                # Autotuning, bounded (two candidates a kernel, a minute at most), then the tuned plan checked.
                tuned = os.path.join(tmp, name + ".tuned.plan.json")
                store = os.path.join(tmp, "tuning.db")
                if run([gpusim, "tune", rel, "--top-k", "2", "--budget-s", "60", "--repeat", "0", "--quiet",
                        "--store", store, "--out", tuned] + backend + dims).returncode == 0:
                    run([gpusim, "run", rel, "--check", "--repeat", "1", "--quiet", "--plan", tuned] + backend + dims)
    print(f"\n{ran} commands on {len(models)} models, {len(failures)} failed")
    for line, rc, out in failures:
        print(f"\nFAIL (exit {rc}): {line}\n{out}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
