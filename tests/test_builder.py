"""dg.GraphBuilder: one method per registered op kind (made from the registry),
types inferred as ops are added, errors raised at the call that is wrong, and
a compiled graph that computes what numpy does."""

import inspect

import numpy as np
import pytest

import dyngraph as dg
from dyngraph.builder import method_name
from dyngraph.ops import registered_kinds, schema_of


def test_every_registered_op_kind_is_a_method_with_its_attributes_as_keywords():
    names = set()
    for kind in registered_kinds():
        m = getattr(dg.GraphBuilder, method_name(kind))
        params = inspect.signature(m).parameters
        for attr, spec in schema_of(kind).attrs.items():
            assert params[attr].kind is inspect.Parameter.KEYWORD_ONLY, (kind, attr)
        names.add(method_name(kind))
    assert len(names) == len(registered_kinds())  # one method per kind, no clash
    assert {method_name(k) for k in (dg.OpKind.MatMul, dg.OpKind.RMSNorm, dg.OpKind.ScaledDotProductAttention,
                                     dg.OpKind.StaticReshape, dg.OpKind.SoftMax)} == {
        "matmul", "rms_norm", "scaled_dot_product_attention", "static_reshape", "softmax"}


def test_a_built_mlp_infers_shapes_as_it_goes_and_matches_numpy(engine, rng):
    batch = dg.Dim("batch", max=64)
    w1 = rng.standard_normal((8, 16)).astype(np.float32)
    b1 = rng.standard_normal(16).astype(np.float32)
    w2 = rng.standard_normal((16, 4))  # float64: stored f32
    b = dg.GraphBuilder()
    x = b.input("x", dg.f32, [batch, 8])
    h = b.matmul(x, b.constant("w1", w1), b.constant("b1", b1))
    assert h.shape == (batch, 16) and h.dtype is dg.f32
    y = b.op(dg.OpKind.MatMul, [b.relu(h), b.constant("w2", w2)], name="y")
    assert y.shape == (batch, 4) and y.name == "y"
    b.output(y)
    cp = b.compile(engine)
    for n in (1, 5, 64):
        xv = rng.standard_normal((n, 8)).astype(np.float32)
        (got,) = cp(xv)
        want = np.maximum(xv @ w1 + b1, 0) @ w2.astype(np.float32)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_declared_dtype_ops_take_dtype_and_variadic_ops_take_a_list(engine):
    seq = dg.Dim("seq")
    b = dg.GraphBuilder()
    x = b.input("x", dg.i64, [seq])
    r = b.arange(end=seq, dtype=dg.i64)
    c = b.concat([x, r], axis=0)
    assert c.shape == (2 * seq,)
    b.output(b.type_cast(c, dtype=dg.f32))
    (got,) = b.compile(engine)(np.array([7, 8, 9]))
    np.testing.assert_array_equal(got, [7, 8, 9, 0, 1, 2])


def test_several_outputs_take_one_declared_dtype_each(engine):
    b = dg.GraphBuilder()
    x = b.input("x", dg.f32, [dg.Dim("n", min=3)])
    values, idx = b.op(dg.OpKind.TopK, [x], {"k": 3}, dtype=[None, dg.i32], n_outputs=2)
    assert (values.dtype, idx.dtype) == (dg.f32, dg.i32)
    b.output(values, idx)
    got_v, got_i = b.compile(engine)(np.array([1.0, 5.0, 3.0, 4.0], np.float32))
    np.testing.assert_array_equal(got_v, [5.0, 4.0, 3.0])
    np.testing.assert_array_equal(got_i, [1, 3, 2])
    assert got_i.dtype == np.int32
    b2 = dg.GraphBuilder()
    x2 = b2.input("x", dg.f32, [4])
    with pytest.raises(dg.GraphError, match="one per output"):
        b2.op(dg.OpKind.TopK, [x2], {"k": 1}, dtype=[dg.f32], n_outputs=2)
    with pytest.raises(dg.GraphError, match="dtype=i64 was asked"):
        b2.op(dg.OpKind.TopK, [x2], {"k": 1}, dtype=[dg.i64, dg.i64], n_outputs=2)


def test_state_and_several_outputs(engine, rng):
    b = dg.GraphBuilder()
    x = b.input("x", dg.f32, [dg.DYNAMIC_DIM, 6])
    centered = b.subtract(x, b.reduce_mean(x, axes=[1], keep_dims=True))
    y = b.layer_norm(centered, b.constant("gamma", np.ones(6, np.float32)), b.constant("beta", np.zeros(6, np.float32)))
    assert y.shape[1] == 6 and y.shape[0] is dg.UNKNOWN_DIM  # an anonymous dynamic dimension is left to finalize
    pos = b.input("pos", dg.i64, [1])
    cache = b.state("cache", dg.f32, [1, 4, 6], init=np.full((1, 4, 6), 2.0, np.float32))
    written = b.scatter_rows(cache, pos, b.static_reshape(b.slice(y, begin=[0], end=[1]), shape=[1, 1, 6]))
    b.output(y, centered, b.reduce_sum(written, axes=[2]))
    cp = b.compile(engine)
    xv = rng.standard_normal((3, 6)).astype(np.float32)
    got_y, got_centered, got_sum = cp(xv, np.array([2]))
    np.testing.assert_allclose(got_centered, xv - xv.mean(-1, keepdims=True), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_sum[0, [0, 1, 3]], 12.0)
    np.testing.assert_allclose(got_sum[0, 2], got_y[0].sum(), atol=1e-5)


def test_mistakes_are_errors_at_the_call():
    b = dg.GraphBuilder()
    x = b.input("x", dg.f32, [4, 3])
    with pytest.raises(dg.GraphError, match="unknown attribute 'axiss'"):
        b.softmax(x, axiss=0)
    with pytest.raises(dg.GraphError, match="'order' is required"):
        b.static_transpose(x)
    with pytest.raises(dg.ShapeError, match="do not broadcast"):
        b.add(x, b.input("y", dg.f32, [5, 3]))
    with pytest.raises(dg.DTypeError):
        b.add(x, b.input("z", dg.i32, [4, 3]))
    with pytest.raises(dg.GraphError, match="takes 2 inputs"):
        b.add(x)
    with pytest.raises(dg.GraphError, match="does not come from this builder"):
        b.relu(dg.GraphBuilder().input("x", dg.f32, [2]))
    with pytest.raises(dg.ShapeError, match="output dtype"):
        b.arange(end=4)
    with pytest.raises(dg.GraphError, match="unknown op kind"):
        b.op("NoSuchKind", [x])
    with pytest.raises(dg.CompileError, match="no outputs"):
        b.compile()


def test_a_graph_of_several_partitions_is_compiled_partition_by_partition():
    b = dg.GraphBuilder()
    x = b.input("x", dg.f32, [4])
    y = b.wildcard([b.relu(x)], [(dg.f32, [4])])
    b.output(b.tanh(y))
    with pytest.raises(dg.CompileError, match="3 partitions"):
        b.compile()
    assert [p.is_supported() for p in b.partitions()] == [True, False, True]
