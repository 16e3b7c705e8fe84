"""Attention backends: config._attn_implementation picks eager, sdpa, flex_attention or any registered function,
and every one gives the model's numbers with every position encoding and mask (float32, tolerance 1e-5)."""

import pytest
import torch
from transformers import AttentionInterface, AutoModelForCausalLM
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from modeling import ScratchTransformerForCausalLM
from support.tiny_models import PAD, POSITION_ENCODINGS, random_ids, tiny_causal_lm, tiny_seq2seq

CALLS: list[dict] = []


def recorded_sdpa(module, query, key, value, attention_mask, **kwargs):
    """A backend of our own, registered by name like any third-party one: SDPA, noting what it was given."""
    CALLS.append(dict(mask=attention_mask, is_causal=kwargs.get("is_causal"), position_bias=kwargs.get("position_bias"),
                      query=tuple(query.shape), key=tuple(key.shape)))
    return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)


AttentionInterface.register("recorded_sdpa", recorded_sdpa)
AttentionMaskInterface.register("recorded_sdpa", sdpa_mask)
BACKENDS = ["sdpa", "recorded_sdpa"]  # flex_attention: CUDA only (test_flex_attention_is_refused_on_the_cpu)


def left_padded_batch():
    """Two rows: 4 pads then 8 tokens, and 12 tokens."""
    ids = random_ids(2, 12)
    ids[0, :4] = PAD
    mask = torch.ones_like(ids)
    mask[0, :4] = 0
    return ids, mask


def build(kind: str, position_encoding: str, backend: str):
    model = (tiny_causal_lm if kind == "causal" else tiny_seq2seq)(position_encoding)
    model.set_attn_implementation(backend)
    return model


def logits(model, ids, mask, **kwargs):
    with torch.no_grad():
        if model.config.is_encoder_decoder:  # padded source; the target reads the same ids, unpadded
            return model(ids, attention_mask=mask, decoder_input_ids=ids[:, 4:].contiguous(), **kwargs).logits
        return model(ids, attention_mask=mask, **kwargs).logits[mask.bool()]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", ["causal", "seq2seq"])
def test_every_backend_matches_the_explicit_softmax(kind, backend):
    """Every encoding (RoPE and ALiBi act inside attention), with padding: left-padded causal rows, a padded source."""
    ids, mask = left_padded_batch()
    for position_encoding in POSITION_ENCODINGS:
        expected = logits(build(kind, position_encoding, "eager"), ids, mask)
        actual = logits(build(kind, position_encoding, backend), ids, mask)
        torch.testing.assert_close(actual, expected, rtol=0, atol=1e-5, msg=f"{backend}, {position_encoding}")


@pytest.mark.parametrize("backend", ["eager", "sdpa", "flex_attention"])
def test_from_pretrained_takes_attn_implementation(tmp_path, backend):
    tiny_causal_lm("alibi").save_pretrained(tmp_path)
    model = AutoModelForCausalLM.from_pretrained(tmp_path, attn_implementation=backend)
    assert model.config._attn_implementation == backend
    assert all(m.config._attn_implementation == backend for m in model.modules() if hasattr(m, "qkv_proj"))


def test_a_registered_backend_gets_the_queries_and_the_alibi_bias():
    model = build("causal", "alibi", "recorded_sdpa")
    ids, mask = left_padded_batch()
    CALLS.clear()
    logits(model, ids, mask)
    assert len(CALLS) == 2  # one per layer
    call = CALLS[0]
    assert call["query"] == call["key"] == (2, 4, 12, 8) and call["is_causal"] is True
    assert call["position_bias"].shape == (2, 4, 12, 12)  # -slope_h |i - j|: head 0's slope is 2^-2
    assert call["position_bias"][1, 0, 5, 2].item() == pytest.approx(-0.25 * 3)
    assert call["mask"].dtype == torch.bool and not call["mask"][0, 0, 6, 2]  # padding key hidden from a real query


def test_without_padding_sdpa_gets_no_mask_and_uses_its_causal_path():
    """Training batches are unpadded: no (T, S) bias is built, SDPA's is_causal does the masking."""
    model = build("causal", "rope", "recorded_sdpa")
    CALLS.clear()
    with torch.no_grad():
        model(random_ids(2, 12))
    assert [call["mask"] for call in CALLS] == [None, None]
    assert all(call["is_causal"] for call in CALLS)


