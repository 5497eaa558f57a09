#!/usr/bin/env bash
# The install test: installs the built gpusim into a temporary prefix, builds the example consumer
# (examples/predict_consumer) against it with find_package(gpusim CONFIG), and runs both it and the
# installed gpusim program from outside the source and build trees, with no profile path set, so
# that they can only find their profiles in <prefix>/share/gpusim.
# Usage: install_consumer.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"

cmake --install "$build" --prefix "$prefix" >/dev/null
test -f "$prefix/include/gpusim/gpusim.h"
test -f "$prefix/share/gpusim/gpu_profiles/nvidia/nvidia-rtx-3060.yaml"
test -f "$prefix/share/gpusim/llm/llama-2-7b.yaml"
test -x "$prefix/bin/gpusim"

cmake -S "$src/examples/predict_consumer" -B "$work/example" -DCMAKE_PREFIX_PATH="$prefix" \
      -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/example" -j2 >/dev/null

# Nothing but the installation: no profile path, a fresh home, a working directory elsewhere.
unset GPUSIM_PROFILE_PATH GPUSIM_RUNTIME_PATH
export HOME="$work/home" XDG_CONFIG_HOME="$work/home/.config"
mkdir -p "$HOME"
cp "$src/models/mobilenet_v2.onnx" "$work/model.onnx"
cd "$work"

"$work/example/predict_consumer" model.onnx nvidia-rtx-3060 | tee "$work/consumer.txt"
grep -q "^eager " "$work/consumer.txt"
grep -q "^fused " "$work/consumer.txt"
grep -q "^ran " "$work/consumer.txt"

# The README's C++ snippet, as written there, in a main() built against the installed package with
# the README's own CMake lines (no C++ standard set).
mkdir -p "$work/snippet"
python3 - "$src/README.md" "$work/snippet" <<'PY'
import re, sys, pathlib
readme = pathlib.Path(sys.argv[1]).read_text()
out = pathlib.Path(sys.argv[2])
cmake = re.search(r"```cmake\n(find_package\(gpusim.*?)```", readme, re.S).group(1)
cpp = re.search(r"```cpp\n(#include <gpusim/gpusim.h>\n.*?)```", readme, re.S).group(1)
includes = "".join(l + "\n" for l in cpp.splitlines() if l.startswith("#include"))
body = "".join("  " + l + "\n" for l in cpp.splitlines() if not l.startswith("#include"))
(out / "main.cpp").write_text(includes + "\n#include <string>\n\nint main() {\n" + body +
                              "  return model && gpu && p && plans && program && !doc.empty() ? 0 : 1;\n}\n")
(out / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.25)\nproject(readme_snippet LANGUAGES CXX)\n"
                                   "add_executable(my_engine main.cpp)\n" + cmake)
PY
cmake -S "$work/snippet" -B "$work/snippet/build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/snippet/build" -j2 >/dev/null
"$work/snippet/build/my_engine"
echo "install test: the README's C++ snippet builds and runs"

"$prefix/bin/gpusim" profiles list --json > "$work/profiles.json"
grep -q "\"$prefix/share/gpusim/gpu_profiles" "$work/profiles.json"
"$prefix/bin/gpusim" predict model.onnx --gpu nvidia-rtx-3060 --runtime pytorch-eager --json > "$work/predict.json"
grep -q '"schema": "gpusim.predict/1"' "$work/predict.json"
# A bundled language model by name, from the installed data (<prefix>/share/gpusim/llm) and runtimes.
"$prefix/bin/gpusim" predict llama-2-7b --gpu nvidia-rtx-3060 --weights Q4_0 --prompt 64 --generate 8 --json > "$work/llm.json"
grep -q '"schema": "gpusim.generation/1"' "$work/llm.json"
grep -q '"runtime": "llamacpp-cuda"' "$work/llm.json"

# A calibrated profile in the user's config directory is found by name.
mkdir -p "$XDG_CONFIG_HOME/gpusim/profiles"
cat > "$XDG_CONFIG_HOME/gpusim/profiles/my-3060.yaml" <<'YAML'
schema: gpusim.profile/1
name: my-3060
extends: nvidia-rtx-3060
display_name: My RTX 3060
YAML
"$prefix/bin/gpusim" predict model.onnx --gpu my-3060 --json > "$work/mine.json"
grep -q '"gpu": "my-3060"' "$work/mine.json"
# The planner alone: find_package(gpusim COMPONENTS core) gives gpusim::core (libgpusim_core.so),
# which needs no executor library: with libgpusim.so removed from the prefix, a planner-only engine
# (examples/planner_consumer) still configures, builds and plans, and neither it nor the core
# library asks the loader for shaderc, Vulkan, CUDA or HIP.
find "$prefix" -name 'libgpusim.so*' -delete
test -z "$(find "$prefix" -name 'libgpusim.so*')"
core_lib=$(find "$prefix" -name 'libgpusim_core.so.*.*' | head -1)
test -n "$core_lib"
cmake -S "$src/examples/planner_consumer" -B "$work/planner" -DCMAKE_PREFIX_PATH="$prefix" \
      -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/planner" -j2 >/dev/null
for f in "$work/planner/planner_consumer" "$core_lib"; do
  if readelf -d "$f" | grep NEEDED | grep -E 'libgpusim\.so|shaderc|vulkan|cuda|nvrtc|amdhip|hiprtc'; then
    echo "install test: $f needs an executor library" >&2
    exit 1
  fi
done
"$work/planner/planner_consumer" model.onnx nvidia-rtx-3060 | tee "$work/planner.txt"
grep -q "^eager .*(library (the cost model's whole menu))" "$work/planner.txt"
grep -q "^fused " "$work/planner.txt"
echo "install test: a planner-only engine links gpusim::core alone and plans"
echo "install test: ok ($prefix)"
