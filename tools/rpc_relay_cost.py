"""Per decoded token: the 4-layer test decoder with its layers on an RPC server, served
(a) by ggml's own loop directly (the --worker mode: no supervisor) and (b) by the
supervised rpc-server, without and with a token. The client's relay is in every case."""
import os, socket, subprocess, sys, time
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path[:0] = [os.path.join(ROOT, "tests"), os.path.join(ROOT, "api")]
import numpy as np, dyngraph as dg
from dyngraph.models.llama import LlamaConfig, LlamaRunner, random_weights
from rpcutil import free_port, popen_options, server_command

CFG = LlamaConfig(layers=4, max_seq=256)
W = random_weights(CFG, seed=3)

def start(extra):
    port = free_port()
    p = subprocess.Popen(server_command() + ["--host", "127.0.0.1", "--port", str(port), "--threads", "1"] + extra,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **popen_options())
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close(); break
        except OSError:
            time.sleep(0.1)
    return p, f"127.0.0.1:{port}"

def per_token(endpoint, token=None, n=64):
    rpc = dg.Engine("rpc", endpoints=[endpoint], num_threads=1, timeout=60, token=token)
    r = LlamaRunner(CFG, W, engine=[rpc])
    r.generate([1, 5, 7], 8)  # warm: graphs built
    r.reset()
    t = time.perf_counter(); r.generate([1, 5, 7], n); dt = time.perf_counter() - t
    return dt / n * 1e3

rows = []
for name, extra, tok in [("ggml loop (no supervisor)", ["--worker"], None), ("supervised", [], None),
                         ("supervised + token", ["--token", "t0ken"], "t0ken")]:
    p, ep = start(extra)
    try:
        best = min(per_token(ep, tok) for _ in range(3))
        rows.append((name, best))
    finally:
        p.kill(); p.wait()
for name, ms in rows:
    print(f"{name:28s} {ms:7.2f} ms/token")
