"""compile(..., size_checks=[(lhs, rhs, message)]): conditions on sizes beyond the
dimensions' ranges, checked at every call and kept by a saved partition."""

import numpy as np
import pytest

import dyngraph as dg


def relu_partition(n):
    g = dg.Graph()
    g.add_op(dg.Op(0, dg.OpKind.ReLU, [dg.LogicalTensor(0, dg.f32, [n, 3])], [dg.LogicalTensor(1, dg.f32)]))
    g.finalize()
    (part,) = g.get_partitions()
    return part


def compile_with(checks, n=None):
    n = n or dg.Dim("n")
    part = relu_partition(n)
    return part.compile(part.get_input_ports(), part.get_output_ports(), dg.Engine(num_threads=1), size_checks=checks)


def assert_runs(cp, rows):
    x = np.linspace(-1, 1, rows * 3, dtype=np.float32).reshape(rows, 3)
    (y,) = cp(x)
    np.testing.assert_array_equal(y, np.maximum(x, 0))


def assert_refused(cp, rows, message):
    x = np.zeros((rows, 3), np.float32)
    with pytest.raises(dg.ShapeError, match=message):
        cp(x)
    with pytest.raises(dg.ShapeError, match=message):
        cp.infer_outputs([dg.LogicalTensor(0, dg.f32, [rows, 3])])


def test_sizes_that_break_a_check_are_refused_by_execute_and_infer_outputs():
    n = dg.Dim("n")
    cp = compile_with([(n % 8, 0, "n is a multiple of 8"), (dg.sym_max(n, 16), n, "n is at least 16")], n)
    for rows in (16, 24, 64):
        assert_runs(cp, rows)
    assert_refused(cp, 12, r"^n is a multiple of 8: .* = 4 but 0 = 0 \(n=12\)")
    assert_refused(cp, 8, r"^n is at least 16: ")
    assert_runs(cp, 24)  # a refused call leaves the partition as it was


def test_a_saved_partition_keeps_its_checks(tmp_path):
    n = dg.Dim("n")
    cp = compile_with([(n % 2, 1, "n is odd")], n)
    cp.save(tmp_path / "odd.dg")
    loaded = dg.load(tmp_path / "odd.dg")
    for rows in (1, 7):
        assert_runs(loaded, rows)
    assert_refused(loaded, 4, "^n is odd: ")


def test_checks_the_program_already_has_or_that_always_hold_add_nothing():
    n = dg.Dim("n")
    cp = compile_with([(n, n, "always"), (n % 8, 0, "twice"), (n % 8, 0, "twice")], n)
    assert [msg for _, _, msg in cp._program.guards] == ["twice"]


@pytest.mark.parametrize("checks, message", [
    ("n % 8", "a list of"),
    ([(1, 2)], r"each check is \(lhs, rhs, message\)"),
    ([(1, 2, 3)], r"each check is \(lhs, rhs, message\)"),
    ([("n", 2, "a name is not a size")], "expected an integer or a dimension expression"),
    ([(1.5, 2, "a float is not a size")], "expected an integer or a dimension expression"),
])
def test_malformed_checks_are_a_compile_error(checks, message):
    with pytest.raises(dg.CompileError, match=message):
        compile_with(checks)


def test_a_check_on_a_size_no_input_gives_is_a_compile_error():
    m = dg.Dim("m")
    with pytest.raises(dg.CompileError, match=r"'m' \(used by a shape check\) cannot be determined"):
        compile_with([(m % 2, 0, "m is even")])
