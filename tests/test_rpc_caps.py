"""Which ops a remote device computes (issue 19, item 4): the client asks dyngraph's rpc-server
(backend/rpc_caps.h) and places what the device does not compute on the host CPU, so the server
never receives a node it cannot compute. A CUDA server's "no" cannot be had on a CPU machine:
`--refuse-op` makes the served CPU say no to an op, through the same query and answer, and
closes a client that sends such a node anyway."""

from __future__ import annotations

import re
import socket
import struct
import subprocess
import time

import numpy as np
import pytest

import dyngraph as dg
from dyngraph.models.llama import LlamaConfig, LlamaRunner, random_weights
from dyngraph.rpc_supervisor import CAPS_HELLO, CAPS_OK, CMD, MAX_QUERY_BYTES, QUERY_MAGIC, SUPPORTS
from rpcfake import CLOSE, FakeServer
from rpcutil import free_port, popen_options, server_command
from rpcwire import Server, closed, graph_compute, hello, recv_exact, rpc_tensor

pytestmark = pytest.mark.skipif(
    not dg._backend.has_rpc(),
    reason="this ggml was built without its RPC backend (DYNGRAPH_GGML=wheel): the default build has it",
)

OPS = dg._backend.ggml_op_names()
F32, F16 = 0, 1  # ggml's type numbers


def engine(endpoint, **kw):
    return dg.Engine("rpc", endpoints=[endpoint], num_threads=1, timeout=20, connect_timeout=5, **kw)


def matmul_partition(rows_max=64):
    n = dg.Dim("n", min=1, max=rows_max)
    x = dg.LogicalTensor(0, dg.f32, [n, 32])
    w = dg.LogicalTensor(1, dg.f32, [32, 24], property=dg.CONSTANT)
    h = dg.LogicalTensor(2, dg.f32, [dg.UNKNOWN_DIM, dg.UNKNOWN_DIM])
    y = dg.LogicalTensor(3, dg.f32, [dg.UNKNOWN_DIM, dg.UNKNOWN_DIM])
    g = dg.Graph()
    g.add_op(dg.Op(0, dg.OpKind.MatMul, [x, w], [h]))
    g.add_op(dg.Op(1, dg.OpKind.Add, [h, h], [y]))
    g.finalize()
    wv = np.random.default_rng(1).standard_normal((32, 24)).astype(np.float32)
    return g.get_partitions()[0], [x, w], [y], {1: wv}


# -- the query, as bytes (the layout of backend/rpc_caps.h) ----------------------------------

def tensor(type_=F32, op="NONE", ne=(4, 1, 1, 1), nb=None, params=()):
    size = 2 if type_ == F16 else 4
    if nb is None:
        nb = (size, size * ne[0], size * ne[0] * ne[1], size * ne[0] * ne[1] * ne[2])
    p = list(params) + [0] * (16 - len(params))
    return struct.pack("<II4q4Q16ii", type_, OPS.index(op), *ne, *nb, *p, 0)


def node(op, ne, srcs, type_=F32, nb=None):
    mask = (1 << len(srcs)) - 1
    return struct.pack("<I", mask) + tensor(type_, op, ne, nb) + b"".join(srcs)


def query(*nodes, device=0, count=None):
    return struct.pack("<III", QUERY_MAGIC, device, len(nodes) if count is None else count) + b"".join(nodes)


ADD = node("ADD", (4, 1, 1, 1), [tensor(ne=(4, 1, 1, 1)), tensor(ne=(4, 1, 1, 1))])
MUL_MAT = node("MUL_MAT", (3, 2, 1, 1), [tensor(ne=(8, 3, 1, 1)), tensor(ne=(8, 2, 1, 1))])


def test_the_worker_answers_for_its_device_and_refuses_what_it_is_told():
    devices = []  # (the CPU)
    assert dg._backend.rpc_supports(devices, query(ADD, MUL_MAT), []) == b"\x01\x01"
    assert dg._backend.rpc_supports(devices, query(ADD, MUL_MAT), [OPS.index("MUL_MAT")]) == b"\x01\x00"
    assert dg._backend.rpc_supports(devices, query(), []) == b""
    no_source = struct.pack("<I", 0) + tensor(op="MUL_MAT", ne=(3, 2, 1, 1))
    assert dg._backend.rpc_supports(devices, query(no_source), []) == b"\x00"  # refused, not read
    empty = node("ADD", (4, 0, 1, 1), [tensor(ne=(4, 0, 1, 1)), tensor(ne=(4, 0, 1, 1))])
    assert dg._backend.rpc_supports(devices, query(empty, ADD), []) == b"\x00\x01"  # (ggml asserts on it in debug)


