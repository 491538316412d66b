"""weight_type chosen per tensor: a mapping from tensor ids or glob patterns
on tensor names to storage types (the first key that matches decides)."""

import numpy as np
import pytest

import dyngraph as dg


def two_layer(rng, shared: bool = False):
    """x @ W1 -> @ W2 (W1 named "mlp.up", W2 "mlp.down"); with shared, -> @ W2 once
    more (W2 has two users: each gets a transposed copy)."""
    n = dg.Dim("n")
    x = dg.LogicalTensor(0, dg.f32, [n, 64])
    w1 = dg.LogicalTensor(1, dg.f32, [64, 64], property=dg.CONSTANT, name="mlp.up")
    w2 = dg.LogicalTensor(2, dg.f32, [64, 64], property=dg.CONSTANT, name="mlp.down")
    h = dg.LogicalTensor(3, dg.f32, [n, 64])
    y = dg.LogicalTensor(4, dg.f32, [n, 64])
    g = dg.Graph(dg.Engine.CPU)
    g.add_op(dg.Op(0, dg.OpKind.MatMul, [x, w1], [h]))
    g.add_op(dg.Op(1, dg.OpKind.MatMul, [h, w2], [y]))
    outs, ins = [y], [x, w1, w2]
    if shared:
        z = dg.LogicalTensor(5, dg.f32, [n, 64])
        g.add_op(dg.Op(2, dg.OpKind.MatMul, [y, w2], [z]))
        outs = [z]
    g.finalize()
    W = {1: rng.standard_normal((64, 64), dtype=np.float32), 2: rng.standard_normal((64, 64), dtype=np.float32)}
    return g.get_partitions()[0], ins, outs, W


def storages(cp):
    return {t.name: t.storage for t in cp.program.tensors if t.property is dg.CONSTANT}


@pytest.mark.parametrize("mapping, want", [
    ({"*.up": "q4_0", "*": "q8_0"}, {"mlp.up": "q4_0", "mlp.down": "q8_0"}),
    ({"mlp.*": "f16"}, {"mlp.up": "f16", "mlp.down": "f16"}),
    ({2: "q8_0"}, {"mlp.up": "default", "mlp.down": "q8_0"}),  # by tensor id; the other stays f32
    ({"mlp.down": "q4_0", "mlp.*": "f16"}, {"mlp.up": "f16", "mlp.down": "q4_0"}),  # first match decides
])
def test_types_per_tensor(mapping, want, rng):
    part, ins, outs, W = two_layer(rng)
    cp = part.compile(ins, outs, dg.Engine(dg.Engine.CPU, num_threads=1), constants=W, weight_type=mapping)
    assert storages(cp) == want
    for n in (1, 9):
        a = rng.standard_normal((n, 64), dtype=np.float32)
        ref = (a.astype(np.float64) @ W[1]) @ W[2]
        (y,) = cp(a)
        # rounding scales with sum |a| |w| (see test_weight_types.py): bound each layer's
        # storage rounding (plus the activation's), first order in both layers
        bound = {"default": 0.0, "f16": 2.0**-10, "q8_0": 2 / 254 + 2.0**-10, "q4_0": 1 / 8 + 1 / 254 + 2.0**-10}
        scale = (np.abs(a) @ np.abs(W[1])) @ np.abs(W[2])
        err = np.abs(y - ref) / scale
        assert err.max() < bound[want["mlp.up"]] + bound[want["mlp.down"]] + 1e-5, err.max()


def test_a_transposed_copy_takes_its_weights_type(rng):
    part, ins, outs, W = two_layer(rng, shared=True)
    cp = part.compile(ins, outs, dg.Engine(dg.Engine.CPU, num_threads=1), constants=W,
                      weight_type={"mlp.down": "q8_0"})
    st = storages(cp)  # one user transposes the weight in place, the other reads a copy
    assert st == {"mlp.up": "default", "mlp.down": "q8_0", "mlp.down.T": "q8_0"}
    a = rng.standard_normal((4, 64), dtype=np.float32)
    (z,) = cp(a)
    ref = a.astype(np.float64) @ W[1] @ W[2] @ W[2]
    scale = np.abs(a) @ np.abs(W[1]) @ np.abs(W[2]) @ np.abs(W[2])
    assert (np.abs(z - ref) / scale).max() < 2 * (2 / 254 + 2.0**-10)  # two q8_0 layers, f32 one


@pytest.mark.parametrize("mapping, match", [
    ({"attn.*": "q8_0"}, r"keys \['attn\.\*'\] match no float constant.*mlp\.up"),
    ({"*": "q3_k"}, r"weight_type\['\*'\] must be one of"),
    ({1.5: "f16"}, "tensor ids or name patterns"),
    (["q8_0"], "a type name or a mapping"),
])
def test_bad_mappings_are_compile_errors(mapping, match, rng):
    part, ins, outs, W = two_layer(rng)
    with pytest.raises(dg.CompileError, match=match):
        part.compile(ins, outs, dg.Engine(dg.Engine.CPU, num_threads=1), constants=W, weight_type=mapping)
