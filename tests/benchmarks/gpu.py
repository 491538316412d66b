"""GPU rows of the report: a SmolLM2-135M-shaped decoder (30 layers, hidden 576,
9 query / 3 KV heads, vocabulary 49152; random f32 weights, so no model file
is needed on the GPU machine) on a GPU engine, against PyTorch CUDA eager
running transformers' LlamaForCausalLM of the same configuration.

    python tests/benchmarks/gpu.py [--device CUDA0] [--rounds 10]

Rows: the first call of a fresh partition (its graph built and its buffers
allocated), prefill of 32 and 512 tokens (median of rounds, the KV cache reset
before each), and decode (median time per token after a 32-token prefill).
Both sides on the same GPU in the same process; dyngraph's times include
copying the tokens in and the logits out."""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import dyngraph as dg
from dyngraph.models.llama import LlamaConfig, LlamaRunner, random_weights

CFG = LlamaConfig(vocab=49152, hidden=576, layers=30, heads=9, kv_heads=3, ffn=1536, max_seq=1024, rope_base=100000.0)


def ms(t: float) -> str:
    return f"{t * 1e3:.2f} ms"


def dyngraph_rows(device: str, rounds: int, rng) -> dict:
    w = random_weights(CFG, seed=0)
    t0 = time.perf_counter()
    run = LlamaRunner(CFG, w, engine=dg.Engine("cpu") if device == "cpu" else dg.Engine("gpu", device=device))
    compile_s = time.perf_counter() - t0
    toks = rng.integers(0, CFG.vocab, 512).tolist()
    t0 = time.perf_counter()
    run.forward(toks[:32])
    first = time.perf_counter() - t0
    run.reset()
    t0 = time.perf_counter()
    run.forward(toks[:32])
    second = time.perf_counter() - t0
    out = {"compile": compile_s, "first call pp32": first, "second call pp32": second}
    for n in (32, 512):
        for _ in range(2):  # its graph built, then (ggml-cuda) captured as a CUDA graph: not timed
            run.reset()
            run.forward(toks[:n])
        ts = []
        for _ in range(rounds):
            run.reset()
            t0 = time.perf_counter()
            run.forward(toks[:n])
            ts.append(time.perf_counter() - t0)
        out[f"pp{n}"] = statistics.median(ts)
    run.reset()
    run.forward(toks[:32])
    ts = []
    for k in range(max(rounds, 32)):
        t0 = time.perf_counter()
        run.forward([toks[32 + k]])
        ts.append(time.perf_counter() - t0)
    out["tg (per token)"] = statistics.median(ts)
    info = run.cp.cache_info()
    out["_info"] = f"host_fallback_ops={info.host_fallback_ops} graph_splits={info.graph_splits} builds={info.builds}"
    return out


def torch_rows(rounds: int, rng, where: str = "cuda") -> dict:
    import torch
    import transformers

    cfg = transformers.LlamaConfig(vocab_size=CFG.vocab, hidden_size=CFG.hidden, intermediate_size=CFG.ffn,
                                   num_hidden_layers=CFG.layers, num_attention_heads=CFG.heads,
                                   num_key_value_heads=CFG.kv_heads, max_position_embeddings=CFG.max_seq,
                                   rope_theta=CFG.rope_base, tie_word_embeddings=True)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg).eval().to(where)
    toks = torch.tensor([rng.integers(0, CFG.vocab, 512).tolist()], device=where)

    def timed(fn):
        if where == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        r = fn()
        if where == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - t0, r

    out = {}
    with torch.no_grad():
        out["first call pp32"], _ = timed(lambda: model(toks[:, :32]))
        for n in (32, 512):
            out[f"pp{n}"] = statistics.median(timed(lambda: model(toks[:, :n]))[0] for _ in range(rounds))
        _, r = timed(lambda: model(toks[:, :32], use_cache=True))
        past = r.past_key_values
        ts = []
        for k in range(max(rounds, 32)):
            t, r = timed(lambda: model(toks[:, 32 + k:33 + k], past_key_values=past, use_cache=True))
            past = r.past_key_values
            ts.append(t)
        out["tg (per token)"] = statistics.median(ts)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--no-torch", action="store_true")
    args = ap.parse_args()
    gpus = [d for d in dg.Engine.devices() if d.kind in ("gpu", "igpu")]
    if not gpus:
        raise SystemExit("no GPU device in this build of dyngraph (build with GGML_CUDA=ON on a CUDA machine)")
    dev = args.device or gpus[0].name
    print(f"device: {dev}: {next((d.description for d in gpus if d.name == dev), '?')}")
    rng = np.random.default_rng(0)
    ours = dyngraph_rows(dev, args.rounds, rng)
    theirs = {} if args.no_torch else torch_rows(args.rounds, np.random.default_rng(0))
    print(f"dyngraph: {ours.pop('_info')}; compile {ours.pop('compile'):.2f} s")
    print("| case | dyngraph | PyTorch CUDA eager | ratio |")
    print("|---|---|---|---|")
    for k, v in ours.items():
        t = theirs.get(k)
        print(f"| {k} | {ms(v)} | {ms(t) if t else '-'} | {f'{v / t:.2f}' if t else '-'} |")


if __name__ == "__main__":
    main()
