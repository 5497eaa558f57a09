#!/usr/bin/env bash
# GPU Dojo generator benchmark (issue 18): kernel rows per second per core of `gpusim dojo
# generate` (one process, one shard), the wall time of the same dataset on both cores (two
# processes, --shard 0/2 and 1/2), and bytes on disk per million kernel rows (CSV and NDJSON).
#
#   bench/dojo/run.sh build/bin/gpusim PLANS [REPEATS]
#
# The dataset: ResNet-50, MobileNetV2, ViT-B/16 and BERT-base at batch 1 and 8, on the T4, RTX 3060,
# A10 and L40S profiles with 4 virtual GPUs each (20 GPUs), latency objective, fp16; PLANS random
# plans a task besides eager and best. Prints Markdown table rows for bench/RESULTS.md; the median
# over REPEATS (default 3) runs.
set -euo pipefail
gpusim=${1:?gpusim binary}; plans=${2:-64}; reps=${3:-3}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
args=(--model models/resnet50.onnx --model models/mobilenet_v2.onnx --model models/vit_b_16.onnx
      --model models/bert_base_seq128.onnx --dims batch=1 --dims batch=8
      --gpu nvidia-t4,nvidia-rtx-3060,nvidia-a10,nvidia-l40s --virtual-gpus 4 --plans "$plans" --quiet)
med() { python3 -c 'import sys,statistics; print(statistics.median(float(x) for x in sys.argv[1:]))' "$@"; }
rows() { python3 -c 'import sys; print(sum(sum(1 for _ in open(f)) - 1 for f in sys.argv[1:]))' "$@"; }
one=(); two=(); cpu=()
for r in $(seq "$reps"); do
  rm -rf "$work/a" "$work/b"
  s=$(date +%s.%N)
  /usr/bin/time -f "%U %S" -o "$work/time" "$gpusim" dojo generate "${args[@]}" --out "$work/a"
  one+=("$(python3 -c "import time; print(time.time() - $s)")")
  cpu+=("$(awk '{print $1 + $2}' "$work/time")")
  s=$(date +%s.%N)
  "$gpusim" dojo generate "${args[@]}" --shard 0/2 --out "$work/b" &
  "$gpusim" dojo generate "${args[@]}" --shard 1/2 --out "$work/b"
  wait
  two+=("$(python3 -c "import time; print(time.time() - $s)")")
done
n=$(rows "$work"/a/kernels-*.csv)
csv=$(du -cb "$work"/a/kernels-*.csv | tail -1 | cut -f1)
"$gpusim" dojo generate "${args[@]}" --format ndjson --out "$work/j"
nd=$(du -cb "$work"/j/kernels-*.ndjson | tail -1 | cut -f1)
cmp -s "$work/a/kernels-00000-of-00001.csv" <(cat "$work"/b/kernels-00000-of-00002.csv <(tail -n +2 "$work"/b/kernels-00001-of-00002.csv)) \
  && same="identical" || same="DIFFERENT"
t1=$(med "${one[@]}"); t2=$(med "${two[@]}"); c1=$(med "${cpu[@]}")
echo "| kernel rows | one core: wall s (rows/s) | one core: CPU s (rows/s per core) | two cores: wall s (rows/s) | 2-shard output vs 1-shard | CSV MB per M rows | NDJSON MB per M rows |"
echo "|---|---|---|---|---|---|---|"
python3 - "$n" "$t1" "$c1" "$t2" "$csv" "$nd" "$same" <<'PY'
import sys
n, t1, c1, t2, csv, nd, same = int(sys.argv[1]), *map(float, sys.argv[2:7]), sys.argv[7]
print(f"| {n:,} | {t1:.2f} ({n/t1:,.0f}) | {c1:.2f} ({n/c1:,.0f}) | {t2:.2f} ({n/t2:,.0f}) | {same} | {csv/n:.0f} | {nd/n:.0f} |")
PY
