"""A file truncated while its partition is loaded in the mapped mode: executing
must not crash the process (copy the weights, or document and detect it).
The constant read in place is a 2.4 MB table (a Gather's): constants under
2 MiB are copied where the load lays MatMul weights out in panels, so a
small model would not read the file at all (resident.cpp, `borrowable`)."""
# fails-in: release asan
# reason: by design in the mapped mode (weights used in place, zero copy): a file truncated under a live mapping is SIGBUS; load(..., mmap_weights=False) reads the weights into memory and is immune (docs/guide/save-load.md)
import os
import numpy as np
from tests.fuzz.reproducers._common import _TMP, ENGINE, expect_typed, run
import dyngraph as dg

b = dg.GraphBuilder()
ids = b.input("ids", dg.i64, [dg.Dim("n")])
table = np.arange(600 * 1000, dtype=np.float32).reshape(600, 1000)
b.output(b.op(dg.OpKind.Gather, [b.constant("table", table), ids]))
path = os.path.join(_TMP, "case.dg")
b.compile(ENGINE).save(path)
loaded = dg.load(path, ENGINE)
assert loaded.cache_info().borrowed_bytes == table.nbytes
os.truncate(path, 4096)
expect_typed(lambda: run(loaded, np.array([1, 599], np.int64)))
