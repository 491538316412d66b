"""Partitioning: supported ops are grouped, unsupported ones stand alone."""

import numpy as np
import pytest

import dyngraph as dg
import dyngraph.onednn  # noqa: F401  (from_json)


def lt(i, shape=None, **kw):
    return dg.LogicalTensor(i, dg.f32, shape, **kw)


def chain_with_wildcard():
    """x -> MatMul -> Wildcard (the caller's op) -> ReLU -> y"""
    n = dg.Dim("n")
    g = dg.Graph()
    g.add_op(dg.Op(0, dg.OpKind.MatMul, [lt(0, [n, 4]), lt(1, [4, 3], property=dg.CONSTANT)], [lt(2)]))
    g.add_op(dg.Op(1, dg.OpKind.Wildcard, [lt(2)], [lt(3, [n, 3])]))
    g.add_op(dg.Op(2, dg.OpKind.ReLU, [lt(3)], [lt(4)]))
    g.finalize()
    return g


def test_an_unsupported_op_gets_its_own_partition():
    parts = chain_with_wildcard().get_partitions()
    assert [p.is_supported() for p in parts] == [True, False, True]
    assert [[op.kind for op in p.get_ops()] for p in parts] == [
        [dg.OpKind.MatMul], [dg.OpKind.Wildcard], [dg.OpKind.ReLU]
    ]


def test_partition_ports_connect_through_the_unsupported_partition():
    p0, p1, p2 = chain_with_wildcard().get_partitions()
    assert [t.id for t in p0.get_input_ports()] == [0, 1]
    assert [t.id for t in p0.get_output_ports()] == [2]
    assert [t.id for t in p1.get_input_ports()] == [2] and [t.id for t in p1.get_output_ports()] == [3]
    assert [t.id for t in p2.get_input_ports()] == [3] and [t.id for t in p2.get_output_ports()] == [4]


def test_compiling_an_unsupported_partition_is_a_compile_error():
    _, p1, _ = chain_with_wildcard().get_partitions()
    with pytest.raises(dg.CompileError, match="Wildcard.*not supported"):
        p1.compile(p1.get_input_ports(), p1.get_output_ports(), dg.Engine(num_threads=1))


def test_caller_runs_the_unsupported_partition_between_compiled_ones():
    g = chain_with_wildcard()
    p0, p1, p2 = g.get_partitions()
    eng = dg.Engine(num_threads=1)
    W = np.arange(12, dtype=np.float32).reshape(4, 3) - 6
    c0 = p0.compile(p0.get_input_ports(), p0.get_output_ports(), eng, constants={1: W})
    c2 = p2.compile(p2.get_input_ports(), p2.get_output_ports(), eng)
    for n in (1, 5, 9):
        x = np.linspace(-1, 1, n * 4, dtype=np.float32).reshape(n, 4)
        (h,) = c0(x)
        u = h * 2.0 - 1.0  # the "unsupported" op, run by the caller
        (y,) = c2(u.astype(np.float32))
        np.testing.assert_allclose(y, np.maximum((x @ W) * 2.0 - 1.0, 0), rtol=1e-6, atol=1e-5)


def test_grouping_never_makes_a_cycle_between_partitions():
    """a = relu(x); u = wildcard(a); b = tanh(a); c = b + u: relu and tanh may share a
    partition, the add may not join them (it depends on them through the wildcard)."""
    g = dg.Graph()
    g.add_op(dg.Op(0, dg.OpKind.ReLU, [lt(0, [3])], [lt(1)]))
    g.add_op(dg.Op(1, dg.OpKind.Wildcard, [lt(1)], [lt(2, [3])]))
    g.add_op(dg.Op(2, dg.OpKind.Tanh, [lt(1)], [lt(3)]))
    g.add_op(dg.Op(3, dg.OpKind.Add, [lt(3), lt(2)], [lt(4)]))
    g.finalize()
    parts = g.get_partitions()
    kinds = [sorted(op.kind.name for op in p.get_ops()) for p in parts]
    assert kinds == [["ReLU", "Tanh"], ["Wildcard"], ["Add"]]
    # every partition's inputs are produced by an earlier partition (or are graph inputs)
    produced = set()
    graph_inputs = {0}
    for p in parts:
        assert all(t.id in produced or t.id in graph_inputs for t in p.get_input_ports())
        produced |= {t.id for t in p.get_output_ports()}


def test_disconnected_supported_ops_form_separate_partitions():
    g = dg.Graph()
    g.add_op(dg.Op(0, dg.OpKind.ReLU, [lt(0, [3])], [lt(1)]))
    g.add_op(dg.Op(1, dg.OpKind.Tanh, [lt(2, [3])], [lt(3)]))
    g.finalize()
    assert len(g.get_partitions()) == 2


