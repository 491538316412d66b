"""RPC as an attacker sees it (issue 21): the client against a fake server that
answers hostile values; `dyngraph rpc-server` against malformed messages (it
stays up and serves the next client); the token's challenge and response."""

from __future__ import annotations

import hashlib
import hmac
import struct
import time

import numpy as np
import pytest

import dyngraph as dg
from dyngraph.rpc_supervisor import AUTH_CONTEXT, AUTH_HELLO, CMD, HELLO_REQ, RPC_TENSOR
from rpcfake import CLOSE, FakeServer, raw
from rpcwire import Server, closed, graph_compute, hello, recv_exact, rpc_tensor

pytestmark = pytest.mark.skipif(
    not dg._backend.has_rpc(),
    reason="this ggml was built without its RPC backend (DYNGRAPH_GGML=wheel): the default build has it",
)


def engine(endpoint, **kw):
    return dg.Engine("rpc", endpoints=[endpoint], num_threads=1, timeout=10, connect_timeout=5, **kw)


def add_partition(eng):
    a, b, c = (dg.LogicalTensor(i, dg.f32, [4, 8]) for i in range(3))
    g = dg.Graph()
    g.add_op(dg.Op(0, dg.OpKind.Add, [a, b], [c]))
    g.finalize()
    (p,) = g.get_partitions()
    return p.compile([a, b], [c], eng)


def test_hmac_of_the_relay_is_rfc_2104():
    for key in (b"", b"k", b"x" * 64, b"y" * 65, bytes(range(200))):
        for msg in (b"", b"abc", bytes(1000)):
            assert dg._backend._hmac_sha256(key, msg) == hmac.new(key, msg, hashlib.sha256).digest()


HOSTILE_ANSWERS = [
    ("an alignment of 0", {"GET_ALIGNMENT": struct.pack("<Q", 0)}, "alignment of 0"),
    ("an alignment of 3", {"GET_ALIGNMENT": struct.pack("<Q", 3)}, "alignment of 3"),
    ("an alignment of 2^40", {"GET_ALIGNMENT": struct.pack("<Q", 1 << 40)}, "alignment of 1099511627776"),
    ("2^32-1 devices", {"DEVICE_COUNT": struct.pack("<I", 2**32 - 1)}, "4294967295 devices"),
    ("0 devices", {"DEVICE_COUNT": struct.pack("<I", 0)}, "0 devices"),
    ("a max size of 0", {"GET_MAX_SIZE": struct.pack("<Q", 0)}, "maximum buffer size of 0"),
    ("another protocol", {"HELLO": bytes([4, 0, 0, 0]) + bytes(24)}, "protocol 4.0"),
    ("a short alignment", {"GET_ALIGNMENT": b"\1\0"}, "GET_ALIGNMENT with 2 bytes"),
    ("a 2^63-byte answer", {"DEVICE_COUNT": raw(struct.pack("<Q", 1 << 63))}, "9223372036854775808 bytes"),
    ("a smaller buffer", {"ALLOC_BUFFER": lambda b: struct.pack("<QQ", 0x1000, 1)}, "a buffer of 1 bytes"),
    ("a null base", {"BUFFER_GET_BASE": struct.pack("<Q", 0)}, "base address of 0"),
    ("a closed connection", {"GET_ALIGNMENT": CLOSE}, "closed the connection"),
]


@pytest.mark.parametrize("what,answers,message", HOSTILE_ANSWERS, ids=[h[0] for h in HOSTILE_ANSWERS])
def test_a_hostile_answer_is_a_device_error_naming_the_endpoint(what, answers, message):
    srv = FakeServer(answers)
    try:
        t0 = time.monotonic()
        with pytest.raises(dg.DeviceError) as e:
            eng = engine(srv.endpoint)
            cp = add_partition(eng)
            cp(np.ones((4, 8), np.float32), np.ones((4, 8), np.float32))
        assert srv.endpoint in str(e.value) and message in str(e.value), str(e.value)
        assert time.monotonic() - t0 < 10  # (the fake answers at once: nothing waits for a timeout)
    finally:
        srv.stop()


def test_the_fake_server_is_good_enough_when_it_is_honest():
    srv = FakeServer()
    try:
        eng = engine(srv.endpoint)
        cp = add_partition(eng)  # allocates on the fake device
        assert "GET_ALIGNMENT" in srv.seen and "ALLOC_BUFFER" in srv.seen
        del cp, eng
    finally:
        srv.stop()


# -- the server ----------------------------------------------------------------------------

def _check_serves(endpoint, **kw):
    eng = engine(endpoint, **kw)
    cp = add_partition(eng)
    a, b = np.arange(32, dtype=np.float32).reshape(4, 8), np.ones((4, 8), np.float32)
    (out,) = cp(a, b)
    np.testing.assert_array_equal(out, a + b)


