#!/usr/bin/env bash
# Makes the fixed sample of the NeuSight training data that CI validates against
# (tests/data/truth/neusight-sample/): the header and every 50th row of each CSV, xz-compressed.
# Deterministic: the same input gives the same files. Usage: tools/make-truth-sample.sh [TRUTH_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
src="${1:-../shared/truth/neusight-train}"
out=tests/data/truth/neusight-sample
mkdir -p "$out"
for f in "$src"/*.csv.xz; do
  xz -dc "$f" | awk 'NR == 1 || (NR - 2) % 50 == 0' | xz -9 -T1 > "$out/$(basename "$f")"
done
cp "$src/LICENSE" "$out/LICENSE"
echo "sample: $(for f in "$out"/*.csv.xz; do xz -dc "$f" | tail -n +2; done | wc -l) rows in $out"
