"""A GGUF file's q5, k-quant and i-quant tensors (llama.cpp's Q*_K_S/M, IQ* files) and mxfp4 taken as
they are by dyngraph.torch.gguf: a small file written with the gguf package,
its llama query rows interleaved per head as llama.cpp's converter writes
them, read back into the module's order and run against the module holding
the same values dequantized."""

from itertools import combinations

import numpy as np
import pytest

torch = pytest.importorskip("torch", minversion="2.5")
gguf = pytest.importorskip("gguf")

import dyngraph.torch as dgt  # noqa: E402
from dyngraph import _backend as dg_backend  # noqa: E402
from dyngraph.torch.gguf import gguf_weights  # noqa: E402

from test_stored_weight_types import blocks, dequantized  # noqa: E402

HIDDEN, HEADS = 512, 2
# (not q4_K, which ggml repacks for its own product at these sizes where it is not in panels:
# test_stored_weight_types.py)
TYPES = {"model.layers.0.self_attn.q_proj.weight": ("blk.0.attn_q.weight", "q3_K"),
         "model.layers.0.self_attn.k_proj.weight": ("blk.0.attn_k.weight", "q5_K"),
         "model.layers.0.mlp.down_proj.weight": ("blk.0.ffn_down.weight", "q6_K"),
         "model.layers.0.mlp.up_proj.weight": ("blk.0.ffn_up.weight", "q5_0"),
         "model.layers.0.self_attn.v_proj.weight": ("blk.0.attn_v.weight", "iq4_nl"),
         "model.layers.0.mlp.gate_proj.weight": ("blk.0.ffn_gate.weight", "iq4_xs"),
         "model.layers.0.self_attn.o_proj.weight": ("blk.0.attn_output.weight", "q2_K")}
# an IQ1-IQ3 file's types, and gpt-oss's mxfp4: ggml multiplies them (no panels)
LOWBIT_TYPES = {"model.layers.0.self_attn.q_proj.weight": ("blk.0.attn_q.weight", "iq3_s"),
                "model.layers.0.self_attn.k_proj.weight": ("blk.0.attn_k.weight", "iq2_xs"),
                "model.layers.0.mlp.down_proj.weight": ("blk.0.ffn_down.weight", "iq1_m"),
                "model.layers.0.mlp.up_proj.weight": ("blk.0.ffn_up.weight", "iq3_xxs"),
                "model.layers.0.self_attn.v_proj.weight": ("blk.0.attn_v.weight", "iq1_s"),
                "model.layers.0.mlp.gate_proj.weight": ("blk.0.ffn_gate.weight", "iq2_xxs"),
                "model.layers.0.self_attn.o_proj.weight": ("blk.0.attn_output.weight", "mxfp4")}
