"""dg.Tensor with shape (3074457345618258603, 6) over a 2-element array: the
element count wraps (x6 = 2^64 + 2), the tensor is accepted, execute reads
out of bounds."""
# fails-in: asan
# reason: the shape's element count is computed with wrapping arithmetic in make_tensor: shape x dtype not checked against the buffer
import numpy as np
from tests.fuzz.reproducers._common import ENGINE, expect_typed
import dyngraph as dg


def go():
    x = dg.LogicalTensor(0, dg.f32, [3074457345618258603, 6])
    t = dg.Tensor(x, ENGINE, np.zeros(2, np.float32))
    g = dg.Graph()
    y = dg.LogicalTensor(1, dg.f32, None)
    xd = dg.LogicalTensor(0, dg.f32, [dg.DYNAMIC_DIM, 6])
    g.add_op(dg.Op(0, dg.OpKind.ReLU, [xd], [y]))
    g.finalize()
    (p,) = g.get_partitions()
    cp = p.compile([xd], [y], ENGINE)
    out = dg.Tensor(dg.LogicalTensor(1, dg.f32, [3074457345618258603, 6]), ENGINE, np.zeros(2, np.float32))
    cp.execute(dg.Stream(ENGINE), [t], [out])


expect_typed(go, "a 2-element array accepted for 3074457345618258603 x 6 elements")
