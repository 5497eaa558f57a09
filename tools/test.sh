#!/usr/bin/env bash
# Runs gpusim's whole test suite from a fresh clone: installs the Debian packages (idempotent),
# configures with warnings as errors, builds, and runs every test with ctest: first the default
# tiers in parallel, then the "package" tier (`pip install .` into a fresh virtual environment,
# which builds the library again and fetches scikit-build-core from PyPI).
# Usage: tools/test.sh            (build directory: build-test/)
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
cmake -S . -B build-test -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUSIM_WERROR=ON -DGPUSIM_BUILD_BENCH=ON
cmake --build build-test -j"$(nproc)"
ctest --test-dir build-test --output-on-failure -j"$(nproc)" -LE package
ctest --test-dir build-test --output-on-failure -L package
