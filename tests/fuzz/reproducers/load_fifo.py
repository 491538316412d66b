"""load() on a FIFO (or a device, or a directory) must be refused at once, not block."""
# fails-in: asan
# timeout: 10
# reason: the FIFO is opened and read: load blocks forever waiting for a writer
import os
import tempfile
from tests.fuzz.reproducers._common import ENGINE, expect_typed
import dyngraph as dg

d = tempfile.mkdtemp()
fifo = os.path.join(d, "model.dg")
os.mkfifo(fifo)
expect_typed(lambda: dg.load(fifo, ENGINE), "a FIFO loaded")
