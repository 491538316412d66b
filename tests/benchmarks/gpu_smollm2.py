"""SmolLM2-135M through dyngraph.torch on a GPU, against llama.cpp built with CUDA
(`llama-bench -ngl 99`) and PyTorch CUDA eager, on the same GPU in one run.

    python tests/benchmarks/gpu_smollm2.py --gguf MODEL-F32.gguf [--llama-bench PATH --gguf-dir DIR]
        [--device CUDA0] [--types f32,f16,q8_0,q4_0] [--rounds 5] [--check-cpu]

The model is a GGUF file of SmolLM2-135M's architecture (the package's file
where it is installed, else one made by `random_gguf.py fill`: speed does not
depend on the values), loaded into transformers' LlamaForCausalLM, wrapped in
the static-cache module (`StaticCacheLM`, 1024 positions, logits of the last
position only, as llama-bench computes them) and exported once with a dynamic
sequence length; then, per weight type, `dyngraph.torch.compile(...,
engine=dg.Engine("gpu"), weight_type=...)`.

Rows per weight type: compile (the exported program to a GPU partition,
weights quantized and uploaded), the first call (pp32: its graph built and
buffers allocated), pp32 and pp512 (median of rounds, from position 0) and
decode (median per token at positions 0..31 in turn, as llama-bench's tg32),
in tokens/s, and llama-bench's pp32 / pp512 / tg32 of the file of that type
(`*F32.gguf`, `*F16.gguf`, `*Q8_0.gguf`, `*Q4_0.gguf` in --gguf-dir) with
flash attention off and on (the table takes llama.cpp's better one).
PyTorch CUDA eager runs the f32 model (and the same model in f16, as GPU users
run it). --check-cpu compiles each weight type for the host CPU too and prints
how far the GPU's last-position logits are from the CPU's and whether 16
greedy tokens agree."""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import subprocess
import time

os.environ.setdefault("TQDM_DISABLE", "1")  # transformers' GGUF loading draws progress bars

import torch  # noqa: E402

import dyngraph as dg  # noqa: E402
import dyngraph.torch as dgt  # noqa: E402
from dyngraph.torch.hf import StaticCacheLM, export_static_cache_lm, load_gguf_causal_lm  # noqa: E402

CACHE = 1024
LLAMA_TYPE = {"f32": "F32", "f16": "F16", "q8_0": "Q8_0", "q4_0": "Q4_0"}


def tokens(n: int) -> torch.Tensor:
    return torch.randint(100, 40000, (1, n), generator=torch.Generator().manual_seed(0))


def timed(fn, sync=None) -> float:
    if sync:
        sync()
    t0 = time.perf_counter()
    fn()
    if sync:
        sync()
    return time.perf_counter() - t0


def speed(run, rounds: int, sync=None) -> dict:
    """tokens/s of pp32, pp512 and decode for a callable (ids, positions) -> logits."""
    ids = tokens(512)
    out = {}
    for n in (32, 512):
        pos = torch.arange(n)
        for _ in range(2):  # its graph built, then (ggml-cuda) captured as a CUDA graph: not timed
            run(ids[:, :n], pos)
        out[f"pp{n}"] = n / statistics.median(timed(lambda: run(ids[:, :n], pos), sync) for _ in range(rounds))
    per = [timed(lambda p=p: run(ids[:, p:p + 1], torch.tensor([p])), sync) for p in range(32)]
    out["tg32"] = 1 / statistics.median(per)
    return out


def greedy(run, n: int = 16) -> list:
    ids, out = tokens(8), []
    logits = run(ids, torch.arange(8))
    for p in range(8, 8 + n):
        t = int(logits.reshape(-1, logits.shape[-1])[-1].argmax())
        out.append(t)
        logits = run(torch.tensor([[t]]), torch.tensor([p]))
    return out


def dyngraph_rows(ep, engine, wt: str, rounds: int, check_cpu: bool) -> dict:
    t0 = time.perf_counter()
    run = dgt.compile(ep, engine=engine, weight_type=wt)
    out = {"compile s": time.perf_counter() - t0}
    ids = tokens(32)
    out["first call pp32 ms"] = timed(lambda: run(ids, torch.arange(32))) * 1e3
    out.update(speed(run, rounds))
    info = run.cache_info()
    out["partitions"] = len(info)
    out["host ops"] = sum(i.host_fallback_ops for i in info)
    if check_cpu:
        cpu = dgt.compile(ep, engine=dg.Engine("cpu"), weight_type=wt)
        a, b = run(ids, torch.arange(32)), cpu(ids, torch.arange(32))
        out["logits |gpu-cpu|/max|cpu|"] = float((a - b).abs().max() / b.abs().max())
        out["greedy tokens agree"] = greedy(run) == greedy(cpu)
    return out


