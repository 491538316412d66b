"""Run Python code in a fresh interpreter that imports the same dyngraph."""

import os
import subprocess
import sys

API = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "api")
TESTS = os.path.dirname(os.path.abspath(__file__))
# the first lines of a script that imports the tests' own helpers (quant_rounding, ...)
IMPORT_TESTS = f"import sys\nsys.path.insert(0, {TESTS!r})\n"


def run_python(code: str, timeout: float = 120, env_vars: dict = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    for name, value in (env_vars or {}).items():  # None: unset (the variable the test runner was given)
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    if env.get("DYNGRAPH_DEV") == "1":
        env["PYTHONPATH"] = API + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout)
