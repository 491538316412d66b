"""Positions computed inside the graph (pos + 1): an execute refused for an
out-of-range position must write nothing (docs/guide/save-load.md's promise), but the
state row has already been written when the refusal comes."""
# fails-in:
# reason: in-graph computed indices are checked after the ScatterRows has written the state
import sys
import numpy as np
from tests.fuzz.reproducers._common import ENGINE
import dyngraph as dg

seq = dg.Dim("seq", min=1, max=8)
pos = dg.LogicalTensor(0, dg.i64, [seq], name="pos")
src = dg.LogicalTensor(1, dg.f32, [seq, 4], name="src")
one = dg.LogicalTensor(2, dg.i64, [1], property=dg.CONSTANT, name="one")
cache = dg.LogicalTensor(3, dg.f32, [8, 4], property=dg.STATE, name="cache")
idx = dg.LogicalTensor(10, dg.i64, None, name="idx")
new = dg.LogicalTensor(11, dg.f32, None, name="new")
g = dg.Graph()
g.add_op(dg.Op(0, dg.OpKind.Add, [pos, one], [idx]))
g.add_op(dg.Op(1, dg.OpKind.ScatterRows, [cache, idx, src], [new]))
g.finalize()
(p,) = g.get_partitions()
cp = p.compile([pos, src, one, cache], [], ENGINE, constants={2: np.ones(1, np.int64)})
before = cp.read_state(3)
try:
    cp(np.array([0, 7], np.int64), np.ones((2, 4), np.float32))  # rows 1 and 8: 8 is out of range
except dg.DyngraphError as e:
    print(f"refused: {e}")
else:
    print("WRONG: an out-of-range row index was accepted")
    sys.exit(1)
after = cp.read_state(3)
if not np.array_equal(before, after):
    print(f"WRONG: the refused execute wrote rows {np.flatnonzero((before != after).any(axis=1)).tolist()}")
    sys.exit(1)
print("ok: nothing written")
