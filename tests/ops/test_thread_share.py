"""Every kernel of ours splits its work with one helper (backend/kernels/thread_share.h): the same
results with 1, 2, 3 and 5 threads, also when there are fewer tasks (rows, planes, columns) than threads."""

import numpy as np
import pytest

import dyngraph as dg

K = dg.OpKind
rng = np.random.default_rng(7)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def _pool(kind, fmt, **extra):
    shape = (2, 3, 5, 6) if fmt == "NCX" else (2, 5, 6, 3)
    attrs = dict(strides=[1, 2], pads_begin=[1, 0], pads_end=[0, 1], kernel=[2, 3], data_format=fmt, **extra)
    return [f32(*shape)], lambda b, x: b.op(kind, [x], attrs)


def _conv(fmt):
    x = f32(1, 3, 5, 4) if fmt == "NCX" else f32(1, 5, 4, 3)
    w = f32(3, 3, 3, 4)  # XIO: kh, kw, in, out
    attrs = dict(strides=[1, 1], pads_begin=[1, 1], pads_end=[1, 1], dilations=[1, 1], data_format=fmt)
    return [x], lambda b, x: b.op(K.Convolution, [x, b.constant("w", w)], attrs)


def _matmul(m, k, n):
    w = f32(k, n)  # a constant: laid out in panels where the CPU's kernels take them (x86-64)
    return [f32(m, k)], lambda b, x: b.matmul(x, b.constant("w", w))


def _batch_norm(shape, fmt):
    g, be, m, v = f32(3), f32(3), f32(3), np.abs(f32(3)) + 0.5  # drawn once: the same constants on every run
    return [f32(*shape)], lambda b, x: b.op(K.BatchNormInference, [
        x, b.constant("g", g), b.constant("b", be), b.constant("m", m), b.constant("v", v)],
        dict(epsilon=1e-5, data_format=fmt))


TABLE, UPDATES = f32(5, 6), f32(2, 4)


CASES = {
    "maximum": ([f32(3, 2, 5), f32(3, 2, 5)], lambda b, x, y: b.op(K.Maximum, [x, y])),
    "strided slice": ([f32(4, 7, 9)], lambda b, x: b.op(K.Slice, [x], dict(begin=[0, 1], end=[4, 7], axes=[0, 1],
                                                                          steps=[3, 2]))),
    "argsort": ([f32(2, 9)], lambda b, x: b.op(K.ArgSort, [x], dict(axis=-1))),
    "quantize": ([f32(5, 7)], lambda b, x: b.op(K.Quantize, [x], dict(scales=[0.05], zps=[7]), dtype=dg.u8)),
    "gather": ([np.array([[4, 0, 2]], np.int64)],
               lambda b, i: b.op(K.Gather, [b.constant("t", TABLE), i], dict(axis=0))),
    "scatter_nd": ([f32(6, 4)], lambda b, d: b.op(K.ScatterND, [d, b.constant("i", np.array([[1], [4]], np.int64)),
                                                                 b.constant("u", UPDATES)])),
    "batch norm NCX": _batch_norm((2, 3, 2, 2), "NCX"),
    "batch norm NXC": _batch_norm((2, 2, 2, 3), "NXC"),
    "max pool NCX": _pool(K.MaxPool, "NCX"),
    "max pool NXC": _pool(K.MaxPool, "NXC"),
    "avg pool NCX": _pool(K.AvgPool, "NCX", exclude_pad=True),
    "nearest resize NCX": ([f32(1, 2, 3, 4)], lambda b, x: b.op(K.Interpolate, [x], dict(
        mode="nearest", sizes=[5, 7], data_format="NCX"))),
    "nearest resize NXC": ([f32(1, 3, 4, 2)], lambda b, x: b.op(K.Interpolate, [x], dict(
        mode="nearest", sizes=[5, 7], data_format="NXC"))),
    "attention prefill": ([f32(1, 4, 40, 16), f32(1, 2, 40, 16), f32(1, 2, 40, 16)],
                          lambda b, q, k, v: b.op(K.ScaledDotProductAttention, [q, k, v], dict(is_causal=True))),
    # 4 (batch, kv head) pairs: each a task of its group's 5 query heads, or one task per head from 5 threads
    "attention decode": ([f32(2, 10, 1, 16), f32(2, 2, 9, 16), f32(2, 2, 9, 16)],
                         lambda b, q, k, v: b.op(K.ScaledDotProductAttention, [q, k, v])),
    # decoding over 3 key blocks of 512: 3 kv heads x 3 blocks of tasks, joined in block order
    "attention decode key blocks": ([f32(1, 9, 1, 16), f32(1, 3, 1100, 16), f32(1, 3, 1100, 16)],
                                    lambda b, q, k, v: b.op(K.ScaledDotProductAttention, [q, k, v])),
    "convolution NXC": _conv("NXC"),  # (NCX goes through sgemm, whose sums depend on its blocking)
    # f32 products over constant weights: whole panels of 48 columns per thread (5 panels, the last of 8)
    "matmul 37 rows": _matmul(37, 100, 200),
    "matmul 2 rows": _matmul(2, 33, 100),
}


def _run(inputs, build, threads):
    b = dg.GraphBuilder()
    xs = [b.input(f"x{i}", {np.float32: dg.f32, np.int64: dg.i64}[a.dtype.type], list(a.shape))
          for i, a in enumerate(inputs)]
    b.output(build(b, *xs))
    cp = b.compile(dg.Engine(dg.Engine.CPU, num_threads=threads))
    (out,) = cp(*inputs)
    return np.array(out), cp.cache_info().panel_bytes


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_kernel_gives_the_same_result_on_any_number_of_threads(case):
    inputs, build = CASES[case]
    one, panels = _run(inputs, build, 1)
    # (a product whose weights keep their rows, where the panels are off: the generic kernel level, CPUs
    # other than x86-64: from 8 rows OpenBLAS's sgemm, whose sums depend on the columns a thread gets)
    sgemm = case == "matmul 37 rows" and panels == 0
    for threads in (2, 3, 5):
        got = _run(inputs, build, threads)[0]
        if sgemm:
            np.testing.assert_allclose(got, one, rtol=1e-5, atol=1e-5, err_msg=f"{case}, {threads} threads")
        else:
            np.testing.assert_array_equal(got, one, err_msg=f"{case}, {threads} threads")