def test_the_fewest_policy_groups_every_supported_op_of_a_stage():
    """x -> relu -> wildcard -> add(., fill) and an unconnected tanh(z), a fill with
    no inputs: under "connected" the fill and tanh are partitions of their own,
    under "fewest" one partition before the wildcard and one after it."""
    g = dg.Graph()
    g.add_op(dg.Op(0, dg.OpKind.ReLU, [lt(0, [3])], [lt(1)]))
    g.add_op(dg.Op(1, dg.OpKind.Wildcard, [lt(1)], [lt(2, [3])]))
    g.add_op(dg.Op(2, dg.OpKind.Full, [], [lt(3)], {"shape": [3], "value": 2.0}))
    g.add_op(dg.Op(3, dg.OpKind.Add, [lt(2), lt(3)], [lt(4)]))
    g.add_op(dg.Op(4, dg.OpKind.Tanh, [lt(5, [3])], [lt(6)]))
    g.finalize()
    assert len(g.get_partitions()) == 5
    parts = g.get_partitions(policy="fewest")
    kinds = [sorted(op.kind.name for op in p.get_ops()) for p in parts]
    assert kinds == [["Full", "ReLU", "Tanh"], ["Wildcard"], ["Add"]]
    produced, graph_inputs = set(), {0, 5}
    for p in parts:
        assert all(t.id in produced or t.id in graph_inputs for t in p.get_input_ports())
        produced |= {t.id for t in p.get_output_ports()}
    # and they compute: the caller runs the wildcard between the two compiled partitions
    eng = dg.Engine(dg.Engine.CPU)
    p0, _, p2 = parts
    c0 = p0.compile(p0.get_input_ports(), p0.get_output_ports(), eng)
    x, z = np.array([-1.0, 0.5, 2.0], np.float32), np.array([0.1, -3.0, 1.0], np.float32)
    ins = {0: x, 5: z}
    outs = dict(zip([t.id for t in p0.get_output_ports()], c0(*[ins[t.id] for t in p0.get_input_ports()])))
    np.testing.assert_allclose(outs[6], np.tanh(z), rtol=1e-6)
    outs[2] = outs[1] * 10  # the wildcard
    c2 = p2.compile(p2.get_input_ports(), p2.get_output_ports(), eng)
    (y,) = c2(*[outs[t.id] for t in p2.get_input_ports()])
    np.testing.assert_allclose(y, np.maximum(x, 0) * 10 + 2.0, rtol=1e-6)


def test_an_unknown_partition_policy_is_refused():
    g = chain_with_wildcard()
    with pytest.raises(dg.CompileError, match="policy"):
        g.get_partitions(policy="greedy")


def test_compile_must_name_every_port():
    g = chain_with_wildcard()
    p0 = g.get_partitions()[0]
    with pytest.raises(dg.CompileError, match="missing \\[1\\]"):
        p0.compile([lt(0, [dg.DYNAMIC_DIM, 4])], p0.get_output_ports(), dg.Engine(num_threads=1))


def test_constants_need_data():
    p0 = chain_with_wildcard().get_partitions()[0]
    with pytest.raises(dg.CompileError, match="constant 1 has no data"):
        p0.compile(p0.get_input_ports(), p0.get_output_ports(), dg.Engine(num_threads=1))


def test_constant_data_shape_must_match():
    p0 = chain_with_wildcard().get_partitions()[0]
    with pytest.raises(dg.ShapeError, match="declared shape \\[4, 3\\], data has shape \\[3, 4\\]"):
        p0.compile(p0.get_input_ports(), p0.get_output_ports(), dg.Engine(num_threads=1),
                   constants={1: np.zeros((3, 4), np.float32)})


def test_a_static_dim_cannot_become_dynamic_at_compile():
    p0 = chain_with_wildcard().get_partitions()[0]
    with pytest.raises(dg.CompileError, match="static \\(4\\) in the graph but DYNAMIC_DIM"):
        p0.compile([lt(0, [dg.DYNAMIC_DIM, dg.DYNAMIC_DIM]), lt(1, [4, 3], property=dg.CONSTANT)],
                   p0.get_output_ports(), dg.Engine(num_threads=1), constants={1: np.zeros((4, 3), np.float32)})


def test_compile_can_make_a_dynamic_dim_static():
    p0 = chain_with_wildcard().get_partitions()[0]
    cp = p0.compile([lt(0, [5, 4]), lt(1, [4, 3], property=dg.CONSTANT)], p0.get_output_ports(),
                    dg.Engine(num_threads=1), constants={1: np.ones((4, 3), np.float32)})
    assert cp.get_outputs()[0].shape == (5, 3)
    with pytest.raises(dg.ShapeError, match="static, expected 5, got 6"):
        cp.infer_outputs([lt(0, [6, 4])])


