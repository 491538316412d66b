"""Every causal-LM architecture transformers ships, tiny and random, through
dyngraph.torch: what converts whole, what falls back, what fails, what differs.

    PYTHONPATH=api python tools/arch_sweep.py [--jobs 2] [--only llama,gpt2] [--timeout 300] [--json out.json]

Each architecture runs in a subprocess of its own (a crash or a hang costs
one row): its config from ``AutoConfig.for_model`` shrunk to 2 layers of
width 64 (4 heads, 2 kv heads, 4 experts where it has them, a 256-token
vocabulary), with sdpa attention (eager where the model has no sdpa form), weights a
model leaves at zero drawn at random (a zero router ties every choice),
exported with a dynamic sequence length (``use_cache=False``; torch's AUTO
where the model's code guards the length), compiled once, and its logits
compared with eager PyTorch at 1, 7 and 30 tokens (those in the exported
range; f32, 1e-4 absolute). One line per architecture:

- ``ok``: converted whole, matches at every length;
- ``fallback``: runs and matches, with the ops PyTorch ran (``run.fallbacks``);
- ``mismatch``: the largest difference from eager;
- ``export`` / ``model``: torch.export or the model itself failed (not ours);
- ``compile`` / ``run``: dyngraph failed, with the exception;
- ``crash`` / ``timeout``: the subprocess died or ran past ``--timeout``.

This is a tool for finding what a user's model meets, not a test: the
architectures change with every transformers release, and a config that
``for_model`` cannot shrink this way is reported as ``model``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, vocab_size=256, max_position_embeddings=512,
            moe_intermediate_size=32, shared_expert_intermediate_size=32, num_experts=4, num_local_experts=4,
            n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=1, first_k_dense_replace=1,
            kv_lora_rank=16, q_lora_rank=32, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16,
            sliding_window=16, n_group=1, topk_group=1, tie_word_embeddings=False)
# sizes of families whose configs name them otherwise (the generic names above do not reach them)
FAMILY = dict(rotary_dim=8, n_inner=128,  # GPT-J, CodeGen
              expand=2, num_heads=8, state_size=16, n_groups=1, chunk_size=32,  # Mamba2 (one chunk: AUTO exports guard it)
              d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
              encoder_ffn_dim=128, decoder_ffn_dim=128)  # BART-style decoders
LENGTHS = (1, 7, 30)
ATOL = 1e-4


# tried in turn until the model builds and runs eagerly
TIERS = (tuple(TINY), tuple(k for k in TINY if k != "head_dim"),
         ("num_hidden_layers", "vocab_size", "num_experts", "num_local_experts", "n_routed_experts"))


def tiny_config(model_type: str, keys=tuple(TINY)):
    import transformers

    base = transformers.AutoConfig.for_model(model_type)
    aliases = getattr(base, "attribute_map", {}) or {}  # (GPT-J's n_embd for hidden_size: the config's own name)
    kwargs = {aliases.get(k, k): TINY[k] for k in keys if hasattr(base, k)}
    if keys == tuple(TINY):
        kwargs.update({k: v for k, v in FAMILY.items() if k in vars(base) and k not in kwargs})
    if hasattr(base, "qk_rope_head_dim"):  # multi-head latent attention: head_dim is the rotary part's,
        kwargs.pop("head_dim", None)  # and as many kv heads as query heads
        kwargs["num_key_value_heads"] = kwargs.get("num_attention_heads", 4)
    cfg = transformers.AutoConfig.for_model(model_type, **kwargs)
    for k in ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id"):
        v = getattr(cfg, k, None)
        if isinstance(v, int) and v >= cfg.vocab_size:
            setattr(cfg, k, 0)
    if isinstance(getattr(cfg, "layer_types", None), list):
        try:
            cfg.layer_types = cfg.layer_types[: cfg.num_hidden_layers]
        except AttributeError:  # a property derived from other fields
            pass
    return cfg


def one(model_type: str) -> dict:
    """Runs in the child: the whole check for one architecture."""
    import torch
    import transformers

    import dyngraph.torch as dgt

    cls = transformers.MODEL_FOR_CAUSAL_LM_MAPPING._model_mapping[model_type]
    for keys, attention in ((k, a) for k in TIERS for a in ("sdpa", "eager")):
        torch.manual_seed(0)
        try:
            cfg = tiny_config(model_type, keys)
            cfg._attn_implementation = attention  # (sdpa first; eager where a model has no sdpa form)
            cfg.use_cache = False
            model = getattr(transformers, cls)(cfg).eval()
            with torch.no_grad():  # weights a model initializes to zero (a router's gate) would tie every choice
                for p in model.parameters():
                    if p.dim() >= 2 and not p.any():
                        p.normal_(0, 0.02)
            size = sum(p.numel() for p in model.parameters())
            if size > 50_000_000:
                failed = {"status": "model", "detail": f"{size / 1e6:.0f} M parameters after shrinking"}
                continue
            vocab = cfg.vocab_size
            ids = torch.randint(0, vocab, (1, 5))
            with torch.no_grad():
                model(input_ids=ids)
            break
        except Exception as e:  # noqa: BLE001 - the model or its config, not dyngraph
            failed = {"status": "model", "detail": f"{type(e).__name__}: {e}"[:300]}
    else:
        return failed
    # a named range first; where the model's code guards seq (chunked scans pad to a multiple), AUTO
    for seq in (torch.export.Dim("seq", min=1, max=128), torch.export.Dim.AUTO):
        try:
            ep = torch.export.export(model, (), {"input_ids": ids}, dynamic_shapes={"input_ids": {1: seq}},
                                     strict=False)
            break
        except Exception as e:  # noqa: BLE001
            failed = {"status": "export", "detail": f"{type(e).__name__}: {e}"[:300]}
    else:
        return failed
    length = next(n.meta["val"].shape[1] for n in ep.graph.nodes if n.op == "placeholder" and n.name == "input_ids")
    if str(length).isdigit():  # (an int, or a SymInt torch pinned to one value)
        return {"status": "export", "detail": f"torch.export specialized the length to {length}"}
    t0 = time.perf_counter()
    try:
        run = dgt.compile(ep, engine=1)
    except Exception as e:  # noqa: BLE001
        return {"status": "compile", "detail": f"{type(e).__name__}: {e}"[:600]}
    compile_s = time.perf_counter() - t0
    import dyngraph as dg

    worst, ran = 0.0, []
    try:
        for n in LENGTHS:
            x = torch.randint(0, vocab, (1, n))
            with torch.no_grad():
                want = model(input_ids=x).logits
            try:
                got = run(input_ids=x)
            except dg.ShapeError as e:  # a length the export's range or guards leave out (AUTO may start
                if "outside its range" in str(e) or "fail a condition torch.export traced" in str(e):  # it at 2)
                    continue
                raise
            worst = max(worst, (got["logits"].float() - want.float()).abs().max().item())
            ran.append(n)
    except Exception as e:  # noqa: BLE001
        return {"status": "run", "detail": f"{type(e).__name__}: {e}"[:600]}
    if len(ran) < 2:
        return {"status": "run", "detail": f"only lengths {ran} of {LENGTHS} in the exported range"}
    fallbacks = sorted({str(t) for _, t, _ in run.fallbacks})
    reasons = {str(t): why for _, t, why in run.fallbacks}  # (one node's per op)
    status = "mismatch" if not worst <= ATOL else ("fallback" if fallbacks else "ok")
    return {"status": status, "max_abs": worst, "fallbacks": fallbacks, "reasons": reasons, "lengths": ran,
            "partitions": len(run.compiled_partitions), "compile_s": round(compile_s, 2)}


def child(model_type: str, timeout: float) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", TRANSFORMERS_VERBOSITY="error", HF_HUB_OFFLINE="1")
    cmd = [sys.executable, __file__, "--child", model_type]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "detail": f"over {timeout:.0f} s"}
    for line in reversed(p.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    return {"status": "crash", "detail": f"exit {p.returncode}: {p.stderr[-400:]}"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--child")
    ap.add_argument("--only", help="comma-separated model types")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--json", help="write every row here too")
    a = ap.parse_args()
    if a.child:
        print(json.dumps(one(a.child)), flush=True)
        return 0
    from transformers.models.auto import modeling_auto

    types = a.only.split(",") if a.only else sorted(modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)
    rows = {}
    with ThreadPoolExecutor(a.jobs) as pool:
        for t, r in zip(types, pool.map(lambda t: child(t, a.timeout), types)):
            rows[t] = r
            extra = r.get("detail") or ", ".join(r.get("fallbacks", [])) or f"max |diff| {r['max_abs']:.2e}"
            print(f"{t:32} {r['status']:9} {extra}", flush=True)
    counts = {}
    for r in rows.values():
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    print(" ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
