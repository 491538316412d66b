"""Fits the erfc polynomial of GELU's kernel (backend/kernels/gelu_erf.cpp).

erfc(z) = t exp(q(s) - z^2) with t = 1 / (1 + k z) and s = 1 - t = k z t: q
approximates log(erfcx(z) / t) over z in [0, 9.4] (below GELU(x) = 1e-38 at
x = -13.3), so an error of q is the kernel's relative error. The kernel
computes s as (k z) t, with the relative error of one rounding: near z = 0,
where t rounds to an absolute 6e-8, 1 - t would shift z by 6e-8 / k. A
least-squares fit in s reweighted towards its largest errors (Lawson's
iteration) approaches the minimax polynomial; k is chosen by a scan. Prints k, the error before and
after rounding the coefficients to f32, and the coefficients c0..cN.

    python tools/fit_erfc.py [--degree 8]
"""

import argparse
import math

import numpy as np

Z_MAX = 9.4


def target(k: float, points: int = 8000):
    t_min = 1.0 / (1.0 + k * Z_MAX)
    t = np.cos(np.linspace(0.0, math.pi, points)) * (1.0 - t_min) / 2 + (1.0 + t_min) / 2  # Chebyshev nodes
    z = (1.0 / t - 1.0) / k
    erfcx = np.array([math.erfc(v) * math.exp(v * v) for v in z])
    return 1.0 - t, np.log(erfcx / t)


def fit(k: float, degree: int, iterations: int = 400):
    s, f = target(k)
    v = np.vander(s, degree + 1, increasing=True)
    w = np.full(s.shape, 1.0 / s.size)
    best_err, best = math.inf, None
    for _ in range(iterations):
        c, *_ = np.linalg.lstsq(v * np.sqrt(w)[:, None], f * np.sqrt(w), rcond=None)
        e = np.abs(v @ c - f)
        if e.max() < best_err:
            best_err, best = e.max(), c
        w = w * e
        w /= w.sum()
    c32 = best.astype(np.float32).astype(np.float64)
    return c32, best_err, float(np.abs(v @ c32 - f).max())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--degree", type=int, default=8)
    args = ap.parse_args()
    # k by the error with the coefficients rounded to f32, what the kernel runs
    k = min(np.arange(0.30, 0.70, 0.01), key=lambda k: fit(k, args.degree, 150)[2])
    c, err, err32 = fit(k, args.degree)
    print(f"k = {k:.3f}: max |error| {err:.2e}, {err32:.2e} with f32 coefficients")
    print(", ".join(f"{v:.9g}f" for v in c))


if __name__ == "__main__":
    main()
