"""SmolLM2-135M through dyngraph.torch with Hugging Face's rotary embedding converted as one RoPE op
(the default, converters/rope.py) and op by op, side by side in one process, interleaved rounds.

    python tests/benchmarks/rope_fusion_ab.py --gguf MODEL-F32.gguf [--device gpu|cpu] [--types f32,q8_0]
        [--threads N] [--rounds 3]

Per weight type and variant: prefill pp32 and pp512 and decode (median per token at positions 32..63)
in tokens/s, the decode graph's nodes, graph splits and host ops, and how far the two variants' logits
are apart. On a GPU, also a torch.profiler count of GPU events and their summed time per decode token
(ggml's kernels and copies: CUPTI sees the whole process). The model is loaded from a GGUF file of
SmolLM2-135M's architecture (the package's, or one from `random_gguf.py fill`: speed does not depend
on the values) into a static-cache module of 1024 positions, as gpu_smollm2.py does."""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("TQDM_DISABLE", "1")

import torch  # noqa: E402

import dyngraph as dg  # noqa: E402
import dyngraph.torch as dgt  # noqa: E402
import dyngraph.torch.converters.elementwise as elementwise  # noqa: E402
from dyngraph.torch.hf import StaticCacheLM, export_static_cache_lm, load_gguf_causal_lm  # noqa: E402


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def compile_both(ep, engine, wt):
    """{"fused": program, "op by op": program}: the second converted with the pattern switched off."""
    fused = elementwise.rotary_pattern
    out = {"fused": dgt.compile(ep, engine=engine, weight_type=wt)}
    elementwise.rotary_pattern = lambda *a: None
    try:
        out["op by op"] = dgt.compile(ep, engine=engine, weight_type=wt)
    finally:
        elementwise.rotary_pattern = fused
    return out


def profile_decode(run, ids) -> str:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for p in range(40, 50):
            run(ids[:, p:p + 1], torch.tensor([p]))
    ev = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    names = {}
    for e in ev:
        names[e.name[:40]] = names.get(e.name[:40], 0) + 1
    top = sorted(names.items(), key=lambda kv: -kv[1])[:6]
    return f"{len(ev) / 10:.0f} GPU events a token, {sum(e.device_time for e in ev) / 10:.0f} us of GPU time; {top}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--device", default="cpu", help="cpu, gpu or a device name (CUDA0)")
    ap.add_argument("--types", default="f32,q8_0")
    ap.add_argument("--threads", type=int, default=1, help="CPU threads (--device cpu)")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if args.device == "cpu":
        engine = dg.Engine("cpu", num_threads=args.threads)
    else:
        engine = dg.Engine("gpu") if args.device == "gpu" else dg.Engine("gpu", device=args.device)
    model, _ = load_gguf_causal_lm(args.gguf)
    lm = StaticCacheLM(model, max_cache_len=1024, last_logits_only=True).eval()
    ep = export_static_cache_lm(lm, max_length=1024)
    ids = torch.randint(100, 40000, (1, 600), generator=torch.Generator().manual_seed(0))
    for wt in args.types.split(","):
        runs = compile_both(ep, engine, wt)
        res = {k: {"pp32": [], "pp512": [], "tg": []} for k in runs}
        for r in runs.values():  # graphs built, buffers allocated
            r(ids[:, :32], torch.arange(32))
            r(ids[:, :512], torch.arange(512))
            r(ids[:, :1], torch.tensor([3]))
        for _ in range(args.rounds):
            for k, r in runs.items():
                res[k]["pp32"].append(timed(lambda: r(ids[:, :32], torch.arange(32))))
                res[k]["pp512"].append(timed(lambda: r(ids[:, :512], torch.arange(512))))
                res[k]["tg"] += [timed(lambda p=p: r(ids[:, p:p + 1], torch.tensor([p]))) for p in range(32, 64)]
        a, b = (r(ids[:, :32], torch.arange(32)) for r in runs.values())
        print(f"{wt}: logits |fused - op by op| / max = {float((a - b).abs().max() / b.abs().max()):.2e}")
        for k, r in runs.items():
            info = r.cache_info()[0]
            m = {c: statistics.median(v) for c, v in res[k].items()}
            print(f"  {wt} {k:9s} pp32 {32 / m['pp32']:8.0f} tok/s  pp512 {512 / m['pp512']:8.0f} tok/s  "
                  f"decode {1 / m['tg']:6.0f} tok/s ({1e3 * m['tg']:.3f} ms)  nodes {info.last_graph_nodes} "
                  f"splits {info.graph_splits} host ops {info.host_fallback_ops}", flush=True)
            if args.device != "cpu":
                try:
                    print(f"    profile: {profile_decode(r, ids)}", flush=True)
                except Exception as e:  # a torch without CUPTI: the rows above stand
                    print(f"    profile: {type(e).__name__}: {str(e)[:200]}")


if __name__ == "__main__":
    main()
