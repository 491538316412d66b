"""dyngraph.torch.compile(weight_type=...) per parameter: glob patterns on
state-dict names, the first that matches decides, the rest stays f32."""

import pytest

torch = pytest.importorskip("torch", minversion="2.5")
transformers = pytest.importorskip("transformers")

import dyngraph as dg  # noqa: E402
import dyngraph.torch as dgt  # noqa: E402


@pytest.fixture(scope="module")
def tiny_llama():
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    model = transformers.LlamaForCausalLM(cfg).eval()
    ids = torch.randint(0, 128, (1, 8))
    seq = torch.export.Dim("seq", min=1, max=32)
    with torch.no_grad():
        ep = torch.export.export(model, (), {"input_ids": ids, "use_cache": False},
                                 dynamic_shapes={"input_ids": {1: seq}, "use_cache": None}, strict=False)
    return model, ep


def storage_by_kind(run):
    (cp,) = run.compiled_partitions
    out = {}
    for t in cp.program.tensors:
        if t.property is dg.CONSTANT and t.dtype.is_float and t.name:
            kind = "mlp" if "_mlp_" in t.name else "attn" if "_self_attn_" in t.name else "other"
            out.setdefault(kind, set()).add(t.storage)
    return out


def test_patterns_choose_per_parameter(tiny_llama):
    model, ep = tiny_llama
    run = dgt.compile(ep, weight_type={"model.layers.*.mlp.*": "q4_0", "model.layers.*": "q8_0"}, engine=1)
    st = storage_by_kind(run)
    assert st["mlp"] == {"q4_0"} and st["attn"] == {"q8_0"}
    assert "q4_0" not in st["other"] and "q8_0" not in st["other"]  # embeddings, norms: no pattern, f32
    ids = torch.randint(0, 128, (1, 11))
    with torch.no_grad():
        want = model(input_ids=ids, use_cache=False).logits
    got = run(input_ids=ids, use_cache=False).logits
    assert (got - want).abs().max() < 0.1 * want.abs().max()  # quantized layers: close, not equal
    assert (got - want).abs().max() > 1e-5  # and really quantized


def test_a_pattern_that_matches_nothing_is_an_error(tiny_llama):
    _, ep = tiny_llama
    with pytest.raises(dg.CompileError, match=r"patterns \['decoder\.\*'\] match no float parameter"):
        dgt.compile(ep, weight_type={"decoder.*": "q8_0"}, engine=1)


def test_an_unknown_type_is_an_error(tiny_llama):
    _, ep = tiny_llama
    with pytest.raises(dg.CompileError, match="weight_type maps parameter name patterns"):
        dgt.compile(ep, weight_type={"*": "int3"}, engine=1)
