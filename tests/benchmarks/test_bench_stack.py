"""pytest-benchmark suite: the decoder stack (cached, rebuilt, padded, numpy)
and the example MLP against numpy. One engine thread, one BLAS thread.

    pytest tests/benchmarks --benchmark-enable

Under the project's default ``--benchmark-disable`` each case runs once, as
a plain test of what it computes. Nothing here asserts a time.
"""

import pytest

from cases import MLP_BATCHES, STATIC_ROWS, calls_of, check, mlp_cases, stack_cases, static_dynamic_cases


@pytest.fixture(scope="module")
def stack(engine):
    return stack_cases(engine)


@pytest.fixture(scope="module")
def mlp(engine):
    return mlp_cases(engine)


def _bench(benchmark, case):
    benchmark.group = case.group
    benchmark.name = case.name
    benchmark.extra_info["case"] = case.name
    benchmark(case.fn)
    check(case)


def test_stack_cached_seq7(benchmark, stack):
    case = stack["cached"]
    builds = case.cp.cache_info().builds
    _bench(benchmark, case)
    assert case.cp.cache_info().builds == builds  # every timed call was a cache hit


def test_stack_rebuild_clear_cache_each_call_seq7(benchmark, stack):
    case = stack["rebuild_clear"]
    _bench(benchmark, case)
    info = case.cp.cache_info()
    assert info.builds == calls_of(case)  # every call (timed or checking) built the graph
    benchmark.extra_info["build_seconds_per_build"] = info.build_seconds / info.builds
    benchmark.extra_info["graph_nodes"] = info.last_graph_nodes


def test_stack_rebuild_capacity1_alternating_seq7_seq8(benchmark, stack):
    case = stack["rebuild_alt"]
    benchmark.group = case.group
    benchmark.name = case.name
    benchmark(case.fn)
    info = case.cp.cache_info()
    assert info.builds == calls_of(case) and info.entries == 1
    benchmark.extra_info["build_seconds_per_build"] = info.build_seconds / info.builds


def test_stack_padded_static127_seq7(benchmark, stack):
    case = stack["padded"]
    _bench(benchmark, case)
    assert case.cp.cache_info().builds == 1


def test_stack_numpy_f32_seq7(benchmark, stack):
    _bench(benchmark, stack["numpy"])


@pytest.mark.parametrize("batch", MLP_BATCHES)
def test_mlp_dyngraph_cached(benchmark, mlp, batch):
    _bench(benchmark, mlp[f"dyngraph{batch}"])


@pytest.mark.parametrize("batch", MLP_BATCHES)
def test_mlp_numpy_f32(benchmark, mlp, batch):
    _bench(benchmark, mlp[f"numpy{batch}"])


@pytest.fixture(scope="module")
def llama(engine):
    from cases import llama_cases

    return llama_cases(engine)


@pytest.mark.parametrize("key", ["prefill", "decode"])
def test_llama_decoder(benchmark, llama, key):
    case = llama[key]
    builds = case.cp.cache_info().builds
    _bench(benchmark, case)
    assert case.cp.cache_info().builds == builds == 2  # one graph for the prefill length, one for decode


@pytest.fixture(scope="module")
def static_dynamic(engine):
    return static_dynamic_cases(engine)


@pytest.mark.parametrize("how", ["static", "dynamic"])
@pytest.mark.parametrize("rows", STATIC_ROWS)
def test_mlp_stack_static_vs_dynamic_compile(benchmark, static_dynamic, how, rows):
    case = static_dynamic[f"{how}{rows}"]
    benchmark.group = case.group
    benchmark.name = case.name
    benchmark(case.fn)
    check(case, rtol=1e-4, atol=1e-4)
