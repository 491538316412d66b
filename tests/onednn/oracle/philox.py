"""The oracle tests' view of oneDNN's Dropout generator: the reference's own
(dyngraph.reference.philox), so that what the oracle checks is what the
numpy reference and, through tests/ops/test_dropout.py, the backend compute."""

from dyngraph.reference.philox import dropout_draws, dropout_mask, dropout_scale, philox4x32_10  # noqa: F401


def onednn_draws(n, seed, offset):
    """oneDNN's u32 draw for elements 0..n-1."""
    return dropout_draws(n, seed, offset)
