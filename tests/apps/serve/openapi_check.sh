#!/usr/bin/env bash
# apps/serve/openapi.json as a checked contract: a fresh virtual environment on Debian's python3, the
# newest openapi-spec-validator and jsonschema from PyPI (tests/apps/serve/requirements-openapi.txt), then
# tests/apps/serve/openapi_check.py: the document is valid OpenAPI, and (given the gpusim binary) a live
# `gpusim serve` answers every route as the document says.
#   tests/apps/serve/openapi_check.sh SOURCE_DIR [GPUSIM_BINARY [--extended]]
set -euo pipefail
src=$(cd "$1" && pwd)
gpusim=${2:-}
shift $(( $# < 2 ? $# : 2 ))
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
py=/usr/bin/python3

$py -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$src/tests/apps/serve/requirements-openapi.txt"

args=(--source-dir "$src")
if [ -n "$gpusim" ]; then
  args+=(--gpusim "$(cd "$(dirname "$gpusim")" && pwd)/$(basename "$gpusim")")
fi
PYTHONDONTWRITEBYTECODE=1 "$work/venv/bin/python" "$src/tests/apps/serve/openapi_check.py" "${args[@]}" "$@"
