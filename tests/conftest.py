import os
import sys

import numpy as np
import pytest

# Tests run against the installed package; a developer's in-tree build
# (api/dyngraph with the extension linked in) is used when DYNGRAPH_DEV=1.
if os.environ.get("DYNGRAPH_DEV") == "1":
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "api"))

import dyngraph as dg  # noqa: E402


@pytest.fixture(scope="session")
def engine():
    return dg.Engine(dg.Engine.CPU, num_threads=1)


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture(scope="session")
def c_load_check(tmp_path_factory):
    """examples/c/load_check.c built against the installed C API (tests/capi_util.py)."""
    import os

    from capi_util import EXAMPLES, build

    d = tmp_path_factory.mktemp("capi")
    return build(os.path.join(EXAMPLES, "load_check.c"), str(d / "load_check"))
