"""constant_pad_nd (F.pad, mode "constant") converts: pads known at compile,
negative ones (crops), and pads that are size expressions of a dynamic
dimension (Mamba2 pads its sequence to a multiple of the chunk length, by 0
at some lengths), each equal to eager at several sizes, with no fallback."""

import pytest

torch = pytest.importorskip("torch", minversion="2.5")
F = torch.nn.functional

from torchutil import assert_matches_eager, compile_module, mk  # noqa: E402

SIZES = (1, 6, 23)


def n_dim(lo=1):
    return torch.export.Dim("n", min=lo, max=64)


def converts(module, example, dynamic, sizes, make):
    run = compile_module(module, example, dynamic)
    assert run.fallbacks == [], run.report()
    assert_matches_eager(run, module, [make(n) for n in sizes])
    return run


@pytest.mark.parametrize("pad", [(1, 2), (0, 3, 2, 0), (2, 1, 1, 2, 0, 1), (-1, 2), (3, -2, -1, 0)],
                         ids=["last", "last-two", "three-axes", "crop-begin", "crop-mixed"])
def test_static_pads_match_eager_at_dynamic_sizes(pad):
    module = mk(lambda x: F.pad(torch.tanh(x), pad, value=0.5) * 2)
    converts(module, [torch.randn(2, 5, 4)], ({1: n_dim(3)},), (3, 6, 23), lambda n: [torch.randn(2, n, 4)])


def test_padding_the_dynamic_axis_itself():
    module = mk(lambda x: F.pad(x, (0, 0, 2, 3), value=-1.0) + 1)
    converts(module, [torch.randn(5, 3)], ({0: n_dim()},), SIZES, lambda n: [torch.randn(n, 3)])


def test_a_pad_that_is_the_dynamic_length_matches_eager():
    module = mk(lambda x: F.pad(torch.tanh(x), (0, x.shape[0])) + 1)
    converts(module, [torch.randn(5, 3)], ({0: n_dim()},), SIZES, lambda n: [torch.randn(n, 3)])


def test_a_pad_of_the_dynamic_axis_by_a_derived_size():
    # the only input is 2 * n long; pad n at the end and 1 at the start
    n = n_dim()
    module = mk(lambda x: F.pad(x, (0, 0, 1, x.shape[0] // 2)) * 3)
    run = compile_module(module, [torch.randn(6, 3)], ({0: 2 * n},))
    assert run.fallbacks == [], run.report()
    assert_matches_eager(run, module, [[torch.randn(2 * k, 3)] for k in (2, 4, 9)])


@pytest.mark.parametrize("chunk", [4, 8])
def test_mamba2_chunk_padding_is_zero_at_some_lengths(chunk):
    # pad_tensor_by_size: the sequence (axis 1) grows to a multiple of the chunk length
    def fn(x):
        pad = (chunk - x.shape[1] % chunk) % chunk
        return F.pad(torch.sigmoid(x), (0, 0, 0, pad)) * 2

    module = mk(fn)
    sizes = (1, chunk - 1, chunk, 2 * chunk, 2 * chunk + 3)
    converts(module, [torch.randn(2, 5, 4)], ({1: n_dim()},), sizes, lambda n: [torch.randn(2, n, 4)])


def test_a_pad_that_crops_or_grows_with_the_length():
    # Mamba2's conv state: F.pad(h, (k - length, 0)) keeps the last k positions, padding short inputs
    k = 6
    module = mk(lambda x: F.pad(torch.relu(x), (k - x.shape[-1], 0)) - 1)
    converts(module, [torch.randn(2, 3, 5)], ({2: n_dim()},), (1, 5, 6, 7, 23), lambda n: [torch.randn(2, 3, n)])


def test_integer_and_half_inputs_pad_in_their_dtype():
    module = mk(lambda x, i: (F.pad(x, (1, 1), value=2.0), F.pad(i, (0, 2), value=7)))
    n = n_dim()
    converts(module, [torch.randn(5, 3).half(), torch.arange(15).reshape(5, 3)], ({0: n}, {0: n}),
             SIZES, lambda n: [torch.randn(n, 3).half(), torch.arange(3 * n).reshape(n, 3)])


@pytest.mark.parametrize("length", [13, 16], ids=["padded", "whole-chunks"])
def test_mamba2_converts_whole_and_matches_eager(length):
    """transformers' Mamba2 (its reference PyTorch path: chunked scan, causal conv) at a fixed length, one
    that its chunking pads and one that it does not: no fallback. (With a dynamic length torch.export itself
    refuses the model: its reshapes guard on the padded length's divisibility.)"""
    transformers = pytest.importorskip("transformers")
    import dyngraph.torch as dgt

    torch.manual_seed(0)
    cfg = transformers.Mamba2Config(vocab_size=128, hidden_size=64, state_size=16, num_heads=8, head_dim=16,
                                    n_groups=1, expand=2, num_hidden_layers=2, chunk_size=8, conv_kernel=4)
    model = transformers.Mamba2ForCausalLM(cfg).eval()
    ids = torch.randint(0, 128, (1, length))
    run = dgt.compile(model, kwargs={"input_ids": ids, "use_cache": False})
    assert run.fallbacks == [], run.report()
    with torch.no_grad():
        want = model(input_ids=ids, use_cache=False).logits
    torch.testing.assert_close(run(input_ids=ids, use_cache=False).logits, want, atol=1e-4, rtol=0)
