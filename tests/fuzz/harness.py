"""What the fuzzer does with one input, inside a worker (or replay) process.

``run_case`` loads an artifact and exercises it: ``dyngraph.load`` (mode
"load") or the C++ constructor directly (mode "raw": ``_backend.
CompiledPartition(ir, {}, engine, 16)``, which skips the Python reader and
its checks: the C++ layer must hold on its own), then ``infer_outputs``
(shapes only, then with a build), ``execute`` and the one-call path, over a
few steps of inputs, then the state API.

Outcomes: "ok", "typed:<Error>" (a dyngraph error: the wanted behaviour for
bad input), "untyped:<Exception>" (a finding). Crashes, aborts and hangs are
seen by the parent, which reads the phase reported through ``phase``.
"""

from __future__ import annotations

import os
import traceback
from typing import Callable, List, Optional

import numpy as np

from . import irmodel

MAX_OUT_BYTES = 256 << 20  # outputs larger than this are not allocated (counted as "oversized")
NP_OF_CODE = {0: np.float32, 1: np.float16, 2: np.uint16, 3: np.int32, 4: np.int64, 5: np.bool_}


def arrays_of(step: list) -> List[np.ndarray]:
    return [np.array(a["data"], dtype=a["dtype"]).reshape(a["shape"]) for a in step]


def _generic(dtype, shape) -> np.ndarray:
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if np.issubdtype(dtype, np.floating):
        return (np.arange(n, dtype=np.float64) % 7 * 0.25 - 0.5).astype(dtype).reshape(shape)
    if dtype == np.bool_:
        return (np.arange(n) % 2 == 0).reshape(shape)
    return (np.arange(n) % 3).astype(dtype).reshape(shape)


def _small_shape(shape) -> Optional[list]:
    """Concrete dims for a logical shape: symbolic ones at 2; None when too big to allocate."""
    out = []
    for d in shape or ():
        v = d if isinstance(d, int) else 2
        if v < 0:
            return None
        out.append(v)
    total = 1
    for v in out:
        total *= v
    return out if total <= (1 << 22) else None


def _fits(arr: np.ndarray, dtype, rank: int) -> bool:
    return arr.dtype == np.dtype(dtype) and arr.ndim == rank


def _candidates(steps, dtypes, ranks, shapes):
    """Input arrays to try: the seed's steps when they fit the inputs, else generic ones."""
    out = []
    for step in steps or []:
        arrs = arrays_of(step)
        if len(arrs) == len(dtypes) and all(_fits(a, d, r) for a, d, r in zip(arrs, dtypes, ranks)):
            out.append(arrs)
    if not out:
        gen = []
        for d, s in zip(dtypes, shapes):
            if s is None:
                return out
            gen.append(_generic(d, s))
        out.append(gen)
    return out


def _nbytes(shape, dtype) -> int:
    n = np.dtype(dtype).itemsize
    for d in shape:
        n *= int(d)
    return n


class Counters:
    oversized = 0


class BadResult(Exception):
    """A call returned something impossible (a negative output dimension)."""


def _check_shapes(shapes):
    for s in shapes:
        if any(int(d) < 0 for d in s):
            raise BadResult(f"an output shape has a negative dimension: {list(s)}")


def _exercise_loaded(cp, dg, engine, steps, phase):
    lts = cp.get_inputs()
    dtypes = [lt.dtype.numpy for lt in lts]
    ranks = [len(lt.shape or ()) for lt in lts]
    shapes = [_small_shape(lt.shape) for lt in lts]
    for k, arrays in enumerate(_candidates(steps, dtypes, ranks, shapes)):
        phase("infer")
        ins = [dg.Tensor(lt, engine, a) for lt, a in zip(lts, arrays)]
        cp.infer_outputs(ins, build=False)
        out_lts = cp.infer_outputs(ins)
        _check_shapes([lt.shape for lt in out_lts])
        if any(_nbytes(lt.shape, lt.dtype.numpy) > MAX_OUT_BYTES for lt in out_lts):
            Counters.oversized += 1
            return
        outs = [dg.Tensor(lt, engine, np.empty(lt.shape, dtype=lt.dtype.numpy)) for lt in out_lts]
        phase("execute")
        cp.execute(dg.Stream(engine), ins, outs)
        if k == 0:
            phase("call")
            cp(*arrays)
    phase("state")
    for t in cp.program.tensors:
        if t.property.name == "STATE":
            cp.read_state(t.id)
    cp.reset_state()
    cp.cache_info()


