#!/usr/bin/env bash
# Creates .venv-tools (repository root): the command-line tools gpusim reads compiled code with,
# from PyPI, for the compile tier and `gpusim codegen report`:
#   nvidia-cuda-nvdisasm   nvdisasm, which turns a cubin into its SASS (not part of NVRTC or the
#                          toolkit's runtime packages)
#   nvidia-cuda-cuobjdump  cuobjdump, for reading a fat binary's cubins by hand
# Prints the nvdisasm path on its last line; set GPUSIM_NVDISASM to it (tools/compile_tier.py does).
#   tools/setup-tools-venv.sh            create (or update) .venv-tools
#   tools/setup-tools-venv.sh --recreate delete and recreate it
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv-tools"
if [[ "${1:-}" == "--recreate" ]]; then rm -rf "$venv"; fi
if [[ ! -x $venv/bin/python ]]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check "nvidia-cuda-nvdisasm>=13,<14" "nvidia-cuda-cuobjdump>=13,<14"
tool=$(find "$venv/lib" -path '*/site-packages/nvidia/*/bin/nvdisasm' -type f | head -n 1)
[[ -n $tool && -x $tool ]] || { echo "setup-tools-venv: nvidia-cuda-nvdisasm installed no nvdisasm under $venv" >&2; exit 1; }
"$tool" --version | tail -n 1 >&2
echo "$tool"
