#!/usr/bin/env bash
# `pip install .` as a user does it: a fresh, clean virtual environment on Debian's python3 (no
# system site packages), so pip brings the newest NumPy (2.x) from PyPI with the package, and
# scikit-build-core and pybind11 (pyproject.toml's [build-system]) under its build isolation; CMake
# builds the module with the Debian C++ packages (the wheel's default: no `gpusim` program). Then
# pytest and gpusim.dojo's PyPI dependencies at their newest (apps/python/requirements-dojo-newest.txt) and
# the checks of check_install.sh: data found, the README's Python example, the pytest suite (its
# documents compared with GPUSIM_BINARY's, the CMake build's program), the Dojo example. Prints how
# long the install took.
#   tests/apps/python/pip_install.sh SOURCE_DIR GPUSIM_BINARY
set -euo pipefail
[[ $# -eq 2 ]] || { echo "usage: $0 SOURCE_DIR GPUSIM_BINARY" >&2; exit 2; }
src=$(cd "$1" && pwd)
binary=$(realpath "$2")
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
py=/usr/bin/python3
pip=("$work/venv/bin/python" -m pip --disable-pip-version-check)

$py -m venv "$work/venv"
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
start=$(date +%s)
"${pip[@]}" install --quiet "$src"
echo "pip_install: \`pip install .\` took $(($(date +%s) - start)) s (CMAKE_BUILD_PARALLEL_LEVEL=$CMAKE_BUILD_PARALLEL_LEVEL)"
if [[ -e $work/venv/bin/gpusim ]]; then
  echo "pip_install: the default wheel should not carry the gpusim program (GPUSIM_WHEEL_PROGRAM is OFF)" >&2
  exit 1
fi
# The clean environment holds PyPI's newest NumPy, a 2.x: what the module must work with.
"$work/venv/bin/python" - <<'EOF'
import numpy, sys
if int(numpy.__version__.split(".")[0]) < 2 or "/usr/lib/python3" in numpy.__file__:
    sys.exit(f"pip_install: expected PyPI's NumPy 2 in the clean environment, found {numpy.__version__} at {numpy.__file__}")
EOF
"${pip[@]}" install --quiet pytest -r "$src/apps/python/requirements-dojo-newest.txt"

bash "$here/check_install.sh" "$src" "$work/venv" "$work" pip_install "$binary"
