"""f32 MatMul weights in panels (backend/kernels/f32_panels.h): a compiled
partition stores a constant that only MatMuls read as their weights as panels
of 48 transposed weight rows, and its own product reads them. Checked against
numpy in float64 at every kernel variant (DYNGRAPH_KERNEL_ISA, each in a fresh
process with DYNGRAPH_F32_PANELS=1, so the portable variant runs too), each
over its own sub-panels and the other width (DYNGRAPH_PANEL_SPLIT), at row
counts on both sides of each tile's size, weight counts that leave every kind
of last panel (narrower than a tile's columns, than a vector, one column),
several threads (a thread's columns are whole panels), depths cut into passes
(a row's outputs the same bits alone as among others) and dynamic shapes; and
the rule of which weights are laid out that way, and that save() writes the
rows back."""

import functools
import textwrap

import numpy as np
import pytest

import dyngraph as dg
from subproc import IMPORT_TESTS, run_python
from ops.test_kernel_isa import ORDER, best_isa

CHECK = textwrap.dedent("""
    import numpy as np
    import dyngraph as dg

    first = {}  # (k, n, i): the outputs on 1 thread, which 3 threads give bit for bit
    for threads in (1, 3):
        e = dg.Engine(dg.Engine.CPU, num_threads=threads)
        for k, n in ((1, 5), (33, 7), (64, 48), (37, 49), (100, 97), (256, 200), (20, 1030), (513, 50), (1100, 60),
                     (40, 30), (70, 72), (29, 85)):
            x = dg.LogicalTensor(0, dg.f32, [dg.DYNAMIC_DIM, k])
            w = dg.LogicalTensor(1, dg.f32, [k, n], property=dg.CONSTANT)
            b = dg.LogicalTensor(2, dg.f32, [n], property=dg.CONSTANT)
            h = dg.LogicalTensor(3, dg.f32, [dg.UNKNOWN_DIM, dg.UNKNOWN_DIM])
            y = dg.LogicalTensor(4, dg.f32, [dg.UNKNOWN_DIM, dg.UNKNOWN_DIM])
            g = dg.Graph(dg.Engine.CPU)
            g.add_op(dg.Op(0, dg.OpKind.MatMul, [x, w, b], [h]))
            g.add_op(dg.Op(1, dg.OpKind.ReLU, [h], [y]))
            g.finalize()
            (p,) = g.get_partitions()
            rng = np.random.default_rng([k, n])
            W = rng.standard_normal((k, n)).astype(np.float32)
            B = rng.standard_normal(n).astype(np.float32)
            cp = p.compile([x, w, b], [y], e, constants={1: W, 2: B})
            assert cp.cache_info().panel_bytes == 4 * k * n, (k, n, cp.cache_info())
            # 600: blocks of rows at K >= 513; from 24 rows, a last panel's narrow tiles; 3 threads take
            # 600 rows by rows where the panels do not share out evenly (n = 200: 96, 96 and 8 columns)
            for i, m in enumerate((1, 2, 3, 4, 5, 7, 8, 9, 17, 24, 64, 130, 600, 1, 3)):
                a = rng.standard_normal((m, k)).astype(np.float32)
                (out,) = cp(a)
                assert np.array_equal(first.setdefault((k, n, i), out), out), (threads, k, n, m)
                ref = np.maximum(a.astype(np.float64) @ W.astype(np.float64) + B, 0)
                err = np.abs(out - ref).max() / max(np.abs(ref).max(), 1e-30)
                assert err < 1e-5, (threads, k, n, m, err)
                # a row's sums do not depend on the rows beside it (tiles of other sizes, K cut in passes)
                (alone,) = cp(a[-1:])
                assert np.array_equal(alone[0], out[-1]), (threads, k, n, m)
    print(dg._backend.panel_split(), dg._backend.kernel_isa())
""")


def default_split(isa: str) -> int:
    """The sub-panels' width a process whose kernels are `isa`'s lays its panels out in (f32_panels.h)."""
    return 24 if isa == "avx2" else 48


