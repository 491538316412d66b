"""A constant dimension built as a 20,000-node chain (8 + 0 + 0 + ...)."""
# fails-in: asan
# reason: recursive expression evaluation overflows the stack (SIGSEGV); depth not bounded, evaluation not iterative
from tests.fuzz.reproducers._common import compiled, const, expect_typed, load, model_of, run, tensor
from tests.fuzz.seeds import ops
import numpy as np

cp, steps = compiled(ops)
m = model_of(cp)
n = const(m, 8)
zero = const(m, 0)
for _ in range(20000):
    m.exprs.append((2, n, zero))
    n = len(m.exprs) - 1
tensor(m, "cache").shape[1] = n
expect_typed(lambda: run(load(m), np.array([1], np.int64), np.array([0], np.int64)))
