"""DLPack: dg.Tensor and cp(...) take any object with __dlpack__ (numpy,
torch) in place, and hand their outputs on the same way."""

import numpy as np
import pytest

import dyngraph as dg

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def relu(engine):
    x = dg.LogicalTensor(0, dg.f32, [dg.DYNAMIC_DIM, 4])
    g = dg.Graph()
    g.add_op(dg.Op(0, dg.OpKind.ReLU, [x], [dg.LogicalTensor(1, dg.f32, None)]))
    g.finalize()
    (p,) = g.get_partitions()
    return p.compile([x], p.get_output_ports(), engine)


class _Producer:
    """A foreign DLPack producer (only __dlpack__ / __dlpack_device__, no __array__)."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, **kw):
        return self.a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


def test_a_torch_tensor_is_used_in_place(relu, engine):
    t = torch.randn(3, 4)
    lt = dg.LogicalTensor(0, dg.f32, [dg.DYNAMIC_DIM, 4])
    x = dg.Tensor(lt, engine, t)
    assert x.data_ptr == t.data_ptr()
    assert x.get_logical_tensor().shape == (3, 4)


def test_an_output_tensor_backed_by_torch_is_written_in_place(relu):
    engine = relu.engine  # (execute takes tensors of the partition's engine)
    t = torch.randn(5, 4)
    out = torch.empty(5, 4)
    xl = dg.LogicalTensor(0, dg.f32, [5, 4])
    (yl,) = relu.infer_outputs([xl])
    relu.execute(dg.Stream(engine), [dg.Tensor(xl, engine, t)], [dg.Tensor(yl, engine, out)])
    assert torch.equal(out, t.relu())
    assert relu.cache_info().staged_outputs == 0 and relu.cache_info().staged_inputs == 0


def test_any_dlpack_producer_is_taken_without_a_copy(relu, engine):
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    x = dg.Tensor(dg.LogicalTensor(0, dg.f32, [2, 4]), engine, _Producer(a))
    assert x.data_ptr == a.ctypes.data


def test_the_call_shortcut_takes_torch_and_its_outputs_go_to_torch_without_a_copy(relu):
    t = torch.randn(6, 4)
    (out,) = relu(t)
    assert isinstance(out, np.ndarray)
    back = torch.from_dlpack(out)
    assert back.data_ptr() == out.ctypes.data
    assert torch.equal(back, t.relu())
    (out2,) = relu(_Producer(np.ones((2, 4), np.float32) * -1))
    assert (out2 == 0).all()


def test_a_tensor_hands_its_memory_on(engine):
    a = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    x = dg.Tensor(dg.LogicalTensor(0, dg.f32, [3, 4]), engine, a)
    t = torch.from_dlpack(x)
    assert t.data_ptr() == a.ctypes.data
    n = np.from_dlpack(x)
    assert n.ctypes.data == a.ctypes.data


def test_bf16_torch_tensors_are_taken_as_their_bits(engine):
    t = torch.randn(2, 8).to(torch.bfloat16)
    x = dg.Tensor(dg.LogicalTensor(0, dg.bf16, [2, 8]), engine, t)
    assert x.data_ptr == t.data_ptr()
    assert np.array_equal(x.array, t.view(torch.int16).numpy().view(np.uint16))


@pytest.fixture(scope="module")
def neg_bf16():
    x = dg.LogicalTensor(0, dg.bf16, [dg.DYNAMIC_DIM, dg.DYNAMIC_DIM])
    g = dg.Graph()
    g.add_op(dg.Op(0, dg.OpKind.Neg, [x], [dg.LogicalTensor(1, dg.bf16, None)]))
    g.finalize()
    (p,) = g.get_partitions()
    return p.compile([x], p.get_output_ports(), dg.Engine(num_threads=1))


def test_bf16_computes_from_a_torch_tensor_and_goes_back_as_bfloat16(neg_bf16):
    t = torch.tensor([[1.5, -2.0, 0.25], [3.0, -0.125, 7.0]], dtype=torch.bfloat16)
    (out,) = neg_bf16(t)
    assert isinstance(out, np.ndarray) and out.dtype == dg.bf16.numpy
    got = torch.from_dlpack(out)
    assert got.dtype is torch.bfloat16 and got.data_ptr() == out.ctypes.data
    assert torch.equal(got, -t)
    # a strided view of it goes with its strides; numpy's own view of it is unchanged
    col = torch.from_dlpack(out[:, 1])
    assert col.dtype is torch.bfloat16 and col.stride() == (3,) and torch.equal(col, -t[:, 1])
    assert np.array_equal(out.astype(np.float32), -t.float().numpy())
    # a capsule nobody takes is freed, the array kept alive until then
    cap = out.__dlpack__()
    del cap
    assert torch.equal(torch.from_dlpack(out), -t)


def test_a_bf16_tensor_goes_to_torch_as_bfloat16(engine):
    a = np.array([1.5, -2.0, 0.25, 8.0], dtype=dg.bf16.numpy)
    x = dg.Tensor(dg.LogicalTensor(0, dg.bf16, [4]), engine, a)
    t = torch.from_dlpack(x)
    assert t.dtype is torch.bfloat16 and t.data_ptr() == a.ctypes.data
    assert torch.equal(t.float(), torch.tensor([1.5, -2.0, 0.25, 8.0]))


@pytest.mark.parametrize("dt", [dg.f8_e4m3, dg.s4], ids=str)
def test_a_tensor_of_an_ml_dtypes_type_hands_on_its_bits(dt, engine):
    a = np.arange(-4, 4).astype(dt.numpy)
    x = dg.Tensor(dg.LogicalTensor(0, dt, [8]), engine, a)
    t = torch.from_dlpack(x)
    assert t.data_ptr() == a.ctypes.data and t.element_size() == a.itemsize
    assert np.array_equal(t.numpy(), a.view(np.dtype(f"u{a.itemsize}")))


NON_CONTIGUOUS = {
    "numpy rows": lambda: np.arange(32, dtype=np.float32).reshape(8, 4)[::2],
    "numpy fortran": lambda: np.asfortranarray(np.arange(12, dtype=np.float32).reshape(3, 4) - 6),
    "torch transposed": lambda: (torch.arange(12.0).reshape(4, 3) - 6).t(),
    "torch rows": lambda: (torch.arange(24.0).reshape(6, 4) - 9)[::2],
}


@pytest.mark.parametrize("name", list(NON_CONTIGUOUS))
def test_the_call_shortcut_refuses_a_non_contiguous_input(relu, name):
    make = NON_CONTIGUOUS[name]
    before = relu.cache_info()
    with pytest.raises(dg.ExecutionError, match="C-contiguous"):
        relu(make())
    after = relu.cache_info()
    assert (after.executions, after.misses, after.staged_inputs) == (before.executions, before.misses,
                                                                      before.staged_inputs)
    x = np.ascontiguousarray(np.asarray(make()))  # the copy the message names works
    (out,) = relu(x)
    np.testing.assert_array_equal(out, np.maximum(x, 0))


def test_a_non_contiguous_tensor_is_refused_not_copied(relu, engine):
    with pytest.raises(dg.ExecutionError, match="C-contiguous"):
        dg.Tensor(dg.LogicalTensor(0, dg.f32, [dg.DYNAMIC_DIM, 4]), engine, torch.randn(4, 3).t())


def test_a_tensor_that_requires_grad_is_a_typed_error(engine):
    with pytest.raises(dg.ExecutionError, match="DLPack"):
        dg.Tensor(dg.LogicalTensor(0, dg.f32, [2, 2]), engine, torch.zeros(2, 2, requires_grad=True))


def test_a_wrong_dtype_through_dlpack_is_a_dtype_error(engine):
    with pytest.raises(dg.DTypeError):
        dg.Tensor(dg.LogicalTensor(0, dg.f32, [2]), engine, torch.zeros(2, dtype=torch.float64))