def _exercise_raw(impl, backend, engine, body: bytes, steps, phase):
    try:
        m = irmodel.decode(body)
        tensors, inputs, outputs = m.tensors or [], m.inputs or [], m.outputs or []
        ins_t = [tensors[i] for i in inputs]
        outs_t = [tensors[i] for i in outputs]
        consts = {}
        for i, e in enumerate(m.exprs or []):
            if e[0] == 0:
                consts[i] = e[1]
    except Exception:  # the C++ verifier accepted it; the Python decoder is a helper only
        return
    dtypes = [NP_OF_CODE.get(t.dtype, np.float32) for t in ins_t]
    ranks = [len(t.shape or []) for t in ins_t]
    shapes = [_small_shape([consts.get(s, "sym") for s in t.shape or []]) for t in ins_t]
    out_dtypes = [NP_OF_CODE.get(t.dtype, np.float32) for t in outs_t]
    for k, arrays in enumerate(_candidates(steps, dtypes, ranks, shapes)):
        phase("infer")
        hts = [backend.Tensor(t.id, t.dtype, list(a.shape), a, engine) for t, a in zip(ins_t, arrays)]
        impl.infer(hts, False, True)
        shapes_out = impl.infer(hts, True, True)
        _check_shapes(shapes_out)
        if any(_nbytes(s, d) > MAX_OUT_BYTES for s, d in zip(shapes_out, out_dtypes)):
            Counters.oversized += 1
            return
        outs = [backend.Tensor(t.id, t.dtype, list(s), np.empty(s, dtype=d), engine) for t, s, d in zip(outs_t, shapes_out, out_dtypes)]
        phase("execute")
        impl.execute(hts, outs)
        if k == 0:
            phase("call")
            impl.run(arrays, out_dtypes)
    phase("state")
    impl.reset_state()
    impl.stats()


def run_case(data: bytes, mode: str, steps, engine, tmpdir: str, phase: Callable[[str], None] = lambda p: None,
             name: str = "case") -> str:
    """Run one input; returns "ok", "typed:<Error>" or "untyped:<Exception>|<where>|<message>"."""
    import dyngraph as dg
    from dyngraph import _backend

    try:
        if mode == "raw":
            phase("load")
            impl = _backend.CompiledPartition(data, {}, engine.impl, 16)
            _exercise_raw(impl, _backend, engine.impl, data, steps, phase)
            del impl
        else:
            path = os.path.join(tmpdir, f"{name}.dg")
            with open(path, "wb") as f:
                f.write(data)
            phase("load")
            try:
                cp = dg.load(path, engine)
            finally:
                os.unlink(path)  # a mapping keeps the content; the next input gets a new file
            _exercise_loaded(cp, dg, engine, steps, phase)
            del cp
        return "ok"
    except dg.DyngraphError as e:
        return f"typed:{type(e).__name__}"
    except Exception as e:  # noqa: BLE001 - this is what the fuzzer looks for
        tb = traceback.extract_tb(e.__traceback__)
        where = "?"
        if isinstance(e, BadResult):
            where = "result"
        for fr in reversed(tb):
            if where == "result":
                break
            if "dyngraph" in fr.filename:
                where = f"{os.path.basename(fr.filename)}:{fr.name}"
                break
        else:
            if tb:
                where = f"{os.path.basename(tb[-1].filename)}:{tb[-1].name}"
        return f"untyped:{type(e).__name__}|{where}|{str(e)[:200]}"