@pytest.mark.parametrize("blob, message", [
    (b"", "ends inside its header"),
    (struct.pack("<III", 0x12345678, 0, 0), "no magic number"),
    (query(ADD, device=1), "device 1 of 1"),
    (query(count=5000), "5000 nodes"),
    (query(ADD, count=2), "ends inside a node"),
    (query(ADD) + b"x", "1 bytes after the last node"),
    (query(node("ADD", (4, 1, 1, 1), [tensor(type_=99)])), "type 99 is not one of ggml's"),
    (query(struct.pack("<I", 0) + struct.pack("<II", F32, 5000) + bytes(140 - 8)), "op 5000 is not one of ggml's"),
    (query(struct.pack("<I", 1 << 12) + tensor(op="ADD")), "source mask 4096"),
    (query(node("ADD", (-1, 1, 1, 1), [], nb=(4, 4, 4, 4))), "a dimension of -1"),
    (query(node("ADD", (1 << 30, 1 << 30, 1, 1), [])), r"more than 2\^50 elements"),
    (query(node("ADD", (5, 1, 1, 1), [], type_=8)), "not whole blocks of q8_0"),
    (query(struct.pack("<I", 0) + tensor(op="ADD", nb=(4, 1 << 60, 0, 0))), "a stride of"),
    (query(ADD)[:-3], "ends inside a tensor"),
])
def test_a_malformed_query_is_a_value_error_naming_what_is_wrong(blob, message):
    with pytest.raises(ValueError, match=message):
        dg._backend.rpc_supports([], blob, [])


# -- the client places by the server's answer ----------------------------------------------

@pytest.fixture(scope="module")
def no_matmul():
    srv = Server("--refuse-op", "mul_mat")
    yield srv
    log = srv.stop()
    assert "a graph with" not in log, log  # no engine of these tests sent a refused op


@pytest.mark.parametrize("rows", [1, 7, 33])
def test_an_op_the_server_refuses_runs_on_the_host_cpu(no_matmul, rows):
    part, ins, outs, ws = matmul_partition()
    cp = part.compile(ins, outs, engine(no_matmul.endpoint), constants=ws)
    xv = np.random.default_rng(rows).standard_normal((rows, 32)).astype(np.float32)
    (out,) = cp(xv)
    np.testing.assert_allclose(out, 2 * (xv.astype(np.float64) @ ws[1]), rtol=1e-5, atol=1e-5)
    assert cp.cache_info().host_fallback_ops == 1  # the product; the Add stays on the server
    (dev, dev_ops, _), (cpu, cpu_ops, _) = cp.placement()
    assert dev.startswith("RPC") and cpu == "CPU (host)" and (dev_ops, cpu_ops) == (1, 1)


def test_an_op_the_server_refuses_is_a_compile_error_with_strict_placement(no_matmul):
    part, ins, outs, ws = matmul_partition()
    cp = part.compile(ins, outs, engine(no_matmul.endpoint), constants=ws, placement="strict")
    with pytest.raises(dg.CompileError, match=r"op 'matmul_0' \(MatMul\) cannot run on device RPC\d+ .*MUL_MAT for f32"):
        cp(np.ones((3, 32), np.float32))


def test_attention_goes_the_portable_way_on_a_server_without_flash_attention():
    """A CUDA server's flash attention takes no f32 head size of 16 (it aborted the server before):
    asked first, the client lowers attention to mul_mat + soft_max_ext on the device instead."""
    cfg = LlamaConfig(layers=2, max_seq=32)
    weights = random_weights(cfg, seed=4)
    cpu = LlamaRunner(cfg, weights, engine=dg.Engine("cpu", num_threads=1))
    prompt = [1, 5, 7, 9]
    want = cpu.generate(prompt, 6)
    nodes = {}
    for refuse in ((), ("--refuse-op", "FLASH_ATTN_EXT")):
        srv = Server(*refuse)
        try:
            remote = LlamaRunner(cfg, weights, engine=engine(srv.endpoint))
            assert remote.generate(prompt, 6) == want
            info = remote.cp.cache_info()
            assert info.host_fallback_ops == 0
            nodes[bool(refuse)] = info.last_graph_nodes
            del remote
        finally:
            log = srv.stop()
        assert "refused" not in log, log
    assert nodes[True] > nodes[False]  # mul_mat, soft_max, mul_mat instead of one flash attention per layer


