"""The devices a test process can compile for besides the host CPU: an RPC device (a
`dyngraph rpc-server` on 127.0.0.1 serving its CPU, in every build with RPC) and the
GPUs of the build."""

from __future__ import annotations

import dyngraph as dg

GPUS = [d.name for d in dg.Engine.devices() if d.kind in ("gpu", "igpu")]
DEVICES = (["rpc"] if dg._backend.has_rpc() else []) + GPUS


def device_engine(name: str, endpoint: str, timeout: float) -> dg.Engine:
    """An engine of `name` (an entry of DEVICES); "rpc" runs on the server at `endpoint`."""
    if name == "rpc":
        return dg.Engine("rpc", endpoints=[endpoint], num_threads=1, timeout=timeout, connect_timeout=5)
    return dg.Engine("gpu", device=name)
