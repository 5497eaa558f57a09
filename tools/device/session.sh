#!/usr/bin/env bash
# One lease's measurements on a lent NVIDIA GPU, run there from the repository root after
# tools/device/pack.sh here (see tools/device/README.md). Each step has a time limit and the whole
# script a deadline (DEADLINE_S, default 530 s): later steps are skipped when time runs short.
# Everything lands in /tmp/r, tarred to $OUT/results.tar after every step, so what finished comes
# back even if the call is cut off. Never touches the card's clocks or settings.
set -u
source "$(dirname "$0")/lib.sh" 530
root=$PWD
export LD_LIBRARY_PATH=$root/.dev/lib
mkdir -p .dev/share/gpusim
ln -sfn "$root/gpu_profiles" .dev/share/gpusim/gpu_profiles
ln -sfn "$root/runtimes" .dev/share/gpusim/runtimes
[[ -e /work/main ]] || { mkdir -p /work && ln -s "$root" /work/main; }   # the tests' compiled-in source dir
export GPUSIM_KERNEL_CACHE_DIR=/tmp/kc HOME=/tmp/home XDG_CONFIG_HOME=/tmp/home/.config
mkdir -p /tmp/home
G=$root/.dev/bin/gpusim
PY=python3

step "machine"
{
  nvidia-smi --query-gpu=name,driver_version,pci.bus_id,clocks.sm,clocks.max.sm,clocks.mem,power.draw,power.limit,temperature.gpu,memory.total --format=csv
  nvcc --version | tail -2
  cu=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")"); echo "cuda root $cu"; ls "$cu"/lib64/libnvrtc.so* 2>&1 | head -3
  $PY -c 'import torch, timm; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version(), "timm", timm.__version__)'
  ldd "$G" | grep 'not found'
  nproc; date -u
} > "$R/machine.txt" 2>&1
export CUDA_HOME=$cu
cat "$R/machine.txt"
save

step "CUDA tests"
timeout "$(lim 60)" .dev/bin/gpusim_tests "[cuda]" > "$R/tests_cuda.txt" 2>&1; echo "rc=$?" >> "$R/tests_cuda.txt"
tail -3 "$R/tests_cuda.txt"; save

runm() {  # name, limit, args...
  local name=$1 l=$2; shift 2
  (( $(left) < 20 )) && { echo "skip $name"; return; }
  local s=$(date +%s)
  timeout "$(lim "$l")" "$G" run "$@" --backend cuda --gpu nvidia-h200 --json --quiet > "$R/run_$name.json" 2> "$R/run_$name.err"
  local rc=$?
  echo "$name rc=$rc $(( $(date +%s) - s ))s $($PY -c "import json,sys; d=json.load(open('$R/run_$name.json')); print('total_us', round(d['total_us'],1), 'predicted_us', round(d['predicted_us'],1), 'compile_ms', round(d['compile']['compile_ms']), 'check', [(c['output'], c['pass'], '%.2g' % c['relative_l2']) for c in d.get('check', [])][:3])" 2>/dev/null) $(tail -c 300 "$R/run_$name.err")" | tee -a "$R/runs.txt"
  save
}
step "bundled models, generated kernels, --check against the CPU reference"
for m in resnet50 mobilenet_v2 vit_b_16; do
  runm "${m}_fp32" 90 "models/$m.onnx" --check --repeat 10
  runm "${m}_tf32" 90 "models/$m.onnx" --check --repeat 10 --allow-tf32
  runm "${m}_fp16" 90 "models/$m.onnx" --check --repeat 10 --dtype fp16
done

step "the same GEMM-like nodes through PyTorch (cuBLAS, cuDNN)"
(( $(left) > 60 )) && timeout "$(lim 90)" $PY tools/device/torch_measure.py nodes --nodes .dev/nodes.json --out "$R/library_nodes.json" --budget-s 60 2>&1 | tail -12
save

step "calibrate"
if (( $(left) > 90 )); then
  timeout "$(lim 150)" "$G" calibrate --backend cuda --base nvidia-h200 --force-base --out "$R/nvidia-h200-calibrated.yaml" > "$R/calibrate.txt" 2>&1
  echo "rc=$?" >> "$R/calibrate.txt"; tail -25 "$R/calibrate.txt"
fi
save

step "more bundled models"
runm bert_fp32 60 models/bert_base_seq128.onnx --dim batch=1 --check --repeat 10
runm gpt2_fp32 90 models/gpt2_prefill_seq512.onnx --dim batch=1 --check --repeat 5
runm vae128_fp32 90 models/sd15_vae_decoder_512.onnx --dim batch=1 --dim latent:2=16 --dim latent:3=16 --check --repeat 5
runm unet_fp16 60 models/sd15_unet_64x64.onnx --dim batch=1 --dtype fp16 --repeat 3

step "per-op sweep, NeuSight's method"
(( $(left) > 50 )) && timeout "$(lim 70)" $PY tools/device/torch_measure.py sweep --configs .dev/sweep.json --out "$R/neusight-h200" --budget-s 45 > "$R/sweep.txt" 2>&1; tail -5 "$R/sweep.txt"
save

step "timm models, eager and compiled"
if (( $(left) > 40 )); then
  b=$(( $(left) - 15 ))
  timeout "$(lim $(( b + 10 )))" $PY tools/device/torch_measure.py timm --out "$R/timm-h200.csv" --budget-s "$b" > "$R/timm.txt" 2>&1
  cat "$R/timm.txt" | grep -v Warning | tail -14
fi
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv >> "$R/machine.txt" 2>&1
save
step "done"
