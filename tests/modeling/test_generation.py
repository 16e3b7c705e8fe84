"""generate() through GenerationMixin: KV cache, decoding strategies, left padding, attentions."""

import pytest
import torch
from transformers.cache_utils import DynamicCache, EncoderDecoderCache

from support.tiny_models import PAD, POSITION_ENCODINGS, random_ids, tiny_causal_lm, tiny_seq2seq

GREEDY = dict(max_new_tokens=12, do_sample=False, return_dict_in_generate=True, output_logits=True)


def _generate_both_ways(model, inputs: dict, **kwargs):
    with torch.no_grad():
        cached = model.generate(**inputs, use_cache=True, **kwargs)
        uncached = model.generate(**inputs, use_cache=False, **kwargs)
    return cached, uncached


@pytest.mark.parametrize("kind", ["causal", "seq2seq"])
@pytest.mark.parametrize("position_encoding", POSITION_ENCODINGS)
def test_cached_and_uncached_generation_agree(kind, position_encoding):
    build = tiny_causal_lm if kind == "causal" else tiny_seq2seq
    model = build(position_encoding)
    ids = random_ids(2, 6)
    inputs = dict(input_ids=ids, attention_mask=torch.ones_like(ids))
    cached, uncached = _generate_both_ways(model, inputs, eos_token_id=None, **GREEDY)
    assert torch.equal(cached.sequences, uncached.sequences)
    assert len(cached.logits) == 12
    for a, b in zip(cached.logits, uncached.logits):
        assert (a - b).abs().max().item() <= 1e-5
    expected_cache = DynamicCache if kind == "causal" else EncoderDecoderCache
    assert isinstance(cached.past_key_values, expected_cache)


def test_cache_holds_prompt_plus_generated_keys():
    model = tiny_causal_lm("rope")
    ids = random_ids(1, 6)
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=5, do_sample=False,
                             eos_token_id=None, return_dict_in_generate=True)
    assert out.past_key_values.get_seq_length() == 6 + 5 - 1  # the last token is sampled, never fed back


@pytest.mark.parametrize("kind", ["causal", "seq2seq"])
def test_sampling_is_reproducible_and_uses_the_cache_correctly(kind):
    model = (tiny_causal_lm if kind == "causal" else tiny_seq2seq)("alibi")
    ids = random_ids(1, 5)
    sampling = dict(do_sample=True, temperature=0.8, top_k=20, top_p=0.9, max_new_tokens=15, eos_token_id=None)
    results = []
    for use_cache in (True, False):
        torch.manual_seed(123)
        with torch.no_grad():
            results.append(model.generate(ids, attention_mask=torch.ones_like(ids), use_cache=use_cache, **sampling))
    assert torch.equal(results[0], results[1])
    torch.manual_seed(7)
    with torch.no_grad():
        other = model.generate(ids, attention_mask=torch.ones_like(ids), **sampling)
    assert not torch.equal(results[0], other)  # a different seed samples differently


@pytest.mark.parametrize("kind", ["causal", "seq2seq"])
def test_beam_search_returns_its_best_beam_and_matches_uncached(kind):
    model = (tiny_causal_lm if kind == "causal" else tiny_seq2seq)("rope")
    ids = random_ids(1, 5)
    beams = dict(num_beams=4, num_return_sequences=4, max_new_tokens=8, do_sample=False, eos_token_id=None,
                 return_dict_in_generate=True, output_scores=True)
    cached, uncached = _generate_both_ways(model, dict(input_ids=ids, attention_mask=torch.ones_like(ids)), **beams)
    assert torch.equal(cached.sequences, uncached.sequences)
    assert torch.allclose(cached.sequences_scores, uncached.sequences_scores, atol=1e-5)
    assert cached.sequences_scores[0] >= cached.sequences_scores.max() - 1e-6


@pytest.mark.parametrize("position_encoding", POSITION_ENCODINGS)
def test_left_padded_batch_generates_what_each_prompt_generates_alone(position_encoding):
    model = tiny_causal_lm(position_encoding)
    prompts = [random_ids(1, 4, seed=4)[0], random_ids(1, 9, seed=9)[0]]
    batch = torch.full((2, 9), PAD)
    mask = torch.zeros(2, 9, dtype=torch.long)
    for row, p in enumerate(prompts):
        batch[row, 9 - len(p):] = p
        mask[row, 9 - len(p):] = 1
    greedy = dict(max_new_tokens=10, do_sample=False, eos_token_id=None, pad_token_id=PAD)
    with torch.no_grad():
        together = model.generate(batch, attention_mask=mask, **greedy)
        for row, p in enumerate(prompts):
            alone = model.generate(p[None], attention_mask=torch.ones(1, len(p), dtype=torch.long), **greedy)
            assert torch.equal(together[row, 9:], alone[0, len(p):])


def test_generate_returns_attentions_and_hidden_states_for_every_layer():
    model = tiny_causal_lm("alibi")
    ids = random_ids(1, 6)
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=3, do_sample=False,
                             eos_token_id=None, return_dict_in_generate=True, output_attentions=True,
                             output_hidden_states=True)
    assert len(out.attentions) == 3  # one entry per step
    assert [w.shape for w in out.attentions[0]] == [(1, 4, 6, 6)] * 2  # prefill: every layer
    assert [w.shape for w in out.attentions[2]] == [(1, 4, 1, 8)] * 2  # one query over 8 cached keys
    assert len(out.hidden_states[0]) == 3  # embeddings + 2 layers


def test_seq2seq_generate_returns_encoder_decoder_and_cross_attentions():
    model = tiny_seq2seq()
    ids = random_ids(1, 7)
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=3, do_sample=False,
                             eos_token_id=None, return_dict_in_generate=True, output_attentions=True)
    assert [w.shape for w in out.encoder_attentions] == [(1, 4, 7, 7)] * 2
    assert [w.shape for w in out.decoder_attentions[1]] == [(1, 4, 1, 2)] * 2
    assert [w.shape for w in out.cross_attentions[1]] == [(1, 4, 1, 7)] * 2
    assert out.sequences[0, 0].item() == model.config.decoder_start_token_id


def test_generation_stops_at_eos():
    """Declare the token greedy decoding emits third to be EOS: generation must stop right there."""
    model = tiny_causal_lm("rope")
    ids, mask = random_ids(1, 4), torch.ones(1, 4, dtype=torch.long)
    with torch.no_grad():
        free = model.generate(ids, attention_mask=mask, max_new_tokens=20, do_sample=False, eos_token_id=None)
        eos = free[0, 4 + 2].item()
        first = (free[0, 4:] == eos).nonzero()[0].item()
        stopped = model.generate(ids, attention_mask=mask, max_new_tokens=20, do_sample=False, eos_token_id=eos,
                                 pad_token_id=PAD)
    assert stopped.shape[1] == 4 + first + 1 and stopped[0, -1].item() == eos
    assert torch.equal(stopped[0], free[0, : 4 + first + 1])
