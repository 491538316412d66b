"""A DynamicReshape whose input has a 0 dimension (a static 0 in the IR): the
reshape resolution divides by the product of the known dims."""
# fails-in: asan
# reason: division by zero in the binder's reshape resolution (SIGFPE)
from tests.fuzz.reproducers._common import compiled, const, expect_typed, load, model_of, run, tensor
from tests.fuzz.seeds import shape
import numpy as np

cp, steps = compiled(shape)
m = model_of(cp)
x = tensor(m, "x")
x.shape[1] = const(m, 0)  # x: [DYN, 0]
expect_typed(lambda: run(load(m), np.zeros((4, 0), np.float32), np.array([4, 0, -1], np.int64),
                         np.array([2, 0, 1], np.int64)))
