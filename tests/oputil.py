"""Helpers for op tests: build a one-op graph with dynamic dimensions, compile
it once, run it at several shapes."""

from __future__ import annotations

from typing import Dict, Optional, Sequence

import numpy as np

import dyngraph as dg


# the int8 types of the quantized ops: their numpy type and the [lo, hi) of their values
INT8_NP = {dg.u8: np.uint8, dg.s8: np.int8}
INT8_RANGE = {dg.u8: (0, 256), dg.s8: (-128, 128)}


def int8_values(rng, dt, shape):
    """Values drawn over the whole range of u8 or s8."""
    lo, hi = INT8_RANGE[dt]
    return rng.integers(lo, hi, shape).astype(INT8_NP[dt])

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
    """Compile one op (built with dg.GraphBuilder). ``in_shapes`` use ints,
    dg.Dim expressions and DYNAMIC_DIM; the inputs whose position is in
    ``constants`` are CONSTANT (their tensor id is their position).
    ``out_dtypes``: the outputs' declared dtype, or one per output (else inferred)."""
    constants = constants or {}
    if isinstance(in_dtypes, dg.DataType):
        in_dtypes = [in_dtypes] * len(in_shapes)
    b = dg.GraphBuilder()
    ins = []
    for i, (shape, dt) in enumerate(zip(in_shapes, in_dtypes)):
        if i in constants:
            ins.append(b.constant(f"in{i}", np.asarray(constants[i]), dtype=dt))
        else:
            ins.append(b.input(f"in{i}", dt, shape))
    outs = b.op(kind, ins, attrs or {}, dtype=out_dtypes, n_outputs=n_outputs)
    b.output(*(outs if n_outputs > 1 else [outs]))
    return b.compile(engine or dg.Engine(dg.Engine.CPU, num_threads=1), **options)


def run(cp: dg.CompiledPartition, *arrays) -> list:
    """Execute through the explicit API: infer_outputs, allocate, execute."""
    eng = cp.engine
    ins = [dg.Tensor(lt, eng, a) for lt, a in zip(cp.get_inputs(), arrays)]
    out_lts = cp.infer_outputs(ins)  # Tensors: shape inputs' values are read from them
    outs = [dg.Tensor(lt, eng, np.empty(lt.shape, dtype=lt.dtype.numpy)) for lt in out_lts]
    cp.execute(dg.Stream(eng), ins, outs)
    return [t.get_data_handle() for t in outs]


def ggml_has_q4_0_layout() -> bool:
    """Whether ggml-cpu, as it was compiled, has an interleaved q4_0 layout for this CPU
    (ggml-cpu/repack.cpp: AVX2, or NEON with i8mm or dot products)."""
    has = dg._backend.build_info()["ggml_cpu_has"]
    return has["avx2"] or (has["neon"] and (has["matmul_int8"] or has["dotprod"]))


def ggml_repacks_q4_0() -> bool:
    """Whether q4_0 weights go to ggml's repacked layout (its faster kernels): where it has one, unless
    our kernels compute them (with AVX2 and up), faster still (kernels/f32_matmul.h)."""
    return ggml_has_q4_0_layout() and dg._backend.kernel_isa() == "generic"


def weight_product(n: int, k: int, rows=dg.DYNAMIC_DIM, transpose_b: bool = True):
    """The one-MatMul partition y = x @ w^T: x [rows, k] the input (tensor 0), w [n, k] a CONSTANT (tensor 1;
    [k, n] and y = x @ w without ``transpose_b``), y (tensor 2). Returns (partition, [x, w], [y]), to compile
    with ``constants={1: weight}``."""
    x = dg.LogicalTensor(0, dg.f32, [rows, k])
    w = dg.LogicalTensor(1, dg.f32, [n, k] if transpose_b else [k, n], property=dg.CONSTANT, name="w")
    y = dg.LogicalTensor(2, dg.f32, [dg.UNKNOWN_DIM, dg.UNKNOWN_DIM])
    g = dg.Graph(dg.Engine.CPU)
    g.add_op(dg.Op(0, dg.OpKind.MatMul, [x, w], [y], {"transpose_b": transpose_b}))
    g.finalize()
    (p,) = g.get_partitions()
    return p, [x, w], [y]


def compile_weight_product(n: int, k: int, weight, engine: Optional[dg.Engine] = None, transpose_b: bool = True,
                           **options) -> dg.CompiledPartition:
    """weight_product(n, k) compiled with its weight (an array or a dg.StoredWeight) for any number of rows."""
    p, ins, outs = weight_product(n, k, transpose_b=transpose_b)
    return p.compile(ins, outs, engine or dg.Engine(dg.Engine.CPU, num_threads=1), constants={1: weight}, **options)


def compile_tied(n: int, k: int, table, engine: Optional[dg.Engine] = None) -> dg.CompiledPartition:
    """A tied table [n, k] (an array or a dg.StoredWeight): ids [DYNAMIC_DIM] -> (its rows gathered, those
    rows @ table^T), an embedding and its output layer in one partition."""
    w = dg.LogicalTensor(1, dg.f32, [n, k], property=dg.CONSTANT)
    i = dg.LogicalTensor(0, dg.i64, [dg.DYNAMIC_DIM])
    x = dg.LogicalTensor(3, dg.f32, [dg.UNKNOWN_DIM, k])
    y = dg.LogicalTensor(2, dg.f32, [dg.UNKNOWN_DIM, dg.UNKNOWN_DIM])
    g = dg.Graph(dg.Engine.CPU)
    g.add_op(dg.Op(1, dg.OpKind.Gather, [w, i], [x], {"axis": 0}))
    g.add_op(dg.Op(0, dg.OpKind.MatMul, [x, w], [y], {"transpose_b": True}))
    g.finalize()
    (p,) = g.get_partitions()
    return p.compile([i, w], [x, y], engine or dg.Engine(dg.Engine.CPU, num_threads=1), constants={1: table})


def compile_gather(n: int, k: int, table, engine: Optional[dg.Engine] = None) -> dg.CompiledPartition:
    """ids [DYNAMIC_DIM] -> the rows of the table [n, k] (an array or a dg.StoredWeight): a Gather alone,
    which keeps the table's rows (ggml's get_rows)."""
    t = dg.LogicalTensor(0, dg.f32, [n, k], property=dg.CONSTANT)
    i = dg.LogicalTensor(1, dg.i64, [dg.DYNAMIC_DIM])
    r = dg.LogicalTensor(2, dg.f32, [dg.UNKNOWN_DIM, k])
    g = dg.Graph(dg.Engine.CPU)
    g.add_op(dg.Op(0, dg.OpKind.Gather, [t, i], [r], {"axis": 0}))
    g.finalize()
    (p,) = g.get_partitions()
    return p.compile([t, i], [r], engine or dg.Engine(dg.Engine.CPU, num_threads=1), constants={0: table})
