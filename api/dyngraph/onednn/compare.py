"""Comparing the backend's outputs with the reference's.

Floating-point outputs: an element passes when

    |got - ref| <= rtol * (|ref| + rms(ref))

where ``rms(ref)`` is the root mean square of the reference output's finite
values: an element is measured against its own size, or the typical size of
the output where it is much smaller (a sum that cancels to nearly zero is
not held to a relative error its inputs never had). NaN must meet NaN and
an infinity the same infinity. The error reported is the largest
``|got - ref| / (|ref| + rms(ref))``.

``rtol`` is that of the least precise floating-point type on the way to the
output (a bf16 graph cast to f32 at the end is as precise as bf16):

- f32: 1e-4 (about 840 ulp: room for ggml's approximate exp, erf and tanh
  and for summation order, none for a wrong result);
- f16: 4 * 2**-10 (about 4e-3), bf16: 4 * 2**-7 (about 3e-2): a few
  roundings to the type on the way, each at most half its epsilon.

Integer and bool outputs must be equal, except where a Quantize rounds a
float to them: there the reference gives a band (``quantize_band`` in
``dyngraph.reference.quantize``), the roundings of every value within the
float tolerance of its unrounded value, and the output must lie in it. The
error reported for integers is the number of elements outside.

f8 outputs (f8_e4m3, f8_e5m2) are compared like integers: equal to the
reference (NaN meets NaN), or, where a Quantize rounds to them, within its
band. In an f32 chain (rtol 1e-4) a band holds more than one value only
where the unrounded value lies within the tolerance of a tie (x.5, or
halfway between two f8 values); in a bf16 or f16 chain it spans as many
steps as the float tolerance does (a value of 100 among values of that
size in bf16: 3e-2 x 200 = 6 steps either way).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..dtypes import DataType
from ..reference.values import eps, to_compute

F32_RTOL = 1e-4


def rtol(dtype: DataType) -> float:
    return F32_RTOL if dtype is DataType.f32 else 4 * eps(dtype)


@dataclass
class Comparison:
    ok: bool
    error: float  # worst normalized error (floats) or the number of unequal elements (integers, bool)
    tol: float
    where: Optional[tuple] = None  # index of the worst element
    got: Optional[float] = None
    ref: Optional[float] = None
    detail: str = ""
    ties: int = 0  # integer elements that differ from the reference within its rounding band

    def describe(self) -> str:
        if self.detail:
            return self.detail
        at = f" at {list(self.where)}: got {self.got!r}, reference {self.ref!r}" if self.where is not None else ""
        tie = f", {self.ties} rounded the other way at a tie" if self.ties else ""
        return f"error {self.error:.3g} (tolerance {self.tol:.3g}){at}{tie}"


_CHUNK = 1 << 20


def _compare_f8(g: np.ndarray, ref: np.ndarray, band) -> Comparison:
    """f8 values: equal to the reference, to an end of its band, or between the ends."""
    def same(a, b):
        return (a == b) | (np.isnan(a) & np.isnan(b))

    with np.errstate(invalid="ignore"):
        ok = same(g, ref)
        if band is not None:
            lo, hi = band
            ok |= same(g, lo) | same(g, hi) | ((g >= lo) & (g <= hi))
    bad = ~ok
    if bad.any():
        i = tuple(int(x) for x in np.unravel_index(int(np.argmax(bad)), bad.shape))
        return Comparison(False, float(np.count_nonzero(bad)), 0.0, i, g[i].item(), ref[i].item())
    return Comparison(True, 0.0, 0.0, ties=int(np.count_nonzero(~same(g, ref))))


def compare(got, ref: np.ndarray, dtype: DataType, precision: DataType, band=None) -> Comparison:
    """``got``: the backend's output data; ``ref``: the reference's value
    (compute form); ``band``: for an integer output, the (lowest, highest)
    arrays it may take (default: ``ref`` itself)."""
    got = np.asarray(got)
    if got.shape != ref.shape:
        return Comparison(False, float("inf"), 0.0, detail=f"shape {list(got.shape)}, reference {list(ref.shape)}")
    if dtype.is_f8:
        return _compare_f8(to_compute(got, dtype), ref, band)
    if not dtype.is_float:
        g = to_compute(got, dtype)
        bad = g != ref if band is None else (g < band[0]) | (g > band[1])
        if bad.any():
            i = tuple(int(x) for x in np.unravel_index(int(np.argmax(bad)), bad.shape))
            return Comparison(False, float(np.count_nonzero(bad)), 0.0, i, g[i].item(), ref[i].item())
        return Comparison(True, 0.0, 0.0, ties=0 if band is None else int(np.count_nonzero(g != ref)))
    tol = rtol(precision)
    gf, rf = got.reshape(-1), ref.reshape(-1)
    n = rf.size
    # pass 1: NaN / infinities must match; the rms of the finite reference values
    total, count = 0.0, 0
    for s in range(0, n, _CHUNK):
        g, r = to_compute(gf[s:s + _CHUNK], dtype), rf[s:s + _CHUNK]
        fin = np.isfinite(r)
        if not (fin.all() and np.isfinite(g).all()):
            bad = (np.isnan(g) != np.isnan(r)) | ((np.isinf(g) | np.isinf(r)) & (g != r) & ~np.isnan(r))
            if bad.any():
                i = np.unravel_index(s + int(np.argmax(bad)), ref.shape)
                i = tuple(int(v) for v in i)
                return Comparison(False, float("inf"), tol, i, float(to_compute(got[i], dtype)), float(ref[i]))
            r = np.where(fin, r, 0.0)
        total += float(np.dot(r, r))
        count += int(np.count_nonzero(fin))
    if count == 0:
        return Comparison(True, 0.0, tol)
    rms = (total / count) ** 0.5
    # pass 2: the worst normalized error
    worst, at = 0.0, 0
    for s in range(0, n, _CHUNK):
        g, r = to_compute(gf[s:s + _CHUNK], dtype), rf[s:s + _CHUNK]
        with np.errstate(invalid="ignore"):
            err = np.abs(g - r)
            if rms > 0:
                err /= np.abs(r) + rms
        err[~np.isfinite(r)] = 0.0
        k = int(np.argmax(err))
        if err[k] > worst:
            worst, at = float(err[k]), s + k
    where = tuple(int(v) for v in np.unravel_index(at, ref.shape))
    return Comparison(worst <= tol, worst, tol, where, float(to_compute(got[where], dtype)), float(ref[where]))
