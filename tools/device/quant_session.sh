#!/usr/bin/env bash
# Quantized kernels on a lent NVIDIA GPU (issue 34), run there from the repository root after
# tools/device/pack.sh here: the CUDA and quantized tests, then gpusim's generated dequantize-in-GEMM
# kernels for Llama-7B's projections (tools/device/quant_models.py: Q4_0 and Q8_0 as MatMulNBits,
# int8 QDQ) run with --check at 1 row and timed at 512. Deadline DEADLINE_S (default 300 s); results
# in /tmp/r, tarred to $OUT/results.tar after every step. Never touches the card's clocks or settings.
set -u
source "$(dirname "$0")/lib.sh" 300
mkdir -p "$R/runs"
root=$PWD
export LD_LIBRARY_PATH=$root/.dev/lib PYTHONUNBUFFERED=1
mkdir -p .dev/share/gpusim
ln -sfn "$root/gpu_profiles" .dev/share/gpusim/gpu_profiles
ln -sfn "$root/runtimes" .dev/share/gpusim/runtimes
[[ -e /work/main ]] || { mkdir -p /work && ln -s "$root" /work/main; }
export GPUSIM_KERNEL_CACHE_DIR=/tmp/kc HOME=/tmp/home XDG_CONFIG_HOME=/tmp/home/.config
mkdir -p /tmp/home
G=$root/.dev/bin/gpusim
mkdir -p build-test/bin && ln -sfn "$G" build-test/bin/gpusim   # the tests' compiled-in CLI path

step "machine"
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv; date -u; } > "$R/machine.txt" 2>&1
cat "$R/machine.txt"; save

step "tests: [cuda] and [quantized]"
timeout "$(lim 90)" .dev/bin/gpusim_tests "[cuda],[quantized]" > "$R/tests.txt" 2>&1; echo "rc=$?" >> "$R/tests.txt"
tail -3 "$R/tests.txt"; save

step "models"
python3 tools/device/quant_models.py /tmp/qm > /dev/null || exit 1
step "runs"
for f in /tmp/qm/*_m1.onnx /tmp/qm/*_m512.onnx; do
  b=$(basename "$f" .onnx)
  for mode in fp32 fp16; do
    (( $(left) < 15 )) && { echo "skip $b $mode"; continue; }
    args=(--repeat 20); [[ $b == *_m1 ]] && args+=(--check)
    [[ $mode == fp16 ]] && args+=(--dtype fp16)
    [[ $b == *_m512 && $mode == fp32 ]] && continue
    if [[ $b == int8_* ]]; then  # QDQ: also the planned (fused: dequantize-into-gemm) plan
      "$G" plan "$f" --gpu nvidia-h200 $([[ $mode == fp16 ]] && echo --dtype fp16) --out "/tmp/${b}_$mode.plan.json" > /dev/null 2>&1 &&
        args+=(--plan "/tmp/${b}_$mode.plan.json")
    fi
    timeout "$(lim 40)" "$G" run "$f" --backend cuda --gpu nvidia-h200 --json --quiet "${args[@]}" > "$R/runs/${b}_$mode.json" 2> "$R/runs/${b}_$mode.err"
    echo "$b $mode rc=$? $(python3 -c "import json; d=json.load(open('$R/runs/${b}_$mode.json')); print('measured_us', round(d['total_us'],1), 'predicted_us', round(d['predicted_us'],1), [(k.get('name','')[:30], round(k.get('measured_us', 0),1)) for k in d['kernels']][:3], 'check', [(c['output'], c['pass'], '%.2g' % c['relative_l2']) for c in d.get('check', [])])" 2>/dev/null) $(tail -c 200 "$R/runs/${b}_$mode.err")" | tee -a "$R/runs.txt"
  done
  save
done
step "done"
