"""Helpers for Hugging Face ``transformers`` models.

:class:`StaticCacheLM` wraps a decoder-only causal LM so that it exports with
a static KV cache that the wrapper owns as buffers: ``k_cache_{i}`` and
``v_cache_{i}`` of shape ``[batch, kv_heads, max_cache_len, head_dim]``,
written with ``index_copy_`` at the token positions passed in. Compiled with
:func:`dyngraph.torch.compile`, those buffers become STATE tensors updated in
place: prefill and decode are calls of one compiled program at different
sequence lengths.
"""

from __future__ import annotations

from typing import List, Optional, Sequence

import torch
from transformers.cache_utils import Cache, DynamicLayer, StaticLayer

from ..errors import CompileError, ShapeError
from .export import stack_traces_recorded


class _PositionedLayer(StaticLayer):
    """A cache layer on tensors the wrapper owns, written at given positions.

    transformers builds each layer's attention mask from it: queries at
    ``positions[0]...`` (:meth:`get_seq_length`, a tensor), keys at
    ``0..max_cache_len-1`` (:meth:`StaticLayer.get_mask_sizes`)."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, positions: torch.Tensor):
        super().__init__(max_cache_len=keys.shape[2])
        self.keys, self.values = keys, values
        self.positions = positions
        self.dtype, self.device = keys.dtype, keys.device
        self.batch_size, self.num_heads = keys.shape[:2]
        self.k_head_dim, self.v_head_dim = keys.shape[-1], values.shape[-1]
        self.is_initialized = True

    def update(self, key_states, value_states, *args, **kwargs):
        self.keys.index_copy_(2, self.positions, key_states)
        self.values.index_copy_(2, self.positions, value_states)
        return self.keys, self.values

    def get_seq_length(self):
        return self.positions[0]


class _ShapeProbe(DynamicLayer):
    """A cache layer that only records the shapes and dtype of what it is given."""

    def update(self, key_states, value_states, *args, **kwargs):
        self.shapes = (tuple(key_states.shape), tuple(value_states.shape), key_states.dtype)
        return key_states, value_states


def _kv_shapes(model, num_layers: int):
    """Per layer: (kv heads, key head size, value head size, dtype) of what
    the model writes into its cache, seen by running one token through it:
    the model's own split of heads (multi-query, grouped, Falcon's new
    architecture broadcasting its groups to every head, value heads of
    another size), where config fields name them differently per family."""
    probe = Cache(layer_class_to_replicate=_ShapeProbe)
    with torch.no_grad():
        model(input_ids=torch.zeros((1, 1), dtype=torch.long, device=_device(model)),
              position_ids=torch.zeros((1, 1), dtype=torch.long, device=_device(model)),
              past_key_values=probe, use_cache=True)
    found = [getattr(layer, "shapes", None) for layer in probe.layers]
    if len(found) != num_layers or any(s is None for s in found):
        raise CompileError(f"StaticCacheLM: {type(model).__name__} wrote {sum(s is not None for s in found)} of its "
                           f"{num_layers} layers' keys and values into the cache (layers that share or skip a cache "
                           "are not supported)")
    return [(k[1], k[3], v[3], dtype) for k, v, dtype in found]


def _device(model) -> torch.device:
    return next(model.parameters()).device


class StaticCacheLM(torch.nn.Module):
    """``forward(input_ids [B, S], positions [S]) -> logits [B, S, vocab]``
    (``[B, 1, vocab]`` with ``last_logits_only``: what generation needs, and
    the vocabulary projection of one position instead of S).

    Tokens are written into the cache at ``positions`` (consecutive, as in
    generation) and attend to the cached positions up to their own. The
    masks are the model's own: transformers builds them, in the form the
    model's attention implementation takes (boolean for ``sdpa``, additive
    with the dtype's minimum for ``eager``), per layer type (a sliding window
    on sliding-window layers), from a no-padding mask over the whole cache
    and the cache's offsets (queries at ``positions[0]...``, keys at
    ``0..max_cache_len-1``); ALiBi models build their biases from the same.
    Every layer's cache holds ``max_cache_len`` positions, sliding-window
    layers' too, and is sized as the model writes it: kv heads and head
    sizes seen from one token run through the model at construction.
    Resetting is the caller's: zero the buffers (or, compiled, call the
    program's ``reset()``).
    """

    def __init__(self, model, max_cache_len: int, batch_size: int = 1, dtype: Optional[torch.dtype] = None,
                 last_logits_only: bool = False):
        super().__init__()
        if int(max_cache_len) < 1 or int(batch_size) < 1:
            raise ShapeError(f"StaticCacheLM: max_cache_len ({max_cache_len}) and batch_size ({batch_size}) must be "
                             "at least 1")
        cfg = model.config.get_text_config()
        self.model = model
        self.max_cache_len = int(max_cache_len)
        self.last_logits_only = bool(last_logits_only)  # logits of the last position only: [B, 1, vocab]
        self.num_layers = int(cfg.num_hidden_layers)
        device = _device(model)
        for i, (kv_heads, k_dim, v_dim, probed) in enumerate(_kv_shapes(model, self.num_layers)):
            kv = dict(dtype=dtype or probed, device=device)
            self.register_buffer(f"k_cache_{i}", torch.zeros((batch_size, kv_heads, self.max_cache_len, k_dim), **kv),
                                 persistent=False)
            self.register_buffer(f"v_cache_{i}", torch.zeros((batch_size, kv_heads, self.max_cache_len, v_dim), **kv),
                                 persistent=False)

    def caches(self) -> List[torch.Tensor]:
        return [t for i in range(self.num_layers) for t in (getattr(self, f"k_cache_{i}"), getattr(self, f"v_cache_{i}"))]

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        layers = [
            _PositionedLayer(getattr(self, f"k_cache_{i}"), getattr(self, f"v_cache_{i}"), positions)
            for i in range(self.num_layers)
        ]
        # No padding: every position of the cache holds (or will hold) a token of the sequence. transformers
        # builds each layer's mask from it and the cache's offsets, in the form the model's attention takes;
        # ALiBi models (Bloom, Falcon's ALiBi variant) build their biases from it, over the whole cache.
        no_padding = torch.ones((input_ids.shape[0], self.max_cache_len), dtype=torch.long, device=input_ids.device)
        out = self.model(
            input_ids=input_ids,
            position_ids=positions[None, :],
            attention_mask=no_padding,
            past_key_values=Cache(layers=layers),
            use_cache=True,
            **({"logits_to_keep": 1} if self.last_logits_only else {}),
        )
        return out.logits


def load_gguf_causal_lm(path: str, dtype: torch.dtype = torch.float32):
    """(model, tokenizer) of a GGUF file, with transformers' own GGUF reader
    (weights dequantized to ``dtype``); unlike ``from_pretrained(gguf_file=)``
    it does not need ``accelerate``."""
    import os

    import transformers
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    folder, name = os.path.split(os.path.abspath(path))
    config = transformers.AutoConfig.from_pretrained(folder, gguf_file=name)
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=dtype).eval()
    tensors = load_gguf_checkpoint(path, return_tensors=True, model_to_load=model)["tensors"]
    missing, unexpected = model.load_state_dict(tensors, strict=False)
    tied = {"lm_head.weight"} if getattr(config, "tie_word_embeddings", False) else set()
    if set(missing) - tied or unexpected:
        raise ValueError(f"{name}: missing weights {sorted(set(missing) - tied)}, unexpected {sorted(unexpected)}")
    model.tie_weights()
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder, gguf_file=name)
    return model, tokenizer


def export_static_cache_lm(lm: StaticCacheLM, example_length: int = 4, max_length: Optional[int] = None,
                           batch_size: int = 1, stack_traces: bool = False):
    """``torch.export`` a :class:`StaticCacheLM` with a dynamic sequence length
    (1 to ``max_length``, at most the cache length).

    The nodes carry no ``stack_trace`` unless ``stack_traces``: recording the
    Python stack of each of a model's thousands of traced ops took an eighth
    of the export's time (SmolLM2-135M on a Zen 1, the first export in a
    process: 13.7-13.9 s with them, 11.6-12.1 s without), and dyngraph does
    not read them (``torch.fx.config.do_not_emit_stack_traces``,
    set for the export only)."""
    max_length = min(max_length or lm.max_cache_len, lm.max_cache_len)
    seq = torch.export.Dim("seq", min=1, max=max_length)
    ids = torch.zeros((batch_size, example_length), dtype=torch.long)
    pos = torch.arange(example_length)
    with torch.no_grad(), stack_traces_recorded(stack_traces):
        return torch.export.export(lm, (ids, pos), dynamic_shapes=({1: seq}, {0: seq}), strict=False)


def greedy(run, prompt: Sequence[int], max_new_tokens: int, start: int = 0) -> List[int]:
    """Greedy decoding with a compiled (or eager) StaticCacheLM: prefill the
    prompt at positions ``start...``, then one token per call."""
    ids = torch.tensor([list(prompt)], dtype=torch.long)
    logits = run(ids, torch.arange(start, start + ids.shape[1]))
    pos = start + ids.shape[1]
    out: List[int] = []
    for _ in range(max_new_tokens):
        nxt = int(logits[0, -1].argmax())
        out.append(nxt)
        if len(out) == max_new_tokens:
            break
        logits = run(torch.tensor([[nxt]]), torch.tensor([pos]))
        pos += 1
    return out
