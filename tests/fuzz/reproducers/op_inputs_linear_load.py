"""Concats of 40,000 inputs each, valid, up to the IR's limit of 2^22 op inputs
(16 MB of them) and past it: loading must stay linear and fast, or refuse.
The Python reader read each input through the generated FlatBuffers accessor
(7 us apiece), and its re-inference checked each of a Concat's 40,000 inputs
again (repeated ones too): a minute and more for 32 MB of inputs."""
# fails-in:
# timeout: 40
# reason: 82 s to load 200 Concats of 40,000 inputs (found by the fanout mutator)
import time

from tests.fuzz.reproducers._common import compiled, expect_typed, load, model_of
from tests.fuzz import irmodel as ir
from tests.fuzz.seeds import ops

cp, steps = compiled(ops)
base = model_of(cp)
concat = next(o for o in base.ops if o.name.startswith("concat"))
width = 20_000  # x the op's two inputs


def widened(copies: int) -> ir.Program:
    m = base.clone()
    out = m.tensors[concat.outputs[0]]
    last = m.exprs[out.shape[-1]]
    assert last[0] == 0, "the seed's concat output has a static last dimension"
    m.exprs.append((0, last[1] * width, 0))  # the axis (the last) times the width
    shape = list(out.shape[:-1]) + [len(m.exprs) - 1]
    for i in range(copies):
        m.tensors.append(ir.Tensor(id=10_000 + i, name=f"wide{i}", dtype=out.dtype, shape=shape))
        m.ops.append(ir.Op(id=10_000 + i, kind=concat.kind, name=f"wide{i}", inputs=concat.inputs * width,
                           outputs=[len(m.tensors) - 1], attrs=concat.attrs))
    return m


t0 = time.monotonic()
load(widened(100))  # 4,000,000 inputs: read (no error expected)
print(f"100 wide Concats read in {time.monotonic() - t0:.1f} s")
expect_typed(lambda: load(widened(105)), "4,200,000 op inputs were read")  # past the limit
