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
