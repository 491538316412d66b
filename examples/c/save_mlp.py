"""Save the MLP of examples/mlp_dynamic_batch.py (a dynamic batch) for the C example:

    python examples/c/save_mlp.py mlp.dg
    cc -std=c99 examples/c/mlp.c $(pkg-config --cflags --libs dyngraph) -o mlp   # (see docs/guide/c-api.md)
    ./mlp mlp.dg 1 7 64
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from mlp_dynamic_batch import FFN, HIDDEN, OUT, build_graph  # noqa: E402

import dyngraph as dg  # noqa: E402


def weights():
    rng = np.random.default_rng(0)
    W1 = rng.standard_normal((HIDDEN, FFN), dtype=np.float32) / np.sqrt(HIDDEN)
    B1 = rng.standard_normal(FFN, dtype=np.float32) * 0.1
    W2 = rng.standard_normal((FFN, OUT), dtype=np.float32) / np.sqrt(FFN)
    return W1, B1, W2


def example_input(n: int) -> np.ndarray:
    """The input examples/c/mlp.c makes for batch n: x[i] = sin(0.001 i + n)."""
    i = np.arange(n * HIDDEN, dtype=np.float64)
    return np.sin(0.001 * i + n).astype(np.float32).reshape(n, HIDDEN)


def main(path: str) -> None:
    cp = build_graph(*weights()).compile(dg.Engine(num_threads=1))
    cp.save(path)
    print(f"saved {cp} to {path}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "mlp.dg")
