#!/usr/bin/env bash
# Makes the fixed sample of the timm whole-model data that CI validates against
# (tests/data/truth/timm-sample/): the CSV rows of five small models (two plain convnets, a mobile
# net, a ConvNeXt and a ViT) with their graphs and a manifest of just those. Deterministic.
# Usage: tools/make-timm-sample.sh [TIMM_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
src="${1:-../shared/truth/timm-e2e}"
out=tests/data/truth/timm-sample
models=(vgg11 resnet18 mobilenetv3_small_100 convnext_tiny deit_tiny_patch16_224)
mkdir -p "$out/models"
csv=$(ls "$src"/timm-*.csv)
{
  grep '^#' "$csv"
  awk '!/^#/ { print; exit }' "$csv"
  pattern=$(printf ',%s,|' "${models[@]}")
  grep -v '^#' "$csv" | tail -n +2 | grep -E "${pattern%|}"
} > "$out/$(basename "$csv")"
python3 - "$src/models/manifest.json" "$out/models/manifest.json" "${models[@]}" <<'PY'
import json, sys
src, dst, names = sys.argv[1], sys.argv[2], sys.argv[3:]
m = json.load(open(src))
m["models"] = {k: v for k, v in m["models"].items() if k in names}
m["note"] = m.get("note", "") + "; a sample of five models (tools/make-timm-sample.sh)"
json.dump(m, open(dst, "w"), indent=1, sort_keys=True)
PY
for name in "${models[@]}"; do
  f=$(python3 -c "import json,sys; print(json.load(open('$src/models/manifest.json'))['models']['$name']['file'])")
  cp "$src/models/$f" "$out/models/$f"
done
printf '%s\n' "Rows of timm's published benchmark CSVs (github.com/huggingface/pytorch-image-models, Apache-2.0) and graphs" \
  "exported from timm's models; how they were timed: ../shared/truth/timm-e2e/README.md beside a checkout." > "$out/NOTICE"
echo "sample: $(grep -v '^#' "$out"/timm-*.csv | tail -n +2 | wc -l) rows, ${#models[@]} graphs in $out"
