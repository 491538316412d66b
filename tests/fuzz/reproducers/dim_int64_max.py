"""A STATE dimension of INT64_MAX: the buffer reservation rounds it up and wraps."""
# fails-in: asan
# reason: AlignedBuffer::reserve rounding wraps, memset with a negative size (SIGSEGV): sizes not bounded
from tests.fuzz.reproducers._common import compiled, const, expect_typed, load, model_of, run, tensor
from tests.fuzz.seeds import ops
import numpy as np

cp, steps = compiled(ops)
m = model_of(cp)
big = const(m, (1 << 63) - 1)
for name in ("cache", "t11"):  # the state and the ScatterRows result that is its new version
    tensor(m, name).shape[0] = big
expect_typed(lambda: run(load(m), np.array([1], np.int64), np.array([0], np.int64)),
             "a state of INT64_MAX rows loaded and ran")
