"""oneDNN's own graph cases (../shared/onednn-graph-cases): each file runs
and matches the numpy reference, or is refused with an UnsupportedError
naming what dyngraph lacks. No mismatch, crash, hang or untyped error; the
number that pass only goes up (a ratchet). Run tests/onednn/conformance.py
for the full table."""

import collections

from .conformance import case_files, conformance_tasks, dynamic_tasks, run_all, table

# files that pass today; raise it when more do
PASSING_AT_LEAST = 258


def test_every_case_passes_or_is_refused_by_name(cases_dir):
    results = run_all(conformance_tasks(max_bytes=1 << 30), jobs=2)
    report = table(results)
    print("\n" + report)
    assert len(results) == len(case_files()) == 283
    counts = collections.Counter(r["status"] for r in results)
    bad = [f"{r['status']}: {r['case']}: {r['message'][:500]}" for r in results
           if r["status"] not in ("pass", "unsupported")]
    assert not bad, "\n".join(bad)
    assert all(r["features"] for r in results if r["status"] == "unsupported")
    assert counts["pass"] >= PASSING_AT_LEAST, report


def test_mha_and_gated_mlp_run_at_three_sizes_through_one_compiled_partition(cases_dir):
    results = run_all(dynamic_tasks(), jobs=2)
    assert len(results) == 12
    for r in results:
        assert r["status"] == "pass", f"{r['case']}: {r['message']}"
        assert r["runs"] == 3 and r["partitions"] == 1 and r["graphs_built"] == 3, r
