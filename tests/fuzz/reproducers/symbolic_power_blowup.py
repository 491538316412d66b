"""x_{k+1} = x_k * x_k from a symbol: the Python reader expands batch^(2^40)."""
# fails-in: asan
# timeout: 10
# reason: the Python reader multiplies out the polynomial (exponential size) before any bound applies
from tests.fuzz.reproducers._common import compiled, expect_typed, load, model_of, run
from tests.fuzz.seeds import mlp
import numpy as np

cp, steps = compiled(mlp)
m = model_of(cp)
sym = next(i for i, e in enumerate(m.exprs) if e[0] == 1)
n = sym
for _ in range(40):
    m.exprs.append((4, n, n))
    n = len(m.exprs) - 1
# the nodes need not be used: the reader builds every node of the table
expect_typed(lambda: run(load(m), np.ones((2, 16), np.float32)))
