#!/usr/bin/env python3
"""The compile tier: every kernel of each bundled model's eager plan compiled for four NVIDIA and two
AMD architectures and to SPIR-V for two GPUs the Vulkan backend runs, with `gpusim codegen report`
(NVRTC, hiprtc and libshaderc, no GPU), and the compiled figures set against the cost model's
assumptions.

Fails when a report fails (a kernel that does not compile, a compiler that is missing), when the
share of NVIDIA kernels whose blocks per SM are as the cost model assumed falls under
--min-as-assumed, when more NVIDIA kernels spill than --max-spilling, or when fewer NVIDIA kernels
whose main loop runs on matrix instructions than --min-gates percent pass the machine-code gates
(their SASS, read with nvdisasm: loads in flight, no block barrier per epilogue fragment, no
volatile loads in loops; backends/compile_report.h), or fewer AMD ones than --min-amd-gates percent
(their code read with llvm-objdump: backends/hip/amdgcn.h). nvdisasm comes from PyPI
(tools/setup-tools-venv.sh); --nvdisasm or $GPUSIM_NVDISASM names it, else .venv-tools' is used. AMD and SPIR-V targets are
compiled and reported but not held to the other checks (bench/RESULTS.md "Compiled truth" has their figures;
SPIR-V states no registers or spills, so its blocks per unit check the workgroup size and shared
memory only, with the model's registers). A
target's dtype is fp32, fp16, or tf32 (fp32 with --allow-tf32: GEMMs and convolutions on wmma's
TF32 fragments). Prints one row per report and the totals per architecture as Markdown tables.

Usage: tools/compile_tier.py [--gpusim build-test/bin/gpusim] [--models m1,m2] [--targets gpu:dtype,...]
                             [--min-as-assumed 95] [--max-spilling 0] [--min-gates 95] [--min-amd-gates 95]
                             [--nvdisasm PATH]
                             [--json-dir DIR]
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import time

# One GPU per architecture, each compiled for its own: sm_80, sm_86, sm_90, sm_100; gfx90a (CDNA2), gfx1030
# (RDNA2). fp16 where the GPU has matrix units the generated kernels use (wmma, MFMA), fp32 beside;
# the fp32 matrix kernels too: TF32 on sm_80, fp32 MFMA on gfx90a. SPIR-V (Vulkan) for an Intel and
# an Apple GPU, whose generated kernels have no matrix path.
TARGETS = [
    ("nvidia-a100-40gb", "fp16"),
    ("nvidia-a100-40gb", "tf32"),
    ("nvidia-rtx-3060", "fp32"),
    ("nvidia-h100-sxm", "fp16"),
    ("nvidia-b200", "fp16"),
    ("amd-mi250x", "fp16"),
    ("amd-mi250x", "fp32"),
    ("amd-rx-6800-xt", "fp32"),
    ("intel-arc-a770", "fp16"),
    ("apple-m3-max", "fp32"),
]
MODELS = ["resnet50", "mobilenet_v2", "bert_base_seq128", "gpt2_prefill_seq512", "vit_b_16",
          "sd15_vae_decoder_512", "sd15_unet_64x64"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpusim", default="build-test/bin/gpusim")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--targets", default=",".join(f"{g}:{d}" for g, d in TARGETS))
    ap.add_argument("--min-as-assumed", type=float, default=None,
                    help="fail when fewer NVIDIA kernels than this percentage keep the blocks per SM assumed")
    ap.add_argument("--max-spilling", type=int, default=None, help="fail when more NVIDIA kernels than this spill")
    ap.add_argument("--min-gates", type=float, default=None,
                    help="fail when fewer NVIDIA matrix-path kernels than this percentage pass the machine-code gates")
    ap.add_argument("--min-amd-gates", type=float, default=None,
                    help="fail when fewer AMD matrix-path kernels (MFMA) than this percentage pass them (their "
                         "machine code read with llvm-objdump)")
    ap.add_argument("--nvdisasm", default=None, help="nvdisasm to read the SASS with (default: $GPUSIM_NVDISASM, "
                    "else .venv-tools')")
    ap.add_argument("--json-dir", default=None, help="keep each report's JSON here")
    a = ap.parse_args()
    env = dict(os.environ)
    nvdisasm = a.nvdisasm or env.get("GPUSIM_NVDISASM")
    if not nvdisasm:
        found = sorted(glob.glob(".venv-tools/lib/python*/site-packages/nvidia/*/bin/nvdisasm"))
        nvdisasm = os.path.abspath(found[-1]) if found else None
    if nvdisasm:
        env["GPUSIM_NVDISASM"] = nvdisasm
    elif a.min_gates is not None:
        print("compile_tier: --min-gates needs nvdisasm to read the SASS: run tools/setup-tools-venv.sh (PyPI's "
              "nvidia-cuda-nvdisasm into .venv-tools), or give --nvdisasm PATH", file=sys.stderr)
        return 2
    targets = []
    for t in a.targets.split(","):
        gpu, _, dtype = t.partition(":")
        if not gpu or dtype not in ("fp32", "fp16", "tf32"):
            print(f"compile_tier: --targets: \"{t}\" is not GPU:DTYPE with DTYPE fp32, fp16 or tf32 "
                  f"(nvidia-h100-sxm:fp16)", file=sys.stderr)
            return 2
        targets.append((gpu, dtype))
    models = [m for m in a.models.split(",") if m]
    for m in models:
        if not os.path.exists(f"models/{m}.onnx"):
            print(f"compile_tier: --models: models/{m}.onnx does not exist; the bundled models are in models/",
                  file=sys.stderr)
            return 2
    if a.json_dir:
        os.makedirs(a.json_dir, exist_ok=True)

    failed = []
    totals = {}
    gate_failures = []
    print("| GPU | arch | dtype | model | kernels compiled | as assumed | spilling | no matrix instr. | "
          "machine-code gates | s |")
    print("|---|---|---|---|---:|---:|---:|---:|---:|---:|")
    for gpu, dtype in targets:
        for m in models:
            cmd = [a.gpusim, "codegen", "report", f"models/{m}.onnx", "--gpu", gpu, "--dim", "batch=1",
                   "--dtype", "fp32" if dtype == "tf32" else dtype, "--json", "--no-store"]
            if dtype == "tf32":
                cmd.append("--allow-tf32")  # a check: the user's kernel cache is left as it was
            t0 = time.time()
            p = subprocess.run(cmd, capture_output=True, text=True, env=env)
            wall = time.time() - t0
            if p.returncode != 0:
                failed.append(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()[:2000]}")
                print(f"| {gpu} | ? | {dtype} | {m} | failed (exit {p.returncode}) | | | | | {wall:.0f} |", flush=True)
                continue
            r = json.loads(p.stdout)
            if a.json_dir:
                with open(os.path.join(a.json_dir, f"{gpu}.{dtype}.{m}.json"), "w") as f:
                    f.write(p.stdout)
            s = r["summary"]
            key = (gpu, r["arch"], dtype)
            tot = totals.setdefault(key, {"compiled": 0, "as": 0, "spilling": 0, "missing": 0, "matrix": 0,
                                          "gates": 0, "compiler": r["compiler"]})
            tot["matrix"] += s.get("matrix_kernels", 0)
            tot["gates"] += s.get("machine_code_gates_passed", 0)
            for k in r["kernels"]:
                for g in (k.get("machine_code") or {}).get("gate_failures", []):
                    gate_failures.append(f"{gpu} {r['arch']} {dtype} {m} #{k['index']} {k['name']}: {g}")
            tot["compiled"] += s["compiled"]
            tot["as"] += s["occupancy_as_assumed"]
            tot["spilling"] += s["spilling"] or 0  # null for SPIR-V
            tot["missing"] += s["missing_matrix_instructions"]
            pct = 100.0 * s["occupancy_as_assumed"] / max(1, s["compiled"])
            spills = "?" if r["arch"] == "spirv" else s["spilling"]  # SPIR-V states none: the driver's
            gates = (f"{s['machine_code_gates_passed']} of {s['matrix_kernels']}" if r.get("disassembler")
                     else "not read")
            print(f"| {gpu} | {r['arch']} | {dtype} | {m} | {s['compiled']} | {s['occupancy_as_assumed']} "
                  f"({pct:.1f}%) | {spills} | {s['missing_matrix_instructions']} | {gates} | {wall:.0f} |", flush=True)

    print()
    print("| GPU | arch | dtype | compiler | kernels compiled | as assumed | spilling | no matrix instr. | "
          "machine-code gates |")
    print("|---|---|---|---|---:|---:|---:|---:|---:|")
    sums = {}  # "NVIDIA", "AMD", "SPIR-V": compiled, as assumed, spilling
    for (gpu, arch, dtype), t in totals.items():
        pct = 100.0 * t["as"] / max(1, t["compiled"])
        print(f"| {gpu} | {arch} | {dtype} | {t['compiler']} | {t['compiled']} | {t['as']} ({pct:.1f}%) | "
              f"{'?' if arch == 'spirv' else t['spilling']} | {t['missing']} | "
              f"{t['gates']} of {t['matrix']} |")
        v = sums.setdefault("NVIDIA" if arch.startswith("sm_") else "AMD" if arch.startswith("gfx") else "SPIR-V",
                            [0, 0, 0, 0, 0])
        v[0] += t["compiled"]
        v[1] += t["as"]
        v[2] += t["spilling"]
        v[3] += t["matrix"]
        v[4] += t["gates"]
    for vendor, (c, n, sp, mk, gp) in sums.items():
        print(f"| all {vendor} | | | | {c} | {n} ({100.0 * n / max(1, c):.1f}%) | {'?' if vendor == 'SPIR-V' else sp} | | "
              f"{gp} of {mk} ({100.0 * gp / max(1, mk):.1f}%) |")
    if gate_failures:
        print()
        print(f"Machine-code gates failed ({len(gate_failures)}):")
        for g in gate_failures:
            print(f"- {g}")

    c, n, sp, mk, gp = sums.get("NVIDIA", [0, 0, 0, 0, 0])
    if a.min_gates is not None:
        if mk == 0:
            failed.append("no NVIDIA kernel's machine code was read with a matrix main loop: is nvdisasm working "
                          f"({nvdisasm})?")
        elif 100.0 * gp / mk < a.min_gates:
            failed.append(f"{gp} of {mk} NVIDIA matrix-path kernels ({100.0 * gp / mk:.1f}%) pass the machine-code "
                          f"gates, under --min-gates {a.min_gates:g}% (listed above)")
    if a.min_amd_gates is not None:
        _, _, _, amk, agp = sums.get("AMD", [0, 0, 0, 0, 0])
        if amk == 0:
            failed.append("no AMD kernel's machine code was read with a matrix main loop: is llvm-objdump installed "
                          "(tools/install-deps.sh: llvm; or $GPUSIM_LLVM_OBJDUMP)?")
        elif 100.0 * agp / amk < a.min_amd_gates:
            failed.append(f"{agp} of {amk} AMD matrix-path kernels ({100.0 * agp / amk:.1f}%) pass the machine-code "
                          f"gates, under --min-amd-gates {a.min_amd_gates:g}% (listed above)")
    pct = 100.0 * n / max(1, c)
    if a.min_as_assumed is not None and c > 0 and pct < a.min_as_assumed:
        failed.append(f"blocks per SM as assumed for {pct:.1f}% of the NVIDIA kernels, under --min-as-assumed "
                      f"{a.min_as_assumed:g}% (the kernels flagged \"occupancy\" in each report say which)")
    if a.max_spilling is not None and sp > a.max_spilling:
        failed.append(f"{sp} NVIDIA kernels spill, more than --max-spilling {a.max_spilling} (flagged \"spills\")")
    for f in failed:
        print(f"compile_tier: {f}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
