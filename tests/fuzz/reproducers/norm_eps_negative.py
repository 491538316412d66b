"""An RMSNorm epsilon that is negative in a loaded file."""
# fails-in: asan
# reason: GGML_ASSERT(eps >= 0.0f) aborts at execute: eps not checked at load
from tests.fuzz.reproducers._common import attr, compiled, expect_typed, load, model_of, op, run
from tests.fuzz.seeds import quant_q8
import numpy as np

cp, steps = compiled(quant_q8)
m = model_of(cp)
attr(op(m, "RMSNorm"), "epsilon").floats = [-1e-5]
expect_typed(lambda: run(load(m), np.ones((2, 64), np.float32)), "a negative epsilon ran")
