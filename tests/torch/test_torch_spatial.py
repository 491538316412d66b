"""Converters of the vision / audio ops against eager PyTorch: convolutions,
pooling, batch / group / instance norm, unfold / fold, interpolation. Each module is
exported with a dynamic batch and a dynamic spatial size, compiled once
(as exported, and after torch's decomposition to core ATen, which changes
the ops the converters see), and run at three shapes: nothing may run in
PyTorch and the outputs must match eager within f32 rounding."""

import pytest

torch = pytest.importorskip("torch", minversion="2.5")
F = torch.nn.functional
nn = torch.nn

import dyngraph.torch as dgt  # noqa: E402
from dyngraph.torch.export import decomposition_table  # noqa: E402
from torchutil import assert_matches_eager  # noqa: E402


class Net(nn.Module):
    """Layers applied in order, then an optional functional tail."""

    def __init__(self, *layers, tail=None):
        super().__init__()
        torch.manual_seed(0)
        self.layers = nn.Sequential(*layers)
        self.tail = tail

    def forward(self, x):
        y = self.layers(x)
        return self.tail(y) if self.tail is not None else y


def randomize_norms(m):
    """Running statistics and affine parameters that are not the identity."""
    g = torch.Generator().manual_seed(1)
    for mod in m.modules():
        if isinstance(mod, (nn.BatchNorm1d, nn.BatchNorm2d, nn.InstanceNorm1d, nn.InstanceNorm2d, nn.GroupNorm)):
            if getattr(mod, "weight", None) is not None:
                mod.weight.data = torch.rand(mod.weight.shape, generator=g) + 0.5
                mod.bias.data = torch.randn(mod.bias.shape, generator=g)
            if getattr(mod, "running_mean", None) is not None:
                mod.running_mean = torch.randn(mod.running_mean.shape, generator=g)
                mod.running_var = torch.rand(mod.running_var.shape, generator=g) + 0.5
    return m.eval()


# name -> (module, channels, spatial rank, least spatial size)
CASES = {
    "conv2d_bn_relu_maxpool": (Net(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                                   nn.MaxPool2d(3, 2, 1)), 3, 2, 4),
    "conv2d_strided_dilated_grouped": (Net(nn.Conv2d(4, 8, 3, stride=2, dilation=2, padding=2, groups=2),
                                           nn.Conv2d(8, 8, 3, groups=8, padding=1, bias=False),
                                           nn.Conv2d(8, 6, 1)), 4, 2, 6),
    "conv2d_same_padding": (Net(nn.Conv2d(3, 5, (3, 4), padding="same", dilation=(2, 1))), 3, 2, 5),
    "conv1d_whisper_front": (Net(nn.Conv1d(6, 8, 3, padding=1), nn.GELU(), nn.Conv1d(8, 8, 3, stride=2, padding=1),
                                 nn.GELU()), 6, 1, 4),
    "conv1d_grouped_even_kernel": (Net(nn.Conv1d(8, 8, 6, padding=3, groups=4)), 8, 1, 6),
    "conv_transpose": (Net(nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2),
                           nn.ConvTranspose2d(6, 3, (2, 3), stride=(2, 1), dilation=(1, 2))), 4, 2, 2),
    "conv_transpose1d": (Net(nn.ConvTranspose1d(4, 2, 5, stride=3, padding=2)), 4, 1, 1),
    "pools_2d": (Net(nn.MaxPool2d(2), nn.AvgPool2d(3, 2, 1),
                     tail=lambda y: (F.adaptive_avg_pool2d(y, (2, 3)), F.adaptive_avg_pool2d(y, 1),
                                     F.max_pool2d(y, 3, 1, 1, dilation=2), F.avg_pool2d(y, 2, 1, 1, False, False))),
                 3, 2, 16),
    # (torch specializes a max_pool1d input's length: it is tested with a static length below)
    "pools_1d": (Net(nn.AvgPool1d(2, 1, 1, count_include_pad=True), nn.AvgPool1d(3, 2, 1, count_include_pad=False),
                     tail=lambda y: F.adaptive_avg_pool1d(y, 3)), 3, 1, 4),
    "batch_norm_1d_and_instance_norm": (Net(nn.BatchNorm1d(4), nn.InstanceNorm1d(4, affine=True),
                                            nn.InstanceNorm1d(4)), 4, 1, 3),
    "group_norm_wav2vec2": (Net(nn.Conv1d(1, 8, 10, stride=5, bias=False), nn.GroupNorm(8, 8), nn.GELU()), 1, 1, 15),
    "group_norm_2d": (Net(nn.GroupNorm(2, 6), nn.InstanceNorm2d(6, affine=True), nn.GroupNorm(1, 6, affine=False)),
                      6, 2, 2),
    "instance_norm_running_stats": (Net(nn.InstanceNorm2d(3, track_running_stats=True, affine=True)), 3, 2, 2),
    "interpolate_2d": (Net(nn.Upsample(scale_factor=2, mode="nearest"),
                           tail=lambda y: (F.interpolate(y, scale_factor=3, mode="bilinear"),
                                           F.interpolate(y, scale_factor=2, mode="bilinear", align_corners=True),
                                           F.interpolate(y, scale_factor=2, mode="nearest-exact"))), 3, 2, 1),
    # BiT's weight standardization, and a module without running statistics: the batch's own
    "batch_statistics": (Net(nn.BatchNorm2d(5, track_running_stats=False), nn.BatchNorm2d(5, affine=False,
                                                                               track_running_stats=False)), 5, 2, 1),
    "unfold": (Net(tail=lambda y: (F.unfold(y, (3, 1), padding=(1, 0)),
                                   F.unfold(y, 3, dilation=2, padding=1, stride=2))), 3, 2, 5),
    "fold": (Net(tail=lambda y: (F.fold(F.unfold(y, 3, padding=1), y.shape[2:], 3, padding=1),
                                 F.fold(F.unfold(y, 2, stride=2), (y.shape[2] // 2 * 2, y.shape[3] // 2 * 2),
                                        2, stride=2))), 3, 2, 4),
    "interpolate_1d": (Net(nn.Upsample(scale_factor=3, mode="linear"),
                           tail=lambda y: F.interpolate(y, scale_factor=2, mode="nearest")), 2, 1, 1),
}


