#!/usr/bin/env bash
# `pip install .` as a user does it: a fresh virtual environment on Debian's python3 (its numpy and
# pytest through --system-site-packages), scikit-build-core from PyPI under pip's build isolation,
# CMake building the module with the Debian C++ packages. Then, from outside the source tree, with
# no GPUSIM_PROFILE_PATH and a fresh HOME: the package finds its own data, the README's Python example
# runs, the whole pytest suite passes against the installed package (with gpusim.dojo's PyPI
# dependencies, python/requirements-dojo.txt, installed), the Dojo example trains and reports, and
# the `gpusim` program the wheel installs answers.
#   tests/python/pip_install.sh SOURCE_DIR
set -euo pipefail
src=$(cd "$1" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
py=/usr/bin/python3

$py -m venv --system-site-packages "$work/venv"
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
"$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check "$src"

unset GPUSIM_PROFILE_PATH PYTHONPATH XDG_CONFIG_HOME
export HOME=$work/home PYTHONDONTWRITEBYTECODE=1
mkdir -p "$HOME"
cd "$work"
site=$("$work/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
data=$("$work/venv/bin/python" -c 'import gpusim; print(gpusim.data_dir())')
echo "pip_install: gpusim $("$work/venv/bin/python" -c 'import gpusim; print(gpusim.__version__)') in $site, data $data"
case $data in
  "$site"/gpusim/share/gpusim) ;;
  *) echo "pip_install: the package's data should be $site/gpusim/share/gpusim, is $data" >&2; exit 1 ;;
esac

(cd "$src" && "$work/venv/bin/python" examples/python/predict.py) > example.out
cat example.out
grep -q "over eager" example.out

# The Dojo's Ray path and Parquet (gpusim.dojo): its PyPI dependencies, so its tests run, not skip.
"$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$src/python/requirements-dojo.txt"
GPUSIM_DOJO_DEPS=required GPUSIM_BINARY="$work/venv/bin/gpusim" \
  "$work/venv/bin/python" -m pytest -q -p no:cacheprovider "$src/tests/python"

# The Dojo example: a dataset on a local Ray, a learned model tested on a GPU family it never saw.
(cd "$src" && "$work/venv/bin/python" examples/python/dojo_ranker.py --out "$work/dojo" --plans 6 --virtual-gpus 2) \
  > dojo.out
cat dojo.out
grep -q "plans     learned" dojo.out

"$work/venv/bin/gpusim" predict "$src/models/resnet50.onnx" --gpu nvidia-t4 --dtype fp16 > predict.out
grep -q "Tesla T4" predict.out
echo "pip_install: ok"
