"""torch.nn.MultiheadAttention and TransformerEncoderLayer convert whole: the
packed q/k/v projection's rank-5 intermediate (unsqueeze -> transpose ->
squeeze) becomes a rank-4 transpose, and the result matches eager at several
sequence lengths."""

import pytest

torch = pytest.importorskip("torch", minversion="2.5")

import dyngraph.torch as dgt  # noqa: E402


class SelfAttention(torch.nn.Module):
    def __init__(self, batch_first: bool):
        super().__init__()
        self.a = torch.nn.MultiheadAttention(64, 4, batch_first=batch_first)

    def forward(self, x):
        return self.a(x, x, x, need_weights=False)[0]


@pytest.mark.parametrize("batch_first", [True, False])
def test_multihead_attention_converts_whole(batch_first):
    torch.manual_seed(0)
    m = SelfAttention(batch_first).eval()
    seq = torch.export.Dim("seq", min=1, max=128)
    ax = 1 if batch_first else 0
    shape = lambda n: (2, n, 64) if batch_first else (n, 2, 64)  # noqa: E731
    run = dgt.compile(m, (torch.randn(shape(8)),), dynamic_shapes=({ax: seq},), engine=1)
    assert run.fallbacks == [] and len(run.compiled_partitions) == 1, run.report()
    for n in (1, 5, 33):
        x = torch.randn(shape(n))
        with torch.no_grad():
            torch.testing.assert_close(run(x), m(x), atol=1e-5, rtol=1e-5)


def test_transformer_encoder_layer_converts_whole():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(96, 6, 192, dropout=0.0, batch_first=True).eval()
    seq = torch.export.Dim("seq", min=1, max=256)
    run = dgt.compile(layer, (torch.randn(1, 16, 96),), dynamic_shapes=({1: seq},), engine=1)
    assert run.fallbacks == [], run.report()
    for n in (3, 17, 130):
        x = torch.randn(1, n, 96)
        with torch.no_grad():
            torch.testing.assert_close(run(x), layer(x), atol=1e-5, rtol=1e-5)
