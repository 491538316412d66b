"""The surface fuzzer (tests/fuzz/surfaces.py): each kind runs clean for a few
inputs, and its findings stay fixed."""

import os
import sys

import pytest

import dyngraph as dg

from . import surfaces


@pytest.mark.parametrize("kind,n", [("json", 200), ("rpc-answer", 30), ("rpc-msg", 30)])
def test_each_kind_runs_clean(kind, n):
    if kind != "json" and not dg._backend.has_rpc():
        pytest.skip("no RPC backend in this ggml")
    r = surfaces.fuzz_kind(kind, seed=0, n=n, start=0, timeout=30, seconds=None, python=sys.executable)
    assert r["inputs"] == n and not r["findings"], r


def test_json_findings_stay_fixed():
    """seed 2 input 1304: a float 'axis' of a per-channel Dequantize was a TypeError; seed 37 input
    4672: a float 'axis' of a SoftMax with mode=inf_as_zero, likewise."""
    ctx = {"seeds": surfaces._json_seeds(), "engine": dg.Engine(num_threads=1)}
    assert surfaces.run_json(2, 1304, ctx) in ("pass", "typed")
    assert surfaces.run_json(37, 4672, ctx) in ("pass", "typed")
