"""Integer outputs that a Quantize rounds from floats: the comparison accepts
the other neighbour exactly where the unrounded value lies within the float
tolerance of a rounding boundary (a tie that f32 summation order decides),
and nothing else."""

import json
import os

import numpy as np
import pytest

from dyngraph.cli import main
from dyngraph.dtypes import DataType
from dyngraph.onednn.compare import F32_RTOL, compare
from dyngraph.op import OpKind
from dyngraph.reference.quantize import quantize_band

PER_TENSOR = {"qtype": "per_tensor", "axis": 1, "scales": [0.5], "zps": [3]}


def band(x, attrs=PER_TENSOR, dt=DataType.s8, rtol=F32_RTOL):
    return quantize_band(OpKind.Quantize, attrs, [np.asarray(x, np.float64)], dt, rtol)


def test_a_value_at_a_tie_may_round_either_way():
    # x / 0.5 = 2.5 exactly: 2 or 3, plus the zero point
    lo, hi = band([1.25])
    assert (lo[0], hi[0]) == (5, 6)


def test_a_value_away_from_a_tie_has_one_answer():
    x = np.array([1.0, 1.1, -7.3, 0.0])  # x / 0.5 = 2, 2.2, -14.6, 0
    lo, hi = band(x)
    np.testing.assert_array_equal(lo, hi)
    np.testing.assert_array_equal(lo, np.rint(x / 0.5) + 3)


def test_the_band_scales_with_the_tolerance_and_saturates():
    # 2.5008 is 8e-4 from the tie: outside a 1e-4 tolerance (1e-4 * (2.5 + 2.5) here), inside a 1e-3 one
    lo, hi = band([1.2504])
    assert (lo[0], hi[0]) == (6, 6)
    lo, hi = band([1.2504], rtol=1e-3)
    assert (lo[0], hi[0]) == (5, 6)
    lo, hi = band([1000.0, -1000.0])
    assert (lo[0], hi[0], lo[1], hi[1]) == (127, 127, -128, -128)


def test_per_channel_scales_and_nan():
    attrs = {"qtype": "per_channel", "axis": 1, "scales": [1.0, 0.25], "zps": [0, 10]}
    x = np.array([[0.5, 0.5], [np.nan, 1.0]])  # channel 1: 0.5 / 0.25 = 2 (+10); channel 0: 0.5 is a tie
    lo, hi = band(x, attrs, DataType.u8)
    np.testing.assert_array_equal(lo, [[0, 12], [0, 14]])
    np.testing.assert_array_equal(hi, [[1, 12], [0, 14]])


def test_compare_accepts_only_what_the_band_allows():
    ref = np.array([5, 7, 9], np.int64)
    b = (np.array([5, 7, 9]), np.array([6, 7, 9]))  # element 0 sits at a tie
    ok = compare(np.array([6, 7, 9], np.int8), ref, DataType.s8, DataType.f32, b)
    assert ok.ok and ok.ties == 1 and "1 rounded the other way at a tie" in ok.describe()
    off = compare(np.array([5, 8, 9], np.int8), ref, DataType.s8, DataType.f32, b)  # no tie at element 1
    assert not off.ok and off.error == 1 and off.where == (1,)
    assert not compare(np.array([6, 7, 9], np.int8), ref, DataType.s8, DataType.f32).ok  # no band: exact


def _lt(tid, dtype, shape):
    stride = [int(np.prod(shape[i + 1:])) for i in range(len(shape))]
    return {"id": tid, "dtype": dtype, "shape": shape, "stride": stride, "layout_type": "strided",
            "property_type": "undef"}


def _attr(kind, value):
    return {"type": kind, "value": value}


def test_an_int8_average_pool_whose_exact_results_are_ties_passes(tmp_path, capsys):
    """(q + 4) * 0.1 averaged over 2x2 and divided by 0.2 is (sum + 16) / 8 in exact
    arithmetic: every sum = 4 (mod 8) is a tie, which f32's inexact 0.1 and 0.2 push
    one way or the other (oneDNN's int8_avgpool_reshape_fusion is this case)."""
    q = {"qtype": _attr("string", "per_tensor"), "axis": _attr("s64", 1)}
    ops = [
        {"id": 0, "name": "dq", "kind": "Dequantize",
         "attrs": {**q, "scales": _attr("f32[]", [0.1]), "zps": _attr("s64[]", [-4])},
         "inputs": [_lt(0, "s8", [2, 3, 6, 6])], "outputs": [_lt(1, "f32", [2, 3, 6, 6])]},
        {"id": 1, "name": "pool", "kind": "AvgPool",
         "attrs": {"strides": _attr("s64[]", [1, 1]), "kernel": _attr("s64[]", [2, 2]),
                   "pads_begin": _attr("s64[]", [0, 0]), "pads_end": _attr("s64[]", [0, 0]),
                   "exclude_pad": _attr("bool", 0), "rounding_type": _attr("string", "floor"),
                   "data_format": _attr("string", "NCX")},
         "inputs": [_lt(1, "f32", [2, 3, 6, 6])], "outputs": [_lt(2, "f32", [2, 3, 5, 5])]},
        {"id": 2, "name": "q", "kind": "Quantize",
         "attrs": {**q, "scales": _attr("f32[]", [0.2]), "zps": _attr("s64[]", [-4])},
         "inputs": [_lt(2, "f32", [2, 3, 5, 5])], "outputs": [_lt(3, "s8", [2, 3, 5, 5])]},
    ]
    path = os.path.join(tmp_path, "int8-avgpool-ties.json")
    with open(path, "w") as f:
        json.dump({"version": "3.5.0", "engine_kind": "cpu", "fpmath_mode": "strict", "graph": ops}, f)
    assert main(["run", path]) == 0
    assert "PASS" in capsys.readouterr().out


@pytest.mark.parametrize("rtol", [F32_RTOL, 4 * 2.0 ** -7])
def test_the_band_never_spans_more_than_the_tolerance(rtol):
    rng = np.random.default_rng(0)
    x = rng.uniform(-60, 60, 10_000)
    lo, hi = band(x, rtol=rtol)
    p = x / 0.5
    width = rtol * (np.abs(p) + np.sqrt(np.mean(p * p)))
    assert ((hi - lo) <= np.ceil(2 * width)).all()
    assert (lo <= np.rint(p) + 3).all() and (np.rint(p) + 3 <= hi).all()
