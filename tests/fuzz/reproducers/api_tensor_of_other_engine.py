"""A Tensor made for another Engine, and execute with stream=None, are accepted
silently; both should be typed errors."""
# fails-in:
# reason: execute does not check a Tensor's engine against the partition's, nor the stream
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
# (CPU engines of one kind, device and thread count are interchangeable, as in oneDNN: another engine is
# one that differs, here in threads)
other = dg.Engine(dg.Engine.CPU, num_threads=ENGINE.num_threads + 1)
wrong = []
for label, stream, eng in (("another engine", dg.Stream(ENGINE), other), ("stream=None", None, ENGINE)):
    try:
        cp.execute(stream, [dg.Tensor(x, eng, np.ones((2, 4), np.float32))], [dg.Tensor(yl, eng, np.empty((2, 4), np.float32))])
    except dg.DyngraphError as e:
        print(f"{label}: typed: {e}")
        continue
    wrong.append(label)
if wrong:
    print(f"WRONG: accepted: {wrong}")
    sys.exit(1)
