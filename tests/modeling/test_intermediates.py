"""record(): the model's own numbers of one forward pass, step by step; edits: removing heads."""

import pytest
import torch

from modeling import Site, ablate_heads, record
from modeling.modeling_scratch_transformer import apply_rope
from support.tiny_models import POSITION_ENCODINGS, random_ids, tiny_causal_lm, tiny_seq2seq


def run(model, ids, **kwargs):
    if model.config.is_encoder_decoder:
        kwargs.setdefault("decoder_input_ids", ids[:, :7])
    with torch.no_grad():
        return model(ids, use_cache=False, **kwargs)


def recorded(model, ids, edits=None, keep=None, **kwargs):
    """(output, recording) of one forward pass inside ``record(keep, edits)``."""
    with record(keep, edits) as recording:
        out = run(model, ids, **kwargs)
    return out, recording


def stacks(model, out, recording):
    """(stack record, hidden states, self-attention weights, cross-attention weights) per stack."""
    if not model.config.is_encoder_decoder:
        return {"decoder": (recording.decoder, out.hidden_states, out.attentions, None)}
    return {"encoder": (recording.encoder, out.encoder_hidden_states, out.encoder_attentions, None),
            "decoder": (recording.decoder, out.decoder_hidden_states, out.decoder_attentions, out.cross_attentions)}


MODELS = [("causal", pe) for pe in POSITION_ENCODINGS] + [("seq2seq", pe) for pe in POSITION_ENCODINGS]


def build(kind, position_encoding):
    return (tiny_causal_lm if kind == "causal" else tiny_seq2seq)(position_encoding)


@pytest.mark.parametrize("kind, position_encoding", MODELS)
def test_intermediates_are_the_models_own_numbers(kind, position_encoding):
    model, ids = build(kind, position_encoding), random_ids(2, 12)
    plain = run(model, ids)
    out, recording = recorded(model, ids, output_attentions=True, output_hidden_states=True)
    torch.testing.assert_close(out.logits, plain.logits, rtol=0, atol=1e-5)  # explicit softmax vs fused SDPA
    for name, (record, hidden, self_weights, cross_weights) in stacks(model, out, recording).items():
        torch.testing.assert_close(record.embeddings.sum, hidden[0], rtol=0, atol=0)
        if position_encoding in ("sinusoidal", "learned"):
            torch.testing.assert_close(record.embeddings.sum, record.embeddings.token + record.embeddings.position)
        else:
            assert record.embeddings.position is None
        assert (record.rotary is not None) == (position_encoding == "rope")
        for i, layer in enumerate(record.layers):
            pairs = [(layer.self_attention, self_weights[i])]
            if cross_weights is not None:
                pairs.append((layer.cross_attention, cross_weights[i]))
            for attention, weights in pairs:
                torch.testing.assert_close(attention.weights, weights, rtol=0, atol=0)
                torch.testing.assert_close(attention.scores.softmax(-1), attention.weights, rtol=0, atol=0)
                q = attention.query if attention.query_rotated is None else attention.query_rotated
                k = attention.key if attention.key_rotated is None else attention.key_rotated
                scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
                if attention.bias is not None:
                    scores = scores + attention.bias
                torch.testing.assert_close(attention.scores, scores, rtol=0, atol=1e-6)
                torch.testing.assert_close(attention.heads, attention.weights @ attention.value, rtol=0, atol=1e-6)
                torch.testing.assert_close(attention.concatenated, attention.heads.transpose(1, 2).flatten(2), rtol=0, atol=0)
            # pre-norm Add & Norm: the residual stream after the sublayer is x + sublayer(LN(x))
            torch.testing.assert_close(layer.after_self_attention, layer.input + layer.self_attention.output, rtol=0, atol=0)
            if i < len(record.layers) - 1:
                torch.testing.assert_close(layer.output, hidden[i + 1], rtol=0, atol=0)
        torch.testing.assert_close(record.output, hidden[-1], rtol=0, atol=0)


def test_rope_intermediates_hold_q_and_k_before_and_after_rotation():
    model, ids = tiny_causal_lm("rope"), random_ids(1, 9)
    record = recorded(model, ids)[1].decoder
    attention = record.layers[1].self_attention
    torch.testing.assert_close(attention.query_rotated, apply_rope(attention.query, *record.rotary), rtol=0, atol=0)
    torch.testing.assert_close(attention.key_rotated, apply_rope(attention.key, *record.rotary), rtol=0, atol=0)
    assert not torch.equal(attention.query, attention.query_rotated)


def every_sublayer(kind: str) -> list[tuple[str, str]]:
    return [("decoder", "self")] if kind == "causal" else [("encoder", "self"), ("decoder", "self"), ("decoder", "cross")]


@pytest.mark.parametrize("kind", ["causal", "seq2seq"])
def test_an_edit_removing_no_head_changes_nothing_bit_for_bit(kind):
    """Every head of every sublayer multiplied by 1 (what ablation does to the heads it keeps): the same logits.
    The recording keeps nothing, so attention runs on the configured backend, as without a recording."""
    model, ids = build(kind, "alibi"), random_ids(2, 10)
    calls = []

    def times_one(heads):
        calls.append(heads.shape)
        return heads * torch.ones(4)[:, None, None]

    edits = {Site(stack, layer, part, "heads"): times_one for stack, part in every_sublayer(kind) for layer in range(2)}
    out, recording = recorded(model, ids, edits, keep=lambda site: False)
    assert torch.equal(out.logits, run(model, ids).logits) and recording.values == {}
    assert len(calls) == len(edits)


@pytest.mark.parametrize("kind, stack, part, attention", [
    ("causal", "decoder", "self", "self_attention"),
    ("seq2seq", "encoder", "self", "self_attention"),
    ("seq2seq", "decoder", "self", "self_attention"),
    ("seq2seq", "decoder", "cross", "cross_attention"),
])
def test_removing_a_head_zeroes_its_slice_before_w_o(kind, stack, part, attention):
    model, ids = build(kind, "rope"), random_ids(1, 10)
    kept = getattr(recorded(model, ids)[1], stack).layers[1]
    removed = getattr(recorded(model, ids, ablate_heads(stack, part, [(1, 2)], 2, 4))[1], stack).layers[1]
    before, after = getattr(kept, attention), getattr(removed, attention)
    d_head = before.query.shape[-1]
    expected = before.concatenated.clone()
    expected[..., 2 * d_head:3 * d_head] = 0.0
    torch.testing.assert_close(after.concatenated, expected, rtol=0, atol=0)
    layer = (model.model.encoder if stack == "encoder" else model.model.decoder).stack.layers[1]
    projection = layer.self_attn.out_proj if attention == "self_attention" else layer.cross_attn.out_proj
    torch.testing.assert_close(after.output, projection(expected), rtol=0, atol=0)
    assert not torch.equal(after.output, before.output)


def test_removing_a_head_that_does_not_exist_says_which_heads_exist():
    with pytest.raises(ValueError, match=r"cannot remove head 4 of layer 1: decoder self-attention has layers 0 to 1, heads 0 to 3"):
        ablate_heads("decoder", "self", [(1, 4)], 2, 4)
    with pytest.raises(ValueError, match=r"cannot remove head 0 of layer 2"):
        ablate_heads("decoder", "self", [(2, 0)], 2, 4)


def test_a_recording_refuses_a_filled_cache():
    model, ids = tiny_causal_lm(), random_ids(1, 6)
    with torch.no_grad():
        past = model(ids, use_cache=True).past_key_values
        with pytest.raises(ValueError, match="without past_key_values"), record():
            model(ids[:, -1:], past_key_values=past)
