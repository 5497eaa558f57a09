#!/usr/bin/env bash
# The checks an installed gpusim package must pass, shared by the package tier's two installs
# (pip_install.sh: `pip install .` into a clean environment with the newest NumPy; wheel_install.sh:
# a wheel from `python -m build` into an environment on Debian's python3 packages, NumPy 1.24):
# from outside the source tree, with no GPUSIM_PROFILE_PATH and a fresh HOME, the package finds its
# own data, the README's Python example runs, the whole pytest suite passes against the installed
# package (gpusim.dojo's PyPI dependencies installed, so its tests run, not skip), the Dojo example
# trains and reports, and the `gpusim` program answers where the wheel installed it.
#   tests/apps/python/check_install.sh SOURCE_DIR VENV WORK_DIR NAME GPUSIM_BINARY
# NAME prefixes every line this prints (pip_install, wheel_install). GPUSIM_BINARY: the program whose
# --json documents the package must reproduce (the wheel's own bin/gpusim, or the CMake build's).
set -euo pipefail
src=$1 venv=$2 work=$3 name=$4 binary=$5
py=$venv/bin/python

unset GPUSIM_PROFILE_PATH PYTHONPATH XDG_CONFIG_HOME XDG_CACHE_HOME GPUSIM_TUNING_DB
export HOME=$work/home PYTHONDONTWRITEBYTECODE=1
mkdir -p "$HOME"
cd "$work"
site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
data=$("$py" -c 'import gpusim; print(gpusim.data_dir())')
echo "$name: gpusim $("$py" -c 'import gpusim; print(gpusim.__version__)') in $site, data $data"
echo "$name: $("$py" -c 'import numpy, sys; print("python", sys.version.split()[0], "numpy", numpy.__version__, "from", numpy.__file__)')"
case $data in
  "$site"/gpusim/share/gpusim) ;;
  *) echo "$name: the package's data should be $site/gpusim/share/gpusim, is $data" >&2; exit 1 ;;
esac

(cd "$src" && "$py" examples/python/predict.py) > example.out
cat example.out
grep -q "over eager" example.out

GPUSIM_DOJO_DEPS=required GPUSIM_BINARY="$binary" \
  "$py" -m pytest -q -p no:cacheprovider "$src/tests/apps/python"

# The Dojo example: a dataset on a local Ray, a learned model tested on a GPU family it never saw.
(cd "$src" && "$py" examples/python/dojo_ranker.py --out "$work/dojo" --plans 6 --virtual-gpus 2) > dojo.out
cat dojo.out
grep -q "plans     learned" dojo.out

if [[ -e $venv/bin/gpusim ]]; then
  "$venv/bin/gpusim" predict "$src/models/resnet50.onnx" --gpu nvidia-t4 --dtype fp16 > predict.out
  grep -q "Tesla T4" predict.out
  echo "$name: $venv/bin/gpusim answers"
fi
# Nothing the tests ran made a tuning store in the home (Program.tune's default store; conftest.py
# points it into a temporary directory).
if [[ -e $HOME/.cache/gpusim/tuning.db ]]; then
  echo "$name: the tests wrote a tuning store into the home: $HOME/.cache/gpusim/tuning.db" >&2
  exit 1
fi
echo "$name: ok"
