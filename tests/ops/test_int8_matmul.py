"""The int8 matrix product: QuantizedMatMul against numpy's integer
arithmetic (exact: the integer sums are exact and each f32 step rounds once
on both sides), and the compile-time pass that makes it of oneDNN's pattern
Dequantize -> MatMul <- Dequantize [-> Quantize]."""

import textwrap

import numpy as np
import pytest
from oputil import INT8_NP, INT8_RANGE, compile_op, int8_values, run
from reference.quant_numpy import dequantize, int8_matmul, quantize
from subproc import run_python

import dyngraph as dg

K = dg.OpKind
D = dg.DYNAMIC_DIM
NP, RANGE, ints = INT8_NP, INT8_RANGE, int8_values


def qmm_attrs(rng, adt, wdt, n, per_channel, out):
    zlo, zhi = (0, 256) if adt is dg.u8 else (-128, 128)
    attrs = {"src_scale": float(rng.uniform(0.01, 0.1)), "src_zp": int(rng.integers(zlo, zhi))}
    c = n if per_channel else 1
    attrs["wei_scales"] = [float(v) for v in rng.uniform(0.001, 0.05, c)]
    wlo, whi = (0, 256) if wdt is dg.u8 else (-128, 128)
    attrs["wei_zps"] = [int(v) for v in rng.integers(wlo, whi, c)] if per_channel != "nozp" else []
    if out in (dg.u8, dg.s8):
        attrs["dst_scale"] = 0.7
        attrs["dst_zp"] = 100 if out is dg.u8 else -5
    return attrs


def reference(a, w, attrs, bias, out, transpose_b):
    return int8_matmul(a, w, attrs["src_scale"], attrs["src_zp"], attrs["wei_scales"], attrs["wei_zps"], bias,
                       transpose_b, out.numpy, attrs.get("dst_scale", 1.0), attrs.get("dst_zp", 0))


@pytest.mark.parametrize("adt,wdt", [(dg.u8, dg.s8), (dg.s8, dg.s8), (dg.u8, dg.u8), (dg.s8, dg.u8)])
@pytest.mark.parametrize("k,n", [(16, 2), (37, 17), (300, 5)])
@pytest.mark.parametrize("per_channel", [True, False])
def test_quantized_matmul_equals_integer_arithmetic_at_every_length(adt, wdt, k, n, per_channel, rng):
    seq = dg.Dim("seq", min=1, max=256)
    attrs = qmm_attrs(rng, adt, wdt, n, per_channel, dg.f32)
    attrs["transpose_b"] = True
    w = ints(rng, wdt, (n, k))
    cp = compile_op(K.QuantizedMatMul, [[seq, k], [n, k]], [adt, wdt], attrs, out_dtypes=dg.f32, constants={1: w})
    for m in (1, 5, 33):
        a = ints(rng, adt, (m, k))
        (got,) = run(cp, a)
        np.testing.assert_array_equal(got, reference(a, w, attrs, None, dg.f32, True))
    assert cp.cache_info().builds == 3


@pytest.mark.parametrize("out", [dg.f32, dg.u8, dg.s8])
def test_quantized_matmul_with_bias_batch_and_requantized_output(out, rng):
    b = dg.Dim("b", min=1, max=8)
    k, n = 40, 9
    attrs = qmm_attrs(rng, dg.u8, dg.s8, n, True, out)
    w = ints(rng, dg.s8, (k, n))
    bias = rng.standard_normal(n).astype(np.float32)
    cp = compile_op(K.QuantizedMatMul, [[b, 3, k], [k, n], [n]], [dg.u8, dg.s8, dg.f32], attrs, out_dtypes=out,
                    constants={1: w, 2: bias})
    for nb in (1, 2, 7):
        a = ints(rng, dg.u8, (nb, 3, k))
        (got,) = run(cp, a)
        assert got.dtype == out.numpy and got.shape == (nb, 3, n)
        np.testing.assert_array_equal(got, reference(a, w, attrs, bias, out, False))


