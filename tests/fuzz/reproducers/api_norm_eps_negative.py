"""A LayerNorm built with a negative epsilon through the graph API compiles,
then aborts the process at execute."""
# fails-in: asan
# reason: epsilon not checked by the LayerNorm rule (>= 0 and finite): GGML_ASSERT(eps >= 0.0f) at execute
import numpy as np
from tests.fuzz.reproducers._common import ENGINE, expect_typed
import dyngraph as dg


def go():
    x = dg.LogicalTensor(0, dg.f32, [dg.DYNAMIC_DIM, 8])
    y = dg.LogicalTensor(1, dg.f32, None)
    g = dg.Graph()
    g.add_op(dg.Op(0, dg.OpKind.LayerNorm, [x], [y], {"epsilon": -1.0, "use_affine": False}))
    g.finalize()
    (p,) = g.get_partitions()
    cp = p.compile([x], [y], ENGINE)
    cp(np.ones((2, 8), np.float32))


expect_typed(go, "a negative epsilon ran")
