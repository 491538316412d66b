"""torch.ao's quantized_decomposed ops, as a PT2E-quantized program holds
them (quantize / dequantize pairs around each linear, int8 weights with a
per-channel dequantize), converted to Quantize / Dequantize: exact against
eager where torch computes the same f32 arithmetic, and the int8 linear
fused into one integer product."""

import numpy as np
import pytest

torch = pytest.importorskip("torch", minversion="2.5")
pytest.importorskip("torch.ao.quantization.fx._decomposed")

import dyngraph as dg  # noqa: E402
from torchutil import assert_matches_eager, compile_module, mk  # noqa: E402

qd = torch.ops.quantized_decomposed
K = dg.OpKind



def assert_within_one_step_at_ties(got, want, step=0.1):
    """The fused int8 ops sum the integers exactly, torch rounds each f32 product: the outputs
    (dequantized, output scale ``step``) agree exactly, except where a value sits on a rounding
    boundary, where they may differ by one step (under 1% of the values)."""
    diff = (got - want).abs()
    assert diff.max() <= step + 1e-6
    assert (diff > 1e-6).float().mean() < 0.01

class QuantLinear(torch.nn.Module):
    """What convert_pt2e makes of Linear -> ReLU: u8 activations quantized per tensor, s8 weights
    (symmetric, -127..127) per output channel, the output requantized."""

    def __init__(self, k, n, seed=0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        w = torch.randn(n, k, generator=g)
        self.register_buffer("w_scales", (w.abs().amax(dim=1) / 127).float())
        self.register_buffer("w_zps", torch.zeros(n, dtype=torch.int64))
        self.register_buffer("w_int8", torch.clamp(torch.round(w / self.w_scales[:, None]), -127, 127).to(torch.int8))
        self.bias = torch.nn.Parameter(torch.randn(n, generator=g))

    def forward(self, x):
        q = qd.quantize_per_tensor(x, 0.05, 128, 0, 255, torch.uint8)
        xd = qd.dequantize_per_tensor(q, 0.05, 128, 0, 255, torch.uint8)
        wd = qd.dequantize_per_channel(self.w_int8, self.w_scales, self.w_zps, 0, -127, 127, torch.int8)
        y = torch.relu(torch.nn.functional.linear(xd, wd, self.bias))
        q2 = qd.quantize_per_tensor(y, 0.1, 0, 0, 255, torch.uint8)
        return qd.dequantize_per_tensor(q2, 0.1, 0, 0, 255, torch.uint8)


def test_a_pt2e_style_quantized_linear_converts_whole_and_fuses(rng):
    model = QuantLinear(64, 24).eval()
    seq = torch.export.Dim("seq", min=1, max=256)
    run = compile_module(model, (torch.randn(3, 64),), dynamic_shapes=({0: seq},))
    assert run.fallbacks == [], run.report()
    (cp,) = run.compiled_partitions
    kinds = [op.kind for op in cp._program.ops]
    assert K.QuantizedMatMul in kinds and K.MatMul not in kinds, kinds
    for n in (1, 7, 40):
        x = torch.randn(n, 64) * 3
        with torch.no_grad():
            want = model(x)
        assert_within_one_step_at_ties(run(x), want)


class QuantConv(torch.nn.Module):
    """What convert_pt2e makes of Conv2d -> ReLU: the same quantize / dequantize pairs around aten.conv2d
    (torch.export programs hold no quantized conv op of their own: the pass fuses this form)."""

    def __init__(self, c, o, stride, seed=0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        w = torch.randn(o, c, 3, 3, generator=g)
        self.stride = stride
        self.register_buffer("w_scales", (w.abs().amax(dim=(1, 2, 3)) / 127).float())
        self.register_buffer("w_zps", torch.zeros(o, dtype=torch.int64))
        self.register_buffer("w_int8", torch.clamp(torch.round(w / self.w_scales[:, None, None, None]), -127,
                                                   127).to(torch.int8))
        self.bias = torch.nn.Parameter(torch.randn(o, generator=g))

    def forward(self, x):
        q = qd.quantize_per_tensor(x, 0.05, 128, 0, 255, torch.uint8)
        xd = qd.dequantize_per_tensor(q, 0.05, 128, 0, 255, torch.uint8)
        wd = qd.dequantize_per_channel(self.w_int8, self.w_scales, self.w_zps, 0, -127, 127, torch.int8)
        y = torch.relu(torch.nn.functional.conv2d(xd, wd, self.bias, stride=self.stride, padding=1))
        q2 = qd.quantize_per_tensor(y, 0.1, 0, 0, 255, torch.uint8)
        return qd.dequantize_per_tensor(q2, 0.1, 0, 0, 255, torch.uint8)


@pytest.mark.parametrize("stride", [1, 2])
def test_a_pt2e_style_quantized_conv_converts_whole_and_fuses(stride):
    model = QuantConv(8, 16, stride).eval()
    b, h = torch.export.Dim("b", min=1, max=8), torch.export.Dim("h", min=4, max=64)
    run = compile_module(model, (torch.randn(2, 8, 12, 12),), dynamic_shapes=({0: b, 2: h, 3: h},))
    assert run.fallbacks == [], run.report()
    (cp,) = run.compiled_partitions
    kinds = [op.kind for op in cp._program.ops]
    assert K.QuantizedConvolution in kinds and K.Convolution not in kinds, kinds
    g = torch.Generator().manual_seed(2)
    for n, size in ((1, 5), (3, 16), (2, 31)):
        x = torch.randn(n, 8, size, size, generator=g) * 3
        with torch.no_grad():
            want = model(x)
        assert_within_one_step_at_ties(run(x), want)


class QuantDequant(torch.nn.Module):
    def __init__(self, dtype, per_channel):
        super().__init__()
        self.dtype, self.per_channel = dtype, per_channel
        self.register_buffer("scales", torch.tensor([0.5, 0.25, 0.1, 0.07], dtype=torch.float32))
        lo = 0 if dtype is torch.uint8 else -3
        self.register_buffer("zps", torch.tensor([lo, lo + 1, lo + 2, lo + 3], dtype=torch.int64))

    def forward(self, x):
        lo, hi = (0, 255) if self.dtype is torch.uint8 else (-128, 127)
        if self.per_channel:
            q = qd.quantize_per_channel(x, self.scales, self.zps, 1, lo, hi, self.dtype)
            return q, qd.dequantize_per_channel(q, self.scales, self.zps, 1, lo, hi, self.dtype)
        q = qd.quantize_per_tensor(x, 0.037, 3, lo, hi, self.dtype)
        return q, qd.dequantize_per_tensor(q, 0.037, 3, lo, hi, self.dtype)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8])
