"""GPU devices (CUDA, Vulkan, ...): the 4-layer decoder on a GPU, and split
over the CPU and a GPU, gives the one-CPU tokens and logits; a matrix product
on a GPU matches numpy at several dynamic sizes. These run where ggml was
built with a GPU backend and the machine has the GPU; elsewhere they say so
and skip (the same device code path runs in CI on RPC devices: test_rpc.py).
Asking for a GPU that is not there is a DeviceError everywhere."""

from __future__ import annotations

import numpy as np
import pytest

import dyngraph as dg
from deviceutil import GPUS
from dyngraph.models.llama import LlamaConfig, LlamaRunner, random_weights

needs_gpu = pytest.mark.skipif(
    not GPUS,
    reason="no GPU device: this ggml was built without a GPU backend or the machine has no GPU "
    "(build with -Ccmake.define.GGML_CUDA=ON on a machine with CUDA: docs/design/gpu.md)",
)
CFG = LlamaConfig(layers=4, max_seq=64)
PROMPT = [1, 5, 7, 9, 11]


def test_a_gpu_that_is_not_there_is_a_device_error():
    with pytest.raises(dg.DeviceError, match="no device named 'NoSuchGPU7'"):
        dg.Engine("gpu", device="NoSuchGPU7")
    with pytest.raises(dg.DeviceError, match="no device named 'CPU'"):  # the host CPU is Engine("cpu")
        dg.Engine("gpu", device="CPU")
    with pytest.raises(ValueError, match="device must be a device name"):
        dg.Engine("gpu", device=0)
    with pytest.raises(ValueError, match="takes device, not endpoints"):
        dg.Engine("gpu", endpoints=["127.0.0.1:50052"])
    if not GPUS:
        with pytest.raises(dg.DeviceError, match="this ggml has no GPU device.*GGML_CUDA=ON"):
            dg.Engine("gpu")
        with pytest.raises(dg.DeviceError, match="no device named 'CUDA0' \\(this ggml has no GPU devices"):
            dg.Engine("gpu", device="CUDA0")
    else:
        with pytest.raises(dg.DeviceError, match=f"this ggml has {GPUS[0]}"):
            dg.Engine("gpu", device="NoSuchGPU7")


@needs_gpu
@pytest.mark.parametrize("device", GPUS)
@pytest.mark.parametrize("rows", [1, 3, 17])
def test_matmul_on_a_gpu_matches_numpy(device, rows):
    rng = np.random.default_rng(rows)
    n = dg.Dim("n", min=1, max=64)
    x = dg.LogicalTensor(0, dg.f32, [n, 32])
    w = dg.LogicalTensor(1, dg.f32, [32, 24], property=dg.CONSTANT)
    y = dg.LogicalTensor(2, dg.f32, [dg.UNKNOWN_DIM, dg.UNKNOWN_DIM])
    g = dg.Graph()
    g.add_op(dg.Op(0, dg.OpKind.MatMul, [x, w], [y]))
    g.finalize()
    wv = rng.standard_normal((32, 24)).astype(np.float32)
    cp = g.get_partitions()[0].compile([x, w], [y], dg.Engine("gpu", device=device), constants={1: wv})
    xv = rng.standard_normal((rows, 32)).astype(np.float32)
    (out,) = cp(xv)
    # ggml-cuda computes f32 products as TF32 (cuBLAS's TF32 tensor-op math, its MMA kernels): each
    # factor rounded to 11 significant bits, the sums in f32. Bound: 2^-10 of the sum of |products|.
    exact = xv.astype(np.float64) @ wv
    bound = 2.0**-10 * (np.abs(xv).astype(np.float64) @ np.abs(wv)) + 1e-6
    assert np.all(np.abs(out - exact) <= bound), np.max(np.abs(out - exact) / bound)
    assert cp.cache_info().device_copies == 2  # x in, y out


@needs_gpu
@pytest.mark.parametrize("device", GPUS)
def test_decoder_on_a_gpu_matches_one_cpu(device):
    w = random_weights(CFG, seed=3)
    ref = LlamaRunner(CFG, w, engine=dg.Engine("cpu", num_threads=1))
    want = ref.generate(PROMPT, 12)
    gpu = LlamaRunner(CFG, w, engine=dg.Engine("gpu", device=device))
    assert gpu.cp.placement()[0][0].startswith(device)
    assert gpu.generate(PROMPT, 12) == want
    # prefill, decode, prefill again on the KV cache that lives on the GPU
    ref.reset()
    gpu.reset()
    # logits of O(5) through 4 layers of TF32 products (see above): 0.034 at most on an H200
    for toks in (PROMPT, [3], [8], [4, 6, 1]):
        np.testing.assert_allclose(gpu.forward(toks), ref.forward(toks), rtol=0, atol=0.08)


@needs_gpu
@pytest.mark.parametrize("device", GPUS)
def test_decoder_split_over_cpu_and_gpu_matches_one_cpu(device):
    w = random_weights(CFG, seed=3)
    want = LlamaRunner(CFG, w, engine=dg.Engine("cpu", num_threads=1)).generate(PROMPT, 12)
    split = LlamaRunner(CFG, w, engine=[dg.Engine("cpu", num_threads=1), dg.Engine("gpu", device=device)])
    assert len(split.cp.placement()) == 2 and all(ops > 0 for _, ops, _ in split.cp.placement())
    assert split.generate(PROMPT, 12) == want
