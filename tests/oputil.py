"""Helpers for op tests: build a one-op graph with dynamic dimensions, compile
it once, run it at several shapes."""

from __future__ import annotations

from typing import Dict, Optional, Sequence

import numpy as np

import dyngraph as dg


def compile_op(
    kind: dg.OpKind,
    in_shapes: Sequence[Sequence],
    in_dtypes=dg.f32,
    attrs: Optional[dict] = None,
    out_dtypes=None,
    n_outputs: int = 1,
    constants: Optional[Dict[int, np.ndarray]] = None,
    engine: Optional[dg.Engine] = None,
    **options,
) -> dg.CompiledPartition:
    """Compile one op. ``in_shapes`` use ints, dg.Dim expressions and DYNAMIC_DIM;
    inputs whose id is in ``constants`` are CONSTANT. Output ids are 100, 101, ..."""
    constants = constants or {}
    if isinstance(in_dtypes, dg.DataType):
        in_dtypes = [in_dtypes] * len(in_shapes)
    ins = [
        dg.LogicalTensor(i, dt, shape, property=dg.CONSTANT if i in constants else dg.VARIABLE, name=f"in{i}")
        for i, (shape, dt) in enumerate(zip(in_shapes, in_dtypes))
    ]
    if out_dtypes is None:
        out_dtypes = [in_dtypes[0]] * n_outputs
    elif isinstance(out_dtypes, dg.DataType):
        out_dtypes = [out_dtypes] * n_outputs
    outs = [dg.LogicalTensor(100 + k, dt, None, name=f"out{k}") for k, dt in enumerate(out_dtypes)]
    g = dg.Graph(dg.Engine.CPU)
    g.add_op(dg.Op(0, kind, ins, outs, attrs or {}))
    g.finalize()
    parts = g.get_partitions()
    assert len(parts) == 1 and parts[0].is_supported(), parts
    engine = engine or dg.Engine(dg.Engine.CPU, num_threads=1)
    return parts[0].compile(ins, outs, engine, constants=constants, **options)


def run(cp: dg.CompiledPartition, *arrays) -> list:
    """Execute through the explicit API: infer_outputs, allocate, execute."""
    eng = cp.engine
    ins = [dg.Tensor(lt, eng, a) for lt, a in zip(cp.get_inputs(), arrays)]
    out_lts = cp.infer_outputs(ins)  # Tensors: shape inputs' values are read from them
    outs = [dg.Tensor(lt, eng, np.empty(lt.shape, dtype=lt.dtype.numpy)) for lt in out_lts]
    cp.execute(dg.Stream(eng), ins, outs)
    return [t.get_data_handle() for t in outs]
