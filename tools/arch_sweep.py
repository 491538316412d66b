"""Every causal-LM (or masked-LM, seq2seq-LM, vision, CTC speech) architecture transformers
ships, tiny and random, through dyngraph.torch: what converts whole, what falls back, what
fails, what differs.

    PYTHONPATH=api python tools/arch_sweep.py [--task causal-lm] [--jobs 2] [--only llama,gpt2]
                                              [--timeout 300] [--json out.json]

Each architecture runs in a subprocess of its own (a crash or a hang costs
one row): its config from ``AutoConfig.for_model`` shrunk to 2 layers of
width 64 (4 heads, 2 kv heads, 4 experts where it has them, a 256-token
vocabulary), with sdpa attention (eager where the model has no sdpa form), weights a
model leaves at zero drawn at random (a zero router ties every choice),
exported with a dynamic sequence length (``use_cache=False``; torch's AUTO
where the model's code guards the length), compiled once, and its logits
compared with eager PyTorch at 1, 7 and 30 tokens (those in the exported
range; f32, 1e-4 absolute). ``--task masked-lm`` does the same for encoders;
``--task seq2seq-lm`` for encoder-decoders (an attention mask of ones, and
``decoder_input_ids`` of a dynamic length of their own, n // 3 + 1 at n tokens);
``--task image-classification`` builds vision models at 32 x 32 pixels (2 stages of
widths 16 and 32 for the convolutional ones, weights drawn with variance 1 / fan-in), exports a
dynamic batch and compares at batches of 1, 2 and 5, within 1e-4 of the largest output
(some stacks' outputs are far below 1), and ``--task semantic-segmentation``,
``depth-estimation`` and ``object-detection`` do the same for dense vision
heads (their logits, depth map, or first output); ``--task ctc`` builds speech models on raw audio
(their 7-layer feature encoder 32 channels wide), exports a dynamic sample count and
compares at 1359, 1999 and 4559 samples, likewise. One line per architecture:

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
              encoder_ffn_dim=128, decoder_ffn_dim=128,  # BART-style decoders
              d_ff=128, num_layers=2, num_encoder_layers=2, num_decoder_layers=2, d_kv=16,  # T5, ProphetNet
              block_sizes=[1, 1])  # Funnel (2 blocks: the sequence pooled once)
# what one model needs set that its defaults leave unset
PER_MODEL = {"esm": dict(pad_token_id=1), "xmod": dict(default_language="en_XX")}
# vision models: small images, patches and stages (only the keys a config has are set)
TINY_IMAGE = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, image_size=32,
                  patch_size=8, num_channels=3, num_labels=3, embed_dim=16, hidden_sizes=[16, 32], depths=[1, 1],
                  num_heads=[2, 4], embedding_size=16, window_size=2, projection_dim=32)
# speech models on raw audio: the default 7-layer feature encoder (a frame per 320 samples), narrow
TINY_AUDIO = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  conv_dim=[32] * 7, num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4, vocab_size=32,
                  tdnn_dim=[32] * 5, xvector_output_dim=32, proj_codevector_dim=32,
                  codevector_dim=32, classifier_proj_size=32)
LENGTHS = (1, 7, 30)
SAMPLES = (1359, 1999, 4559)  # (SEW exports for an odd frame count, as traced)
BATCHES = (1, 2, 5)
ATOL = 1e-4


class Task:
    """What a sweep builds and feeds: the model classes, the input, its dynamic dimension
    (index, name and range) and the sizes compared; ``decoder``: a second input,
    ``decoder_input_ids``, of a dynamic length of its own (about a third of the input's)."""

    def __init__(self, mapping, tiny, input_name, dim, sizes, name="seq", least=1, most=128, trace=5,
                 decoder=False):
        self.mapping, self.tiny, self.input_name, self.dim, self.sizes = mapping, tiny, input_name, dim, sizes
        self.name, self.least, self.most, self.trace = name, least, most, trace  # (trace: the size exported at)
        self.decoder = decoder

    def example(self, cfg, n):
        """The inputs, by name, at size ``n``."""
        import torch

        if self.input_name == "input_ids":
            x = torch.randint(0, cfg.vocab_size, (1, n))
        elif self.input_name == "input_values":  # raw audio
            x = torch.randn(1, n)
        else:
            side = getattr(cfg, "image_size", 32)
            side = side[0] if isinstance(side, (list, tuple)) else side
            x = torch.randn(n, getattr(cfg, "num_channels", 3), side, side)
        if not self.decoder:
            return {self.input_name: x}
        return {self.input_name: x, "attention_mask": torch.ones_like(x),  # (LongT5's traced path wants one)
                "decoder_input_ids": torch.randint(0, cfg.vocab_size, (1, n // 3 + 1))}

    def dynamic(self, auto=False):
        """torch.export's dynamic_shapes: named ranges, or torch's AUTO everywhere."""
        import torch

        Dim = torch.export.Dim
        seq = Dim.AUTO if auto else Dim(self.name, min=self.least, max=self.most)
        shapes = {self.input_name: {self.dim: seq}}
        if self.decoder:
            shapes["attention_mask"] = {1: seq}
            shapes["decoder_input_ids"] = {1: Dim.AUTO if auto else Dim("dec", min=1, max=self.most)}
        return shapes


TASKS = {
    "causal-lm": Task("MODEL_FOR_CAUSAL_LM_MAPPING", TINY, "input_ids", 1, LENGTHS),
    "masked-lm": Task("MODEL_FOR_MASKED_LM_MAPPING", TINY, "input_ids", 1, LENGTHS),
    "seq2seq-lm": Task("MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING", TINY, "input_ids", 1, LENGTHS, decoder=True),
    "image-classification": Task("MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING", TINY_IMAGE, "pixel_values", 0, BATCHES,
                                 "batch", 1, 16, trace=2),
    "semantic-segmentation": Task("MODEL_FOR_SEMANTIC_SEGMENTATION_MAPPING", TINY_IMAGE, "pixel_values", 0, BATCHES,
                                  "batch", 1, 16, trace=2),
    "depth-estimation": Task("MODEL_FOR_DEPTH_ESTIMATION_MAPPING", TINY_IMAGE, "pixel_values", 0, BATCHES,
                             "batch", 1, 16, trace=2),
    "object-detection": Task("MODEL_FOR_OBJECT_DETECTION_MAPPING", TINY_IMAGE, "pixel_values", 0, BATCHES,
                             "batch", 1, 16, trace=2),
    "ctc": Task("MODEL_FOR_CTC_MAPPING", TINY_AUDIO, "input_values", 1, SAMPLES, "samples", 400, 16000, trace=1999),
}


# tried in turn until the model builds and runs eagerly
TIERS = (tuple(TINY), tuple(k for k in TINY if k != "head_dim"),
         ("num_hidden_layers", "vocab_size", "num_experts", "num_local_experts", "n_routed_experts"))


def tiny_config(model_type: str, keys=tuple(TINY), tiny=TINY):
    import transformers

    base = transformers.AutoConfig.for_model(model_type)
    aliases = getattr(base, "attribute_map", {}) or {}  # (GPT-J's n_embd for hidden_size: the config's own name)
    kwargs = {aliases.get(k, k): tiny[k] for k in keys if k in tiny and hasattr(base, k)}
    if tiny is not TINY:
        for k, v in list(kwargs.items()):  # stages: up to as many as the model has; conv layers: as many
            have = getattr(base, k)
            if isinstance(v, list) and isinstance(have, (list, tuple)):
                kwargs[k] = (v * len(have))[: len(have)] if len(set(v)) == 1 else v[: len(have)]
    elif keys == tuple(TINY):
        kwargs.update({k: v for k, v in FAMILY.items() if k in vars(base) and k not in kwargs})
    if "num_encoder_layers" in kwargs or "block_sizes" in kwargs:  # (ProphetNet, Funnel refuse num_hidden_layers)
        kwargs.pop("num_hidden_layers", None)
    kwargs.update(PER_MODEL.get(model_type, {}))
    if hasattr(base, "qk_rope_head_dim"):  # multi-head latent attention: head_dim is the rotary part's,
        kwargs.pop("head_dim", None)  # and as many kv heads as query heads
        kwargs["num_key_value_heads"] = kwargs.get("num_attention_heads", 4)
    cfg = transformers.AutoConfig.for_model(model_type, **kwargs)
    for k in ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id"):
        v = getattr(cfg, k, None)
        if isinstance(v, int) and v >= getattr(cfg, "vocab_size", v + 1):
            setattr(cfg, k, 0)
    if isinstance(getattr(cfg, "layer_types", None), list):
        try:
            cfg.layer_types = cfg.layer_types[: cfg.num_hidden_layers]
        except AttributeError:  # a property derived from other fields
            pass
    return cfg


def one(model_type: str, task: Task) -> dict:
    """Runs in the child: the whole check for one architecture."""
    import torch
    import transformers

    import dyngraph.torch as dgt

    cls = getattr(transformers, task.mapping)._model_mapping[model_type]
    cls = cls[0] if isinstance(cls, (list, tuple)) else cls  # (DeiT: with and without its teacher)
    tiers = TIERS if task.tiny is TINY else (tuple(task.tiny), ("num_hidden_layers", "num_labels"), ())
    for keys, attention in ((k, a) for k in tiers for a in ("sdpa", "eager")):
        torch.manual_seed(0)
        try:
            cfg = tiny_config(model_type, keys, task.tiny)
            cfg._attn_implementation = attention  # (sdpa first; eager where a model has no sdpa form)
            cfg.use_cache = False
            with torch.device("meta"):  # counted before it is built: a config not shrunk (nested ones) is GBs
                size = sum(p.numel() for p in getattr(transformers, cls)(cfg).parameters())
            if size > 50_000_000:
                failed = {"status": "model", "detail": f"{size / 1e6:.0f} M parameters after shrinking"}
                continue
            model = getattr(transformers, cls)(cfg).eval()
            with torch.no_grad():  # weights a model initializes to zero (a router's gate) would tie every choice
                for p in model.parameters():
                    if p.dim() >= 2 and not p.any():
                        p.normal_(0, 0.02)
                    elif p.dim() >= 2 and task.tiny is not TINY:  # (deep tiny vision stacks: outputs near 0 else)
                        p.normal_(0, p[0].numel() ** -0.5)  # (He's 2 / fan_in blows LeViT up past f32's precision)
            if getattr(getattr(transformers, cls), "main_input_name", task.input_name) != task.input_name:
                return {"status": "model", "detail": f"takes {getattr(transformers, cls).main_input_name}, "
                                                     f"not {task.input_name}"}
            ids = task.example(cfg, task.trace)
            with torch.no_grad():
                model(**ids)
            break
        except Exception as e:  # noqa: BLE001 - the model or its config, not dyngraph
            failed = {"status": "model", "detail": f"{type(e).__name__}: {e}"[:300]}
    else:
        return failed
    # a named range first; where the model's code guards seq (chunked scans pad to a multiple), AUTO
    name = task.input_name
    for auto in (False, True):
        try:
            ep = torch.export.export(model, (), ids, dynamic_shapes=task.dynamic(auto), strict=False)
            break
        except Exception as e:  # noqa: BLE001
            failed = {"status": "export", "detail": f"{type(e).__name__}: {e}"[:300]}
    else:
        return failed
    length = next(n.meta["val"].shape[task.dim] for n in ep.graph.nodes if n.op == "placeholder" and n.name == name)
    if str(length).isdigit():  # (an int, or a SymInt torch pinned to one value)
        return {"status": "export", "detail": f"torch.export specialized the dynamic size to {length}"}
    t0 = time.perf_counter()
    try:
        run = dgt.compile(ep, engine=1)
    except Exception as e:  # noqa: BLE001
        return {"status": "compile", "detail": f"{type(e).__name__}: {e}"[:600]}
    compile_s = time.perf_counter() - t0
    import dyngraph as dg

    worst, scale, ran = 0.0, 0.0, []
    try:
        for n in task.sizes:
            x = task.example(cfg, n)
            with torch.no_grad():
                want = _first(model(**x))
            try:
                got = run(**x)
            except dg.ShapeError as e:  # a length the export's range or guards leave out (AUTO may start
                if "outside its range" in str(e) or "fail a condition torch.export traced" in str(e):  # it at 2)
                    continue
                raise
            worst = max(worst, (_first(got).float() - want.float()).abs().max().item())
            scale = max(scale, want.float().abs().max().item())
            ran.append(n)
    except Exception as e:  # noqa: BLE001
        return {"status": "run", "detail": f"{type(e).__name__}: {e}"[:600]}
    if len(ran) < 2:
        return {"status": "run", "detail": f"only sizes {ran} of {task.sizes} in the exported range"}
    fallbacks = sorted({str(t) for _, t, _ in run.fallbacks})
    reasons = {str(t): why for _, t, why in run.fallbacks}  # (one node's per op)
    limit = ATOL if task.tiny is TINY else ATOL * scale  # (tiny vision stacks' outputs may be far below 1)
    status = "mismatch" if not worst <= limit else ("fallback" if fallbacks else "ok")
    return {"status": status, "max_abs": worst, "max_out": scale, "fallbacks": fallbacks, "reasons": reasons, "lengths": ran,
            "partitions": len(run.compiled_partitions), "compile_s": round(compile_s, 2)}


def _first(out):
    """The logits, or the first output of a model that has none (a backbone's features)."""
    logits = out["logits"] if "logits" in out else None
    return logits if logits is not None else next(v for v in out.values() if v is not None)


def child(model_type: str, task: str, timeout: float) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", TRANSFORMERS_VERBOSITY="error", HF_HUB_OFFLINE="1")
    cmd = [sys.executable, __file__, "--child", model_type, "--task", task]
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
    ap.add_argument("--task", choices=sorted(TASKS), default="causal-lm")
    ap.add_argument("--only", help="comma-separated model types")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--json", help="write every row here too")
    a = ap.parse_args()
    if a.child:
        print(json.dumps(one(a.child, TASKS[a.task])), flush=True)
        return 0
    from transformers.models.auto import modeling_auto

    types = a.only.split(",") if a.only else sorted(getattr(modeling_auto, TASKS[a.task].mapping + "_NAMES"))
    rows = {}
    with ThreadPoolExecutor(a.jobs) as pool:
        for t, r in zip(types, pool.map(lambda t: child(t, a.task, a.timeout), types)):
            rows[t] = r
            extra = r.get("detail") or ", ".join(r.get("fallbacks", [])) or \
                f"max |diff| {r['max_abs']:.2e} (outputs up to {r['max_out']:.1e})"
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
