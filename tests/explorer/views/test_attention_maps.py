"""explorer.generation.tokens and explorer.views.attention: what a forward pass reads, every head's weights, the view picked."""

import numpy as np
import pytest
import torch

from explorer.views import attention
from explorer.generation import decoding
from explorer.generation.decoding import DecodingSettings
from explorer.views.forward_pass import LRUCache
from explorer.generation.labels import token_labels
from explorer.generation.tokens import forward_inputs, numbered
from support.fixtures_checkpoints import causal_lm, seq2seq_lm

TEXT = "Shall I compare thee to a summer's day? Thou art more lovely and more temperate."
GREEDY = DecodingSettings(False, max_new_tokens=80)


def test_token_labels_are_readable(tokenizer):
    ids = tokenizer(" a\n🙂", add_special_tokens=False).input_ids
    labels = token_labels(tokenizer, ids)
    assert labels[0] == "␣a" and "↵" in "".join(labels) and not any("\ufffd" in label for label in labels)
    assert numbered(["a", "a"]) == ["0:a", "1:a"]


def test_attention_maps_are_the_models_weights(tokenizer):
    model = causal_lm(tokenizer, "alibi")
    maps = attention.attention_maps(model, tokenizer, TEXT, GREEDY)
    ids = tokenizer(TEXT, return_tensors="pt").input_ids
    with torch.no_grad():
        expected = model(ids, output_attentions=True).attentions
    weights = maps.weights["self"]
    assert weights.shape == (2, 4, ids.shape[1], ids.shape[1])
    assert np.allclose(weights[1, 2], expected[1][0, 2].numpy(), atol=1e-6)
    assert np.allclose(weights.sum(-1), 1, atol=1e-5) and np.all(np.triu(weights[0, 0], 1) == 0)
    labels = maps.query_labels["self"]
    assert len(set(labels)) == len(labels) == ids.shape[1]  # unique even where tokens repeat
    assert labels[:2] == numbered(token_labels(tokenizer, ids[0, :2]))


def test_attention_of_a_long_text_is_cut_with_a_notice(tokenizer):
    maps = attention.attention_maps(causal_lm(tokenizer, "learned"), tokenizer, TEXT * 10, GREEDY)
    assert maps.weights["self"].shape[-1] == 64 and "first 64" in maps.notices[0]


def test_seq2seq_shows_encoder_decoder_and_cross_attention(tokenizer):
    maps = attention.attention_maps(seq2seq_lm(tokenizer), tokenizer, TEXT, GREEDY)
    source = len(tokenizer(TEXT).input_ids)
    target = len(maps.query_labels["decoder"])
    assert maps.weights["encoder"].shape == (2, 4, source, source)
    assert maps.weights["decoder"].shape == (2, 4, target, target)
    assert maps.weights["cross"].shape == (2, 4, target, source)
    assert maps.key_labels["cross"] == maps.query_labels["encoder"]


@pytest.mark.parametrize("settings", [GREEDY, DecodingSettings(False, repetition_penalty=1.3, max_new_tokens=60),
                                      DecodingSettings(True, 0.8, 40, 0.95, 1.1, 60, seed=3)])
def test_the_decoder_reads_the_models_whole_rewrite_decoded_as_the_user_chose(tokenizer, settings):
    """Not cut short: the decoder input is exactly what the Generate tab would write with these settings."""
    model = seq2seq_lm(tokenizer)
    read = forward_inputs(model, tokenizer, TEXT, settings)
    ids = tokenizer(TEXT, return_tensors="pt").input_ids
    written = decoding.generate_ids(model, ids, settings)[0]
    eos = model.generation_config.eos_token_id
    expected = written[:-1] if int(written[-1]) == eos else written
    assert torch.equal(read.target_ids, expected) and read.decoded_with == settings.describe()
    assert read.rewrite == decoding.generate_text(model, tokenizer, TEXT, settings)[0]
    maps = attention.attention_maps(model, tokenizer, TEXT, settings)
    assert maps.rewrite == read.rewrite and len(maps.query_labels["cross"]) == len(expected)


def test_an_encoder_decoder_reads_the_first_line_of_a_passage_and_says_so(tokenizer):
    """As the Generate tab feeds it: one line (blank lines and surrounding spaces dropped), with a notice."""
    model = seq2seq_lm(tokenizer)
    read = forward_inputs(model, tokenizer, f"\n  {TEXT}  \n\nThou art more louely\nand more temperate", GREEDY)
    assert torch.equal(read.source_ids, tokenizer(TEXT, return_tensors="pt").input_ids[0])
    assert read.notices[0] == "This model rewrites one line at a time: showing the first of your 3 lines."
    assert read.rewrite == forward_inputs(model, tokenizer, TEXT, GREEDY).rewrite
    assert forward_inputs(model, tokenizer, TEXT, GREEDY).notices == []


def test_pick_view_keeps_kind_layer_and_head_to_what_the_model_has(tokenizer):
    maps = attention.attention_maps(causal_lm(tokenizer), tokenizer, TEXT, GREEDY)
    assert attention.pick_view(maps, "self", "1", "2") == (attention.View("self", 1, 2), [])
    assert attention.pick_view(maps, "self", 0, "average") == (attention.View("self", 0, None), [])
    view, notices = attention.pick_view(maps, "cross", "Infinity", "99")
    assert view == attention.View("self", 0, 3)
    assert notices == ["This model has no attention kind `cross`; it has self: showing self.",
                       "Layer `Infinity` is not a whole number (this model has layers 0 to 1); showing layer 0.",
                       "Head 99 does not exist (this model has heads 0 to 3); showing head 3."]
    seq = attention.attention_maps(seq2seq_lm(tokenizer), tokenizer, TEXT, GREEDY)
    assert attention.pick_view(seq, "self", 0, None) == (attention.View("cross", 0, None), [])  # the menu's default
    assert attention.pick_view(seq, "encoder", 1, 0)[0] == attention.View("encoder", 1, 0)


def test_run_cache_keeps_the_most_recent_inputs():
    cache, computed = LRUCache(size=2), []

    def compute(key):
        return lambda: computed.append(key) or key

    for key in ["a", "b", "a", "c", "a", "b"]:
        assert cache.get(key, compute(key)) == key
    assert computed == ["a", "b", "c", "b"]  # "a" stayed (recently used); "b" was evicted by "c"


def test_kinds_are_one_list():
    assert attention.kinds_of(False) == ("self",) and attention.kinds_of(True) == ("encoder", "decoder", "cross")
    assert set(attention.kinds_of(True)) | {"self"} == set(attention.ATTENTION_KINDS)


def test_seq2seq_maps_are_the_models_own_weights_on_what_the_decoder_read(tokenizer):
    model = seq2seq_lm(tokenizer)
    maps = attention.attention_maps(model, tokenizer, TEXT, GREEDY)
    read = forward_inputs(model, tokenizer, TEXT, GREEDY)
    with torch.no_grad():
        out = model(**read.inputs, output_attentions=True, use_cache=False)
    for kind, expected in (("encoder", out.encoder_attentions), ("decoder", out.decoder_attentions), ("cross", out.cross_attentions)):
        assert np.allclose(maps.weights[kind], torch.stack([w[0] for w in expected]).numpy(), atol=1e-6)
