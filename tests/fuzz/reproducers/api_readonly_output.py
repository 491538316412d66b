"""An output array made read-only after its Tensor was created is still written."""
# fails-in: asan
# reason: writability is checked when the Tensor is made, not at execute
import sys
import numpy as np
from tests.fuzz.reproducers._common import ENGINE
import dyngraph as dg

x = dg.LogicalTensor(0, dg.f32, [2, 4])
y = dg.LogicalTensor(1, dg.f32, None)
g = dg.Graph()
g.add_op(dg.Op(0, dg.OpKind.ReLU, [x], [y]))
g.finalize()
(p,) = g.get_partitions()
cp = p.compile([x], [y], ENGINE)
(yl,) = cp.infer_outputs([x])
out = np.zeros((2, 4), np.float32)
t = dg.Tensor(yl, ENGINE, out)
out.flags.writeable = False
try:
    cp.execute(dg.Stream(ENGINE), [dg.Tensor(x, ENGINE, np.ones((2, 4), np.float32))], [t])
except dg.DyngraphError as e:
    print(f"typed: {e}")
    sys.exit(0)
if out.any():
    print("WRONG: a read-only array was written")
    sys.exit(1)
print("WRONG: execute succeeded without writing the output")
sys.exit(1)
