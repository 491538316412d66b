"""load() on a directory or a character device is a typed error."""
from tests.fuzz.reproducers._common import ENGINE
import sys
import tempfile
import dyngraph as dg

for path in (tempfile.mkdtemp(), "/dev/zero", "/dev/null"):
    try:
        dg.load(path, ENGINE)
    except dg.DyngraphError as e:
        print(f"{path}: typed: {e}")
        continue
    except Exception as e:  # noqa: BLE001
        print(f"{path}: UNTYPED {type(e).__name__}: {e}")
        sys.exit(1)
    print(f"{path}: WRONG: loaded")
    sys.exit(1)
