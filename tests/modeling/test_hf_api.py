"""What every transformers language model takes and returns: inputs_embeds, return_dict=False, BART's output layout,
the loss through loss_function (the Trainer's num_items_in_batch), gradient checkpointing, GenerationMixin among each
generative class's own bases. float32, tolerance 1e-5."""

import pytest
import torch
import torch.nn.functional as F
from transformers import BartConfig, BartForConditionalGeneration, GenerationMixin

import modeling

from support.tiny_models import PAD, POSITION_ENCODINGS, random_ids, tiny_causal_lm, tiny_seq2seq

GREEDY = dict(max_new_tokens=8, do_sample=False, eos_token_id=None, pad_token_id=PAD)


def left_padded():
    ids = random_ids(2, 10)
    ids[0, :3] = PAD
    mask = torch.ones_like(ids)
    mask[0, :3] = 0
    return ids, mask


def test_every_generative_class_lists_generation_mixin_among_its_own_bases():
    """transformers' generation suite (test_inherits_generation_mixin) asks each class that can generate to inherit
    GenerationMixin directly, not through a shared parent; the bare model cannot generate."""
    generative = [cls for cls in (modeling.ScratchTransformerModel, modeling.ScratchTransformerForCausalLM,
                                  modeling.ScratchTransformerForSeq2SeqLM) if cls.can_generate()]
    assert generative == [modeling.ScratchTransformerForCausalLM, modeling.ScratchTransformerForSeq2SeqLM]
    for cls in generative:
        assert GenerationMixin in cls.__bases__, f"{cls.__name__}'s bases: {cls.__bases__}"
        assert issubclass(cls.__bases__[0], modeling.ScratchTransformerPreTrainedModel)  # the model class first


@pytest.mark.parametrize("position_encoding", POSITION_ENCODINGS)
def test_inputs_embeds_give_what_input_ids_give(position_encoding):
    ids, mask = left_padded()
    causal, seq2seq = tiny_causal_lm(position_encoding), tiny_seq2seq(position_encoding)
    target = random_ids(2, 5, seed=4)
    with torch.no_grad():
        embeds = causal.get_input_embeddings()(ids)
        torch.testing.assert_close(causal(inputs_embeds=embeds, attention_mask=mask).logits,
                                   causal(ids, attention_mask=mask).logits, rtol=0, atol=1e-5)
        embeds, target_embeds = seq2seq.get_input_embeddings()(ids), seq2seq.get_input_embeddings()(target)
        torch.testing.assert_close(
            seq2seq(inputs_embeds=embeds, attention_mask=mask, decoder_inputs_embeds=target_embeds).logits,
            seq2seq(ids, attention_mask=mask, decoder_input_ids=target).logits, rtol=0, atol=1e-5)


@pytest.mark.parametrize("position_encoding", ["learned", "rope", "alibi"])
def test_generate_from_inputs_embeds_continues_as_from_input_ids(position_encoding):
    ids, mask = left_padded()
    causal, seq2seq = tiny_causal_lm(position_encoding), tiny_seq2seq(position_encoding)
    with torch.no_grad():
        from_ids = causal.generate(ids, attention_mask=mask, **GREEDY)
        from_embeds = causal.generate(inputs_embeds=causal.get_input_embeddings()(ids), attention_mask=mask, **GREEDY)
        assert torch.equal(from_embeds, from_ids[:, ids.shape[1]:])  # a decoder-only model returns the new tokens
        from_ids = seq2seq.generate(ids, attention_mask=mask, **GREEDY)
        from_embeds = seq2seq.generate(inputs_embeds=seq2seq.get_input_embeddings()(ids), attention_mask=mask, **GREEDY)
        assert torch.equal(from_embeds, from_ids)


@pytest.mark.parametrize("kind", ["causal", "seq2seq"])
def test_return_dict_false_gives_the_outputs_fields_as_a_tuple(kind):
    model = tiny_causal_lm() if kind == "causal" else tiny_seq2seq()
    ids = random_ids(2, 6)
    inputs = dict(input_ids=ids, labels=ids, output_hidden_states=True, output_attentions=True)
    with torch.no_grad():
        as_dict = model(**inputs)
        as_tuple = model(**inputs, return_dict=False)
        model.config.return_dict = False
        from_config = model(**inputs)
    assert isinstance(as_tuple, tuple) and isinstance(from_config, tuple)
    fields = [name for name in as_dict.keys()]
    expected = (["loss", "logits", "past_key_values", "hidden_states", "attentions"] if kind == "causal" else
                ["loss", "logits", "past_key_values", "decoder_hidden_states", "decoder_attentions", "cross_attentions",
                 "encoder_last_hidden_state", "encoder_hidden_states", "encoder_attentions"])
    assert fields == expected  # transformers' order: GPT-2's and BART's
    for name, a, b in zip(fields, as_tuple, from_config):
        if isinstance(a, torch.Tensor):
            assert torch.equal(a, as_dict[name]) and torch.equal(b, as_dict[name]), name
        elif name != "past_key_values":
            assert all(torch.equal(x, y) for x, y in zip(a, as_dict[name])), name


