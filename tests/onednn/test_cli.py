"""The dyngraph command: run (benchdnn's options, batch files, exit codes),
bench, inspect and dot, on the project's own small cases."""

import json
import os
import re
import subprocess
import sys

import numpy as np

import dyngraph as dg
from dyngraph.cli import main
from dyngraph.op import OpKind

from .jsoncase import OWN_CASES

MLP = os.path.join(OWN_CASES, "mlp-f32.json")
ATTN = os.path.join(OWN_CASES, "attention-f32.json")
CONV = os.path.join(OWN_CASES, "conv-f32.json")
CONV3D = os.path.join(OWN_CASES, "conv3d-f32.json")  # 3 spatial axes
UNSUPPORTED = os.path.join(OWN_CASES, "relu-backward-f32.json")  # a training op: dyngraph has none
ROOT = os.path.normpath(os.path.join(OWN_CASES, "..", "..", ".."))


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_run_passes_and_prints_the_worst_error(capsys):
    code, out, _ = run(capsys, "run", MLP)
    assert code == 0
    m = re.match(r"PASS: .*mlp-f32.json: 1 binding, 1 graph built, worst error (\S+) \(tolerance 0.0001\)", out)
    assert m and float(m.group(1)) < 1e-4


def test_run_an_unsupported_case_says_why_with_its_own_exit_code(capsys):
    code, out, _ = run(capsys, "run", UNSUPPORTED)
    assert code == 3
    assert out.startswith("UNSUPPORTED: ") and "no op kind ReLUBackward" in out


def test_run_a_mismatch_fails_with_exit_code_1(capsys, monkeypatch):
    from dyngraph.reference import registry

    gelu = registry.IMPLS[OpKind.GELU]
    monkeypatch.setitem(registry.IMPLS, OpKind.GELU, lambda a, i, c: [v * 1.01 for v in gelu(a, i, c)])
    code, out, _ = run(capsys, "run", MLP)
    assert code == 1
    assert out.startswith("FAIL: ") and "in output 7 (f32)" in out


def test_run_a_malformed_case_is_an_error_with_exit_code_4(capsys, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"graph": [{"id": "zero"}]}')
    code, out, _ = run(capsys, "run", str(bad))
    assert code == 4 and out.startswith("ERROR: ") and "GraphError" in out
    code, out, _ = run(capsys, "run", str(tmp_path / "missing.json"))
    assert code == 2 and out.startswith("USAGE: ") and "no such file" in out


def test_run_hostile_values_are_typed_errors_and_a_batch_goes_on(capsys, tmp_path):
    """Negative sizes (-1, -2, -2^63) and a 5,000-digit literal: each case an ERROR line;
    the cases after them still run and every one is counted."""
    doc = json.loads(open(MLP).read())
    names = []
    for v in (-1, -2, -(2**63)):
        bad = json.loads(json.dumps(doc))
        bad["graph"][0]["inputs"][0]["shape"][0] = v
        (tmp_path / f"neg{len(names)}.json").write_text(json.dumps(bad))
        names.append(f"neg{len(names)}.json")
    (tmp_path / "digits.json").write_text(open(MLP).read().replace('"id": 0,', '"id": ' + "9" * 5000 + ",", 1))
    names.append("digits.json")
    batch = tmp_path / "batch.txt"
    batch.write_text("\n".join(names + ["missing.json", MLP]) + "\n")
    code, out, _ = run(capsys, "run", f"--batch={batch}")
    lines = out.splitlines()
    assert [ln.split(":")[0] for ln in lines[:-1]] == ["ERROR"] * 4 + ["USAGE", "PASS"]
    assert "unknown" in lines[0] and "integer literal of 5000 characters" in lines[3]
    assert lines[-1] == "tests: 6 passed: 1 failed: 0 unsupported: 0 errors: 4 usage errors: 1"
    assert code == 2


