import os

import pytest

from .conformance import CASES


@pytest.fixture(scope="session")
def cases_dir():
    """oneDNN's case collection (../shared/onednn-graph-cases beside the clone)."""
    if not os.path.isdir(CASES):
        pytest.skip(f"oneDNN's graph cases are not at {CASES} (set DYNGRAPH_ONEDNN_CASES)")
    return CASES
