"""A file truncated while its partition is loaded in the mapped mode: executing
must not crash the process (copy the weights, or document and detect it)."""
# fails-in: release asan
# reason: by design in the mapped mode (weights used in place, zero copy): a file truncated under a live mapping is SIGBUS; load(..., mmap_weights=False) reads the weights into memory and is immune (docs/guide/save-load.md)
import os
import numpy as np
from tests.fuzz.reproducers._common import ENGINE, compiled, expect_typed, model_of, run, write
from tests.fuzz.seeds import llama
import dyngraph as dg

cp, steps = compiled(llama)
path = write(model_of(cp))
loaded = dg.load(path, ENGINE)
os.truncate(path, 4096)
expect_typed(lambda: run(loaded, np.array([1, 2], np.int64), np.array([0, 1], np.int64)))
