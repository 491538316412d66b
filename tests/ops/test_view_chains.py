"""Chains of StaticReshape / StaticTranspose / Slice against numpy (lower/view_chain.h).

A transpose at the end of a chain that holds another transpose is copied once
from the chain's start, with the reshapes and slices between composed into one
strided view; the copies the chain made on the way are left unread. These ops
move data without arithmetic: results must equal numpy's exactly.
"""

import numpy as np
import pytest

import dyngraph as dg
from oputil import run

ENG = dg.Engine(dg.Engine.CPU, num_threads=1)


def arange(shape, dtype=np.float32):
    return np.arange(int(np.prod(shape))).reshape(shape).astype(dtype)


def copies(cp, *arrays):
    """The ggml copies (CONT nodes) the partition computes for these inputs."""
    ins = [dg.Tensor(lt, ENG, a) for lt, a in zip(cp.get_inputs(), arrays)]
    outs = [dg.Tensor(lt, ENG, np.empty(lt.shape, lt.dtype.numpy)) for lt in cp.infer_outputs(ins)]
    return sum(1 for node in cp._impl.time_nodes(ins, outs, 1) if node[0] == "CONT")


def mha_split(b, x, s, n, heads, d):
    """PyTorch's multi-head attention on a packed projection x [S, B, 3E] (E = heads * d):
    q, k and v as [B, heads, S, d], the way torch.export writes it."""
    e = heads * d
    t = b.op("StaticReshape", [x], {"shape": [s, n, 3, e]})
    t = b.op("StaticTranspose", [t], {"order": [2, 0, 1, 3]})
    outs = []
    for k in range(3):
        p = b.op("Slice", [t], {"begin": [k], "end": [k + 1], "axes": [0]})
        p = b.op("StaticReshape", [p], {"shape": [s, n, e]})
        p = b.op("StaticReshape", [p], {"shape": [s, n * heads, d]})
        p = b.op("StaticTranspose", [p], {"order": [1, 0, 2]})
        outs.append(b.op("StaticReshape", [p], {"shape": [n, heads, s, d]}))
    return outs


def mha_split_numpy(x, heads, d):
    s, n, _ = x.shape
    t = x.reshape(s, n, 3, heads * d).transpose(2, 0, 1, 3)
    return [t[k].reshape(s, n * heads, d).transpose(1, 0, 2).reshape(n, heads, s, d) for k in range(3)]


def test_multi_head_split_is_one_copy_per_head_tensor():
    s, n = dg.Dim("s", max=512), dg.Dim("b", max=64)
    b = dg.GraphBuilder()
    x = b.input("x", dg.f32, [s, n, 3 * 4 * 8])
    b.output(*mha_split(b, x, s, n, 4, 8))
    cp = b.compile(ENG)
    for shape in [(1, 1, 96), (5, 3, 96), (17, 2, 96), (64, 7, 96)]:
        x = arange(shape)
        for got, want in zip(run(cp, x), mha_split_numpy(x, 4, 8)):
            np.testing.assert_array_equal(got, want)
        # q, k and v copied once each from x (the transpose of the whole [3, S, B, E] is not computed);
        # at one row of one batch each is already a dense view of x
        assert copies(cp, x) == (0 if shape[:2] == (1, 1) else 3)


def chain_numpy(x, steps):
    for kind, arg in steps:
        if kind == "reshape":
            x = x.reshape(arg)
        elif kind == "transpose":
            x = x.transpose(arg)
        else:
            axis, start, stop, step = arg
            index = [slice(None)] * x.ndim
            index[axis] = slice(start, stop, step)
            x = x[tuple(index)]
    return x