def test_quantized_matmul_with_variable_weights(rng):
    k, n = 33, 6
    attrs = qmm_attrs(rng, dg.s8, dg.s8, n, False, dg.f32)
    cp = compile_op(K.QuantizedMatMul, [[D, k], [k, n]], [dg.s8, dg.s8], attrs, out_dtypes=dg.f32)
    for m in (2, 11):
        a, w = ints(rng, dg.s8, (m, k)), ints(rng, dg.s8, (k, n))
        (got,) = run(cp, a, w)
        np.testing.assert_array_equal(got, reference(a, w, attrs, None, dg.f32, False))


def test_long_rows_sum_beyond_32_bits(rng):
    """|acc| up to 70000 * 255 * 255 (> 2^31): the 32-bit partial sums are flushed into 64 bits."""
    k = 70000
    attrs = {"src_scale": 1.0, "src_zp": 0, "wei_scales": [1.0], "wei_zps": [255], "transpose_b": True}
    a = np.full((3, k), 255, np.uint8)
    a[1] = rng.integers(0, 256, k)
    a[2, : k // 2] = 0
    w = np.zeros((2, k), np.uint8)
    w[1] = rng.integers(0, 256, k)
    cp = compile_op(K.QuantizedMatMul, [[D, k], [2, k]], [dg.u8, dg.u8], attrs, out_dtypes=dg.f32, constants={1: w},
                    engine=dg.Engine(dg.Engine.CPU, num_threads=2))
    (got,) = run(cp, a)
    want = reference(a, w, attrs, None, dg.f32, True)
    assert abs(float(want[0, 0])) > 2**31
    np.testing.assert_array_equal(got, want)


def test_two_threads_compute_the_same_numbers(rng):
    k, n = 64, 50
    attrs = qmm_attrs(rng, dg.u8, dg.s8, n, True, dg.u8)
    attrs["transpose_b"] = True
    w = ints(rng, dg.s8, (n, k))
    cps = [compile_op(K.QuantizedMatMul, [[D, k], [n, k]], [dg.u8, dg.s8], attrs, out_dtypes=dg.u8, constants={1: w},
                      engine=dg.Engine(dg.Engine.CPU, num_threads=t)) for t in (1, 2)]
    a = ints(rng, dg.u8, (13, k))
    got = [run(cp, a)[0] for cp in cps]
    np.testing.assert_array_equal(got[0], got[1])
    np.testing.assert_array_equal(got[0], reference(a, w, attrs, None, dg.u8, True))


GENERIC = textwrap.dedent("""
    import numpy as np, dyngraph as dg, sys
    sys.path.insert(0, {tests!r})
    from reference.quant_numpy import int8_matmul
    assert dg._backend.kernel_isa() == "generic"
    rng = np.random.default_rng(1)
    for k, n, m in ((16, 3, 1), (37, 17, 9), (300, 5, 4)):
        x = dg.LogicalTensor(0, dg.u8, [dg.DYNAMIC_DIM, k])
        w = dg.LogicalTensor(1, dg.s8, [n, k], property=dg.CONSTANT)
        y = dg.LogicalTensor(2, dg.f32)
        attrs = dict(transpose_b=True, src_scale=0.05, src_zp=7, wei_scales=list(rng.uniform(0.01, 0.1, n)),
                     wei_zps=[int(v) for v in rng.integers(-3, 3, n)])
        g = dg.Graph(dg.Engine.CPU)
        g.add_op(dg.Op(0, dg.OpKind.QuantizedMatMul, [x, w], [y], attrs))
        g.finalize()
        (p,) = g.get_partitions()
        W = rng.integers(-128, 128, (n, k)).astype(np.int8)
        cp = p.compile([x, w], [y], dg.Engine(dg.Engine.CPU, num_threads=2), constants={{1: W}})
        a = rng.integers(0, 256, (m, k)).astype(np.uint8)
        (out,) = cp(a)
        want = int8_matmul(a, W, 0.05, 7, attrs["wei_scales"], attrs["wei_zps"], transpose_b=True)
        assert (out == want).all(), (k, n, m)
    print("ok")
""")


def test_the_generic_kernel_computes_the_same_integers():
    import os

    tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    r = run_python(GENERIC.format(tests=tests), env_vars={"DYNGRAPH_KERNEL_ISA": "generic"})
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr


# -- the pattern pass ------------------------------------------------------------------------------


def int8_graph(k, n, *, w_qtype="per_channel", w_axis=1, bias=False, requant=True, transpose_b=False,
               extra_reader=False):
    """oneDNN's int8 MatMul: Dequantize(u8 src) -> MatMul (+ bias) <- Dequantize(s8 weights) [-> Quantize u8]."""
    seq = dg.Dim("seq", min=1, max=128)
    x = dg.LogicalTensor(0, dg.u8, [seq, k])
    wshape = [n, k] if transpose_b else [k, n]
    w = dg.LogicalTensor(1, dg.s8, wshape, property=dg.CONSTANT)
    b = dg.LogicalTensor(2, dg.f32, [n], property=dg.CONSTANT)
    xf, wf, y, q = (dg.LogicalTensor(i, t) for i, t in ((3, dg.f32), (4, dg.f32), (5, dg.f32), (6, dg.u8)))
    nch = wshape[w_axis]
    wattrs = {"qtype": w_qtype, "axis": w_axis, "scales": [0.01 * (1 + i % 7) for i in range(nch)],
              "zps": [i % 3 - 1 for i in range(nch)]}
    if w_qtype == "per_tensor":
        wattrs.update(scales=[0.02], zps=[0])
    g = dg.Graph(dg.Engine.CPU)
    g.add_op(dg.Op(0, K.Dequantize, [x], [xf], {"scales": [0.05], "zps": [128]}))
    g.add_op(dg.Op(1, K.Dequantize, [w], [wf], wattrs))
    g.add_op(dg.Op(2, K.MatMul, [xf, wf] + ([b] if bias else []), [y], {"transpose_b": transpose_b}))
    outs = [y]
    if requant:
        g.add_op(dg.Op(3, K.Quantize, [y], [q], {"scales": [0.5], "zps": [120]}))
        outs = [q]
    if extra_reader:
        r = dg.LogicalTensor(7, dg.f32)
        g.add_op(dg.Op(4, K.ReLU, [xf], [r]))
        outs.append(r)
    g.finalize()
    (p,) = g.get_partitions()
    ins = [x, w] + ([b] if bias else [])
    return p, ins, outs, wattrs


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("requant", [False, True])
@pytest.mark.parametrize("transpose_b", [False, True])
def test_the_int8_pattern_becomes_one_integer_product(bias, requant, transpose_b, rng):
    k, n = 48, 10
    p, ins, outs, wattrs = int8_graph(k, n, bias=bias, requant=requant, transpose_b=transpose_b,
                                      w_axis=0 if transpose_b else 1)
    W = rng.integers(-128, 128, [n, k] if transpose_b else [k, n]).astype(np.int8)
    B = rng.standard_normal(n).astype(np.float32)
    consts = {1: W, 2: B} if bias else {1: W}
    cp = p.compile(ins, outs, dg.Engine(dg.Engine.CPU, num_threads=1), constants=consts)
    kinds = [op.kind for op in cp._program.ops]
    assert kinds == [K.QuantizedMatMul], kinds
    wt = W.T if transpose_b else W
    for m in (1, 7, 30):
        a = rng.integers(0, 256, (m, k)).astype(np.uint8)
        (got,) = run(cp, a)
        want = int8_matmul(a, wt, 0.05, 128, wattrs["scales"], wattrs["zps"], B if bias else None,
                           out_dtype=np.uint8 if requant else np.float32, dst_scale=0.5, dst_zp=120)
        np.testing.assert_array_equal(got, want)
        # and what the unfused f32 graph computes, up to its rounding of each product
        f32 = dequantize(a, [0.05], [128]).astype(np.float64) @ dequantize(wt, wattrs["scales"], wattrs["zps"], axis=1)
        if bias:
            f32 = f32 + B
        if requant:
            assert np.abs(got.astype(int) - quantize(f32, [0.5], [120], np.uint8).astype(int)).max() <= 1
        else:
            np.testing.assert_allclose(got, f32, rtol=1e-5, atol=1e-5 * np.abs(f32).max())


@pytest.mark.parametrize("case", ["channels along K", "dequantized src read twice"])
def test_other_graphs_stay_unfused_and_compute_in_f32(case, rng):
    k, n = 16, 8
    opts = {"channels along K": dict(w_axis=0), "dequantized src read twice": dict(extra_reader=True)}[case]
    p, ins, outs, wattrs = int8_graph(k, n, requant=False, **opts)
    W = rng.integers(-128, 128, (k, n)).astype(np.int8)
    cp = p.compile(ins, outs, dg.Engine(dg.Engine.CPU, num_threads=1), constants={1: W})
    assert K.QuantizedMatMul not in [op.kind for op in cp._program.ops]
    a = rng.integers(0, 256, (5, k)).astype(np.uint8)
    got = run(cp, a)[0]
    want = dequantize(a, [0.05], [128]).astype(np.float64) @ dequantize(W, wattrs["scales"], wattrs["zps"],
                                                                          axis=opts.get("w_axis", 1))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


def test_a_fused_partition_saves_and_loads(tmp_path, rng):
    p, ins, outs, wattrs = int8_graph(32, 4, bias=True)
    W = rng.integers(-128, 128, (32, 4)).astype(np.int8)
    cp = p.compile(ins, outs, dg.Engine(dg.Engine.CPU, num_threads=1),
                   constants={1: W, 2: np.ones(4, np.float32)})
    cp.save(tmp_path / "q.dg")
    back = dg.load(tmp_path / "q.dg")
    a = rng.integers(0, 256, (6, 32)).astype(np.uint8)
    np.testing.assert_array_equal(back(a)[0], run(cp, a)[0])


# -- errors ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("attrs,match", [
    ({"src_scale": 0.0, "wei_scales": [1.0]}, "positive"),
    ({"src_scale": 1.0, "wei_scales": [1.0, 2.0]}, "wei_scales"),
    ({"src_scale": 1.0, "wei_scales": [1.0], "wei_zps": [200]}, "range of s8"),
    ({"src_scale": 1.0, "wei_scales": [1.0], "src_zp": -1}, "range of u8"),
    ({"src_scale": 1.0, "wei_scales": [1.0], "dst_zp": 300}, "<= 255"),
    ({"wei_scales": [1.0]}, "required"),
])
def test_bad_quantized_matmul_attributes(attrs, match):
    with pytest.raises((dg.GraphError, dg.ShapeError), match=match):
        compile_op(K.QuantizedMatMul, [[2, 8], [8, 3]], [dg.u8, dg.s8], attrs, out_dtypes=dg.u8)


def test_quantized_matmul_dtypes_and_shapes_are_checked():
    attrs = {"src_scale": 1.0, "wei_scales": [1.0]}
    with pytest.raises(dg.DTypeError):
        compile_op(K.QuantizedMatMul, [[2, 8], [8, 3]], [dg.f32, dg.s8], attrs, out_dtypes=dg.f32)
    with pytest.raises(dg.ShapeError, match="contraction"):
        compile_op(K.QuantizedMatMul, [[2, 8], [7, 3]], [dg.u8, dg.s8], attrs, out_dtypes=dg.f32)
    with pytest.raises(dg.ShapeError, match="rank 2"):
        compile_op(K.QuantizedMatMul, [[2, 8], [1, 8, 3]], [dg.u8, dg.s8], attrs, out_dtypes=dg.f32)