def test_a_server_that_does_not_answer_queries_is_trusted_as_ggml_does(rng):
    """ggml's own server (the worker, unsupervised) closes the connection at the query's hello: the
    client connects again and runs everything there, as before."""
    port = free_port()
    proc = subprocess.Popen(server_command() + ["--worker", "--host", "127.0.0.1", "--port", str(port), "--threads", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **popen_options())
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.1)
        part, ins, outs, ws = matmul_partition()
        cp = part.compile(ins, outs, engine(f"127.0.0.1:{port}"), constants=ws)
        xv = rng.standard_normal((5, 32)).astype(np.float32)
        (out,) = cp(xv)
        np.testing.assert_allclose(out, 2 * (xv.astype(np.float64) @ ws[1]), rtol=1e-5, atol=1e-5)
        assert cp.cache_info().host_fallback_ops == 0
        del cp
    finally:
        proc.kill()
        proc.wait(timeout=30)


# -- the server as an attacker sees it ----------------------------------------------------------

def caps_session(srv):
    s = srv.connect()
    s.sendall(CAPS_HELLO)
    assert recv_exact(s, 4) == CAPS_OK
    assert hello(s)[0] == 5
    return s


def ask(s, blob, size=None):
    s.sendall(bytes([SUPPORTS]) + struct.pack("<Q", len(blob) if size is None else size) + blob)


def check_serves(endpoint):
    part, ins, outs, ws = matmul_partition()
    cp = part.compile(ins, outs, engine(endpoint), constants=ws)
    xv = np.ones((2, 32), np.float32)
    np.testing.assert_allclose(cp(xv)[0], 2 * (xv @ ws[1]), rtol=1e-5, atol=1e-5)


HOSTILE = {
    "garbage": lambda s: ask(s, b"\xff" * 64),
    "a count the nodes do not fill": lambda s: ask(s, query(ADD, count=3)),
    "more than the largest query": lambda s: ask(s, b"", size=MAX_QUERY_BYTES + 1),
    "a type ggml does not have": lambda s: ask(s, query(node("ADD", (4, 1, 1, 1), [tensor(type_=77)]))),
    # ggml's CPU check reads src[1] of a product: the worker dies, the supervisor serves on
    "a product without its second source": lambda s: ask(s, query(node("MUL_MAT", (3, 2, 1, 1), [tensor(ne=(8, 3, 1, 1))]))),
}


def test_the_server_answers_queries(no_matmul):
    s = caps_session(no_matmul)
    ask(s, query(ADD, MUL_MAT, ADD))
    assert recv_exact(s, 8 + 3) == struct.pack("<Q", 3) + b"\x01\x00\x01"
    ask(s, query())
    assert recv_exact(s, 8) == struct.pack("<Q", 0)
    s.close()


def test_the_server_stays_up_after_hostile_queries():
    srv = Server()
    try:
        for what, send in HOSTILE.items():
            s = caps_session(srv)
            send(s)
            assert closed(s), what  # the query was refused, or the worker died of it
            s.close()
            check_serves(srv.endpoint)  # and the next client is served
    finally:
        log = srv.stop()
    assert "malformed capability query" in log and "replaced by a fresh one" in log, log


def test_a_query_without_the_hello_is_an_unknown_command_and_a_refused_op_closes_the_client():
    srv = Server("--refuse-op", "MUL_MAT")
    try:
        s = srv.connect()  # a plain ggml client that did not agree to queries
        assert hello(s)[0] == 5
        ask(s, query(ADD))
        assert closed(s)
        s.close()
        s = srv.connect()  # a client that did not ask, sending the refused op
        assert hello(s)[0] == 5
        s.sendall(graph_compute([1], [rpc_tensor(op=OPS.index("MUL_MAT"))]))
        assert closed(s)
        s.close()
        check_serves(srv.endpoint)
    finally:
        log = srv.stop()
    assert "command 208" in log and "a graph with MUL_MAT" in log, log


def test_refuse_op_must_name_a_ggml_op():
    r = subprocess.run(server_command() + ["--port", "1", "--refuse-op", "NOT_AN_OP"], capture_output=True, text=True,
                       timeout=60, env=popen_options()["env"])
    assert r.returncode == 2 and "--refuse-op NOT_AN_OP: not one of ggml's ops" in r.stderr, r.stderr


