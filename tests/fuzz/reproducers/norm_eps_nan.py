"""A LayerNorm epsilon that is NaN in a loaded file."""
# fails-in: asan
# reason: GGML_ASSERT(eps >= 0.0f) aborts at execute (NaN fails the comparison): eps not checked at load
from tests.fuzz.reproducers._common import attr, compiled, expect_typed, load, model_of, op, run
from tests.fuzz.seeds import mlp
import numpy as np

cp, steps = compiled(mlp)
m = model_of(cp)
attr(op(m, "LayerNorm"), "epsilon").floats = [float("nan")]
expect_typed(lambda: run(load(m), np.ones((2, 16), np.float32)), "a NaN epsilon ran")
