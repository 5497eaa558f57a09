#!/usr/bin/env bash
# Runs the README's HTTP example (examples/http/predict.sh) against `gpusim serve` on a free
# loopback port, checks the answer is a prediction, and stops the server with SIGTERM.
# Usage: http_example.sh GPUSIM SOURCE_DIR
set -euo pipefail
gpusim=$1
src=$(cd "$2" && pwd)
out=$(mktemp)
trap 'rm -f "$out"; kill "$pid" 2>/dev/null || true' EXIT
"$gpusim" serve --port 0 --workers 1 > "$out" &
pid=$!
for _ in $(seq 100); do grep -q "listening on" "$out" && break; sleep 0.1; done
url=$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$out")
test -n "$url"
cd "$src"
answer=$(examples/http/predict.sh "$url" models/resnet50.onnx)
grep -q '"schema": "gpusim.predict/1"' <<< "$answer"
grep -q '"gpu": "nvidia-rtx-3060"' <<< "$answer"
kill -TERM "$pid"
wait "$pid"
grep -q "gpusim serve: stopped" "$out"
echo "http example: ok ($url)"
