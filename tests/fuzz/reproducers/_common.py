"""Helpers of the hand-made reproducers (tests/fuzz/reproducers/*.py).

Each reproducer is a script run in its own process by test_regressions.py:
it builds what it needs by code, does one hostile thing, and exits 0 when
dyngraph answers with a typed error (or does the right thing), 1 when it
answers wrongly (an untyped exception, a wrong result, a silent success);
a crash, an abort or a hang ends it on its own. Header comments say where it
fails today: ``# fails-in: release asan`` and ``# reason: ...``.
"""

from __future__ import annotations

import os
import sys
import tempfile
import traceback

import numpy as np

import dyngraph as dg

from .. import irmodel as ir
from ..container import discover
from ..replay import sample_file

ENGINE = dg.Engine(dg.Engine.CPU, num_threads=1)
_TMP = tempfile.mkdtemp(prefix="dgrepro-")


def compiled(make):
    """(CompiledPartition, steps) from a seed builder of tests/fuzz/seeds.py."""
    return make(np.random.default_rng(0))


def model_of(cp) -> ir.Program:
    path = os.path.join(_TMP, "base.dg")
    cp.save(path)
    with open(path, "rb") as f:
        raw = f.read()
    return ir.decode(raw[ir.body_offset(raw):])


def write(m: ir.Program, name: str = "case.dg") -> str:
    """The program as a file the loader accepts (sealed in the current container format)."""
    path = os.path.join(_TMP, name)
    with open(path, "wb") as f:
        f.write(discover(sample_file()).seal(ir.encode(m)))
    return path


def load(m: ir.Program) -> dg.CompiledPartition:
    return dg.load(write(m), ENGINE)


def run(cp, *arrays):
    ins = [dg.Tensor(lt, ENGINE, a) for lt, a in zip(cp.get_inputs(), arrays)]
    outs = [dg.Tensor(lt, ENGINE, np.empty(lt.shape, lt.dtype.numpy)) for lt in cp.infer_outputs(ins)]
    cp.execute(dg.Stream(ENGINE), ins, outs)
    return [o.get_data_handle() for o in outs]


def const(m: ir.Program, v: int) -> int:
    m.exprs.append((0, v, 0))
    return len(m.exprs) - 1


def tensor(m: ir.Program, name: str) -> ir.Tensor:
    return next(t for t in m.tensors if t.name == name)


def op(m: ir.Program, kind_name: str) -> ir.Op:
    code = int(getattr(dg.OpKind, kind_name))
    return next(o for o in m.ops if o.kind == code)


def attr(o: ir.Op, name: str) -> ir.Attr:
    return next(a for a in o.attrs if a.name == name)


def expect_typed(fn, wrong_if_ok: str = "") -> None:
    """Exit 0 on a typed dyngraph error; 1 on an untyped one, or on success when
    ``wrong_if_ok`` says why success is wrong (else success is fine: exit 0)."""
    try:
        fn()
    except dg.DyngraphError as e:
        print(f"typed: {type(e).__name__}: {e}")
        sys.exit(0)
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        print("UNTYPED exception")
        sys.exit(1)
    if wrong_if_ok:
        print(f"WRONG: {wrong_if_ok}")
        sys.exit(1)
    print("ok")
    sys.exit(0)
