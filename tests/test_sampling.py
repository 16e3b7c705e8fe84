"""explorer/sampling.py: the next-token distribution is the one generate samples from."""

import numpy as np
import pytest
import torch

from explorer import analysis as A
from explorer.sampling import SamplingSettings, next_token_distribution, prompt_ids
from fixtures_checkpoints import SEQ2SEQ_NAME

PROMPT = "Shall I compare thee to a summer's day? Thou art more"
SETTINGS = [SamplingSettings(), SamplingSettings(0.7, 0, 1.0), SamplingSettings(1.3, 5, 1.0),
            SamplingSettings(0.8, 0, 0.6), SamplingSettings(0.9, 20, 0.8, 1.3)]


@pytest.fixture(scope="module")
def models(tiny_checkpoints):
    catalog = A.discover_checkpoints(tiny_checkpoints)
    return {name: A.load_checkpoint(info.path) for name, info in catalog.items()}


@pytest.mark.parametrize("name", ["shakespeare-rope", "shakespeare-learned", SEQ2SEQ_NAME])
@pytest.mark.parametrize("settings", SETTINGS, ids=str)
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
        d = next_token_distribution(model, tokenizer, PROMPT, SamplingSettings(temperature=t), shown=10_000)
        p = d.tempered_probs[d.tempered_probs > 0]
        entropy[t] = float(-(p * np.log(p)).sum())
        assert d.n_kept == d.vocab_size and np.allclose(d.final_probs, d.tempered_probs)
    assert entropy[0.3] < entropy[1.0] < entropy[2.0]
    model_probs = next_token_distribution(model, tokenizer, PROMPT, SamplingSettings(temperature=1.0)).model_probs
    at_one = next_token_distribution(model, tokenizer, PROMPT, SamplingSettings(temperature=1.0)).tempered_probs
    assert np.array_equal(model_probs, at_one)


def test_top_k_keeps_the_k_most_likely(models):
    model, tokenizer = models["shakespeare-rope"]
    d = next_token_distribution(model, tokenizer, PROMPT, SamplingSettings(top_k=7))
    assert d.n_kept == 7 and d.kept[:7].all() and not d.kept[7:].any()


def test_top_p_keeps_the_smallest_head_reaching_p_and_renormalises(models):
    """Computed here from the tempered probabilities: keep the most likely tokens until their sum reaches p."""
    model, tokenizer = models["shakespeare-rope"]
    settings = SamplingSettings(temperature=0.9, top_p=0.5)
    d = next_token_distribution(model, tokenizer, PROMPT, settings, shown=10_000)
    cumulative = np.cumsum(d.tempered_probs.astype(np.float64))
    expected = int(np.searchsorted(cumulative, 0.5 - 1e-6) + 1)
    assert d.n_kept == expected and d.kept[:expected].all() and not d.kept[expected:].any()
    assert d.kept_mass == pytest.approx(cumulative[expected - 1], abs=1e-5)
    renormalised = np.where(d.kept, d.tempered_probs / d.kept_mass, 0.0)
    np.testing.assert_allclose(d.final_probs, renormalised, atol=1e-6)
    assert d.final_probs.sum() == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize("args, message", [
    ((0, 0, 1.0), "temperature must be above 0"),
    ((9, 0, 1.0), "at most 5"),
    (("warm", 0, 1.0), "temperature must be a number; got 'warm'"),
    ((float("nan"), 0, 1.0), "temperature must be a finite number"),
    ((1.0, -1, 1.0), "top-k must be a whole number, 0 (off) or more; got -1"),
    ((1.0, 2.5, 1.0), "top-k must be a whole number"),
    ((1.0, 0, 0.0), "top-p must be above 0 and at most 1"),
    ((1.0, 0, 1.5), "top-p must be above 0 and at most 1"),
    ((1.0, 0, None), "top-p must be a number"),
    ((1.0, 0, 1.0, 0), "repetition penalty must be above 0"),
])
def test_bad_settings_say_what_is_wrong_and_what_is_allowed(args, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        SamplingSettings.checked(*args)