def inputs(channels, rank, n, size):
    return (torch.randn(n, channels, *([size] * rank)),) if rank == 1 else (torch.randn(n, channels, size, size + 1),)


def compiled(name, decomposed):
    module, channels, rank, least = CASES[name]
    randomize_norms(module)
    batch = torch.export.Dim("batch", min=1, max=16)
    spatial = {0: batch, 2: torch.export.Dim("length" if rank == 1 else "height", min=least, max=512)}
    if rank == 2:
        spatial[3] = torch.export.Dim("width", min=least + 1, max=513)
    ep = torch.export.export(module, inputs(channels, rank, 2, 3 * least + 11), dynamic_shapes=(spatial,))
    if decomposed:
        ep = ep.run_decompositions(decomposition_table())
    return dgt.compile(ep, engine=1), module, channels, rank, least


@pytest.mark.parametrize("decomposed", [False, True], ids=["as-exported", "decomposed"])
@pytest.mark.parametrize("name", list(CASES))
def test_spatial_module_matches_eager_at_dynamic_sizes(name, decomposed):
    run, module, channels, rank, least = compiled(name, decomposed)
    assert run.fallbacks == [], run.report()
    assert len(run.compiled_partitions) == 1
    cases = [inputs(channels, rank, n, s) for n, s in [(1, least), (3, least + 7), (2, 37)]]
    assert_matches_eager(run, module, cases, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("size", [7, 8, 13])
def test_ceil_mode_pools_and_max_pool1d_with_a_dynamic_batch(size):
    """torch.export cannot keep these sizes dynamic (it specializes a
    max_pool1d length; it cannot prove ceil mode's last-window guards over a
    range): a static size each, the batch dynamic."""
    module = Net(nn.MaxPool1d(3, 2, 1), nn.MaxPool1d(2, ceil_mode=True),
                 tail=lambda y: (F.avg_pool1d(y, 3, 2, 1, ceil_mode=True),
                                 F.avg_pool1d(y, 3, 2, 1, ceil_mode=True, count_include_pad=False)))
    ep = torch.export.export(module, (torch.randn(2, 3, size),),
                             dynamic_shapes=({0: torch.export.Dim("batch", min=1, max=16)},))
    run = dgt.compile(ep, engine=1)
    assert run.fallbacks == [], run.report()
    assert_matches_eager(run, module, [(torch.randn(n, 3, size),) for n in (1, 4, 9)])
    module2d = Net(nn.AvgPool2d(3, 2, 1, ceil_mode=True), nn.MaxPool2d(2, ceil_mode=True))
    ep = torch.export.export(module2d, (torch.randn(2, 3, size, size + 3),),
                             dynamic_shapes=({0: torch.export.Dim("batch", min=1, max=16)},))
    run = dgt.compile(ep, engine=1)
    assert run.fallbacks == [], run.report()
    assert_matches_eager(run, module2d, [(torch.randn(n, 3, size, size + 3),) for n in (1, 2, 5)])


def test_non_integer_scale_factor_runs_in_pytorch():
    """PyTorch maps coordinates by 1 / scale_factor, Interpolate by the size ratio: only integers agree."""
    module = Net(nn.Upsample(scale_factor=1.5, mode="nearest"))
    run = dgt.compile(module.eval(), (torch.randn(1, 2, 6, 6),), engine=1)
    assert [f.target for f in run.fallbacks] == ["aten.upsample_nearest2d.vec"], run.report()
    x = torch.randn(1, 2, 6, 6)
    torch.testing.assert_close(run(x), module(x))


def test_batch_norm_in_training_mode_runs_in_pytorch():
    module = Net(nn.BatchNorm2d(3))
    ep = torch.export.export(module.train(), (torch.randn(2, 3, 4, 4),))
    run = dgt.compile(ep, engine=1)
    assert [f.target for f in run.fallbacks] == ["aten._native_batch_norm_legit_functional.default"], run.report()


def test_fold_of_overlapping_strided_blocks_runs_in_pytorch():
    """Blocks that overlap with a stride above 1 have no dyngraph form here: that fold runs in
    PyTorch, the rest of the module in dyngraph."""
    module = Net(tail=lambda y: F.fold(y * 2, (7, 7), 3, stride=2) + 1)
    ep = torch.export.export(module, (torch.randn(2, 27, 9),), dynamic_shapes=({0: torch.export.Dim("batch")},))
    run = dgt.compile(ep, engine=1)
    assert [f.target for f in run.fallbacks] == ["aten.col2im.default"], run.report()
    assert_matches_eager(run, module, [(torch.randn(n, 27, 9),) for n in (1, 3)])