@pytest.mark.parametrize("per_channel", [False, True])
def test_quantize_and_dequantize_match_eager_exactly(dtype, per_channel):
    model = QuantDequant(dtype, per_channel)
    seq = torch.export.Dim("seq", min=1, max=128)
    run = compile_module(model, (torch.randn(5, 4),), dynamic_shapes=({0: seq},))
    assert run.fallbacks == [], run.report()
    g = torch.Generator().manual_seed(1)
    xs = []
    for n in (1, 6, 50):
        x = torch.randn(n, 4, generator=g) * 20
        x[0, 0] = 0.5 * 0.037 if not per_channel else 0.25  # a tie
        xs.append((x,))
    assert_matches_eager(run, model, xs, atol=0, rtol=0)


class TensorQParams(torch.nn.Module):
    """Scale and zero point computed in the program (the .tensor forms): DynamicQuantize / DynamicDequantize."""

    def forward(self, x, s):
        scale = s.abs() + 0.01
        zp = torch.zeros((), dtype=torch.int64)
        q = qd.quantize_per_tensor.tensor(x, scale, zp, -128, 127, torch.int8)
        return qd.dequantize_per_tensor.tensor(q, scale, zp, -128, 127, torch.int8)


def test_scales_computed_at_run_time_use_the_dynamic_forms():
    model = TensorQParams()
    seq = torch.export.Dim("seq", min=1, max=64)
    run = compile_module(model, (torch.randn(4, 3), torch.tensor(0.2)), dynamic_shapes=({0: seq}, None))
    assert run.fallbacks == [], run.report()
    kinds = {op.kind for cp in run.compiled_partitions for op in cp._program.ops}
    assert {K.DynamicQuantize, K.DynamicDequantize} <= kinds
    assert_matches_eager(run, model, [(torch.randn(n, 3) * 4, torch.tensor(v)) for n, v in ((1, 0.2), (9, 0.05))],
                         atol=0, rtol=0)


class NarrowRange(torch.nn.Module):
    def forward(self, x):
        return qd.quantize_per_tensor(x, 0.1, 0, -127, 127, torch.int8)


def test_a_narrower_quantization_range_runs_in_pytorch():
    run = compile_module(NarrowRange(), (torch.randn(4, 3),), dynamic_shapes=({0: torch.export.Dim("n")},))
    assert [f.target for f in run.fallbacks] == ["quantized_decomposed.quantize_per_tensor.default"]
    assert "narrower" in run.fallbacks[0].reason
    x = torch.randn(6, 3) * 30
    assert torch.equal(run(x), NarrowRange()(x))