def run_split(check: str, isa: str, which: str):
    """`check` in a fresh process at kernel variant `isa`, its panels in sub-panels of the variant's
    own width (which="own") or of the other one ("other": DYNGRAPH_PANEL_SPLIT); asserts both took
    effect (the check prints the process's split and variant last)."""
    if ORDER.index(isa) > ORDER.index(best_isa()):
        pytest.skip(f"this CPU has no {isa}")
    own = default_split(isa)
    split = own if which == "own" else 48 if own == 24 else 24
    env = {"DYNGRAPH_KERNEL_ISA": isa, "DYNGRAPH_F32_PANELS": "1"}
    if which == "other":
        env["DYNGRAPH_PANEL_SPLIT"] = str(split)
    r = run_python(check, timeout=300, env_vars=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split()[-2:] == [str(split), isa]


# Sub-panels: each variant's own width, and the other one (AVX2's tiles over whole panels, where a
# process that began at AVX-512 switches down; the portable and AVX-512 code over sub-panels of 24,
# the AVX-512 products then leaving them to AVX2's tiles)
SPLITS = ["own", "other"]


@pytest.mark.parametrize("split", SPLITS)
@pytest.mark.parametrize("isa", ORDER)
def test_products_over_panels_match_numpy_at_every_variant(isa, split):
    run_split(CHECK, isa, split)


def mlp_graph(n_dim, k=24, n=50, tied=False):
    """x @ w; when tied (k == n), (x @ w^T) @ (w @ v): w read as activations too, and as the
    product's weights in the form the backend keeps them (transpose_b: no transposed copy)."""
    x = dg.LogicalTensor(0, dg.f32, [n_dim, k])
    w = dg.LogicalTensor(1, dg.f32, [k, n], property=dg.CONSTANT)
    y = dg.LogicalTensor(2, dg.f32, [dg.UNKNOWN_DIM, dg.UNKNOWN_DIM])
    g = dg.Graph(dg.Engine.CPU)
    g.add_op(dg.Op(0, dg.OpKind.MatMul, [x, w], [y], {"transpose_b": True} if tied else {}))
    ins, outs = [x, w], [y]
    if tied:
        v = dg.LogicalTensor(3, dg.f32, [n, 4])
        q = dg.LogicalTensor(4, dg.f32, [dg.UNKNOWN_DIM, dg.UNKNOWN_DIM])
        z = dg.LogicalTensor(5, dg.f32, [dg.UNKNOWN_DIM, dg.UNKNOWN_DIM])
        g.add_op(dg.Op(1, dg.OpKind.MatMul, [w, v], [q]))
        g.add_op(dg.Op(2, dg.OpKind.MatMul, [y, q], [z]))
        ins, outs = [x, w, v], [z]
    g.finalize()
    (p,) = g.get_partitions()
    return p, ins, outs


# A tied table (a Gather reads its rows, a MatMul multiplies by it transposed: a tied embedding and its
# output layer) of f32, f16 or bf16 values in panels (kernels/panel_rows.h): the Gather gives the very
# values ggml's get_rows gives on the rows (a Gather-only partition keeps them), exact; the product is the
# untied one's over the same panels, bit for bit; save() writes the rows back. Last panels of 22, 37 and 1 rows,
# odd and even K (bf16 in pairs of k where the CPU has AVX-512 BF16 and K is even), 1 and 2 threads.
TIED_CHECK = textwrap.dedent("""
    import numpy as np
    import dyngraph as dg
    from oputil import compile_gather, compile_tied, compile_weight_product

    rng = np.random.default_rng(4)
    for storage, size in (("f32", 4), ("f16", 2), ("bf16", 2)):
        for k, n in ((96, 70), (33, 49), (64, 48), (40, 85)):
            values = rng.standard_normal((n, k)).astype(np.float32)
            if storage == "f32":
                constant, exact = values, values
            elif storage == "f16":
                h = values.astype(np.float16)
                constant, exact = dg.StoredWeight((n, k), "f16", h.view(np.uint16)), h.astype(np.float32)
            else:
                h = (values.view(np.uint32) >> 16).astype(np.uint16)  # (truncated: any bf16 values do)
                constant, exact = dg.StoredWeight((n, k), "bf16", h), (h.astype(np.uint32) << 16).view(np.float32)
            for threads in (1, 2):
                e = dg.Engine(dg.Engine.CPU, num_threads=threads)
                cp, untied = compile_tied(n, k, constant, e), compile_weight_product(n, k, constant, e)
                rows = compile_gather(n, k, constant, e)
                assert cp.cache_info().panel_bytes == size * n * k, (storage, k, n, cp.cache_info())
                assert rows.cache_info().panel_bytes == 0
                cp.save("tied.dg")
                loaded = dg.load("tied.dg", e)
                for pick in (np.array([0, n - 1, 47, min(48, n - 1), 5, 5]), np.array([n - 1]), np.arange(n)[::-1].copy()):
                    got, prod = cp(pick)
                    assert np.array_equal(got, rows(pick)[0]), (storage, k, n, threads)
                    assert np.array_equal(got, exact[pick]), (storage, k, n, threads)
                    assert np.array_equal(prod, untied(got)[0]), (storage, k, n, threads)
                    ref = got.astype(np.float64) @ exact.T.astype(np.float64)
                    # (bf16 in pairs: the activations rounded to bf16, as ggml's bf16 product rounds them)
                    tol = 1e-2 if storage == "bf16" and dg._backend.bf16_pair_panels(k) else 1e-5
                    assert np.abs(prod - ref).max() / np.abs(ref).max() < tol, (storage, k, n, threads)
                    for a, b in zip(loaded(pick), (got, prod)):
                        assert np.array_equal(a, b), (storage, k, n, threads)
    print(dg._backend.panel_split(), dg._backend.kernel_isa())
""")


@pytest.mark.parametrize("split", SPLITS)
@pytest.mark.parametrize("isa", ORDER)
def test_a_tied_table_in_panels_gathers_its_very_rows_at_every_variant(isa, split, tmp_path):
    run_split(IMPORT_TESTS + f"import os\nos.chdir({str(tmp_path)!r})\n" + TIED_CHECK, isa, split)


@functools.cache
def panels_on() -> bool:
    """Whether this process lays f32 MatMul weights out in panels (the default where our kernels have
    AVX2, x86-64; DYNGRAPH_F32_PANELS says otherwise)."""
    p, ins, outs = mlp_graph(dg.DYNAMIC_DIM, 4, 4)
    cp = p.compile(ins, outs, dg.Engine(dg.Engine.CPU), constants={1: np.ones((4, 4), np.float32)})
    return cp.cache_info().panel_bytes > 0


def test_which_weights_are_laid_out_in_panels(rng):
    if not panels_on():
        pytest.skip("panels are the default where our kernels have AVX2 (x86-64), and DYNGRAPH_F32_PANELS=0 is not set")
    k, n = 24, 50
    W = rng.standard_normal((k, n)).astype(np.float32)
    e = dg.Engine(dg.Engine.CPU)
    p, ins, outs = mlp_graph(dg.DYNAMIC_DIM)
    assert p.compile(ins, outs, e, constants={1: W}).cache_info().panel_bytes == 4 * k * n
    # a static shape lays them out as the dynamic one does
    p, ins, outs = mlp_graph(5)
    assert p.compile(ins, outs, e, constants={1: W}).cache_info().panel_bytes == 4 * k * n
    # repack_weights=False keeps the rows
    p, ins, outs = mlp_graph(dg.DYNAMIC_DIM)
    assert p.compile(ins, outs, e, constants={1: W}, repack_weights=False).cache_info().panel_bytes == 0
    # a weight another op reads too keeps its rows, and both readers see them
    p, ins, outs = mlp_graph(dg.DYNAMIC_DIM, k, k, tied=True)
    S = W[:, :k].copy()
    cp = p.compile(ins, outs, e, constants={1: S})
    assert cp.cache_info().panel_bytes == 0
    a = rng.standard_normal((9, k)).astype(np.float32)
    v = rng.standard_normal((k, 4)).astype(np.float32)
    (z,) = cp(a, v)
    S64 = S.astype(np.float64)
    np.testing.assert_allclose(z, (a @ S64.T) @ (S64 @ v), rtol=1e-5, atol=1e-4)


def test_the_switch_turns_panels_off_and_on():
    code = textwrap.dedent("""
        import numpy as np, dyngraph as dg
        x = dg.LogicalTensor(0, dg.f32, [dg.DYNAMIC_DIM, 8])
        w = dg.LogicalTensor(1, dg.f32, [8, 3], property=dg.CONSTANT)
        y = dg.LogicalTensor(2, dg.f32, [dg.UNKNOWN_DIM, dg.UNKNOWN_DIM])
        g = dg.Graph(dg.Engine.CPU)
        g.add_op(dg.Op(0, dg.OpKind.MatMul, [x, w], [y]))
        g.finalize()
        (p,) = g.get_partitions()
        W = np.arange(24, dtype=np.float32).reshape(8, 3)
        cp = p.compile([x, w], [y], dg.Engine(dg.Engine.CPU), constants={1: W})
        a = np.ones((2, 8), np.float32)
        assert (cp(a)[0] == a @ W).all()
        print(cp.cache_info().panel_bytes)
    """)
    for value, want in (("0", 0), ("1", 96)):
        r = run_python(code, env_vars={"DYNGRAPH_F32_PANELS": value})
        assert r.returncode == 0, r.stderr[-2000:]
        assert int(r.stdout.split()[-1]) == want


ONE_ROW_VIEW = textwrap.dedent("""
    import numpy as np
    import dyngraph as dg

    # y = t^T @ w with t [k, rows]: at one row, t^T is a dense view of one row whose row stride is
    # the element's (4 bytes), as a dense tensor of one row may have it (LFM's short convolutions)
    rng = np.random.default_rng(0)
    for k, n, half in ((64, 64, False), (40, 1, False), (96, 50, True)):
        b = dg.GraphBuilder()
        t = b.input("t", dg.f32, [k, dg.DYNAMIC_DIM])
        W = rng.standard_normal((n, k)).astype(np.float16 if half else np.float32)
        w = b.constant("w", dg.StoredWeight((n, k), "f16", W.tobytes()) if half else W)
        x = b.op(dg.OpKind.StaticTranspose, [t], {"order": [1, 0]})
        b.output(b.op(dg.OpKind.MatMul, [x, w], {"transpose_b": True}))
        cp = b.compile(dg.Engine(dg.Engine.CPU, num_threads=2))
        for m in (1, 3, 1, 2):
            a = rng.standard_normal((k, m)).astype(np.float32)
            (out,) = cp(a)
            ref = a.T.astype(np.float64) @ W.astype(np.float64).T
            # (f16 weights out of panels: ggml's product, which rounds the activations to f16)
            tol = 4e-3 if half and not cp.cache_info().panel_bytes else 1e-5
            assert np.abs(out - ref).max() <= tol * max(np.abs(ref).max(), 1), (k, n, half, m)
    print("ok")
""")


@pytest.mark.parametrize("panels", ["0", "1"])
def test_a_one_row_view_with_any_row_stride_multiplies_weights_in_or_out_of_panels(panels):
    r = run_python(ONE_ROW_VIEW, env_vars={"DYNGRAPH_F32_PANELS": panels})
    assert r.returncode == 0 and r.stdout.split()[-1] == "ok", r.stderr[-2000:]


@pytest.mark.parametrize("mmap_weights", [True, False])
def test_save_writes_the_rows_back(rng, tmp_path, mmap_weights):
    """A partition saved with its weights in panels loads where panels are off (another CPU) and
    computes the same product; loaded where they are on, it lays them out again."""
    k, n = 40, 101
    W = rng.standard_normal((k, n)).astype(np.float32)
    p, ins, outs = mlp_graph(dg.DYNAMIC_DIM, k, n)
    cp = p.compile(ins, outs, dg.Engine(dg.Engine.CPU), constants={1: W})
    path = tmp_path / "mm.dg"
    cp.save(path)
    a = rng.standard_normal((6, k)).astype(np.float32)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "w.npy", W)
    code = textwrap.dedent(f"""
        import numpy as np, dyngraph as dg
        cp = dg.load({str(path)!r}, dg.Engine(dg.Engine.CPU), mmap_weights={mmap_weights})
        a, W = np.load({str(tmp_path / "a.npy")!r}), np.load({str(tmp_path / "w.npy")!r})
        (y,) = cp(a)
        ref = a.astype(np.float64) @ W
        assert np.abs(y - ref).max() / np.abs(ref).max() < 1e-5
        print(cp.cache_info().panel_bytes)
    """)
    for value, want in (("0", 0), ("1", 4 * k * n)):
        r = run_python(code, env_vars={"DYNGRAPH_F32_PANELS": value})
        assert r.returncode == 0, r.stderr[-2000:]
        assert int(r.stdout.split()[-1]) == want


