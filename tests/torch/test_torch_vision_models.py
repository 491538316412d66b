"""Vision and audio models of ``transformers`` (tiny random-weight configs,
offline) run whole in dyngraph with dynamic sizes and match eager PyTorch
within 1e-4 (f32) at three sizes: a ResNet (convolutions, batch norm folded
into them, max pooling, adaptive average pooling; dynamic batch and image
size), ViT (its patch-embedding convolution; dynamic batch), the Whisper
encoder (its two-convolution front end; dynamic batch) and Wav2Vec2 (its
convolutional feature extractor with group norm, the grouped positional
convolution; dynamic batch and number of samples)."""

import pytest

torch = pytest.importorskip("torch", minversion="2.5")
transformers = pytest.importorskip("transformers")

import dyngraph.torch as dgt  # noqa: E402
from torchutil import offline  # noqa: E402

offline()

ATOL = 1e-4


def check(run, model, kwargs_list, key):
    assert run.fallbacks == [], run.report()
    assert len(run.compiled_partitions) == 1
    for kwargs in kwargs_list:
        with torch.no_grad():
            want = getattr(model(**kwargs), key)
        got = getattr(run(**kwargs), key)
        assert got.shape == want.shape
        torch.testing.assert_close(got, want, atol=ATOL, rtol=0)


def test_resnet_dynamic_batch_and_image_size():
    torch.manual_seed(0)
    cfg = transformers.ResNetConfig(num_channels=3, embedding_size=16, hidden_sizes=[16, 32, 48], depths=[1, 1, 1],
                                    layer_type="basic", num_labels=10)
    model = transformers.ResNetForImageClassification(cfg).eval()
    for m in model.modules():  # running statistics and affine parameters that are not the identity
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.normal_(0, 0.5)
            m.running_var.uniform_(0.5, 2.0)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.normal_(0, 0.5)
    batch = torch.export.Dim("batch", min=1, max=16)
    size = torch.export.Dim("size", min=32, max=256)
    run = dgt.compile(model, kwargs={"pixel_values": torch.randn(2, 3, 64, 64)},
                      dynamic_shapes={"pixel_values": {0: batch, 2: size, 3: size}}, engine=1)
    # every batch norm follows a convolution: folded into it at compile
    kinds = [op.kind.name for op in run.compiled_partitions[0].program.ops]
    convs = sum(isinstance(m, torch.nn.Conv2d) for m in model.modules())
    assert "BatchNormInference" not in kinds and kinds.count("Convolution") == convs == 9
    check(run, model, [{"pixel_values": torch.randn(n, 3, s, s)} for n, s in [(1, 32), (3, 64), (8, 97)]], "logits")


def test_vit_patch_embedding_dynamic_batch():
    torch.manual_seed(0)
    cfg = transformers.ViTConfig(image_size=32, patch_size=8, num_channels=3, hidden_size=32, num_hidden_layers=2,
                                 num_attention_heads=4, intermediate_size=64)
    model = transformers.ViTModel(cfg, add_pooling_layer=False).eval()
    batch = torch.export.Dim("batch", min=1, max=16)
    run = dgt.compile(model, kwargs={"pixel_values": torch.randn(2, 3, 32, 32)},
                      dynamic_shapes={"pixel_values": {0: batch}}, engine=1)
    check(run, model, [{"pixel_values": torch.randn(n, 3, 32, 32)} for n in (1, 4, 11)], "last_hidden_state")


def test_whisper_encoder_dynamic_batch():
    torch.manual_seed(0)
    cfg = transformers.WhisperConfig(num_mel_bins=16, d_model=32, encoder_layers=2, encoder_attention_heads=4,
                                     encoder_ffn_dim=64, max_source_positions=32, decoder_layers=1,
                                     decoder_attention_heads=4, decoder_ffn_dim=64, vocab_size=64, pad_token_id=0,
                                     bos_token_id=1, eos_token_id=2, decoder_start_token_id=1)
    model = transformers.WhisperModel(cfg).get_encoder().eval()
    batch = torch.export.Dim("batch", min=1, max=16)
    run = dgt.compile(model, kwargs={"input_features": torch.randn(2, 16, 64)},
                      dynamic_shapes={"input_features": {0: batch}}, engine=1)
    check(run, model, [{"input_features": torch.randn(n, 16, 64)} for n in (1, 3, 9)], "last_hidden_state")


def test_wav2vec2_dynamic_batch_and_length():
    torch.manual_seed(0)
    cfg = transformers.Wav2Vec2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                      intermediate_size=64, conv_dim=(16, 16, 16), conv_stride=(5, 2, 2),
                                      conv_kernel=(10, 3, 3), num_conv_pos_embeddings=16,
                                      num_conv_pos_embedding_groups=4, feat_extract_norm="group",
                                      do_stable_layer_norm=False)
    model = transformers.Wav2Vec2Model(cfg).eval()
    batch = torch.export.Dim("batch", min=1, max=8)
    # (torch.export cannot prove its own guards over a named range of samples: its range is its own)
    run = dgt.compile(model, kwargs={"input_values": torch.randn(2, 1000)},
                      dynamic_shapes={"input_values": {0: batch, 1: torch.export.Dim.DYNAMIC}}, engine=1)
    check(run, model, [{"input_values": torch.randn(n, s)} for n, s in [(1, 400), (2, 1601), (3, 4000)]],
          "last_hidden_state")
