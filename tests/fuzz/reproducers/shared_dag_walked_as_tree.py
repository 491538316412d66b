"""A few KB of expression DAG whose nodes are shared: x_{k+1} = (x_k + x_k) - x_k
keeps the value (8) but is 3^64 nodes as a tree. Loading must be linear in the file."""
# fails-in: asan
# timeout: 10
# reason: the DAG is walked as a tree (exponential) while holding the GIL: load never finishes
from tests.fuzz.reproducers._common import compiled, const, expect_typed, load, model_of, run, tensor
from tests.fuzz.seeds import ops
import numpy as np

cp, steps = compiled(ops)
m = model_of(cp)
n = const(m, 8)
for _ in range(64):
    m.exprs.append((2, n, n))
    m.exprs.append((3, len(m.exprs) - 1, n))
    n = len(m.exprs) - 1
tensor(m, "cache").shape[1] = n
expect_typed(lambda: run(load(m), np.array([1], np.int64), np.array([0], np.int64)))