def test_run_malformed_option_values_and_missing_files_exit_2(capsys, tmp_path):
    for argv in (["--in-shapes=0:abc", MLP], ["--in-shapes=0:" + "9" * 5000, MLP], ["--op-kind=x:Abs", MLP],
                 ["--shapes=n=zero", MLP], ["--dynamic=0", MLP], ["--attr-fpmath=fast", MLP],
                 ["--max-gib=nan", MLP], [f"--batch={tmp_path / 'none.txt'}"]):
        code, out, err = run(capsys, "run", *argv)
        assert code == 2, argv
        assert not out and "dyngraph run: " in err
    for cmd in ("bench", "inspect", "dot"):
        code, _, err = run(capsys, cmd, str(tmp_path / "missing.json"))
        assert code == 2 and "no such file" in err, cmd
    code, _, err = run(capsys, "bench", MLP, "--shapes", "n=abc")
    assert code == 2 and "OptionError" in err


def test_run_rewrites_of_an_interpolate_case(capsys, tmp_path):
    """--in-shapes and --op-attrs on Interpolate: the reference takes the inferred output shape."""
    case = {"version": "3.5.0", "engine_kind": "cpu", "fpmath_mode": "strict", "graph": [
        {"id": 0, "name": "resize", "kind": "Interpolate",
         "attrs": {"sizes": {"type": "s64[]", "value": [6, 12]}, "mode": {"type": "string", "value": "nearest"},
                   "coordinate_transformation_mode": {"type": "string", "value": "half_pixel"},
                   "data_format": {"type": "string", "value": "NCX"}},
         "inputs": [{"id": 0, "dtype": "f32", "shape": [2, 3, 7, 14], "stride": [294, 98, 14, 1],
                     "layout_type": "strided", "property_type": "undef"}],
         "outputs": [{"id": 1, "dtype": "f32", "shape": [2, 3, 6, 12], "stride": [216, 72, 12, 1],
                      "layout_type": "strided", "property_type": "undef"}]}]}
    path = tmp_path / "interpolate.json"
    path.write_text(json.dumps(case))
    code, out, _ = run(capsys, "run", "--in-shapes=0:2x3x5x10,0:1x3x4x4", "--op-attrs=0:sizes:4x8", str(path))
    assert code == 0 and out.count("PASS: ") == 2, out


def test_run_usage_errors_exit_2(capsys):
    assert run(capsys, "run")[0] == 2
    assert run(capsys, "run", "--frobnicate=1", MLP)[0] == 2
    assert run(capsys, "run", "--threads=x", MLP)[0] == 2
    assert run(capsys, "nope")[0] == 2


def test_run_benchdnn_options_and_variants(capsys):
    code, out, _ = run(capsys, "run", "--mb=1,3", "--op-attrs=2:mode:gelu_tanh", MLP)
    assert code == 0
    lines = out.strip().splitlines()
    assert lines[0].startswith("PASS: ") and "--mb=1" in lines[0] and "gelu_tanh" in lines[0]
    assert lines[1].startswith("PASS: ") and "--mb=3" in lines[1]
    assert lines[2] == "tests: 2 passed: 2 failed: 0 unsupported: 0 errors: 0"


def test_run_dynamic_dims_through_one_compiled_partition(capsys):
    code, out, _ = run(capsys, "run", "--dynamic=0:2:s+1:3:s+5:3:s+8:2:s", "--shapes=s=1+s=7+s=33", "--json", ATTN)
    assert code == 0
    (rec,) = [json.loads(x) for x in out.strip().splitlines()]
    assert rec["status"] == "pass" and rec["graphs_built"] == 3
    assert [o["shape"] for o in rec["outputs"]] == [[1, 4, 1, 8], [1, 4, 7, 8], [1, 4, 33, 8]]
    assert all(o["error"] <= o["tolerance"] for o in rec["outputs"])


def test_run_a_batch_file_as_benchdnn_does(capsys):
    code, out, _ = run(capsys, "run", f"--batch={os.path.join(OWN_CASES, 'batch.txt')}")
    assert code == 3  # everything passed but the ReLUBackward case, which is unsupported
    statuses = [line.split(":")[0] for line in out.strip().splitlines()[:-1]]
    assert statuses == ["PASS"] * 8 + ["UNSUPPORTED"]
    assert out.strip().splitlines()[-1] == "tests: 9 passed: 8 failed: 0 unsupported: 1 errors: 0"


