#!/usr/bin/env bash
# Creates .venv-export (repository root) for tools/export_models.py.
# Uses Debian's /usr/bin/python3 with --system-site-packages so that Debian's
# python3-torch 1.13.1 / python3-torchvision 0.14.1 / python3-numpy are used
# (install them with: tools/install-deps.sh --python). torch is never pip-installed.
# Then pip-installs the pinned packages from tools/requirements-export.txt
# (diffusers, transformers and their dependencies, and a newer onnx that shadows
# Debian's python3-onnx 1.12 inside the venv; it provides opset 21 for the
# version-converter test case).
#   tools/setup-export-venv.sh            create (or update) .venv-export
#   tools/setup-export-venv.sh --recreate delete and recreate it
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv-export"
py=/usr/bin/python3

[[ -x $py ]] || { echo "setup-export-venv: $py missing (Debian python3)" >&2; exit 1; }
$py -c 'import torch, torchvision' 2>/dev/null || {
  echo "setup-export-venv: Debian python3-torch/python3-torchvision missing; run tools/install-deps.sh --python" >&2; exit 1; }

if [[ "${1:-}" == "--recreate" ]]; then rm -rf "$venv"; fi
if [[ ! -x $venv/bin/python ]]; then
  $py -m venv --system-site-packages "$venv"
fi
"$venv/bin/python" -m pip install -r "$root/tools/requirements-export.txt"
# onnx 1.17 needs the pure-Python protobuf runtime (export_models.py sets the same).
PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python "$venv/bin/python" - <<'PY'
import torch, torchvision, onnx, transformers, diffusers
print("torch", torch.__version__, "torchvision", torchvision.__version__,
      "onnx", onnx.__version__, "transformers", transformers.__version__,
      "diffusers", diffusers.__version__)
PY
echo "setup-export-venv: ready: $venv/bin/python tools/export_models.py --help"
