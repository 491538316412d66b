"""One byte of a weight changed after saving (a damaged download): load must
refuse the file (a checksum of its content), not run a different program."""
# fails-in: asan
# reason: no integrity check: the damaged file loads and computes other numbers
import os
from tests.fuzz.reproducers._common import ENGINE, compiled, expect_typed, model_of, write
from tests.fuzz.seeds import mlp
import dyngraph as dg

cp, steps = compiled(mlp)
path = write(model_of(cp))
data = bytearray(open(path, "rb").read())
data[len(data) - 600] ^= 0x40
open(path, "wb").write(bytes(data))
expect_typed(lambda: dg.load(path, ENGINE), "a file with a changed weight byte loaded")