def test_a_token_server_answers_queries_after_the_token(rng):
    srv = Server("--token", "t0ken", "--refuse-op", "MUL_MAT")
    try:
        part, ins, outs, ws = matmul_partition()
        cp = part.compile(ins, outs, engine(srv.endpoint, token="t0ken"), constants=ws)
        xv = rng.standard_normal((4, 32)).astype(np.float32)
        np.testing.assert_allclose(cp(xv)[0], 2 * (xv.astype(np.float64) @ ws[1]), rtol=1e-5, atol=1e-5)
        assert cp.cache_info().host_fallback_ops == 1
        del cp
    finally:
        log = srv.stop()
    assert "refused" not in log, log


# -- the client as an attacker's server sees it ---------------------------------------------------

@pytest.mark.parametrize("caps, answers, message", [
    (b"DGXX", {}, "answered dyngraph's capability query with something else"),
    (CAPS_OK, {"SUPPORTS": b"\x02" * 64}, None),  # (sized per query below)
    (CAPS_OK, {"SUPPORTS": b"\x01" * 10_000}, r"answered a capability query of \d+ nodes with 10000 bytes"),
    (CAPS_OK, {"SUPPORTS": CLOSE}, "closed the connection at a capability query"),
])
def test_a_hostile_answer_to_a_query_is_a_device_error(caps, answers, message):
    if message is None:
        answers = {"SUPPORTS": lambda body: b"\x02" * struct.unpack_from("<I", body, 8)[0]}
        message = r"answered a capability query with 2 \(0 or 1\)"
    srv = FakeServer(answers, caps=caps)
    try:
        with pytest.raises(dg.DeviceError) as e:
            eng = engine(srv.endpoint)
            part, ins, outs, ws = matmul_partition()
            part.compile(ins, outs, eng, constants=ws)(np.ones((2, 32), np.float32))
        assert srv.endpoint in str(e.value) and re.search(message, str(e.value)), str(e.value)
    finally:
        srv.stop()


def test_a_fake_server_that_answers_honestly_is_asked_and_obeyed():
    """The fake says no to every product: the client asks, and places the product on the host CPU."""
    def answer(body):
        n = struct.unpack_from("<I", body, 8)[0]
        out, at = bytearray(), 12
        for _ in range(n):
            mask, op = struct.unpack_from("<I", body, at)[0], struct.unpack_from("<I", body, at + 8)[0]
            out.append(0 if OPS[op] == "MUL_MAT" else 1)
            at += 4 + 140 * (1 + bin(mask).count("1"))
        return bytes(out)

    srv = FakeServer({"SUPPORTS": answer}, caps=CAPS_OK)
    try:
        eng = engine(srv.endpoint)
        part, ins, outs, ws = matmul_partition()
        cp = part.compile(ins, outs, eng, constants=ws)
        cp(np.ones((2, 32), np.float32))  # (the fake computes nothing: its results are zeros)
        assert "SUPPORTS" in srv.seen and cp.cache_info().host_fallback_ops == 1
        del cp, eng
    finally:
        srv.stop()


def test_a_transposed_view_read_on_the_host_cpu_is_copied_there_whole(rng):
    """On a device a transpose read by a RoPE stays a view (lower/layout.cpp). Where the server refuses
    the RoPE, the host CPU runs it and reads that view of device memory: the scheduler copies its span
    across, and the values are the host CPU's own."""
    b = dg.GraphBuilder()
    s = dg.Dim("s")
    x, pos = b.input("x", dg.f32, [1, s, 4, 16]), b.input("positions", dg.i64, [1, s])
    swap = {"order": [0, 2, 1, 3]}
    y = b.op("Add", [x, x])  # computed on the device: the transposes view device memory
    y = b.op("StaticTranspose", [b.op("StaticTranspose", [y], swap)], swap)
    r = b.op("RoPE", [y, pos], {"mode": "neox", "base": 10000.0})
    b.output(b.op("StaticTranspose", [b.op("Multiply", [r, r])], swap))  # back on the device
    cpu = b.compile(dg.Engine("cpu", num_threads=1))
    srv = Server("--refuse-op", "rope")
    try:
        dev = b.compile(engine(srv.endpoint))
        for n in (1, 6):
            ins = [rng.standard_normal((1, n, 4, 16)).astype(np.float32), rng.integers(0, 50, (1, n))]
            (want,), (got,) = cpu(*ins), dev(*ins)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        info = dev.cache_info()
        assert info.host_fallback_ops == 1 and info.graph_splits > 1, info
        del dev
    finally:
        log = srv.stop()
    assert "refused" not in log, log
