"""The int8 convolution against what it replaces: oneDNN's pattern
Dequantize(u8 src) -> Convolution <- Dequantize(s8 weights, per output
channel) [-> Quantize u8], compiled twice: as the compile-time pass makes it
(one QuantizedConvolution: integer sums, kernels/int8_conv.h) and with the
pass off (Dequantize + the f32 convolution: OpenBLAS sgemm). One engine
thread; each case checked against the other before it is timed.

    DYNGRAPH_DEV=1 python tests/benchmarks/int8_conv.py [--rounds N]

prints the medians side by side (timing.py: interleaved, random order);
test_bench_int8_conv.py has the same cases for pytest-benchmark.
"""

from __future__ import annotations

import argparse
import contextlib
from typing import Dict, List, Tuple

import numpy as np

import dyngraph as dg
import dyngraph.passes as passes

from cases import Step

K = dg.OpKind

# (name, C, O, kernel, stride, pad, H): ResNet-50 layers at batch 1
LAYERS = [
    ("3x3 64->64 56x56", 64, 64, 3, 1, 1, 56),
    ("3x3 128->128 28x28", 128, 128, 3, 1, 1, 28),
    ("1x1 256->64 56x56", 256, 64, 1, 1, 0, 56),
    ("3x3/2 128->128 56x56", 128, 128, 3, 2, 1, 56),
    ("dw 3x3 64 56x56", 64, 64, 3, 1, 1, 56),  # depthwise (groups = channels)
]


@contextlib.contextmanager
def int8_pass_off():
    """Compile without the int8 fusion: what ran before QuantizedConvolution."""
    saved = passes.fuse_int8
    passes.fuse_int8 = lambda prog, data: 0
    try:
        yield
    finally:
        passes.fuse_int8 = saved


def build(layer, fmt: str, out: dg.DataType, fused: bool, dst_scale: float = 1.0,
          seed: int = 0) -> Tuple[dg.CompiledPartition, np.ndarray]:
    name, C, O, k, stride, pad, H = layer
    groups = C if name.startswith("dw") else 1
    rng = np.random.default_rng(seed)
    b = dg.GraphBuilder()
    n = dg.Dim("n", min=1, max=64)
    x = b.input("x", dg.u8, [n, C, H, H] if fmt == "NCX" else [n, H, H, C])
    wfmt = "OIX" if fmt == "NCX" else "XIO"
    wshape = [O, C // groups, k, k] if wfmt == "OIX" else [k, k, C // groups, O]
    wq = rng.integers(-127, 128, wshape).astype(np.int8)
    xf = b.op(K.Dequantize, [x], {"scales": [0.02], "zps": [128]}, dtype=dg.f32)
    wf = b.op(K.Dequantize, [b.constant("w", wq, dtype=dg.s8)],
              {"qtype": "per_channel", "axis": 0 if wfmt == "OIX" else 3,
               "scales": [float(s) for s in rng.uniform(0.002, 0.01, O)]}, dtype=dg.f32)
    y = b.op(K.Convolution, [xf, wf, b.constant("b", rng.standard_normal(O).astype(np.float32))],
             dict(strides=[stride] * 2, dilations=[1, 1], pads_begin=[pad] * 2, pads_end=[pad] * 2, groups=groups,
                  data_format=fmt, weights_format=wfmt))
    if out is not dg.f32:
        y = b.op(K.Quantize, [y], {"scales": [dst_scale], "zps": [128 if out is dg.u8 else 0]}, dtype=out)
    b.output(y)
    eng = dg.Engine(dg.Engine.CPU, num_threads=1)
    with contextlib.nullcontext() if fused else int8_pass_off():
        cp = b.compile(eng)
    kinds = {op.kind for op in cp._program.ops}
    assert (K.QuantizedConvolution in kinds) == fused, kinds
    src = rng.integers(0, 256, [1, C, H, H] if fmt == "NCX" else [1, H, H, C]).astype(np.uint8)
    return cp, src


def calibrated_scale(layer, fmt: str) -> float:
    """The output scale a calibration would choose: 99.9% of the f32 outputs within [-127, 127] steps (so
    that saturation, which costs the unfused Quantize a branch miss per value, stays rare, as in a model)."""
    cp, src = build(layer, fmt, dg.f32, True)
    (y,) = cp(src)
    return float(np.percentile(np.abs(y), 99.9)) / 127


def steps(layer, fmt: str, out: dg.DataType) -> Dict[str, Step]:
    """The two ways, prepared and checked against each other (f32: within the f32 rounding of the
    unfused sums; u8: up to one step where a value lies at a rounding tie)."""
    got = {}
    scale = calibrated_scale(layer, fmt) if out is not dg.f32 else 1.0
    for fused in (True, False):
        cp, src = build(layer, fmt, out, fused, scale)
        got["int8" if fused else "dequantize+f32"] = Step(cp, [src])
    a, b = (s().astype(np.float64) for s in got.values())
    if out is dg.f32:
        assert np.abs(a - b).max() <= 1e-5 * np.abs(b).max(), np.abs(a - b).max()
    else:
        assert np.abs(a - b).max() <= 1 and (a != b).mean() < 1e-3
    return got


def main() -> None:
    from timing import fmt as fmt_ns, interleaved, median
    from threads import limit_blas_threads

    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--only", default="", help="layers whose name contains this")
    ap.add_argument("--formats", default="NCX,NXC")
    args = ap.parse_args()
    limit_blas_threads(1)
    rows: List[str] = []
    for layer in [lay for lay in LAYERS if args.only in lay[0]]:
        for fmt in args.formats.split(","):
            for out in (dg.f32, dg.u8):
                st = steps(layer, fmt, out)
                samples = interleaved({k: s for k, s in st.items()}, args.rounds)
                m = {k: median(v) for k, v in samples.items()}
                rows.append(f"| {layer[0]} | {fmt} | {out.name} | {fmt_ns(m['int8'])} | "
                            f"{fmt_ns(m['dequantize+f32'])} | {m['dequantize+f32'] / m['int8']:.2f} |")
                print(rows[-1], flush=True)
    print("\n| layer (batch 1) | layout | output | int8 | dequantize + f32 | speed-up |\n|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
