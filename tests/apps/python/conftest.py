"""Fixtures for the Python package's tests (run by ctest as python_tests; see tests/CMakeLists.txt).

Environment the ctest entry sets: PYTHONPATH (the built package, build/python), GPUSIM_BINARY (the
built gpusim program, whose --json documents the package must reproduce), XDG_CONFIG_HOME (a config
directory of the test's own, so no profile calibrated on this machine changes a result).

Program.tune() keeps its measurements in the default tuning store unless told otherwise
($GPUSIM_TUNING_DB, else the user's cache): every test here runs with GPUSIM_TUNING_DB pointing into
a temporary directory, so none writes into the real home."""
import os
import pathlib

import pytest

import gpusim

ROOT = pathlib.Path(__file__).resolve().parents[3]


@pytest.fixture(scope="session", autouse=True)
def tuning_store_outside_home(tmp_path_factory):
    """The default tuning store of this test run: a temporary file, never ~/.cache/gpusim/tuning.db."""
    saved = os.environ.get("GPUSIM_TUNING_DB")
    store = tmp_path_factory.mktemp("tuning") / "tuning.db"
    os.environ["GPUSIM_TUNING_DB"] = str(store)
    yield store
    if saved is None:
        os.environ.pop("GPUSIM_TUNING_DB", None)
    else:
        os.environ["GPUSIM_TUNING_DB"] = saved


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
