#!/usr/bin/env bash
# Installs gpusim's build, test and tool dependencies from Debian 12 packages.
# Idempotent: packages already present are skipped by apt-get. Runs as root or through sudo.
#   tools/install-deps.sh            C++ build and test dependencies
#   tools/install-deps.sh --python   also the Python tools' packages (model export)
# llvm: llvm-objdump, which disassembles the AMD kernels hiprtc builds (`gpusim codegen report`, the
# compile tier: backends/hip/amdgcn.h). chromium: the package tier opens `gpusim report`'s page in it,
# headless (tests/apps/report/report_browser.sh).
set -euo pipefail

pkgs=(
  build-essential cmake pkg-config git
  libonnx-dev libprotobuf-dev protobuf-compiler
  libyaml-cpp-dev libeigen3-dev nlohmann-json3-dev catch2
  libvulkan-dev mesa-vulkan-drivers libshaderc-dev glslang-tools glslang-dev spirv-tools
  libamdhip64-dev libcli11-dev libfmt-dev libcpp-httplib-dev libsqlite3-dev liblzma-dev
  libbenchmark-dev pybind11-dev curl clang libclang-rt-14-dev llvm
  python3-dev python3-numpy python3-pytest python3-venv ninja-build
  chromium
)
if [[ "${1:-}" == "--python" ]]; then
  pkgs+=(python3 python3-venv python3-pip python3-onnx python3-torch python3-torchvision python3-numpy)
fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#pkgs[@]} packages present"
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "install-deps: not root and no sudo; install as root: apt-get install ${missing[*]}" >&2; exit 1; }
  SUDO=sudo
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
