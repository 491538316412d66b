"""Saving a partition whose STATE tensor has no initial value (zeros): the
export copies 0 bytes from a null pointer."""
# fails-in:
# reason: UBSan: backend/python/bind_partition.cpp export_data (then backend/module.cpp): memcpy(dst, nullptr, 0) for an empty std::vector ("null pointer passed as argument 2")
import os
import tempfile
import numpy as np
from tests.fuzz.reproducers._common import compiled, expect_typed
from tests.fuzz.seeds import ops

cp, steps = compiled(ops)
expect_typed(lambda: cp.save(os.path.join(tempfile.mkdtemp(), "s.dg")))