def test_run_onednns_ci_batch_file_line_by_line(capsys, cases_dir):
    """Lines of oneDNN's own batch file run as they are (relative --case paths,
    --op-kind / --dt variants)."""
    code, out, _ = run(capsys, "run", "--max-gib=0.25", f"--batch={os.path.join(cases_dir, 'op', 'harness_f32_ci')}")
    counts = re.search(r"tests: (\d+) passed: (\d+) failed: (\d+) unsupported: (\d+) errors: (\d+)", out)
    total, passed, failed, unsupported, errors = map(int, counts.groups())
    assert failed == 0 and errors == 0
    assert passed >= 47 and total == passed + unsupported  # 47 of its 67 variants today (the others: training, over 0.25 GiB)
    assert code == 3


def test_run_onednns_whole_ci_batch_without_a_failure(capsys, cases_dir, monkeypatch):
    """test_graph_ci: every harness of its groups (op, pattern, complex_fusion; f32, f16, bf16, int8, f8) with
    their --dt / --op-kind / --op-attrs / --in-shapes variants, from the collection's own folder as benchdnn runs it."""
    monkeypatch.chdir(cases_dir)
    code, out, _ = run(capsys, "run", "--max-gib=0.25", "--batch=test_graph_ci")
    counts = re.search(r"tests: (\d+) passed: (\d+) failed: (\d+) unsupported: (\d+) errors: (\d+)", out)
    total, passed, failed, unsupported, errors = map(int, counts.groups())
    assert failed == 0 and errors == 0, "\n".join(ln for ln in out.splitlines() if ln.startswith(("FAIL", "ERROR")))
    assert total == 225 and passed >= 173  # 173 today; the rest: backward ops, over 0.25 GiB


def test_bench_prints_a_row_per_binding(capsys):
    code, out, _ = run(capsys, "bench", ATTN, "--dynamic=0:2:s+1:3:s+5:3:s+8:2:s", "--shapes=s=4+s=16",
                       "--shapes", "s=64", "--iters=3", "--rebuilds=2")
    assert code == 0
    lines = out.strip().splitlines()
    assert "compile" in lines[0]
    assert lines[1].split() == ["binding", "first", "call", "ms", "build", "ms", "cached", "call", "ms", "rebuild", "ms",
                                "nodes"]
    assert [ln.split()[0] for ln in lines[3:]] == ["s=4", "s=16", "s=64"]


def test_bench_json(capsys):
    code, out, _ = run(capsys, "bench", MLP, "--json", "--iters=2", "--rebuilds=1")
    assert code == 0
    d = json.loads(out)
    (row,) = d["rows"]
    assert d["partitions"] == 1 and row["binding"] == {}
    assert row["build_ms"] > 0 and row["nodes"] > 0 and row["cached_call_ms"] > 0


def saved_model(tmp_path):
    seq = dg.Dim("seq", min=1, max=64)
    tokens = dg.LogicalTensor(0, dg.i64, [seq], name="tokens")
    table = dg.LogicalTensor(1, dg.f32, [50, 32], property=dg.CONSTANT, name="embed")
    w = dg.LogicalTensor(2, dg.f32, [32, 16], property=dg.CONSTANT, name="w")
    cache = dg.LogicalTensor(3, dg.f32, [64, 16], property=dg.STATE, name="cache")
    bias = dg.LogicalTensor(7, dg.f32, [16], property=dg.CONSTANT, name="bias")
    h, y, yb, new = (dg.LogicalTensor(i, dg.f32, None) for i in (4, 5, 8, 6))
    g = dg.Graph()
    g.add_op(dg.Op(0, OpKind.Gather, [table, tokens], [h]))
    g.add_op(dg.Op(1, OpKind.MatMul, [h, w], [y]))
    g.add_op(dg.Op(3, OpKind.Add, [y, bias], [yb]))
    g.add_op(dg.Op(2, OpKind.ScatterRows, [cache, tokens, yb], [new]))
    g.finalize()
    (p,) = g.get_partitions()
    cp = p.compile([tokens, table, w, cache, bias], p.get_output_ports(), dg.Engine(num_threads=1),
                   constants={1: np.ones((50, 32), np.float32), 2: np.ones((32, 16), np.float32),
                              7: np.zeros(16, np.float32)},
                   weight_type="q8_0")
    path = tmp_path / "model.dg"
    cp.save(path)
    return str(path)


