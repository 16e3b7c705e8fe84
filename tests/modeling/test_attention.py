"""Masks and attention paths: causality, padding, batching, fused SDPA vs explicit weights."""

import pytest
import torch

from support.tiny_models import PAD, POSITION_ENCODINGS, random_ids, tiny_causal_lm, tiny_seq2seq


@pytest.mark.parametrize("position_encoding", POSITION_ENCODINGS)
def test_changing_token_t_never_changes_logits_before_t(position_encoding):
    model = tiny_causal_lm(position_encoding)
    ids = random_ids(1, 12)
    changed = ids.clone()
    t = 7
    changed[0, t] = (ids[0, t] + 5) % 60 + 3
    with torch.no_grad():
        a, b = model(ids).logits, model(changed).logits
    assert (a[:, :t] - b[:, :t]).abs().max().item() == 0.0
    assert (a[:, t:] - b[:, t:]).abs().max().item() > 1e-3  # and the change is seen from t on


@pytest.mark.parametrize("position_encoding", POSITION_ENCODINGS)
def test_padding_does_not_change_unpadded_positions(position_encoding):
    """Left padding (as generate uses) with an attention mask: real positions see the same numbers."""
    model = tiny_causal_lm(position_encoding)
    ids = random_ids(1, 9)
    padded = torch.cat([torch.full((1, 4), PAD), ids], dim=1)
    mask = torch.cat([torch.zeros(1, 4, dtype=torch.long), torch.ones(1, 9, dtype=torch.long)], dim=1)
    with torch.no_grad():
        alone = model(ids).logits
        with_padding = model(padded, attention_mask=mask).logits[:, 4:]
    assert (alone - with_padding).abs().max().item() <= 1e-5


@pytest.mark.parametrize("position_encoding", POSITION_ENCODINGS)
def test_batched_equals_one_by_one(position_encoding):
    model = tiny_causal_lm(position_encoding)
    lengths = [5, 11, 8]
    sequences = [random_ids(1, n, seed=n)[0] for n in lengths]
    longest = max(lengths)
    batch = torch.full((3, longest), PAD)
    mask = torch.zeros(3, longest, dtype=torch.long)
    for row, seq in enumerate(sequences):  # left padding
        batch[row, longest - len(seq):] = seq
        mask[row, longest - len(seq):] = 1
    with torch.no_grad():
        batched = model(batch, attention_mask=mask).logits
        for row, seq in enumerate(sequences):
            single = model(seq[None]).logits[0]
            assert (batched[row, longest - len(seq):] - single).abs().max().item() <= 1e-5


def test_seq2seq_source_padding_does_not_change_the_output():
    model = tiny_seq2seq()
    src, tgt = random_ids(1, 7), random_ids(1, 5, seed=3)
    padded_src = torch.cat([src, torch.full((1, 3), PAD)], dim=1)
    mask = torch.cat([torch.ones(1, 7, dtype=torch.long), torch.zeros(1, 3, dtype=torch.long)], dim=1)
    with torch.no_grad():
        a = model(src, decoder_input_ids=tgt).logits
        b = model(padded_src, attention_mask=mask, decoder_input_ids=tgt).logits
    assert (a - b).abs().max().item() <= 1e-5


def test_seq2seq_decoder_is_causal_and_encoder_is_not():
    model = tiny_seq2seq()
    src, tgt = random_ids(1, 7), random_ids(1, 6, seed=3)
    changed_tgt = tgt.clone()
    changed_tgt[0, 4] = 9 if tgt[0, 4] != 9 else 10
    changed_src = src.clone()
    changed_src[0, -1] = 9 if src[0, -1] != 9 else 10
    with torch.no_grad():
        base = model(src, decoder_input_ids=tgt).logits
        after_tgt = model(src, decoder_input_ids=changed_tgt).logits
        after_src = model(changed_src, decoder_input_ids=tgt).logits
    assert (base[:, :4] - after_tgt[:, :4]).abs().max().item() == 0.0
    assert (base[:, 0] - after_src[:, 0]).abs().max().item() > 1e-4  # every target position reads the whole source


@pytest.mark.parametrize("position_encoding", POSITION_ENCODINGS)
def test_fused_and_explicit_attention_paths_agree(position_encoding):
    model = tiny_causal_lm(position_encoding)
    ids = torch.cat([torch.full((1, 3), PAD), random_ids(1, 10)], dim=1).repeat(2, 1)
    mask = torch.ones_like(ids)
    mask[0, :3] = 0
    with torch.no_grad():
        fused = model(ids, attention_mask=mask).logits
        explicit = model(ids, attention_mask=mask, output_attentions=True)
    # padding queries see no key: their rows are undefined (SDPA writes zeros, the explicit softmax a mean)
    assert (fused - explicit.logits)[mask.bool()].abs().max().item() <= 1e-5
    for weights in explicit.attentions:
        assert weights.shape == (2, 4, 13, 13)
        assert torch.allclose(weights.sum(-1), torch.ones(2, 4, 13), atol=1e-5)
        assert weights[1].triu(1).abs().max().item() == 0.0  # causal
        assert weights[0, :, 3:, :3].abs().max().item() == 0.0  # real tokens never attend to padding


def test_seq2seq_fused_and_explicit_paths_agree_and_return_every_attention():
    model = tiny_seq2seq(position_encoding="alibi")
    src, tgt = random_ids(2, 7), random_ids(2, 5, seed=3)
    with torch.no_grad():
        fused = model(src, decoder_input_ids=tgt).logits
        explicit = model(src, decoder_input_ids=tgt, output_attentions=True, output_hidden_states=True)
    assert (fused - explicit.logits).abs().max().item() <= 1e-5
    assert [w.shape for w in explicit.encoder_attentions] == [(2, 4, 7, 7)] * 2
    assert [w.shape for w in explicit.decoder_attentions] == [(2, 4, 5, 5)] * 2
    assert [w.shape for w in explicit.cross_attentions] == [(2, 4, 5, 7)] * 2
    assert len(explicit.encoder_hidden_states) == 3 and len(explicit.decoder_hidden_states) == 3


def test_the_stacked_projection_hands_out_the_rows_of_q_k_and_v():
    """qkv_proj's rows are W^Q, then W^K, then W^V; projection() returns views of them (a gradient or an edit reaches
    the parameter), project() splits the one product into heads exactly as three separate products would."""
    attention = tiny_causal_lm("rope").model.decoder.stack.layers[0].self_attn
    d, weight, bias = attention.qkv_proj.in_features, attention.qkv_proj.weight, attention.qkv_proj.bias
    for i, part in enumerate("qkv"):
        w, b = attention.projection(part)
        assert w.shape == (d, d) and w.data_ptr() == weight[i * d].data_ptr() and torch.equal(b, bias[i * d:(i + 1) * d])
    w, b = attention.projection("kv")
    assert torch.equal(w, weight[d:]) and torch.equal(b, bias[d:])
    x = torch.randn(2, 5, d, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        for together, part in zip(attention.project(x, "qkv"), "qkv"):
            alone = torch.nn.functional.linear(x, *attention.projection(part))
            expected = alone.view(2, 5, attention.n_heads, attention.d_head).transpose(1, 2)
            torch.testing.assert_close(together, expected, atol=1e-6, rtol=0)  # one product against three
    for wrong in ("", "qv", "x", "vq"):
        with pytest.raises(ValueError, match="parts must be q, k, v or adjacent ones"):
            attention.projection(wrong)
