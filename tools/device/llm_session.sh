#!/usr/bin/env bash
# Language-model measurements on a lent NVIDIA GPU (issue 34), run there from the repository root
# after tools/device/pack.sh here: the CUDA tests, matrix-unit rates by type, the batch-1 GEMV sweep
# and eager PyTorch generation (tools/device/llm_measure.py). Each step has a time limit and the
# whole a deadline (DEADLINE_S, default 400 s); results land in /tmp/r, tarred to $OUT/results.tar
# after every step. Never touches the card's clocks or settings.
set -u
source "$(dirname "$0")/lib.sh" 400
root=$PWD
export LD_LIBRARY_PATH=$root/.dev/lib PYTHONUNBUFFERED=1
[[ -e /work/main ]] || { mkdir -p /work && ln -s "$root" /work/main; }
export GPUSIM_KERNEL_CACHE_DIR=/tmp/kc HOME=/tmp/home XDG_CONFIG_HOME=/tmp/home/.config
mkdir -p /tmp/home
PY=python3

step "machine"
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,power.limit,temperature.gpu,memory.total --format=csv
  $PY -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.version.cuda, "transformers", transformers.__version__)'
  date -u
} > "$R/machine.txt" 2>&1
cat "$R/machine.txt"; save

step "CUDA tests"
timeout "$(lim 60)" .dev/bin/gpusim_tests "[cuda]" > "$R/tests_cuda.txt" 2>&1; echo "rc=$?" >> "$R/tests_cuda.txt"
tail -3 "$R/tests_cuda.txt"; save

step "matrix rates by type"
timeout "$(lim 60)" $PY tools/device/llm_measure.py rates --out "$R/rates.json" 2>&1 | tee "$R/rates.txt"; save

step "GEMV sweep, cold weights"
timeout "$(lim 100)" $PY tools/device/llm_measure.py gemv --out "$R/gemv.json" --budget-s $(( $(lim 100) - 15 )) > "$R/gemv.txt" 2>&1
tail -4 "$R/gemv.txt"; save

step "eager generation"
(( $(left) > 40 )) && timeout "$(lim 200)" $PY tools/device/llm_measure.py generate --out "$R/generate.json" \
  --budget-s $(( $(lim 200) - 50 )) 2>&1 | grep -v Warning | tee "$R/generate.txt"
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv >> "$R/machine.txt" 2>&1
save
step "done"
