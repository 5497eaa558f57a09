#!/usr/bin/env bash
# Regenerates tests/data/golden/*.json: one pinned prediction per case, from the built gpusim.
# Run after a deliberate change to the cost model, and say in the commit why the numbers moved.
# Usage: tools/update_golden.sh [path/to/gpusim]     (default build/bin/gpusim)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-build/bin/gpusim}
out=tests/data/golden
mkdir -p "$out"
# name | model | gpu | dtype | dims
cases=(
  "vae-decoder-rtx3060-fp16|models/sd15_vae_decoder_512.onnx|nvidia-rtx-3060|fp16|batch=1"
  "unet-h100-fp16|models/sd15_unet_64x64.onnx|nvidia-h100-sxm|fp16|batch=1"
  "unet-rx7900xtx-fp16|models/sd15_unet_64x64.onnx|amd-rx-7900-xtx|fp16|batch=1"
  "resnet50-t4-fp32|models/resnet50.onnx|nvidia-t4|fp32|"
  "bert-a100-fp16|models/bert_base_seq128.onnx|nvidia-a100-40gb|fp16|batch=8"
  "gpt2-mi300x-bf16|models/gpt2_prefill_seq512.onnx|amd-mi300x|bf16|batch=1"
  "mobilenet-m3max-fp32|models/mobilenet_v2.onnx|apple-m3-max|fp32|"
  "vit-rtx4090-fp16|models/vit_b_16.onnx|nvidia-rtx-4090|fp16|"
)
for c in "${cases[@]}"; do
  IFS='|' read -r name model gpu dtype dims <<<"$c"
  args=(predict "$model" --gpu "$gpu" --dtype "$dtype" --tiles library --json)  # the cost model's menu, as test_predict prices it
  [[ -n "$dims" ]] && args+=(--dim "$dims")
  "$bin" "${args[@]}" | python3 -c '
import json, sys
p = json.load(sys.stdin)
name, model, gpu, dtype, dims = sys.argv[1:6]
case = {
  "model": model, "gpu": gpu, "dtype": dtype,
  "dims": {k: int(v) for k, v in (d.split("=") for d in dims.split(",") if d)},
  "expected_total_us": round(p["total_us"], 3),
  "expected_kernels": p["kernel_count"],
  "tolerance": 0.005,
  "note": "pinned by tools/update_golden.sh; a change here must be deliberate",
}
json.dump(case, open(f"tests/data/golden/{name}.json", "w"), indent=2)
print("%s: %.3f ms, %d kernels" % (name, p["total_us"] / 1e3, p["kernel_count"]))
' "$name" "$model" "$gpu" "$dtype" "$dims"
done
