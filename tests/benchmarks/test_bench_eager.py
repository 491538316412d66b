"""pytest-benchmark cases against PyTorch eager (one engine thread, one torch
thread): the MLP, a transformer encoder layer and ResNet basic blocks
(convolutions with folded batch norms), dyngraph.torch and eager in
one group per shape. Each pair is checked against eager when it is built
(torch_cases.py); report.py runs the same pairs side by side, with MiniLM and
SmolLM2 too. Nothing here asserts a time."""

import pytest

torch = pytest.importorskip("torch", minversion="2.5")

import torch_cases as tc  # noqa: E402


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def pairs():
    return {p.name: p for p in tc.mlp_pairs() + tc.encoder_layer_pairs() + tc.resnet_block_pairs()}


NAMES = [f"MLP batch {b}" for b in (1, 8, 64, 256)] + [f"encoder layer seq {s}" for s in (7, 32, 128)] + \
    [f"ResNet block {name} batch {b}" for name in tc.RESNET_BLOCKS for b in (1, 8)]


@pytest.mark.parametrize("side", ["dyngraph", "eager"])
@pytest.mark.parametrize("name", NAMES)
def test_vs_eager(benchmark, pairs, name, side):
    benchmark.group = name
    out = benchmark(getattr(pairs[name], side))
    assert out.dtype == torch.float32