def random_chain(rng, shape):
    """A chain of up to 7 view ops on a tensor of `shape` (rank >= 2), with at least two transposes;
    reshapes keep the rank >= 2, slices may leave axes of 1."""
    steps, cur, n_transposes = [], list(shape), 0
    for _ in range(200):  # (a draw that does not fit the shape draws again)
        if len(steps) == 7 or (n_transposes >= 2 and rng.random() < 0.5):
            break
        kind = rng.choice(["reshape", "transpose", "transpose", "slice"])
        if 7 - len(steps) <= 2 - n_transposes:  # the last places: transposes
            kind = "transpose"
        if kind == "transpose" and len(cur) > 1:
            order = [int(a) for a in rng.permutation(len(cur))]
            steps.append(("transpose", order))
            cur = [cur[a] for a in order]
            n_transposes += 1
        elif kind == "reshape":
            # merge two neighbours or split one axis in two
            if len(cur) > 2 and (len(cur) == 4 or rng.random() < 0.5):
                i = int(rng.integers(len(cur) - 1))
                cur = cur[:i] + [cur[i] * cur[i + 1]] + cur[i + 2:]
            else:
                i = int(rng.integers(len(cur)))
                divisors = [f for f in range(2, cur[i]) if cur[i] % f == 0]
                if not divisors:
                    continue
                f = int(rng.choice(divisors))
                cur = cur[:i] + [f, cur[i] // f] + cur[i + 1:]
            steps.append(("reshape", list(cur)))
        elif kind == "slice":
            axis = int(rng.integers(len(cur)))
            if cur[axis] < 2:
                continue
            start = int(rng.integers(cur[axis] - 1))
            step = int(rng.choice([1, 1, 2]))
            stop = int(rng.integers(start + 1, cur[axis] + 1))
            steps.append(("slice", (axis, start, stop, step)))
            cur[axis] = len(range(start, stop, step))
    assert n_transposes >= 2, steps
    return steps


@pytest.mark.parametrize("seed", range(60))
def test_random_chains_match_numpy(seed):
    rng = np.random.default_rng(seed)
    shape = [int(v) for v in rng.choice([2, 3, 4, 6, 8], size=int(rng.integers(2, 5)))]
    steps = random_chain(rng, shape)
    b = dg.GraphBuilder()
    t = b.input("x", dg.f32, shape)
    for kind, arg in steps:
        if kind == "reshape":
            t = b.op("StaticReshape", [t], {"shape": arg})
        elif kind == "transpose":
            t = b.op("StaticTranspose", [t], {"order": arg})
        else:
            axis, start, stop, step = arg
            t = b.op("Slice", [t], {"begin": [start], "end": [stop], "axes": [axis], "steps": [step]})
    b.output(t)
    cp = b.compile(ENG)
    xa = arange(shape)
    (got,) = run(cp, xa)
    np.testing.assert_array_equal(got, chain_numpy(xa, steps), err_msg=f"{shape} {steps}")


def test_a_chain_from_a_computed_tensor_with_another_reader():
    # the chain's start is also read by an Add: both see the same values; the inner transpose's copy
    # is still read by the second output and stays
    b = dg.GraphBuilder()
    x = b.input("x", dg.f32, [dg.Dim("n", max=64), 6, 4])
    y = b.op("ReLU", [x])
    t1 = b.op("StaticTranspose", [y], {"order": [1, 0, 2]})
    r = b.op("StaticReshape", [t1], {"shape": [3, -1, 4]})
    t2 = b.op("StaticTranspose", [r], {"order": [2, 1, 0]})
    b.output(t2, b.op("Add", [y, y]), t1)
    cp = b.compile(ENG)
    for n in (1, 2, 5):
        xa = arange((n, 6, 4)) - 7.0
        ya = np.maximum(xa, 0)
        got = run(cp, xa)
        np.testing.assert_array_equal(got[0], ya.transpose(1, 0, 2).reshape(3, -1, 4).transpose(2, 1, 0))
        np.testing.assert_array_equal(got[1], ya + ya)
        np.testing.assert_array_equal(got[2], ya.transpose(1, 0, 2))


@pytest.mark.parametrize("dtype", [dg.f16, dg.i32])
def test_multi_head_split_of_other_dtypes(dtype):
    b = dg.GraphBuilder()
    s, n = dg.Dim("s", max=64), dg.Dim("b", max=8)
    x = b.input("x", dtype, [s, n, 3 * 2 * 4])
    b.output(*mha_split(b, x, s, n, 2, 4))
    cp = b.compile(ENG)
    xa = arange((6, 3, 24), dtype.numpy)
    for got, want in zip(run(cp, xa), mha_split_numpy(xa, 2, 4)):
        np.testing.assert_array_equal(got, want)
