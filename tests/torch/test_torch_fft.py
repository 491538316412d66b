"""Discrete Fourier transforms (converters/fft.py): products with the DFT matrix,
along static and dynamic axes, forward and inverse, every normalization, real
and complex inputs, one-sided (rfft), as exported and after torch's
decomposition to core ATen (``_fft_c2c`` / ``_fft_r2c``), against eager."""

import pytest

torch = pytest.importorskip("torch", minversion="2.5")

from torchutil import assert_matches_eager, mk  # noqa: E402

import dyngraph.torch as dgt  # noqa: E402
from dyngraph.torch.export import decomposition_table  # noqa: E402


def parts(z):
    """A complex result as a real tensor (a program's output cannot be complex)."""
    return torch.stack((z.real, z.imag), -1)


CASES = {
    # FNet's mixing: the real part of a 2-D transform over sequence and width
    "fnet": (lambda x: torch.fft.fftn(x, dim=(1, 2)).real, (2, 7, 16), 1),
    "fft": (lambda x: parts(torch.fft.fft(x)), (3, 7), 1),
    "fft-1d": (lambda x: torch.fft.fft(x).imag, (7,), 0),
    "fft-first-axis": (lambda x: torch.fft.fftn(x, dim=(0,)).real, (7, 3, 5), 0),
    "ifft-ortho": (lambda x: parts(torch.fft.ifft(x, dim=1, norm="ortho")), (3, 7, 5), 1),
    "ifftn": (lambda x: parts(torch.fft.ifftn(x)), (3, 7, 5), 1),
    "fft-forward-norm": (lambda x: parts(torch.fft.fft(x, dim=1, norm="forward")), (3, 7), 1),
    "fft2-of-complex": (lambda x: parts(torch.fft.fft2(torch.fft.fft(x, dim=0))), (4, 7, 6), 1),
    "fft-then-ifft": (lambda x: torch.fft.ifft(torch.fft.fft(x, dim=1), dim=1).real, (3, 7), 1),
    "rfft": (lambda x: parts(torch.fft.rfft(x, dim=1)), (3, 7), 1),
    "rfftn-forward-norm": (lambda x: parts(torch.fft.rfftn(x, norm="forward")), (2, 7, 6), 1),
}


@pytest.mark.parametrize("decomposed", [False, True], ids=["exported", "decomposed"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_transform_matches_eager(case, decomposed):
    fn, shape, dim = CASES[case]
    module = mk(fn)
    ep = torch.export.export(module, (torch.randn(*shape),),
                             dynamic_shapes=({dim: torch.export.Dim("n", min=2, max=64)},))
    if decomposed:
        ep = ep.run_decompositions(decomposition_table())
    run = dgt.compile(ep, engine=1)
    assert run.fallbacks == [], run.report()

    def at(n):
        return [torch.randn(*[n if i == dim else s for i, s in enumerate(shape)])]

    for n in (2, 7, 33):  # sums of n products of unit size: measured at most 1e-6, 5e-6, 1.5e-5
        assert_matches_eager(run, module, [at(n)], atol=2e-6 * n, rtol=1e-5)


def test_an_axis_that_may_be_long_runs_in_pytorch():
    """The DFT matrices are n^2: an axis whose range reaches past 8192 is not converted."""
    module = mk(lambda x: torch.fft.fft(x, dim=1).real * 2)
    run = dgt.compile(module, (torch.randn(3, 7),), dynamic_shapes=({1: torch.export.Dim("n", max=100_000)},))
    why = {str(t): reason for _, t, reason in run.fallbacks}
    assert "at most 8192" in why["aten._fft_r2c.default"], run.report()
    assert_matches_eager(run, module, [[torch.randn(3, n)] for n in (2, 9)], atol=1e-5)


def test_a_large_axis_takes_its_matrices_from_the_graph():
    """A known size past the constants' limit (1024) and a dynamic one give the same matrices."""
    module = mk(lambda x: parts(torch.fft.fft(x, dim=0)))
    x = torch.randn(1031, 2)
    run = dgt.compile(module, (x,))
    assert run.fallbacks == [], run.report()
    assert_matches_eager(run, module, [[x]], atol=2e-4, rtol=1e-5)  # (measured 3.8e-5 of outputs up to 87)


@pytest.mark.parametrize("n", [16, 4])
def test_a_transform_length_pads_or_crops_the_axis(n):
    """``n`` past the axis pads it with zeros, short of it crops it (a number known now)."""
    module = mk(lambda x: torch.fft.fft(x, n=n, dim=1).real * 2 + torch.fft.rfft(x, n=n, dim=1).imag.sum())
    run = dgt.compile(module, (torch.randn(3, 7),), dynamic_shapes=({0: torch.export.Dim("b", max=8)},))
    assert run.fallbacks == [], run.report()
    assert_matches_eager(run, module, [[torch.randn(b, 7)] for b in (1, 5)], atol=1e-4, rtol=1e-4)


def test_a_transform_length_that_is_a_size_expression_converts_decomposed():
    """fft's converter pads by numbers only; torch's decomposition pads by the expression
    (constant_pad_nd) and transforms with _fft_r2c: whole either way."""
    module = mk(lambda x: torch.fft.fft(x, n=2 * x.shape[1], dim=1).real * 2)
    run = dgt.compile(module, (torch.randn(3, 7),), dynamic_shapes=({1: torch.export.Dim("n", max=32)},))
    assert run.fallbacks == [], run.report()
    assert_matches_eager(run, module, [[torch.randn(3, n)] for n in (2, 9)], atol=1e-5)


def test_a_lazily_negated_tensor_is_read_by_its_values():
    """``z.conj().imag`` is a view with torch's negative bit set (what ``ifft`` of a real
    tensor's ``.imag`` is in eager): passed to a compiled program, its values are read."""
    module = mk(lambda x: torch.exp(x) + 1)
    run = dgt.compile(module, (torch.randn(3, 7),), dynamic_shapes=({0: torch.export.Dim("b", max=8)},))
    z = torch.randn(5, 7, dtype=torch.complex64)
    lazy = z.conj().imag
    assert lazy.is_neg()
    assert_matches_eager(run, module, [[lazy]], atol=1e-5)
