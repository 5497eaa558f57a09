"""Fixtures for the Python package's tests (run by ctest as python_tests; see tests/CMakeLists.txt).

Environment the ctest entry sets: PYTHONPATH (the built package, build/python), GPUSIM_BINARY (the
built gpusim program, whose --json documents the package must reproduce), XDG_CONFIG_HOME (a config
directory of the test's own, so no profile calibrated on this machine changes a result)."""
import os
import pathlib

import pytest

import gpusim

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def root():
    return ROOT


@pytest.fixture(scope="session")
def session():
    return gpusim.Session()


@pytest.fixture(scope="session")
def onnx_testdata():
    """The ONNX project's test data (../shared/onnx-testdata, or $GPUSIM_ONNX_TESTDATA)."""
    d = pathlib.Path(os.environ.get("GPUSIM_ONNX_TESTDATA", ROOT.parent / "shared" / "onnx-testdata"))
    if not d.is_dir():
        pytest.skip(f"ONNX test data not found at {d}; set GPUSIM_ONNX_TESTDATA")
    return d


@pytest.fixture(scope="session")
def gpusim_binary():
    b = os.environ.get("GPUSIM_BINARY")
    if not b:
        pytest.fail("GPUSIM_BINARY is not set: run these tests through ctest (python_tests)")
    return b
