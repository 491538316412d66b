"""oneDNN files with s4, u4, f8_e4m3 and f8_e5m2 tensors: the names map to
dyngraph's types, inputs are filled with values the types hold, f8 outputs
are compared up to a tie, and the project's own small cases run (one with
its key count dynamic through one compiled partition)."""

import json
import os

import ml_dtypes
import numpy as np
import pytest

import dyngraph as dg
from dyngraph import onednn
from dyngraph.cli import main
from dyngraph.dtypes import DataType
from dyngraph.onednn import dtypes as odt
from dyngraph.onednn.compare import F32_RTOL, compare
from dyngraph.onednn.fill import consumers, fill_tensor
from dyngraph.op import OpKind
from dyngraph.reference.quantize import quantize_band

from .jsoncase import OWN_CASES, doc, lt, op

F8_CASE = os.path.join(OWN_CASES, "f8-matmul.json")
INT4_CASE = os.path.join(OWN_CASES, "int4-kv.json")


@pytest.mark.parametrize("name,dt", [("s4", dg.s4), ("u4", dg.u4), ("f8_e4m3", dg.f8_e4m3), ("f8_e5m2", dg.f8_e5m2)])
def test_low_bit_dtypes_map_by_their_onednn_names(name, dt):
    assert odt.to_dyngraph(name) is dt
    assert odt.to_onednn(dt) == name


def test_an_f8_matmul_case_runs_and_matches_the_reference(capsys):
    """Dequantize f8_e4m3 (per tensor) and f8_e5m2 weights (per channel) -> MatMul -> ReLU -> Quantize f8_e5m2."""
    assert main(["run", "--json", F8_CASE]) == 0
    (rec,) = [json.loads(x) for x in capsys.readouterr().out.strip().splitlines()]
    assert rec["status"] == "pass"
    assert [(o["dtype"], o["shape"]) for o in rec["outputs"]] == [("f8_e5m2", [2, 16, 8])]


def test_an_s4_kv_case_runs_at_three_sizes_through_one_compiled_partition(capsys):
    """DynamicDequantize of an s4 value cache (u4 zero points, f16 scales per group of 8) -> MatMul,
    the key count dynamic."""
    assert main(["run", "--json", "--dynamic=0:2:k+1:2:k+2:2:k+4:3:k", "--shapes=k=1+k=9+k=40", INT4_CASE]) == 0
    (rec,) = [json.loads(x) for x in capsys.readouterr().out.strip().splitlines()]
    assert rec["status"] == "pass" and rec["graphs_built"] == 3
    assert all(o["error"] <= o["tolerance"] for o in rec["outputs"])


def test_from_json_of_to_json_keeps_the_low_bit_dtypes():
    g = onednn.from_json(INT4_CASE)
    text = onednn.to_json(g)
    assert [t["dtype"] for t in json.loads(text)["graph"][0]["inputs"]] == ["s4", "f16", "u4"]
    back = onednn.from_json(text)
    assert [t.dtype for t in back.get_ops()[0].inputs] == [dg.s4, dg.f16, dg.u4]


def _fill(d, tid, shape):
    g = onednn.from_json(d)
    return fill_tensor(g, tid, shape, consumers(g).get(tid, []), seed=0)


@pytest.mark.parametrize("dt", ["f8_e4m3", "f8_e5m2"])
def test_f8_inputs_are_filled_with_values_the_type_holds_in_the_range_of_their_reader(dt):
    """Read by MatMul (through a Dequantize with scale 1): k/8 in [-1, 1], rounded to the type."""
    d = doc(op(0, "Dequantize", [lt(0, [64, 32], dt)], [lt(1, [64, 32])], scales=[1.0]),
            op(1, "MatMul", [lt(1, [64, 32]), lt(2, [32, 4])], [lt(3, [64, 4])]))
    x = _fill(d, 0, (64, 32))
    assert x.dtype == DataType(dt).numpy
    v = x.astype(np.float64)
    assert np.isfinite(v).all() and np.abs(v).max() <= 2.0
    np.testing.assert_array_equal(v.astype(np.float32).astype(x.dtype).astype(np.float64), v)


def test_4_bit_inputs_span_their_type_and_zero_points_the_range_of_the_source_type():
    d = doc(op(0, "DynamicDequantize", [lt(0, [64, 32], "u4"), lt(1, [64, 4]), lt(2, [64, 4], "u8")],
               [lt(3, [64, 32])], qtype="per_group", group_shape=[1, 8]))
    q, z = _fill(d, 0, (64, 32)), _fill(d, 2, (64, 4))
    assert q.dtype == ml_dtypes.uint4 and z.dtype == np.uint8
    assert set(q.astype(np.int64).reshape(-1)) == set(range(16))
    assert 0 <= z.min() and z.max() <= 15


def test_f8_outputs_of_a_quantize_compare_up_to_a_tie():
    """x / 0.5 = 1.125 lies halfway between the f8_e5m2 values 1.0 and 1.25: either is right;
    at 1.0625 only 1.0 is."""
    attrs = {"qtype": "per_tensor", "axis": 1, "scales": [0.5], "zps": []}
    x = np.array([0.5625, 0.53125])
    band = quantize_band(OpKind.Quantize, attrs, [x], DataType.f8_e5m2, F32_RTOL)
    np.testing.assert_array_equal(band[0], [1.0, 1.0])
    np.testing.assert_array_equal(band[1], [1.25, 1.0])
    ref = np.array([1.0, 1.0])
    got = np.array([1.25, 1.0], ml_dtypes.float8_e5m2)
    ok = compare(got, ref, DataType.f8_e5m2, DataType.f32, band)
    assert ok.ok and ok.ties == 1
    assert not compare(np.array([1.0, 1.25], ml_dtypes.float8_e5m2), ref, DataType.f8_e5m2, DataType.f32, band).ok
    assert not compare(got, ref, DataType.f8_e5m2, DataType.f32).ok  # no band: exact


def test_f8_comparison_meets_nan_with_nan_and_infinity_with_infinity():
    ref = np.array([np.nan, np.inf, 2.0])
    assert compare(np.array([np.nan, np.inf, 2.0], ml_dtypes.float8_e5m2), ref, DataType.f8_e5m2, DataType.f32).ok
    assert not compare(np.array([1.0, np.inf, 2.0], ml_dtypes.float8_e5m2), ref, DataType.f8_e5m2, DataType.f32).ok
    assert not compare(np.array([np.nan, -np.inf, 2.0], ml_dtypes.float8_e5m2), ref, DataType.f8_e5m2,
                       DataType.f32).ok