MIXES = {"k-quants": TYPES, "i-quants": LOWBIT_TYPES}
# bytes of a 512 x 512 weight where ggml repacks it for its own product (its CPU build's choice: iq4_nl on
# x86-64 with AVX2 and Arm with dotprod, q2_K on x86-64 with AVX2 where it is not in panels, mxfp4)
REPACKABLE = {"iq4_nl": HIDDEN * HIDDEN // 32 * 18, "q2_K": HIDDEN * HIDDEN // 256 * 84,
              "mxfp4": HIDDEN * HIDDEN // 32 * 17}


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.self_attn = torch.nn.Module()
        self.self_attn.q_proj = torch.nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.self_attn.k_proj = torch.nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.self_attn.v_proj = torch.nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.self_attn.o_proj = torch.nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.mlp = torch.nn.Module()
        self.mlp.gate_proj = torch.nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.mlp.up_proj = torch.nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.mlp.down_proj = torch.nn.Linear(HIDDEN, HIDDEN, bias=False)


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.model = torch.nn.Module()
        self.model.layers = torch.nn.ModuleList([Block()])

    def forward(self, x):
        b = self.model.layers[0]
        h = b.self_attn.q_proj(x) * torch.sigmoid(b.self_attn.k_proj(x)) + b.self_attn.v_proj(x)
        return b.mlp.down_proj(torch.relu(b.mlp.up_proj(b.self_attn.o_proj(h))) * b.mlp.gate_proj(h))


def interleaved(rows: np.ndarray, heads: int) -> np.ndarray:
    """The file's order of a query's rows: a head's row a * D/2 + j is the file's 2 j + a."""
    d = rows.shape[0] // heads
    out = np.empty_like(rows)
    for h in range(heads):
        for a in range(2):
            for j in range(d // 2):
                out[h * d + 2 * j + a] = rows[h * d + a * d // 2 + j]
    return out


@pytest.fixture(params=list(MIXES))
def written(request, tmp_path, rng):
    """(the file, the module's rows of blocks per parameter name, {name: (file name, type)})"""
    types = MIXES[request.param]
    path = tmp_path / "tiny.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(1)
    w.add_head_count(HEADS)
    w.add_head_count_kv(HEADS)
    model_rows = {}
    for name, (gname, storage) in types.items():
        raw = blocks(rng, storage, HIDDEN, HIDDEN)
        model_rows[name] = raw
        in_file = interleaved(raw, HEADS) if gname in ("blk.0.attn_q.weight", "blk.0.attn_k.weight") else raw
        w.add_tensor(gname, in_file, raw_dtype=getattr(gguf.GGMLQuantizationType, storage.upper()))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return str(path), model_rows, types


def test_the_files_blocks_come_back_in_the_modules_order(written):
    path, model_rows, types = written
    weights = gguf_weights(path, Tiny())
    assert {n: w.storage for n, w in weights.items()} == {n: t[1] for n, t in types.items()}
    for name, raw in model_rows.items():
        np.testing.assert_array_equal(weights[name].data.reshape(raw.shape), raw, err_msg=name)


def test_a_module_runs_on_them_as_on_their_values(written, rng):
    path, model_rows, types = written
    module = Tiny().eval()
    weights = gguf_weights(path, module)
    params = dict(module.named_parameters())
    with torch.no_grad():
        for name, raw in model_rows.items():
            params[name].copy_(torch.from_numpy(dequantized(raw, types[name][1], (HIDDEN, HIDDEN)).astype(np.float32)))
    batch = torch.export.Dim("batch", min=1, max=160)
    ep = torch.export.export(module, (torch.zeros(4, HIDDEN),), dynamic_shapes=({0: batch},))
    run = dgt.compile(ep, engine=1, weights=weights)
    (cp,) = run.compiled_partitions
    assert {t.storage for t in cp.program.tensors if t.storage != "default"} == {t for _, t in types.values()}
    info = cp.cache_info()
    repackable = [REPACKABLE[t] for _, t in types.values() if t in REPACKABLE]
    assert info.repacked_bytes in {sum(c) for r in range(len(repackable) + 1) for c in combinations(repackable, r)}, info
    # from this many rows every product not in panels multiplies the dequantized weights (dequant_min_rows)
    dequantized_from = max(dg_backend.dequant_min_rows(t) for _, t in types.values())
    for m in (1, 5, 8, 33, dequantized_from):
        x = torch.from_numpy(rng.standard_normal((m, HIDDEN), dtype=np.float32))
        with torch.no_grad():
            ref = module(x).double()
        got = run(x).double()
        err = ((got - ref).norm() / ref.norm()).item()
        # from dequantized_from rows (q2_K's 128, iq2's 80) every product is exact in f32, unless the weights are
        # in the quantized panels (x86-64 with AVX2) or ggml repacked some; below, ggml's round the
        # activations to 8 bits per block, as the panels do: 0.5-1% a product with these random blocks,
        # 1.5-2% three products deep (a row or a block out of place would be 100% and more)
        exact = m >= dequantized_from and info.panel_bytes == 0 and info.repacked_bytes == 0
        assert err < (1e-5 if exact else 0.1), (m, err)
