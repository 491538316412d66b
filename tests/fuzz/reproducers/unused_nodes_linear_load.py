"""2 million unused expression nodes (48 MB): loading must stay linear (and fast)
in the file size, or refuse the file: here, within the test's time limit."""
# fails-in:
# timeout: 20
# reason: ~43 s to load 2 million unused nodes (per-node Python objects and checks)
# (fixed: ~5 s on a 2-vCPU Zen 3, the file's making included; 10 s with both cores loaded, where a
# limit of 10 s failed it)
from tests.fuzz.reproducers._common import compiled, expect_typed, load, model_of
from tests.fuzz.seeds import mlp

cp, steps = compiled(mlp)
m = model_of(cp)
base = len(m.exprs)
m.exprs.append((0, 1, 0))
m.exprs.extend((2, base + i, base) for i in range(2_000_000))
expect_typed(lambda: load(m))
