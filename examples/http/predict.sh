#!/usr/bin/env bash
# Upload a model to a running `gpusim serve` and predict it (the README's HTTP example).
#   examples/http/predict.sh [URL] [MODEL.onnx]     (default http://127.0.0.1:8080, models/resnet50.onnx)
set -euo pipefail
URL=${1:-http://127.0.0.1:8080}
MODEL=${2:-models/resnet50.onnx}
id=$(curl -s --data-binary @"$MODEL" -H 'Content-Type: application/octet-stream' \
       "$URL/v1/models" | sed -n 's/.*"model_id": "\([0-9a-f]*\)".*/\1/p')
curl -s -H 'Content-Type: application/json' \
     -d "{\"model_id\": \"$id\", \"gpu\": \"nvidia-rtx-3060\", \"dtype\": \"fp16\"}" "$URL/v1/predict"
