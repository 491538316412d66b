"""The MLP of examples/mlp_dynamic_batch.py (x @ W1 + b1 -> GELU(erf) -> @ W2)
with its weights, and a vectorized numpy forward of it for speed comparisons."""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from typing import Tuple

import numpy as np

import dyngraph as dg

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "mlp_dynamic_batch.py")


def load_example():
    spec = importlib.util.spec_from_file_location("mlp_dynamic_batch", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def erf(x: np.ndarray) -> np.ndarray:
    """Vectorized erf (Abramowitz and Stegun 7.1.26, |error| < 1.5e-7), in x's dtype."""
    s = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return s * (1.0 - poly * np.exp(-a * a))


@dataclass
class MLP:
    builder: dg.GraphBuilder
    weights: Tuple[np.ndarray, np.ndarray, np.ndarray]  # W1, B1, W2
    hidden: int

    def compile(self, engine: dg.Engine, **options) -> dg.CompiledPartition:
        return self.builder.compile(engine, **options)

    def reference(self, x: np.ndarray) -> np.ndarray:
        """numpy float32 forward (GELU through the vectorized erf above)."""
        W1, B1, W2 = self.weights
        h = x @ W1
        h += B1
        g = 0.5 * h * (1.0 + erf(h * np.float32(1.0 / np.sqrt(2.0))))
        return g @ W2


def build_mlp(seed: int = 0) -> MLP:
    ex = load_example()
    rng = np.random.default_rng(seed)
    W1 = rng.standard_normal((ex.HIDDEN, ex.FFN), dtype=np.float32) / np.float32(np.sqrt(ex.HIDDEN))
    B1 = rng.standard_normal(ex.FFN, dtype=np.float32) * np.float32(0.1)
    W2 = rng.standard_normal((ex.FFN, ex.OUT), dtype=np.float32) / np.float32(np.sqrt(ex.FFN))
    return MLP(ex.build_graph(W1, B1, W2), (W1, B1, W2), ex.HIDDEN)
