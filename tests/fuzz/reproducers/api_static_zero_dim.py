"""A static 0 dimension through the graph API: either supported by every op
or refused at compile. DynamicReshape of a [0, 6] input with target [0, -1]."""
# fails-in: asan
# reason: a static 0 dim is accepted at compile; the reshape resolution divides by it (SIGFPE)
import numpy as np
from tests.fuzz.reproducers._common import ENGINE, expect_typed
import dyngraph as dg


def go():
    x = dg.LogicalTensor(0, dg.f32, [0, 6])
    s = dg.LogicalTensor(1, dg.i64, [2])
    y = dg.LogicalTensor(2, dg.f32, None)
    g = dg.Graph()
    g.add_op(dg.Op(0, dg.OpKind.DynamicReshape, [x, s], [y], {"special_zero": True}))
    g.finalize()
    (p,) = g.get_partitions()
    cp = p.compile([x, s], [y], ENGINE)
    cp(np.zeros((0, 6), np.float32), np.array([0, -1], np.int64))


expect_typed(go)
