"""Building, finalizing and shape-inferring graphs."""

import pytest

import dyngraph as dg

U = dg.UNKNOWN_DIM


def lt(i, shape, dtype=dg.f32, **kw):
    return dg.LogicalTensor(i, dtype, shape, **kw)


def test_finalize_infers_unknown_dims_symbolically():
    seq = dg.Dim("seq")
    x, w, y = lt(0, [seq, 8]), lt(1, [8, 4], property=dg.CONSTANT), lt(2, [U, U])
    g = dg.Graph()
    g.add_op(dg.Op(0, dg.OpKind.MatMul, [x, w], [y]))
    g.finalize()
    assert g.logical_tensor(2).shape == (seq, 4)


def test_derived_dimensions_are_expressions():
    seq = dg.Dim("seq")
    a, b, y = lt(0, [seq, 4]), lt(1, [seq, 4]), lt(2, None)
    g = dg.Graph()
    g.add_op(dg.Op(0, dg.OpKind.Concat, [a, b], [y], {"axis": 0}))
    g.finalize()
    assert g.logical_tensor(2).shape == (2 * seq, 4)


def test_dynamic_dim_becomes_a_symbol_named_after_the_tensor():
    x, y = lt(0, [dg.DYNAMIC_DIM, 3], name="x"), lt(1, None)
    g = dg.Graph()
    g.add_op(dg.Op(0, dg.OpKind.ReLU, [x], [y]))
    g.finalize()
    (d0, d1) = g.logical_tensor(1).shape
    assert str(d0) == "x.dim0" and d1 == 3


def test_mismatched_matmul_fails_at_finalize_naming_the_dims():
    g = dg.Graph()
    g.add_op(dg.Op(0, dg.OpKind.MatMul, [lt(0, [2, 3]), lt(1, [4, 5])], [lt(2, None)]))
    with pytest.raises(dg.ShapeError, match="contraction dimension.*3 != 4"):
        g.finalize()


def test_bad_broadcast_fails_at_finalize():
    g = dg.Graph()
    g.add_op(dg.Op(0, dg.OpKind.Add, [lt(0, [2, 3]), lt(1, [4, 3])], [lt(2, None)]))
    with pytest.raises(dg.ShapeError, match="do not broadcast"):
        g.finalize()


def test_declared_output_shape_must_match_inferred():
    g = dg.Graph()
    g.add_op(dg.Op(0, dg.OpKind.ReLU, [lt(0, [2, 3])], [lt(1, [2, 4])]))
    with pytest.raises(dg.ShapeError, match="dimension 1"):
        g.finalize()


def test_declared_output_dtype_must_match_inferred():
    g = dg.Graph()
    g.add_op(dg.Op(0, dg.OpKind.ReLU, [lt(0, [2, 3])], [lt(1, [2, 3], dtype=dg.f16)]))
    with pytest.raises(dg.DTypeError, match="declared f16"):
        g.finalize()


@pytest.mark.parametrize(
    "op, match",
    [
        (dg.Op(0, dg.OpKind.ReLU, [lt(0, [2])], [lt(1, None)], {"alpha": 1.0}), "unknown attribute 'alpha'"),
        (dg.Op(0, dg.OpKind.Add, [lt(0, [2])], [lt(1, None)]), "takes 2 inputs, got 1"),
        (dg.Op(0, dg.OpKind.SoftMax, [lt(0, [2])], [lt(1, None)], {"axis": "last"}), "must be an int"),
        (dg.Op(0, dg.OpKind.GELU, [lt(0, [2])], [lt(1, None)], {"mode": "fast"}), "must be one of"),
        (dg.Op(0, dg.OpKind.StaticReshape, [lt(0, [2])], [lt(1, None)]), "'shape' is required"),
        (dg.Op(0, dg.OpKind.ReLU, [lt(0, [2])], [lt(0, [2])]), "consumes its own output|already"),
    ],
)
def test_malformed_ops_raise_graph_errors(op, match):
    g = dg.Graph()
    with pytest.raises(dg.GraphError, match=match):
        g.add_op(op)
        g.finalize()


