#!/usr/bin/env bash
# Pack what a lent GPU machine needs into .dev/ (ignored; name it in the device tool's `carry`):
# the stripped gpusim and test binaries from BUILD, the shared libraries they load that a CUDA image
# may lack (Debian 12's onnx, protobuf, yaml-cpp, fmt, sqlite, httplib; not glibc, libstdc++,
# OpenSSL or zlib, which every image has), and the inputs tools/device/session.sh times.
#   tools/device/pack.sh [BUILD=build-test]
set -euo pipefail
build=${1:-build-test}
cd "$(dirname "$0")/../.."
grep -qx '/.dev/' .git/info/exclude 2>/dev/null || { mkdir -p .git/info; echo '/.dev/' >> .git/info/exclude; }
rm -rf .dev/bin .dev/lib && mkdir -p .dev/bin .dev/lib
strip -o .dev/bin/gpusim "$build/bin/gpusim"
strip -o .dev/bin/gpusim_tests "$build/tests/gpusim_tests"
for b in .dev/bin/*; do
  ldd "$b" | awk '/=> \//{print $3}'
done | sort -u | grep -Ev '/(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|libssl|libcrypto|libz)\.so' |
  while read -r l; do cp -L "$l" .dev/lib/; done
python3 tools/device/torch_measure.py configs --neusight ../shared/truth/neusight-train --out .dev/sweep.json
if python3 -c 'import onnx' 2>/dev/null; then py=python3; else py=${ONNX_PYTHON:?python with onnx: set ONNX_PYTHON}; fi
"$py" tools/device/model_nodes.py --out .dev/nodes.json models/resnet50.onnx models/vit_b_16.onnx models/mobilenet_v2.onnx
du -sh .dev
