"""A small Llama-style decoder built with the graph API (random weights),
compiled once, generating greedily through a KV cache held in state.

    python examples/llama_decoder.py

Prefill runs at the prompt's length, decode at one token: one generation
builds exactly two ggml graphs, however many tokens it produces.
"""

import time

import numpy as np

import dyngraph as dg
from dyngraph.models.llama import LlamaConfig, LlamaRunner, random_weights


def main():
    cfg = LlamaConfig(vocab=512, hidden=256, layers=4, heads=8, kv_heads=2, ffn=768, max_seq=256)
    t0 = time.perf_counter()
    runner = LlamaRunner(cfg, random_weights(cfg, seed=0), dg.Engine(dg.Engine.CPU))
    print(f"compiled a {cfg.layers}-layer decoder (hidden {cfg.hidden}, {cfg.heads} query / {cfg.kv_heads} kv heads, "
          f"cache of {cfg.max_seq} positions) in {time.perf_counter() - t0:.2f} s")

    for prompt_len, new_tokens in ((7, 24), (19, 16)):
        runner.reset()
        prompt = list(np.random.default_rng(prompt_len).integers(0, cfg.vocab, prompt_len))
        before = runner.cp.cache_info().builds
        t0 = time.perf_counter()
        out = runner.generate(prompt, max_new_tokens=new_tokens)
        dt = time.perf_counter() - t0
        built = runner.cp.cache_info().builds - before
        print(f"prompt of {prompt_len} tokens -> {new_tokens} new tokens in {dt * 1e3:.1f} ms "
              f"({new_tokens / dt:.0f} tok/s), graphs built: {built}")
        print(f"  tokens: {out}")

    info = runner.cp.cache_info()
    print(f"graph cache: {info.entries} graphs (prefill 7, prefill 19, decode), {info.hits} hits, "
          f"{info.build_seconds * 1e3:.2f} ms spent building, {info.metadata_bytes / 1024:.0f} KiB of graph metadata")


if __name__ == "__main__":
    main()