@pytest.mark.parametrize("rows", [7, 127])
def test_a_static_compile_builds_the_graph_a_dynamic_one_builds_at_that_shape(rows):
    """Static shapes take the dynamic path (issue 25): one ggml graph of the same
    nodes and arena, and the same numbers, whether rows is fixed at compile or not."""
    rng = np.random.default_rng(0)
    ws = [(rng.standard_normal((64, 64), dtype=np.float32) / 8, rng.standard_normal(64, dtype=np.float32))
          for _ in range(4)]

    def compiled(dim):
        b = dg.GraphBuilder()
        h = b.input("x", dg.f32, [dim, 64])
        for i, (w, bias) in enumerate(ws):
            h = b.gelu(b.matmul(h, b.constant(f"w{i}", w), b.constant(f"b{i}", bias)))
        b.output(h)
        return b.compile(dg.Engine(num_threads=1))

    static, dynamic = compiled(rows), compiled(dg.Dim("rows"))
    x = rng.standard_normal((rows, 64), dtype=np.float32)
    (ys,), (yd,) = static(x), dynamic(x)
    np.testing.assert_array_equal(ys, yd)
    si, di = static.cache_info(), dynamic.cache_info()
    assert (si.last_graph_nodes, si.arena_bytes, si.constant_bytes) == (di.last_graph_nodes, di.arena_bytes,
                                                                        di.constant_bytes)


def test_sizes_no_input_gives_are_read_from_a_symbol_input(engine, tmp_path):
    """A partition that makes a tensor of a dimension none of its inputs has
    (an Arange of seq) compiles when the caller gives seq's value: one more
    input, last, an i64 vector of the values of cp.symbol_inputs."""
    seq, past = dg.Dim("seq", max=64), dg.Dim("past", max=64)
    b = dg.GraphBuilder()
    x = b.input("x", dg.f32, [past, 2])
    y = b.add(b.type_cast(b.arange(start=past, end=past + seq, dtype=dg.i64), dtype=dg.f32),
              b.reduce_sum(x, axes=[0, 1]))
    b.output(y)
    (part,) = b.partitions()
    with pytest.raises(dg.CompileError, match="'seq'.*cannot be determined"):
        part.compile([x], [y], engine)
    cp = part.compile([x], [y], engine, symbols=[seq, past])
    assert cp.symbol_inputs == [seq.sym]  # past is x's: only seq is passed
    assert [lt.dtype for lt in cp.get_inputs()] == [dg.f32, dg.i64]
    xv = np.ones((3, 2), np.float32)
    for n in (1, 5, 64):
        (got,) = cp(xv, np.array([n], np.int64))
        np.testing.assert_array_equal(got, np.arange(3, 3 + n) + 6.0)
    # the messages name the input and the element (their words are made only for an error)
    with pytest.raises(dg.ShapeError, match=r"input 1 .*element 0 is 65: that makes seq = 65, outside its range"):
        cp(xv, np.array([65], np.int64))
    with pytest.raises(dg.ShapeError, match=r"input 1 .*: element 0 is needed but it has 0 elements"):
        cp(xv, np.array([], np.int64))
    cp.save(tmp_path / "p.dg")
    loaded = dg.load(tmp_path / "p.dg", engine)
    assert [s.name for s in loaded.symbol_inputs] == ["seq"]
    np.testing.assert_array_equal(loaded(xv, np.array([4], np.int64))[0], np.arange(3, 7) + 6.0)


def _independent_ops_json(n):
    def lt(i):
        return {"id": i, "dtype": "f32", "shape": [2, 3], "stride": [3, 1], "layout_type": "strided",
                "property_type": "undef"}
    ops = [{"id": i, "name": f"abs{i}", "kind": "Abs", "attrs": {}, "inputs": [lt(2 * i)], "outputs": [lt(2 * i + 1)]}
           for i in range(n)]
    return {"version": "3.5.0", "engine_kind": "cpu", "fpmath_mode": "strict", "graph": ops}


def test_partitioning_reads_the_graph_once_not_once_per_partition(monkeypatch):
    """The work count: n independent ops make n partitions; the graph's op list is walked
    a fixed number of times (it was once per partition: quadratic)."""
    calls = {"n": 0}
    real = dg.Graph.get_ops

    def counting(self):
        calls["n"] += 1
        return real(self)

    for n in (10, 200):
        g = dg.onednn.from_json(_independent_ops_json(n))
        calls["n"] = 0
        monkeypatch.setattr(dg.Graph, "get_ops", counting)
        parts = g.get_partitions()
        monkeypatch.setattr(dg.Graph, "get_ops", real)
        assert len(parts) == n
        assert calls["n"] <= 2, (n, calls["n"])


def test_twenty_thousand_op_json_graph_is_read_and_partitioned():
    """20,000 independent ops (6 MB of JSON): seconds now; with the per-partition scan it took over 300 s."""
    g = dg.onednn.from_json(_independent_ops_json(20_000))
    parts = g.get_partitions()
    assert len(parts) == 20_000
    assert [t.id for t in parts[-1].get_input_ports()] == [39_998]
    assert [t.id for t in parts[-1].get_output_ports()] == [39_999]