def test_inspect_a_saved_partition(capsys, tmp_path):
    path = saved_model(tmp_path)
    code, out, _ = run(capsys, "inspect", path)
    assert code == 0
    assert "seq in [1, 64]" in out
    assert re.search(r"0 tokens: i64 \[seq\]", out)
    assert "Gather 1" in out and "MatMul 1" in out and "ScatterRows 1" in out and "Add 1" in out
    assert "a saved file is one compiled partition" in out
    assert re.search(r"q8_0: 2 tensors", out) and re.search(r"f32: 1 tensors", out)
    assert re.search(r"3 cache: f32 \[64, 16\]", out)
    code, out, _ = run(capsys, "inspect", path, "--json")
    d = json.loads(out)
    assert d["weights"]["f32"]["bytes"] == 16 * 4
    assert d["weights"]["q8_0"]["bytes"] == (50 * 32 + 32 * 16) // 32 * 34  # 34-byte blocks of 32 values
    assert [t["name"] for t in d["state"]] == ["cache"]


def test_inspect_a_json_case_and_a_bad_file(capsys, tmp_path):
    code, out, _ = run(capsys, "inspect", ATTN)
    assert code == 0 and "partitions: 1" in out and "SoftMax mode=inf_as_zero" in out
    bad = tmp_path / "bad.dg"
    bad.write_bytes(b"\x00" * 64)
    code, _, err = run(capsys, "inspect", str(bad))
    assert code == 4 and "IRError" in err


def test_bench_a_saved_partition(capsys, tmp_path):
    code, out, _ = run(capsys, "bench", saved_model(tmp_path), "--shapes=seq=3+seq=20", "--iters=2", "--rebuilds=1")
    assert code == 0
    assert [ln.split()[0] for ln in out.strip().splitlines()[3:]] == ["seq=3", "seq=20"]


def _dot_ok(text):
    assert text.startswith("digraph dyngraph {") and text.rstrip().endswith("}")
    assert text.count("{") == text.count("}")
    nodes = set(re.findall(r"^\s+(\w+) \[", text, re.M))
    for a, b in re.findall(r"^\s+(\w+) -> (\w+)", text, re.M):
        assert a in nodes and b in nodes, (a, b)
    return nodes


def test_dot_draws_partitions_as_clusters(capsys, cases_dir):
    code, out, _ = run(capsys, "dot", ATTN)
    assert code == 0
    _dot_ok(out)
    assert out.count("subgraph cluster_") == 1 and "partition 0 (backend)" in out
    code, out, _ = run(capsys, "dot", UNSUPPORTED)
    assert code == 0
    _dot_ok(out)
    assert "not run by the backend" in out and '\\nReLUBackward"' in out


def test_dot_of_a_saved_partition(capsys, tmp_path):
    code, out, _ = run(capsys, "dot", saved_model(tmp_path))
    assert code == 0
    nodes = _dot_ok(out)
    assert {"op0", "op1", "op2"} <= nodes


def test_the_console_script_is_declared_and_runs():
    import tomllib

    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        assert tomllib.load(f)["project"]["scripts"]["dyngraph"] == "dyngraph.cli:main"
    env = dict(os.environ)
    if os.environ.get("DYNGRAPH_DEV") == "1":
        env["PYTHONPATH"] = os.path.join(ROOT, "api") + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-m", "dyngraph.cli", "run", UNSUPPORTED], capture_output=True, text=True, env=env)
    assert r.returncode == 3 and r.stdout.startswith("UNSUPPORTED: ")