def test_seq2seq_outputs_have_barts_fields_shapes_and_order():
    ours = tiny_seq2seq()
    c = ours.config
    bart = BartForConditionalGeneration(BartConfig(
        vocab_size=c.vocab_size, d_model=c.d_model, encoder_layers=c.n_encoder_layers, decoder_layers=c.n_layers,
        encoder_attention_heads=c.n_heads, decoder_attention_heads=c.n_heads, encoder_ffn_dim=c.d_ff,
        decoder_ffn_dim=c.d_ff, max_position_embeddings=c.max_position_embeddings, attn_implementation="eager")).eval()
    src, tgt = random_ids(2, 7), random_ids(2, 5, seed=3)
    inputs = dict(input_ids=src, decoder_input_ids=tgt, output_attentions=True, output_hidden_states=True, use_cache=True)
    with torch.no_grad():
        a, b = ours(**inputs), bart(**inputs)
    assert list(a.keys()) == list(b.keys()) == ["logits", "past_key_values", "decoder_hidden_states", "decoder_attentions",
                                                "cross_attentions", "encoder_last_hidden_state", "encoder_hidden_states",
                                                "encoder_attentions"]

    def shapes(value):
        if isinstance(value, torch.Tensor):
            return tuple(value.shape)
        if isinstance(value, tuple):
            return [shapes(v) for v in value]
        return type(value).__name__  # the cache

    for name in a.keys():
        assert shapes(a[name]) == shapes(b[name]), name
    assert [w.shape for w in a.cross_attentions] == [(2, 4, 5, 7)] * 2  # (batch, heads, target, source)


def test_causal_loss_goes_through_loss_function_and_honours_num_items_in_batch():
    model, ids = tiny_causal_lm(), random_ids(2, 9)
    labels = ids.clone()
    labels[0, :4] = -100
    with torch.no_grad():
        out = model(ids, labels=labels)
        summed = model(ids, labels=labels, num_items_in_batch=torch.tensor(5)).loss
    per_token = F.cross_entropy(out.logits[:, :-1].flatten(0, 1), labels[:, 1:].flatten(), ignore_index=-100, reduction="none")
    counted = (labels[:, 1:] != -100).sum()
    torch.testing.assert_close(out.loss, per_token.sum() / counted, rtol=0, atol=1e-6)
    torch.testing.assert_close(summed, per_token.sum() / 5, rtol=0, atol=1e-6)


def test_seq2seq_loss_is_unshifted_cross_entropy_through_loss_function():
    """The decoder reads the labels shifted right, so logits at t already predict label t: no second shift."""
    model, src, labels = tiny_seq2seq(), random_ids(2, 7), random_ids(2, 6, seed=5)
    labels[1, -2:] = -100
    with torch.no_grad():
        out = model(src, labels=labels)
        summed = model(src, labels=labels, num_items_in_batch=torch.tensor(4)).loss
    per_token = F.cross_entropy(out.logits.flatten(0, 1), labels.flatten(), ignore_index=-100, reduction="none")
    torch.testing.assert_close(out.loss, per_token.sum() / 10, rtol=0, atol=1e-6)
    torch.testing.assert_close(summed, per_token.sum() / 4, rtol=0, atol=1e-6)


@pytest.mark.parametrize("kind", ["causal", "seq2seq"])
def test_gradient_checkpointing_gives_the_same_gradients(kind):
    grads = []
    for checkpointing in (False, True):
        model = (tiny_causal_lm if kind == "causal" else tiny_seq2seq)("rope").train()
        if checkpointing:
            model.gradient_checkpointing_enable()
        ids = random_ids(2, 8)
        model(ids, labels=ids, **({} if kind == "causal" else dict(decoder_input_ids=ids))).loss.backward()
        grads.append({name: p.grad for name, p in model.named_parameters()})
    assert grads[0].keys() == grads[1].keys()
    for name in grads[0]:
        torch.testing.assert_close(grads[1][name], grads[0][name], rtol=0, atol=1e-6, msg=name)
