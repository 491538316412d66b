"""A DynamicReshape target whose product overflows int64 (2^62+1 * 4 wraps to 4):
it must be refused, not reshape 24 elements to (2^62+1, 24, 1)-like shapes."""
# fails-in: asan
# reason: the target's volume is computed with wrapping int64 arithmetic, so a huge target passes the volume check
import math
from tests.fuzz.reproducers._common import ENGINE, compiled, expect_typed, load, model_of
from tests.fuzz.seeds import shape
import dyngraph as dg
import numpy as np

cp, steps = compiled(shape)
loaded = load(model_of(cp))


def go():
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    ins = [dg.Tensor(lt, ENGINE, a) for lt, a in zip(loaded.get_inputs(), (
        x, np.array([(1 << 62) + 1, 4, 6], np.int64), np.array([0, 1, 2], np.int64)))]
    (y,) = loaded.infer_outputs(ins)
    if math.prod(y.shape) != 24:
        raise SystemExit(f"WRONG: 24 elements reshaped to {y.shape}")


expect_typed(go)
