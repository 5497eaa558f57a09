#!/usr/bin/env bash
# The wheel and the oldest NumPy the package claims: `python -m build --wheel` (PyPA's build from
# PyPI, in an environment of its own; it builds in an isolated one with pyproject.toml's
# [build-system]), with the `gpusim` program (GPUSIM_WHEEL_PROGRAM=ON, which pip_install.sh's
# default install leaves out), then that wheel installed into a virtual environment on Debian's python3 WITH its
# system site packages, so the dependency numpy>=1.24 is met by Debian's python3-numpy 1.24 (the
# lower bound pyproject.toml declares) and pytest by python3-pytest, with gpusim.dojo's pinned PyPI
# dependencies of the NumPy 1 era (apps/python/requirements-dojo.txt). Then the checks of
# check_install.sh, as pip_install.sh runs them. Prints how long the wheel took to build.
#   tests/apps/python/wheel_install.sh SOURCE_DIR
set -euo pipefail
src=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
py=/usr/bin/python3

$py -m venv "$work/build-venv"
"$work/build-venv/bin/python" -m pip install --quiet --disable-pip-version-check build
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
start=$(date +%s)
"$work/build-venv/bin/python" -m build --wheel --outdir "$work/dist" \
  --config-setting=cmake.define.GPUSIM_WHEEL_PROGRAM=ON "$src" > "$work/build.log" 2>&1 ||
  { tail -n 60 "$work/build.log" >&2; exit 1; }
wheels=("$work"/dist/gpusim-*.whl)
echo "wheel_install: \`python -m build --wheel\` took $(($(date +%s) - start)) s: $(basename "${wheels[0]}")"

$py -m venv --system-site-packages "$work/venv"
pip=("$work/venv/bin/python" -m pip --disable-pip-version-check)
"${pip[@]}" install --quiet "${wheels[0]}"
# Debian's NumPy held where it is: unconstrained, pip would lift it to the newest 1.x that the newest
# SciPy (scikit-learn's dependency, not a Debian package here) asks for.
debian_numpy=$("$work/venv/bin/python" -c 'import numpy; print(numpy.__version__)')
"${pip[@]}" install --quiet -r "$src/apps/python/requirements-dojo.txt" "numpy==$debian_numpy"
# The environment's NumPy is Debian's (pip must not have pulled a newer one over it).
"$work/venv/bin/python" - <<'EOF'
import numpy, sys
if not numpy.__file__.startswith("/usr/lib/python3/dist-packages/") or not numpy.__version__.startswith("1.24."):
    sys.exit(f"wheel_install: expected Debian's NumPy 1.24, found {numpy.__version__} at {numpy.__file__}")
EOF

[[ -x $work/venv/bin/gpusim ]] || { echo "wheel_install: the wheel did not install bin/gpusim" >&2; exit 1; }
bash "$here/check_install.sh" "$src" "$work/venv" "$work" wheel_install "$work/venv/bin/gpusim"
