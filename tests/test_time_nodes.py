"""CompiledPartition._impl.time_nodes: the profiling aid that times each ggml node alone."""

import numpy as np
import pytest

import dyngraph as dg
from oputil import compile_op

D = dg.DYNAMIC_DIM
K = dg.OpKind


def prepared(cp, *arrays):
    eng = cp.engine
    ins = [dg.Tensor(lt, eng, a) for lt, a in zip(cp.get_inputs(), arrays)]
    outs = [dg.Tensor(lt, eng, np.empty(lt.shape, lt.dtype.numpy)) for lt in cp.infer_outputs(ins)]
    return ins, outs


def test_time_nodes_lists_each_node_of_the_executed_graph(rng):
    b = dg.GraphBuilder()
    x = b.input("x", dg.f32, [dg.Dim("n"), 16])
    w_data = rng.standard_normal((16, 8)).astype(np.float32)
    w = b.constant("w", w_data)
    # Tanh: a ReLU or GELU read off the product alone runs in the product's node (test_matmul_activation.py)
    b.output(b.op("Tanh", [b.matmul(x, w)], {}))
    cp = b.compile(dg.Engine(dg.Engine.CPU, num_threads=1))
    for n in (3, 40):
        ins, outs = prepared(cp, rng.standard_normal((n, 16)).astype(np.float32))
        nodes = cp._impl.time_nodes(ins, outs, 3)
        assert len(nodes) == cp.cache_info().last_graph_nodes
        op, name, dtype, ne, srcs, ns = nodes[-1]  # the Tanh, last: ggml [8, n]
        assert (dtype, ne[:2]) == ("f32", (8, n)) and ns > 0
        assert f"f32 [8, {n}, 1, 1] nb [4, 32, " in srcs  # its source, the product
        # the nodes ran in order: the outputs hold the graph's result, as after execute()
        ref = np.tanh(ins[0].get_data_handle() @ w_data)
        np.testing.assert_allclose(outs[0].get_data_handle(), ref, rtol=1e-5, atol=1e-5)


def test_time_nodes_of_a_layer_norm_is_one_custom_node(rng):
    cp = compile_op(K.LayerNorm, [[D, 64], [64], [64]], constants={1: np.ones(64, np.float32), 2: np.zeros(64, np.float32)})
    ins, outs = prepared(cp, rng.standard_normal((5, 64)).astype(np.float32))
    ((op, _, dtype, ne, srcs, ns),) = cp._impl.time_nodes(ins, outs, 2)
    assert (op, dtype, ne) == ("CUSTOM", "f32", (64, 5, 1, 1)) and ns > 0
    assert srcs.count("f32 [64, ") == 3  # x, gamma, beta


def test_time_nodes_refuses_wrong_inputs(rng):
    cp = compile_op(K.ReLU, [[D, 4]])
    ins, outs = prepared(cp, rng.standard_normal((2, 4)).astype(np.float32))
    with pytest.raises(dg.ShapeError, match="expected 1 runtime inputs, got 2"):
        cp._impl.time_nodes(ins + ins, outs, 1)
    with pytest.raises(dg.ShapeError, match="expected 1 outputs, got 0"):
        cp._impl.time_nodes(ins, [], 1)
    assert len(cp._impl.time_nodes(ins, outs, 1)) == 1  # still usable