def test_a_tensor_produced_twice_is_refused():
    g = dg.Graph()
    g.add_op(dg.Op(0, dg.OpKind.ReLU, [lt(0, [2])], [lt(1, [2])]))
    with pytest.raises(dg.GraphError, match="already produced"):
        g.add_op(dg.Op(1, dg.OpKind.Tanh, [lt(0, [2])], [lt(1, [2])]))


def test_inconsistent_declarations_of_one_id_are_refused():
    g = dg.Graph()
    g.add_op(dg.Op(0, dg.OpKind.ReLU, [lt(0, [2])], [lt(1, [2])]))
    with pytest.raises(dg.GraphError, match="declared with dtype"):
        g.add_op(dg.Op(1, dg.OpKind.Tanh, [lt(1, [2], dtype=dg.f16)], [lt(2, [2])]))


def test_cycles_are_refused():
    g = dg.Graph()
    g.add_op(dg.Op(0, dg.OpKind.ReLU, [lt(1, [2])], [lt(0, [2])]))
    g.add_op(dg.Op(1, dg.OpKind.Tanh, [lt(0, [2])], [lt(1, [2])]))
    with pytest.raises(dg.GraphError, match="cycle"):
        g.finalize()


def test_no_ops_after_finalize():
    g = dg.Graph()
    g.add_op(dg.Op(0, dg.OpKind.ReLU, [lt(0, [2])], [lt(1, [2])]))
    g.finalize()
    with pytest.raises(dg.GraphError, match="finalized"):
        g.add_op(dg.Op(1, dg.OpKind.Tanh, [lt(1, [2])], [lt(2, [2])]))


def test_partitions_need_finalize():
    g = dg.Graph()
    g.add_op(dg.Op(0, dg.OpKind.ReLU, [lt(0, [2])], [lt(1, [2])]))
    with pytest.raises(dg.GraphError, match="finalize"):
        g.get_partitions()


def test_rank_above_six_is_refused_and_above_four_for_kinds_that_take_four():
    with pytest.raises(dg.ShapeError, match="rank 7"):
        g = dg.Graph()
        g.add_op(dg.Op(0, dg.OpKind.ReLU, [lt(0, [1, 2, 3, 4, 5, 1, 2])], [lt(1, None)]))
        g.finalize()
    with pytest.raises(dg.ShapeError, match="rank 5; ScatterRows takes rank 4 at most"):
        g = dg.Graph()
        g.add_op(dg.Op(0, dg.OpKind.ScatterRows, [lt(0, [1, 2, 3, 4, 5]), lt(1, [2], dg.i64), lt(2, [1, 2, 3, 2, 5])],
                       [lt(3, None)]))
        g.finalize()


def test_two_dims_with_one_name_are_refused_at_finalize():
    x = dg.LogicalTensor(0, dg.f32, [dg.Dim("n"), 4])
    y = dg.LogicalTensor(1, dg.f32, [dg.Dim("n"), 4])
    g = dg.Graph(dg.Engine.CPU)
    g.add_op(dg.Op(0, dg.OpKind.ReLU, [x], [y]))
    with pytest.raises(dg.GraphError, match="two different dimensions named 'n'.*same Dim object"):
        g.finalize()


def test_ids_above_int64_are_graph_errors():
    """The IR stores ids as int64: a larger one (oneDNN JSON can carry any integer) is refused where it
    is declared, not by the IR writer (fuzz finding: json seed 0 input 1221)."""
    with pytest.raises(dg.GraphError, match=r"logical tensor id 9223372036854775808 is above 2\*\*63 - 1"):
        dg.LogicalTensor(2**63, dg.f32, [2])
    x = dg.LogicalTensor(2**63 - 1, dg.f32, [2])  # the largest one is fine
    y = dg.LogicalTensor(0, dg.f32, [2])
    with pytest.raises(dg.GraphError, match=r"op id 9223372036854775810 is above 2\*\*63 - 1"):
        dg.Op(2**63 + 2, dg.OpKind.ReLU, [x], [y])
