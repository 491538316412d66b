"""pytest-benchmark cases of the cache-hit overhead: execute() of a one-op
graph at a built shape against the bare ggml compute of the same graph
(timed inside C++). report.py prints the difference against its target."""

import statistics

import dyngraph as dg
from cases import one_op_step


def test_one_op_execute(benchmark):
    s = one_op_step(dg.Engine(dg.Engine.CPU, num_threads=1))
    benchmark.group = "cache-hit-one-op"
    benchmark(s.cp.execute, s.stream, s.ins, s.outs)
    assert s.cp.cache_info().misses == 1  # every timed call was a hit
    assert (s.out_arrays[0] == 2.0).all()


def test_one_op_bare_compute(benchmark):
    s = one_op_step(dg.Engine(dg.Engine.CPU, num_threads=1))
    benchmark.group = "cache-hit-one-op"
    ns = []
    benchmark(lambda: ns.append(s.cp._impl.time_compute(s.ins, s.outs, 1)))
    assert statistics.median(ns) > 0
