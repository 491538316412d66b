"""A STATE tensor whose byte size wraps 2^64 (4 bytes x 8 x (2^62 + 1) rows = 2^67 + 32):
the state is allocated at the wrapped size and ScatterRows writes past it."""
# fails-in: asan
# reason: the state byte size wraps to 32 bytes (unchecked arithmetic): ScatterRows writes past it, SIGSEGV (ASan: heap-buffer-overflow WRITE)
from tests.fuzz.reproducers._common import compiled, const, expect_typed, load, model_of, run, tensor
from tests.fuzz.seeds import ops
import numpy as np

cp, steps = compiled(ops)
m = model_of(cp)
big = const(m, (1 << 62) + 1)  # 4 x 8 x (2^62 + 1) bytes = 2^67 + 32: 32 bytes after the wrap
for name in ("cache", "t11"):  # the state and the ScatterRows result that is its new version
    tensor(m, name).shape[0] = big
expect_typed(lambda: run(load(m), np.array([1, 2], np.int64), np.array([0, 1], np.int64)),
             "a state of (2^62 + 1) x 8 f32 loaded and ran")