def torch_rows(lm, device: str, rounds: int, dtype) -> dict:
    m = lm.to(device=device, dtype=dtype)
    sync = torch.cuda.synchronize if device.startswith("cuda") else None

    def run(ids, pos):
        with torch.no_grad():
            return m(ids.to(device), pos.to(device))

    out = {"first call pp32 ms": timed(lambda: run(tokens(32), torch.arange(32)), sync) * 1e3}
    out.update(speed(run, rounds, sync))
    return out


def llama_bench_rows(bench: str, gguf_dir: str, types) -> dict:
    """{(type, 'pp32'|'pp512'|'tg32'): best tokens/s over flash attention off / on}."""
    out = {}
    for wt in types:
        hits = sorted(glob.glob(os.path.join(gguf_dir, f"*{LLAMA_TYPE[wt]}.gguf")))
        if not hits:
            continue
        cmd = [bench, "-m", hits[0], "-ngl", "99", "-p", "32,512", "-n", "32", "-fa", "off,on", "-r", "3", "-o", "json"]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if p.returncode != 0:
            print(f"llama-bench {wt}: exit {p.returncode}: {p.stderr[-400:]}")
            continue
        for r in json.loads(p.stdout):
            key = (wt, f"pp{r['n_prompt']}" if r["n_prompt"] else f"tg{r['n_gen']}")
            fa = r.get("flash_attn")
            out[key] = max(out.get(key, (0, None)), (r["avg_ts"], fa), key=lambda v: v[0])
        out["_build"] = f"llama.cpp {p.stdout and json.loads(p.stdout)[0].get('build_commit', '?')}"
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gguf", required=True, help="an F32 (or any) GGUF file of SmolLM2-135M's architecture")
    ap.add_argument("--device", default=None, help="a GPU device name (default: the first); 'cpu' for a dry run")
    ap.add_argument("--types", default="f32,f16,q8_0,q4_0")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--llama-bench", default=os.environ.get("LLAMA_BENCH"))
    ap.add_argument("--gguf-dir", default=None)
    ap.add_argument("--check-cpu", action="store_true")
    ap.add_argument("--no-torch", action="store_true")
    args = ap.parse_args()
    types = args.types.split(",")
    if args.device == "cpu":
        engine, tdev = dg.Engine("cpu"), "cpu"
    else:
        gpus = [d for d in dg.Engine.devices() if d.kind in ("gpu", "igpu")]
        if not gpus:
            raise SystemExit("no GPU device in this build of dyngraph (build with GGML_CUDA=ON on a CUDA machine)")
        dev = args.device or gpus[0].name
        print(f"device: {dev}: {next((d.description for d in gpus if d.name == dev), '?')}")
        engine, tdev = dg.Engine("gpu", device=dev), "cuda"
    model, _ = load_gguf_causal_lm(args.gguf)
    lm = StaticCacheLM(model, max_cache_len=CACHE, last_logits_only=True).eval()
    t0 = time.perf_counter()
    ep = export_static_cache_lm(lm, max_length=CACHE)
    print(f"torch.export: {time.perf_counter() - t0:.1f} s (torch {torch.__version__})")
    ours = {}
    for wt in types:
        try:
            ours[wt] = dyngraph_rows(ep, engine, wt, args.rounds, args.check_cpu)
        except Exception as e:  # report and go on: one weight type must not hide the others
            print(f"dyngraph {wt}: {type(e).__name__}: {str(e)[:300]}")
        else:
            extra = {k: v for k, v in ours[wt].items() if not k.startswith(("pp", "tg"))}
            print(f"dyngraph {wt}: " + ", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}"
                                                 for k, v in extra.items()))
    theirs = {}
    if not args.no_torch:
        for name, dtype in (("f32", torch.float32), ("f16", torch.float16)):
            if name in types:
                theirs[name] = torch_rows(lm, tdev, args.rounds, dtype)
                print(f"PyTorch {tdev} eager {name}: first call pp32 {theirs[name]['first call pp32 ms']:.1f} ms")
    ref = llama_bench_rows(args.llama_bench, args.gguf_dir, types) if args.llama_bench and args.gguf_dir else {}
    if "_build" in ref:
        print(ref.pop("_build"))
    print("| weight type | case | dyngraph tok/s | llama.cpp tok/s (fa) | ratio | PyTorch eager tok/s | ratio |")
    print("|---|---|---|---|---|---|---|")
    for wt in types:
        for case in ("pp32", "pp512", "tg32"):
            v = ours.get(wt, {}).get(case)
            r, fa = ref.get((wt, case), (None, None))
            t = theirs.get(wt, {}).get(case)
            print(f"| {wt} | {case} | {f'{v:.0f}' if v else '-'} | {f'{r:.0f} ({fa})' if r else '-'} | "
                  f"{f'{v / r:.2f}' if v and r else '-'} | {f'{t:.0f}' if t else '-'} | {f'{v / t:.2f}' if v and t else '-'} |")


if __name__ == "__main__":
    main()