def test_a_mapped_load_keeps_large_constants_in_place_and_copies_small_ones(rng, tmp_path):
    """Loading with mmap_weights lays the MatMul weights out in panels and releases their pages of the
    file. A constant of 2 MiB or more that is read in place stays in place (zero copy); smaller ones
    are copied, since the kernel maps a file in folios of up to 2 MiB and reading one would map its
    neighbours' released pages back (report.py's peak-RSS row: 1.30 of the budget before, 1.07 after)."""
    table = rng.standard_normal((600, 1000)).astype(np.float32)  # 2.4 MB: read by Gather, in place
    w = rng.standard_normal((1000, 50)).astype(np.float32)       # MatMul's weights: panels
    bias = rng.standard_normal(50).astype(np.float32)            # 200 bytes: copied
    b = dg.GraphBuilder()
    ids = b.input("ids", dg.i64, [dg.Dim("n")])
    h = b.op(dg.OpKind.Gather, [b.constant("table", table), ids])
    b.output(b.op(dg.OpKind.MatMul, [h, b.constant("w", w), b.constant("b", bias)]))
    path = tmp_path / "g.dg"
    b.compile(dg.Engine(dg.Engine.CPU)).save(path)
    cp = dg.load(path, dg.Engine(dg.Engine.CPU))
    info = cp.cache_info()
    i = np.array([3, 599, 0, 3])
    (y,) = cp(i)
    np.testing.assert_allclose(y, table[i].astype(np.float64) @ w + bias, rtol=1e-5, atol=1e-4)
    assert info.panel_bytes == (w.nbytes if panels_on() else 0)
    if panels_on():
        assert info.borrowed_bytes == table.nbytes
    else:  # (nothing released: every constant whose bytes lie 64 bytes apart in the file is read in place)
        assert info.borrowed_bytes >= table.nbytes