def test_encoder_and_cross_attention_are_not_causal():
    model = build("seq2seq", "none", "recorded_sdpa")
    CALLS.clear()
    with torch.no_grad():
        model(random_ids(1, 7), decoder_input_ids=random_ids(1, 5, seed=2))
    kinds = [(call["query"][2], call["key"][2], call["is_causal"]) for call in CALLS]
    # encoder layers, then per decoder layer: self-attention, cross-attention over the 7 source tokens
    assert kinds == [(7, 7, False)] * 2 + [(5, 5, True), (5, 7, False)] * 2


@pytest.mark.parametrize("kind", ["causal", "seq2seq"])
def test_flex_attention_is_refused_on_the_cpu(kind):
    """torch 2.13's compiled flex kernel on the CPU gave wrong values (NaN, once) for the second row of a batch once a
    second query/key length was compiled (seq2seq: encoder, decoder, cross-attention): refused, naming what works."""
    ids, mask = left_padded_batch()
    with pytest.raises(ValueError, match="'flex_attention' runs on CUDA only.*use 'sdpa' \\(the default\\) or 'eager'"):
        logits(build(kind, "rope", "flex_attention"), ids, mask)


@pytest.mark.parametrize("backend", ["eager", "sdpa", "flex_attention"])
def test_output_attentions_returns_the_weights_on_every_backend(backend):
    """The weights come from the explicit softmax whatever the backend, so every backend can return them."""
    model = build("causal", "alibi", backend)
    ids, mask = left_padded_batch()
    with torch.no_grad():
        out = model(ids, attention_mask=mask, output_attentions=True)
    assert [w.shape for w in out.attentions] == [(2, 4, 12, 12)] * 2
    torch.testing.assert_close(out.logits[mask.bool()], logits(build("causal", "alibi", "eager"), ids, mask), rtol=0, atol=1e-5)
    for weights in out.attentions:
        assert weights[1].triu(1).abs().max().item() == 0.0  # causal
        assert weights[0, :, 4:, :4].abs().max().item() == 0.0  # real tokens never attend to padding


def test_supports_flags_say_which_backends_run():
    assert ScratchTransformerForCausalLM._supports_sdpa and ScratchTransformerForCausalLM._supports_flex_attn
    assert ScratchTransformerForCausalLM._supports_attention_backend and ScratchTransformerForCausalLM._can_compile_fullgraph
    assert not ScratchTransformerForCausalLM._supports_flash_attn  # flash attention cannot add ALiBi's per-head bias
    with pytest.raises(ValueError, match="does not support Flash Attention 2"):
        tiny_causal_lm().set_attn_implementation("flash_attention_2")
    with pytest.raises(ValueError, match='"no_such_backend"` is not supported'):
        tiny_causal_lm().set_attn_implementation("no_such_backend")


@pytest.mark.parametrize("backend", ["eager", "sdpa"])
def test_torch_style_transformer_runs_on_eager_and_sdpa_and_refuses_others(backend):
    from modeling import Transformer, ScratchTransformerConfig

    config = ScratchTransformerConfig(vocab_size=1, d_model=16, n_heads=2, n_layers=1, n_encoder_layers=1, d_ff=32,
                                      dropout=0.0, is_encoder_decoder=True, position_encoding="alibi",
                                      attn_implementation=backend)
    torch.manual_seed(0)
    model = Transformer(config=config).eval()
    torch.manual_seed(0)
    reference = Transformer(config=ScratchTransformerConfig(**{**config.to_dict(), "attn_implementation": "eager"})).eval()
    src, tgt = torch.randn(2, 5, 16), torch.randn(2, 4, 16)
    padding = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])
    kwargs = dict(tgt_mask=Transformer.generate_square_subsequent_mask(4), src_key_padding_mask=padding,
                  memory_key_padding_mask=padding)
    with torch.no_grad():
        torch.testing.assert_close(model(src, tgt, **kwargs), reference(src, tgt, **kwargs), rtol=0, atol=1e-5)
    config = ScratchTransformerConfig(vocab_size=1, d_model=16, n_heads=2, is_encoder_decoder=True,
                                      attn_implementation="flex_attention")
    with pytest.raises(ValueError, match="Transformer runs attention with sdpa or eager; got .*'flex_attention'"):
        Transformer(config=config)
