"""Run Python code in a fresh interpreter that imports the same dyngraph."""

import os
import subprocess
import sys

API = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "api")


def run_python(code: str, timeout: float = 120, env_vars: dict = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, **(env_vars or {}))
    if env.get("DYNGRAPH_DEV") == "1":
        env["PYTHONPATH"] = API + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout)
