"""explorer.views.sampling: the next-token distribution is the one generate samples from."""

import numpy as np
import pytest
import torch

from explorer.core.inputs import InputProblem
from explorer.views.sampling import next_token_distribution, prompt_ids, sampling_settings
from support.fixtures_checkpoints import SEQ2SEQ_NAME
from support.shipped import load

PROMPT = "Shall I compare thee to a summer's day? Thou art more"
SETTINGS = [sampling_settings(*args) for args in ((1.0, 0, 1.0), (0.7, 0, 1.0), (1.3, 5, 1.0), (0.8, 0, 0.6), (0.9, 20, 0.8, 1.3))]


@pytest.fixture(scope="module")
def models(tiny_checkpoints):
    return {name: load(tiny_checkpoints, name) for name in ("shakespeare-rope", "shakespeare-learned", SEQ2SEQ_NAME)}


@pytest.mark.parametrize("name", ["shakespeare-rope", "shakespeare-learned", SEQ2SEQ_NAME])
@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: s.describe())
def test_numbers_are_what_generate_samples_from(models, name, settings):
    """transformers' generate(do_sample=True) with the same settings: the same logits and the same processed
    scores, bit for bit; softmax of those is the distribution it draws from."""
    model, tokenizer = models[name]
    shown = next_token_distribution(model, tokenizer, PROMPT, settings)
    inputs, _ = prompt_ids(model, tokenizer, PROMPT)
    with torch.inference_mode():
        out = model.generate(inputs["input_ids"], attention_mask=inputs["attention_mask"], do_sample=True,
                             temperature=settings.temperature, top_k=settings.top_k, top_p=settings.top_p,
                             repetition_penalty=settings.repetition_penalty, max_new_tokens=1, output_scores=True,
                             output_logits=True, return_dict_in_generate=True)
    assert torch.equal(out.logits[0][0], shown.logits)
    assert torch.equal(out.scores[0][0], shown.processed)
    sampled_from = out.scores[0][0].softmax(-1)
    assert np.array_equal(sampled_from[torch.from_numpy(shown.ids)].numpy(), shown.final_probs)
    assert shown.n_kept == int(torch.isfinite(out.scores[0][0]).sum())


def test_temperature_sharpens_below_one_and_flattens_above(models):
    model, tokenizer = models["shakespeare-rope"]
    entropy = {}
    for t in (0.3, 1.0, 2.0):
        d = next_token_distribution(model, tokenizer, PROMPT, sampling_settings(t, 0, 1.0), shown=10_000)
        p = d.tempered_probs[d.tempered_probs > 0]
        entropy[t] = float(-(p * np.log(p)).sum())
        assert d.n_kept == d.vocab_size and np.allclose(d.final_probs, d.tempered_probs)
    assert entropy[0.3] < entropy[1.0] < entropy[2.0]
    model_probs = next_token_distribution(model, tokenizer, PROMPT, sampling_settings(1.0, 0, 1.0)).model_probs
    at_one = next_token_distribution(model, tokenizer, PROMPT, sampling_settings(1.0, 0, 1.0)).tempered_probs
    assert np.array_equal(model_probs, at_one)


def test_top_k_keeps_the_k_most_likely(models):
    model, tokenizer = models["shakespeare-rope"]
    d = next_token_distribution(model, tokenizer, PROMPT, sampling_settings(1.0, 7, 1.0))
    assert d.n_kept == 7 and d.kept[:7].all() and not d.kept[7:].any()


def test_top_p_keeps_the_smallest_head_reaching_p_and_renormalises(models):
    """Computed here from the tempered probabilities: keep the most likely tokens until their sum reaches p."""
    model, tokenizer = models["shakespeare-rope"]
    settings = sampling_settings(0.9, 0, 0.5)
    d = next_token_distribution(model, tokenizer, PROMPT, settings, shown=10_000)
    cumulative = np.cumsum(d.tempered_probs.astype(np.float64))
    expected = int(np.searchsorted(cumulative, 0.5 - 1e-6) + 1)
    assert d.n_kept == expected and d.kept[:expected].all() and not d.kept[expected:].any()
    assert d.kept_mass == pytest.approx(cumulative[expected - 1], abs=1e-5)
    renormalised = np.where(d.kept, d.tempered_probs / d.kept_mass, 0.0)
    np.testing.assert_allclose(d.final_probs, renormalised, atol=1e-6)
    assert d.final_probs.sum() == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize("args, message", [
    ((0, 0, 1.0), "Temperature must be above 0 and at most 5"),
    ((9, 0, 1.0), "Temperature must be above 0 and at most 5"),
    (("warm", 0, 1.0), "Temperature must be a number (above 0, at most 5; 1 leaves the model's distribution); got `warm`"),
    ((float("nan"), 0, 1.0), "Temperature must be a number"),
    ((1.0, -1, 1.0), "Top-k (0 = off) must be a whole number from 0 to 100,000; got `-1`"),
    ((1.0, 2.5, 1.0), "Top-k (0 = off) must be a whole number"),
    ((1.0, 0, 0.0), "Top-p must be above 0 and at most 1 (1 = off)"),
    ((1.0, 0, 1.5), "Top-p must be above 0 and at most 1 (1 = off)"),
    ((1.0, 0, None), "Top-p must be a number"),
    ((1.0, 0, 1.0, 0), "Repetition penalty must be above 0 and at most 10 (1 = off)"),
])
def test_bad_settings_say_what_is_wrong_and_what_is_allowed(args, message):
    with pytest.raises(InputProblem) as error:
        sampling_settings(*args)
    assert message in str(error.value)


def test_an_encoder_decoder_reads_the_first_line_of_a_passage_and_says_so(models):
    """As the Generate tab feeds it, one line: the distribution of the rewrite's first token of line one."""
    model, tokenizer = models[SEQ2SEQ_NAME]
    passage, _ = prompt_ids(model, tokenizer, f"{PROMPT}\n\nlend me your eares")
    single, notices = prompt_ids(model, tokenizer, PROMPT)
    assert torch.equal(passage["input_ids"], single["input_ids"]) and notices == []
    assert prompt_ids(model, tokenizer, f"{PROMPT}\nlend me")[1] == [
        "This model rewrites one line at a time: showing the first of your 2 lines."]
    causal, _ = models["shakespeare-rope"]
    assert prompt_ids(causal, tokenizer, f"{PROMPT}\nlend me")[0]["input_ids"].shape[1] > single["input_ids"].shape[1]
