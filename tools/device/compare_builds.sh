#!/usr/bin/env bash
# Generated kernels of several gpusim builds on one lent GPU, run there from the repository root:
# each build (a stripped binary, xz-compressed, in .dev/builds/NAME.xz; the shared libraries in
# .dev/lib from tools/device/pack.sh) runs ResNet-50, MobileNetV2 and ViT-B/16 at batch 1 in fp32,
# TF32 and fp16 with `gpusim run --backend cuda --check --repeat 10 --json`, builds interleaved
# model by model so that they see the same machine. Results: $OUT/results.tar (runs/NAME_MODEL_MODE.json).
#   BUILDS="B A C" DEADLINE_S=330 tools/device/compare_builds.sh
set -u
T0=$(date +%s); D=${DEADLINE_S:-330}
O=${OUT:-/tmp/out}; R=/tmp/runs; mkdir -p "$O" "$R"
root=$PWD
export LD_LIBRARY_PATH=$root/.dev/lib HOME=/tmp/home
mkdir -p /tmp/home /tmp/bin
for b in ${BUILDS:-B A C}; do
  xz -dc ".dev/builds/$b.xz" > "/tmp/bin/$b" && chmod +x "/tmp/bin/$b"
done
# The binaries find their data at ../share/gpusim beside them.
mkdir -p /tmp/share/gpusim && ln -sfn "$root/gpu_profiles" /tmp/share/gpusim/gpu_profiles && ln -sfn "$root/runtimes" /tmp/share/gpusim/runtimes
export CUDA_HOME=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu --format=csv,noheader
for m in resnet50 mobilenet_v2 vit_b_16; do
  for mode in fp32 tf32 fp16; do
    case $mode in fp32) f=();; tf32) f=(--allow-tf32);; fp16) f=(--dtype fp16);; esac
    for b in ${BUILDS:-B A C}; do
      left=$(( D - ($(date +%s) - T0) )); (( left < 15 )) && { echo "skip $b $m $mode"; continue; }
      s=$(date +%s)
      GPUSIM_KERNEL_CACHE_DIR=/tmp/kc_$b timeout "$left" "/tmp/bin/$b" run "models/$m.onnx" --backend cuda --gpu nvidia-h200 \
        "${f[@]}" --check --repeat 10 --json --quiet > "$R/${b}_${m}_${mode}.json" 2> "$R/${b}_${m}_${mode}.err"
      rc=$?
      echo "$b $m $mode rc=$rc $(( $(date +%s) - s ))s $(python3 -c "import json; d=json.load(open('$R/${b}_${m}_${mode}.json')); print('total_us %.1f predicted_us %.1f' % (d['total_us'], d['predicted_us']), [(c['pass'], '%.2g' % c['relative_l2']) for c in d.get('check', [])])" 2>/dev/null) $(tail -c 200 "$R/${b}_${m}_${mode}.err")"
    done
    tar -C /tmp -cf "$O/results.tar" runs
  done
done