MALFORMED = {
    # ggml asserts data inside its buffer: the worker aborts
    "SET_TENSOR outside its buffer": lambda: bytes([CMD["SET_TENSOR"]]) + struct.pack("<Q", RPC_TENSOR + 8 + 4)
    + rpc_tensor(buffer=0xdead, data=1 << 40) + struct.pack("<Q", 0) + b"abcd",
    "SET_TENSOR of 2^63 bytes": lambda: bytes([CMD["SET_TENSOR"]]) + struct.pack("<Q", 1 << 63),
    "an unknown command": lambda: bytes([200]) + struct.pack("<Q", 0),
    "GRAPH_COMPUTE of garbage": lambda: bytes([CMD["GRAPH_COMPUTE"]]) + struct.pack("<Q", 64) + b"\xff" * 64,
    # an op ggml does not have: its CPU backend aborts
    "an invalid op": lambda: graph_compute([1], [rpc_tensor(op=5000)]),
    # a 200,000-deep source chain: create_node's recursion overflows the stack (SIGSEGV)
    "a deep source chain": lambda: graph_compute([1], [rpc_tensor(tid=i, op=1, src=(i + 1,)) for i in range(1, 200_001)]),
    "a second HELLO": lambda: bytes([CMD["HELLO"]]) + struct.pack("<Q", HELLO_REQ) + bytes(HELLO_REQ),
}


def test_the_server_stays_up_after_malformed_messages():
    srv = Server()
    try:
        for what, msg in MALFORMED.items():
            s = srv.connect()
            assert hello(s)[0] == 5
            s.sendall(msg())
            assert closed(s), what  # the connection ends (the worker died, or the message was refused)
            s.close()
            _check_serves(srv.endpoint)  # and the next client is served correctly
    finally:
        log = srv.stop()
    assert "refused" in log and "replaced by a fresh one" in log, log


def test_the_server_refuses_recompute_after_free_and_oversized_writes():
    srv = Server()
    try:
        s = srv.connect()
        hello(s)
        s.sendall(bytes([CMD["ALLOC_BUFFER"]]) + struct.pack("<QIQ", 12, 0, 4096))
        size, ptr, got = struct.unpack("<QQQ", recv_exact(s, 24))
        assert size == 16 and ptr and got >= 4096
        s.sendall(bytes([CMD["SET_TENSOR"]]) + struct.pack("<Q", RPC_TENSOR + 8 + 8192))  # more than the buffer
        assert closed(s)
        s.close()
        s = srv.connect()
        hello(s)
        s.sendall(bytes([CMD["ALLOC_BUFFER"]]) + struct.pack("<QIQ", 12, 0, 4096))
        ptr = struct.unpack("<QQQ", recv_exact(s, 24))[1]
        s.sendall(bytes([CMD["FREE_BUFFER"]]) + struct.pack("<QQ", 8, ptr))
        assert recv_exact(s, 8) == struct.pack("<Q", 0)
        s.sendall(bytes([CMD["GRAPH_RECOMPUTE"]]) + struct.pack("<QI", 4, 0))
        assert closed(s)
        s.close()
        _check_serves(srv.endpoint)
    finally:
        log = srv.stop()
    assert "larger than any buffer" in log and "GRAPH_RECOMPUTE after FREE_BUFFER" in log, log


def test_a_token_server_refuses_clients_without_the_token():
    srv = Server("--token", "s3cret")
    try:
        with pytest.raises(dg.DeviceError, match=srv.endpoint.replace(".", r"\.") + ".*token"):
            engine(srv.endpoint, token="")
        with pytest.raises(dg.DeviceError, match="refused the token"):
            engine(srv.endpoint, token="wrong")
        s = srv.connect()  # a plain ggml client: HELLO first
        s.sendall(bytes([CMD["HELLO"]]) + struct.pack("<Q", HELLO_REQ) + bytes(HELLO_REQ))
        assert closed(s)
        s.close()
        s = srv.connect()  # a right answer to another nonce
        s.sendall(AUTH_HELLO)
        recv_exact(s, 32)
        s.sendall(hmac.new(b"s3cret", AUTH_CONTEXT + bytes(32), hashlib.sha256).digest())
        assert closed(s)
        s.close()
        _check_serves(srv.endpoint, token="s3cret")
    finally:
        log = srv.stop()
    assert "wrong token" in log and "no token" in log


def test_a_server_without_a_token_serves_a_plain_ggml_client_and_refuses_a_token():
    srv = Server()
    try:
        s = srv.connect()
        assert hello(s)[:2] == bytes([5, 0])
        s.sendall(bytes([CMD["DEVICE_COUNT"]]) + struct.pack("<Q", 0))
        assert struct.unpack("<QI", recv_exact(s, 12)) == (4, 1)
        s.close()
        with pytest.raises(dg.DeviceError, match="token"):
            engine(srv.endpoint, token="s3cret")
        _check_serves(srv.endpoint)
    finally:
        srv.stop()