def test_a_large_tied_table_loaded_from_a_file_is_never_in_memory_twice(rng, tmp_path):
    """A tied table (Gather + MatMul) of 64 MiB, loaded with mmap_weights: packed into panels in slices,
    each slice's pages of the file released after it, so the load's peak RSS is the panels plus a slice,
    not the panels plus the file's pages (SmolLM2's f32 generation: 1.24x its budget with the pages
    released only at the end, 1.07x with slices)."""
    if not panels_on():
        pytest.skip("panels are the default where our kernels have AVX2 (x86-64), and DYNGRAPH_F32_PANELS=0 is not set")
    n, k = 16384, 1024  # 64 MiB
    table = rng.standard_normal((n, k), dtype=np.float32)
    b = dg.GraphBuilder()
    ids = b.input("ids", dg.i64, [dg.Dim("s")])
    t = b.constant("table", table)
    b.output(b.op(dg.OpKind.MatMul, [b.op(dg.OpKind.Gather, [t, ids]), t], {"transpose_b": True}))
    path = tmp_path / "tied.dg"
    b.compile(dg.Engine(dg.Engine.CPU)).save(path)
    np.save(tmp_path / "rows.npy", table[[5, n - 1]])
    del table
    code = textwrap.dedent(f"""
        import numpy as np, dyngraph as dg

        def kib(field):
            return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith(field + ":"))

        base = kib("VmRSS")
        cp = dg.load({str(path)!r}, dg.Engine(dg.Engine.CPU, num_threads=1))
        peak = kib("VmHWM") - base
        (y,) = cp(np.array([5, {n - 1}]))
        rows = np.load({str(tmp_path / "rows.npy")!r})
        assert np.allclose(y[:, [5, {n - 1}]], rows @ rows.T, rtol=1e-4), y[:, [5, {n - 1}]]
        print(cp.cache_info().panel_bytes, peak)
    """)
    r = run_python(code)
    assert r.returncode == 0, r.stderr[-2000:]
    panel_bytes, peak_kib = map(int, r.stdout.split()[-2:])
    assert panel_bytes == 4 * n * k
    # (here 1.18x: the panels, a slice of 8 MiB, the partition's own; both at once: 2x)
    assert peak_kib * 1024 < 1.5 * panel_bytes, peak_kib / 1024
