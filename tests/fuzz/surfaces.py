"""Fuzzing the surfaces of issue 21: oneDNN JSON graphs, RPC messages (server
side) and RPC answers (client side).

    python -m tests.fuzz.surfaces --kinds json rpc-msg rpc-answer --inputs 3000 --seed 0
    DYNGRAPH_DEV=1 python -m tests.fuzz.surfaces --kinds json --inputs 20000 --seed 7

Each kind runs in a worker process that makes input ``idx`` from ``(seed,
idx)`` alone (a finding is replayed with ``--kinds K --seed S --start idx
--inputs 1``) and says ``S idx`` before and ``D idx outcome`` after it. A
worker that dies is a crash, one silent past ``--timeout`` a hang, an
outcome ``untyped ...`` an exception that is not a DyngraphError; each is
printed and counted, and the worker restarts after the input.

- ``json``: oneDNN graph files (the project's cases, and generated ones)
  mutated by structure (hostile numbers: -1, -2, -2^63, 2^64, 5,000 digits,
  floats, strings, nulls, nesting; keys dropped or duplicated, lists made
  ragged or long, op kinds and ids changed) and as text; read with
  ``dyngraph.onednn.from_json``, partitioned, and one in eight run (``run_case``).
- ``rpc-answer``: an Engine on a fake server (tests/rpcfake.py) whose answer
  to one command is mutated (size, values, closing); it opens the engine,
  compiles and runs a partition: success or a DyngraphError.
- ``rpc-msg``: one supervised ``dyngraph rpc-server``; each input is a
  connection sending HELLO (mostly) and 1-3 mutated ggml messages; a third
  of them agree to capability queries first and send mutated queries among
  the messages (backend/rpc_caps.h). Every 250
  inputs and at the end a real client must get a correct result from it,
  and its process must be alive with no Python traceback in its log.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import select
import socket
import struct
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
KINDS = ("json", "rpc-msg", "rpc-answer")
CHUNK = 2000  # inputs per worker process
HOSTILE_INTS = [-1, -2, -(2**63), 2**63 - 1, 2**63, 2**64, 0, 1, 2**31, 2**32 - 1, -(2**31), 10**30, 7]


# -- json ----------------------------------------------------------------------------------

def _json_seeds():
    d = os.path.join(ROOT, "tests", "onednn", "cases")
    out = []
    for name in sorted(os.listdir(d)):
        if name.endswith(".json"):
            with open(os.path.join(d, name)) as f:
                out.append(json.load(f))
    return out


def _walk(v, path=()):
    yield path, v
    if isinstance(v, dict):
        for k, x in v.items():
            yield from _walk(x, path + (k,))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            yield from _walk(x, path + (i,))


def _set(doc, path, value):
    if not path:
        return value
    cur = doc
    for p in path[:-1]:
        cur = cur[p]
    cur[path[-1]] = value
    return doc


def _mutate_value(rng, v):
    r = rng.random()
    if isinstance(v, bool) or r < 0.05:
        return rng.choice([None, True, "x", [], {}, 1.5, float("nan"), -0.0, "?", "9" * 5000])
    if isinstance(v, int):
        return rng.choice(HOSTILE_INTS + [v + 1, v - 1, -v, v * 1000003])
    if isinstance(v, str):
        return rng.choice(["", "f32", "s8", "u4", "bf16", "Abs", "MatMul", "Interpolate", "NCX", "constant",
                           "undef", "strided", "?", v * 3, v[::-1], "1x2", "\x00", "é" * 10])
    if isinstance(v, list):
        c = rng.random()
        if c < 0.3 and v:
            return v[:-1]
        if c < 0.6:
            return v + [rng.choice(v) if v else 1]
        if c < 0.7:
            return [v]  # ragged / nested
        if c < 0.8:
            return v * rng.choice([2, 7, 1000])
        return list(reversed(v))
    if isinstance(v, dict):
        if v and rng.random() < 0.5:
            k = rng.choice(list(v))
            return {x: y for x, y in v.items() if x != k}
        return dict(v, **{rng.choice(["id", "shape", "kind", "attrs", "extra"]): rng.choice(HOSTILE_INTS)})
    return rng.choice(HOSTILE_INTS)


def _generated(rng):
    """A fresh graph: a chain / fan of Abs, Add, ReLU over random shapes."""
    n = rng.randint(1, 40)
    shape = [rng.randint(1, 4) for _ in range(rng.randint(1, 4))]

    def lt(i):
        return {"id": i, "dtype": "f32", "shape": list(shape), "stride": [], "layout_type": "strided",
                "property_type": "undef"}
    ops = []
    for i in range(n):
        k = rng.choice(["Abs", "ReLU", "Add", "Exp"])
        a = rng.randrange(0, i + 1) if rng.random() < 0.7 else 1000 + i
        ins = [lt(a)] + ([lt(rng.randrange(0, i + 1))] if k == "Add" else [])
        ops.append({"id": i, "name": f"op{i}", "kind": k, "attrs": {}, "inputs": ins, "outputs": [lt(i + 1)]})
    return {"version": "3.5.0", "engine_kind": "cpu", "fpmath_mode": "strict", "graph": ops}


def make_json(seed: int, idx: int, seeds) -> str:
    rng = random.Random(f"json/{seed}/{idx}")
    doc = json.loads(json.dumps(rng.choice(seeds))) if rng.random() < 0.7 else _generated(rng)
    for _ in range(rng.choice([1, 1, 2, 3, 5])):
        nodes = list(_walk(doc))
        path, v = rng.choice(nodes)
        doc = _set(doc, path, _mutate_value(rng, v))
    text = json.dumps(doc, allow_nan=True)
    r = rng.random()
    if r < 0.08:  # text-level: truncate, a long literal, deep nesting, a byte flipped
        c = rng.randrange(4)
        if c == 0:
            text = text[: rng.randrange(len(text) + 1)]
        elif c == 1:
            i = text.find(": ", rng.randrange(len(text)))
            if i > 0:
                text = text[: i + 2] + "9" * rng.choice([30, 400, 5000]) + text[i + 2:]
        elif c == 2:
            text = text.replace('"attrs": {}', '"attrs": ' + "[" * 5000 + "]" * 5000, 1)
        else:
            b = bytearray(text.encode())
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
            return b.decode("utf-8", "replace")
    return text


def run_json(seed, idx, ctx):
    import dyngraph as dg
    import dyngraph.onednn  # noqa: F401  (from_json)
    from dyngraph.onednn.reader import import_graph
    from dyngraph.onednn.runner import run_case

    text = make_json(seed, idx, ctx["seeds"])
    try:
        g = dg.onednn.from_json(text)
        g.get_partitions()
        dg.onednn.from_json(dg.onednn.to_json(g))  # written back as the file it was read from, and read again
        if random.Random(idx).random() < 0.125:
            run_case(import_graph(text), [], engine=ctx["engine"], max_bytes=64 << 20)
        return "pass"
    except dg.DyngraphError:
        return "typed"


# -- rpc-answer ------------------------------------------------------------------------------

ASKED = ["HELLO", "DEVICE_COUNT", "GET_ALIGNMENT", "GET_MAX_SIZE", "ALLOC_BUFFER", "BUFFER_GET_BASE", "GET_TENSOR",
         "GET_ALLOC_SIZE", "FREE_BUFFER", "INIT_TENSOR", "GET_DEVICE_MEMORY", "BUFFER_CLEAR"]


def make_answer(seed: int, idx: int):
    from rpcfake import CLOSE, raw

    rng = random.Random(f"rpc-answer/{seed}/{idx}")
    name = rng.choice(ASKED)
    c = rng.random()
    words = [0, 1, 2, 3, 31, 32, 33, 4096, 2**20, 2**20 + 1, 2**31, 2**32 - 1, 2**40, 2**48, 2**63, 2**64 - 1]
    if c < 0.45:
        n = {"HELLO": 28, "DEVICE_COUNT": 4, "ALLOC_BUFFER": 16, "GET_DEVICE_MEMORY": 16}.get(name, 8)
        ans = b"".join(struct.pack("<Q", rng.choice(words)) for _ in range(4))[:n]
        if name == "HELLO":
            ans = bytes([rng.choice([5, 4, 6, 0, 255]), rng.choice([0, 1, 9])]) + ans[2:]
        return name, ans
    if c < 0.6:
        return name, bytes(rng.randrange(256) for _ in range(rng.choice([0, 1, 3, 7, 9, 17, 29, 64])))
    if c < 0.75:
        return name, raw(struct.pack("<Q", rng.choice(words)) + bytes(rng.randrange(0, 40)))
    if c < 0.85:
        return name, CLOSE
    if c < 0.99:  # a function of the request: an answer as large as asked, or one byte off
        off = rng.choice([-1, 1, 0])
        return name, (lambda body, off=off: bytes(max(0, len(body) + off)))
    return name, raw(b"")  # silence: the call's timeout


def run_rpc_answer(seed, idx, ctx):
    import gc

    import numpy as np

    import dyngraph as dg

    srv = ctx["fake"]
    srv.select(idx)
    try:
        eng = dg.Engine("rpc", endpoints=[srv.endpoint], num_threads=1, timeout=1, connect_timeout=2)
        a, b, c = (dg.LogicalTensor(i, dg.f32, [4, 8]) for i in range(3))
        g = dg.Graph()
        g.add_op(dg.Op(0, dg.OpKind.Add, [a, b], [c]))
        g.finalize()
        (p,) = g.get_partitions()
        cp = p.compile([a, b], [c], eng)
        x = np.ones((4, 8), np.float32)
        cp(x, x)
        return "pass"
    except dg.DyngraphError:
        return "typed"
    finally:
        cp = eng = None
        gc.collect()


# -- rpc-msg ---------------------------------------------------------------------------------

def make_messages(seed: int, idx: int) -> bytes:
    from dyngraph.rpc_supervisor import CAPS_HELLO, CMD_NAMES, HELLO_REQ, REQUEST_SIZE, RPC_TENSOR

    rng = random.Random(f"rpc-msg/{seed}/{idx}")
    out = b""
    caps = rng.random() < 0.3
    if caps:
        out += CAPS_HELLO
    if rng.random() < 0.9:
        out += bytes([14]) + struct.pack("<Q", HELLO_REQ) + bytes(HELLO_REQ)

    def tensor():
        t = bytearray(RPC_TENSOR)
        for off, fmt in ((0, "<Q"), (8, "<I"), (12, "<Q"), (52, "<I"), (204, "<Q"), (212, "<Q"), (220, "<Q")):
            if rng.random() < 0.6:
                struct.pack_into(fmt, t, off, rng.choice([0, 1, 2, 3, 0x10000, 2**31, 2**32 - 1][: 7 if fmt == "<I" else 7]))
        for i in range(8):
            struct.pack_into("<I", t, 20 + 4 * i, rng.choice([0, 1, 2, 4, 16, 2**31, 2**32 - 1]))
        for i in range(rng.choice([0, 0, 1, 3])):
            struct.pack_into("<Q", t, 124 + 8 * i, rng.choice([1, 2, 3, 2**63]))
        if rng.random() < 0.1:
            t[rng.randrange(RPC_TENSOR)] = rng.randrange(256)
        return bytes(t)

    for _ in range(rng.choice([1, 1, 2, 3])):
        if caps and rng.random() < 0.5:
            out += capability_query(rng)
            continue
        cmd = rng.choice(range(len(CMD_NAMES))) if rng.random() < 0.9 else rng.randrange(256)
        size = REQUEST_SIZE.get(cmd)
        if cmd == 10:  # GRAPH_COMPUTE: | device | n_nodes | nodes | n_tensors | tensors |
            n = rng.choice([1, 2, 3, 50])
            tensors = [tensor() for _ in range(rng.choice([0, 1, n]))]
            body = struct.pack("<II", rng.choice([0, 0, 1, 2**32 - 1]), n) + struct.pack(f"<{n}Q", *[
                rng.choice([0, 1, 2, 3]) for _ in range(n)]) + struct.pack("<I", len(tensors)) + b"".join(tensors)
        elif cmd == 6:  # SET_TENSOR: | tensor | offset | data |
            body = tensor() + struct.pack("<Q", rng.choice([0, 1, 2**40])) + bytes(rng.choice([0, 4, 100]))
        elif size:
            body = (tensor() * 12)[:size] if size >= RPC_TENSOR else bytes(rng.randrange(256) for _ in range(size))
            if size >= 12 and rng.random() < 0.5:
                body = struct.pack("<IQ", rng.choice([0, 1, 7]), rng.choice([0, 64, 2**30, 2**62])) + body[12:]
        else:
            body = bytes(rng.randrange(256) for _ in range(rng.choice([0, 1, 8])))
        declared = len(body)
        r = rng.random()
        if r < 0.1:
            declared = rng.choice([2**63, 2**64 - 1, 2**40, len(body) + 1, max(0, len(body) - 1)])
        out += bytes([cmd]) + struct.pack("<Q", declared) + body
    if rng.random() < 0.05:
        out = out[: rng.randrange(len(out) + 1)]
    return out


def capability_query(rng: random.Random) -> bytes:
    """A SUPPORTS message (backend/rpc_caps.h) with hostile fields: types, ops, shapes, strides,
    op parameters, source masks, counts and sizes."""
    from dyngraph.rpc_supervisor import QUERY_MAGIC, SUPPORTS

    def tensor():
        ne = [rng.choice([0, 1, 2, 4, 32, 2**31, -1, 2**40 + 1]) for _ in range(4)]
        nb = [rng.choice([0, 1, 4, 128, 2**32, 2**60]) for _ in range(4)]
        params = [rng.choice([0, 1, -1, 2**31 - 1, rng.randrange(-2**31, 2**31)]) for _ in range(16)]
        return struct.pack("<II4q4Q16ii", rng.choice([0, 0, 1, 2, 8, 30, 39, 99, 2**32 - 1]),
                           rng.choice([rng.randrange(101), rng.randrange(101), 101, 2**32 - 1]), *ne, *nb, *params,
                           rng.choice([0, 1, -1]))

    nodes = b""
    n = rng.choice([0, 1, 2, 5])
    for _ in range(n):
        mask = rng.choice([0, 1, 3, 7, 1 << 10, rng.randrange(1 << 10)])
        nodes += struct.pack("<I", mask) + tensor() + b"".join(tensor() for i in range(10) if mask >> i & 1)
    body = struct.pack("<III", QUERY_MAGIC if rng.random() < 0.9 else rng.randrange(2**32), rng.choice([0, 0, 1]),
                       rng.choice([n, n, n + 1, 2**32 - 1])) + nodes
    if rng.random() < 0.1:
        body = body[: rng.randrange(len(body) + 1)]
    declared = len(body) if rng.random() < 0.9 else rng.choice([2**63, 7 << 20, len(body) + 1])
    return bytes([SUPPORTS]) + struct.pack("<Q", declared) + body


def run_rpc_msg(seed, idx, ctx):
    data = make_messages(seed, idx)
    s = socket.create_connection(("127.0.0.1", ctx["port"]), timeout=10)
    try:
        try:
            s.sendall(data)
        except OSError:
            pass  # (the server closed it: refused)
        deadline = time.monotonic() + 0.3
        while time.monotonic() < deadline:  # answers, until the server closes or goes quiet
            r, _, _ = select.select([s], [], [], max(0.0, deadline - time.monotonic()))
            if not r:
                break
            try:
                if not s.recv(1 << 16):
                    break
            except OSError:
                break
    finally:
        s.close()
    if idx % 250 == 249:
        return _server_check(ctx)
    return "pass"


def _server_check(ctx) -> str:
    import numpy as np

    import dyngraph as dg

    proc = ctx["server"]
    if proc.poll() is not None:
        return f"untyped rpc-server exited with {proc.returncode}"
    log = _drain(ctx)
    if "Traceback" in log:
        return "untyped rpc-server logged a Python traceback: " + log[log.find("Traceback"):][:300].replace("\n", " | ")
    a, b, c = (dg.LogicalTensor(i, dg.f32, [4, 8]) for i in range(3))
    g = dg.Graph()
    g.add_op(dg.Op(0, dg.OpKind.Add, [a, b], [c]))
    g.finalize()
    (p,) = g.get_partitions()
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    # The supervisor replaces a worker that a hostile message stopped; a connection made while
    # the new one starts (seconds, under a sanitizer on a loaded machine) may be dropped. A
    # server that serves no good client in 3 tries, 2 s apart, is a finding.
    err = None
    for attempt in range(3):
        if attempt:
            time.sleep(2)
        try:
            eng = dg.Engine("rpc", endpoints=[f"127.0.0.1:{ctx['port']}"], num_threads=1, timeout=20,
                            connect_timeout=10)
            (out,) = p.compile([a, b], [c], eng)(x, x)
        except (dg.DeviceError, dg.ExecutionError) as e:
            err = e
            continue
        if not np.array_equal(out, 2 * x):
            return "untyped rpc-server computed a wrong result"
        return "pass"
    return f"untyped rpc-server served no good client in 3 tries: {type(err).__name__}: {str(err)[:200]}"


def _drain(ctx) -> str:
    f = ctx["server"].stderr
    chunks = []
    while select.select([f], [], [], 0)[0]:
        b = os.read(f.fileno(), 1 << 16)
        if not b:
            break
        chunks.append(b.decode("utf-8", "replace"))
    ctx["log"] = (ctx.get("log", "") + "".join(chunks))[-200_000:]
    return ctx["log"]


# -- worker ----------------------------------------------------------------------------------

def worker(kind: str, seed: int, start: int, end: int, status) -> None:
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    if os.environ.get("DYNGRAPH_DEV") == "1":
        sys.path.insert(0, os.path.join(ROOT, "api"))
    import faulthandler

    faulthandler.enable()
    import dyngraph as dg

    ctx = {}
    if kind == "json":
        ctx["seeds"] = _json_seeds()
        ctx["engine"] = dg.Engine(num_threads=1)
        fn = run_json
    elif kind == "rpc-answer":
        from rpcfake import FakeServerProcess

        ctx["fake"] = FakeServerProcess(lambda i: dict([make_answer(seed, i)]))
        fn = run_rpc_answer
    else:
        from rpcutil import free_port, popen_options, server_command

        ctx["port"] = free_port()
        cmd = server_command() + ["--host", "127.0.0.1", "--port", str(ctx["port"]), "--threads", "1"]
        ctx["server"] = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **popen_options())
        for _ in range(600):
            try:
                socket.create_connection(("127.0.0.1", ctx["port"]), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        fn = run_rpc_msg
    for idx in range(start, end):
        status.write(f"S {idx}\n")
        status.flush()
        try:
            out = fn(seed, idx, ctx)
        except Exception as e:  # noqa: BLE001 - what the fuzzer is for
            out = f"untyped {type(e).__name__}: {str(e)[:300]}".replace("\n", " ")
        status.write(f"D {idx} {out}\n")
        status.flush()
    if kind == "rpc-msg":
        out = _server_check(ctx)
        status.write(f"D {end - 1} {out}\n" if out != "pass" else "")
        status.flush()
        ctx["server"].kill()


# -- parent ----------------------------------------------------------------------------------

def fuzz_kind(kind, seed, n, start, timeout, seconds, python) -> dict:
    t0 = time.monotonic()
    done, findings = 0, []
    counts = {"pass": 0, "typed": 0}
    idx, end = start, start + n
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [ROOT] + ([os.path.join(ROOT, "api")] if os.environ.get("DYNGRAPH_DEV") == "1" else [])
        + [os.environ.get("PYTHONPATH", "")]))
    while idx < end and (seconds is None or time.monotonic() - t0 < seconds):
        first = idx
        # a worker runs at most CHUNK inputs: an Engine whose server was lost leaks its ggml objects by
        # design (freeing them would talk to the server), which adds up over thousands of inputs
        proc = subprocess.Popen([python, "-m", "tests.fuzz.surfaces", "--worker", kind, "--seed", str(seed),
                                 "--start", str(idx), "--inputs", str(min(CHUNK, end - idx))], cwd=ROOT, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
        current = None
        last = time.monotonic()
        limit = timeout * 20  # (the worker's start: imports, a server)
        while True:
            if seconds is not None and time.monotonic() - t0 > seconds:
                proc.kill()
                proc.wait()
                end = idx
                break
            r, _, _ = select.select([proc.stdout], [], [], 0.5)
            if r:
                line = proc.stdout.readline()
                if not line:
                    code = proc.wait()
                    err = proc.stderr.read()[-2000:]
                    if current is not None and code != 0:
                        findings.append((current, f"crash (exit {code}): {err.strip().splitlines()[-1:] }"))
                        idx = current + 1
                    elif current is None and code != 0:
                        findings.append((idx, f"worker failed to start (exit {code}): {err[-500:]}"))
                        idx = end
                    elif idx == first:
                        idx = end  # (a worker that ran nothing: do not start another)
                    break
                last = time.monotonic()
                limit = timeout
                if not (line.startswith(("S ", "D ")) and line.split(" ")[1].strip().isdigit()):
                    continue  # (something else the worker printed)
                tag, num, *rest = line.rstrip("\n").split(" ", 2)
                if tag == "S":
                    current = int(num)
                else:
                    current = None
                    outcome = rest[0] if rest else ""
                    done += 1
                    idx = int(num) + 1
                    if outcome.startswith("untyped"):
                        findings.append((int(num), outcome))
                    else:
                        counts[outcome] = counts.get(outcome, 0) + 1
            elif time.monotonic() - last > limit:
                proc.kill()
                proc.wait()
                findings.append((current if current is not None else idx, f"hang (> {limit} s)"))
                idx = (current if current is not None else idx) + 1
                break
    return {"kind": kind, "inputs": done, "counts": counts, "findings": findings, "seconds": time.monotonic() - t0}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.fuzz.surfaces", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kinds", nargs="*", default=list(KINDS), choices=KINDS)
    p.add_argument("--inputs", type=int, default=1000, help="inputs per kind")
    p.add_argument("--seconds", type=float, default=None, help="stop each kind after this long")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--start", type=int, default=0, help="first input index (to replay a finding)")
    p.add_argument("--timeout", type=float, default=15.0, help="seconds one input may take before it is a hang")
    p.add_argument("--fail-on", choices=["any", "none"], default="any")
    p.add_argument("--worker", choices=KINDS, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        worker(args.worker, args.seed, args.start, args.start + args.inputs, sys.stdout)
        return 0
    total = 0
    for kind in args.kinds:
        r = fuzz_kind(kind, args.seed, args.inputs, args.start, args.timeout, args.seconds, sys.executable)
        for idx, what in r["findings"][:20]:
            print(f"[finding] {kind} seed {args.seed} input {idx}: {what}")
        print(f"dyngraph fuzz surfaces ({kind}, seed {args.seed}): {r['inputs']} inputs in {r['seconds']:.0f} s "
              f"({', '.join(f'{k} {v}' for k, v in sorted(r['counts'].items()))}): "
              f"{len(r['findings'])} crashes/hangs/untyped errors", flush=True)
        total += len(r["findings"])
    return 1 if total and args.fail_on == "any" else 0


if __name__ == "__main__":
    sys.exit(main())
