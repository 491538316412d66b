"""A model file of SmolLM2-135M's architecture and tokenizer with random weights,
for speed runs on a machine that cannot hold the real file (a lent GPU machine
takes 64 MiB of carried files; the model package's GGUF is 98 MB).

    python tests/benchmarks/random_gguf.py skeleton SRC.gguf OUT.gguf   # metadata only (~3 MB)
    python tests/benchmarks/random_gguf.py fill SKELETON.gguf OUT-F32.gguf [--seed 0]

`skeleton` keeps every key of SRC (architecture, tokenizer, chat template) and
the names and shapes of its tensors, but no tensor data. `fill` writes an F32
file of those tensors with random values (norm weights near 1, the others
normal with a standard deviation of 0.02, as transformers initializes
Llama), which llama.cpp, transformers and dyngraph.torch.gguf all load;
llama-quantize makes the F16, Q8_0 and Q4_0 files from it. Speed does not
depend on the values; greedy tokens of random weights are near ties, so
devices are compared on logits, not on tokens, with such a file."""

from __future__ import annotations

import argparse
import json

import numpy as np

TENSORS_KEY = "dyngraph.skeleton.tensors"


def _copy_fields(reader, writer, skip=()) -> None:
    import gguf

    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture" or key in skip:
            continue
        vtype = field.types[0]
        sub = field.types[1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(key, field.contents(), vtype, sub_type=sub)


def skeleton(src: str, out: str) -> None:
    import gguf

    r = gguf.GGUFReader(src)
    arch = r.fields["general.architecture"].contents()
    w = gguf.GGUFWriter(out, arch)
    _copy_fields(r, w, skip=("general.file_type", TENSORS_KEY))
    shapes = [[t.name, [int(d) for d in t.shape]] for t in r.tensors]  # ggml order, fastest first
    w.add_string(TENSORS_KEY, json.dumps(shapes))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def fill(skel: str, out: str, seed: int = 0) -> None:
    import gguf

    r = gguf.GGUFReader(skel)
    arch = r.fields["general.architecture"].contents()
    shapes = json.loads(r.fields[TENSORS_KEY].contents())
    w = gguf.GGUFWriter(out, arch)
    _copy_fields(r, w, skip=("general.file_type", TENSORS_KEY))
    w.add_file_type(int(gguf.LlamaFileType.ALL_F32))
    rng = np.random.default_rng(seed)
    for name, ne in shapes:
        shape = tuple(reversed(ne))  # numpy order, slowest first
        if name.endswith("norm.weight"):
            a = 1.0 + 0.02 * rng.standard_normal(shape, dtype=np.float32)
        else:
            a = 0.02 * rng.standard_normal(shape, dtype=np.float32)
        w.add_tensor(name, a.astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("skeleton")
    s.add_argument("src")
    s.add_argument("out")
    f = sub.add_parser("fill")
    f.add_argument("skeleton")
    f.add_argument("out")
    f.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if a.cmd == "skeleton":
        skeleton(a.src, a.out)
    else:
        fill(a.skeleton, a.out, a.seed)


if __name__ == "__main__":
    main()
