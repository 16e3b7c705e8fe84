"""The evaluation's bookkeeping: every character counted once, whatever the window or the alphabet."""

import math

import pytest
import torch

from checkpointing.scoring import bits_per_character, window_losses
from training.build import build_model
from checkpointing.in_context import head_scores
from training.evaluate import (
    character_error_rate,
    evaluate_experiment,
    in_context_scores,
    insensitive_cer,
    plain_words,
    position_losses,
    within_one_word,
)
from training.corpus import read_split
from training.presets import PRESETS
from training.tokenization import train_tokenizer


@pytest.fixture(scope="module")
def tiny_lm(corpus):
    tokenizer = train_tokenizer()
    torch.manual_seed(0)
    return build_model(PRESETS["tiny"].model, tokenizer, 32).eval(), tokenizer


@pytest.mark.parametrize("text", [
    "To be, or not to be: that is the question:\n" * 4,
    "\u2019Tis the witching time of night \u2014 when churchyards yawn \u201cand hell itself\u201d " * 3,
    "\U0001F642\U0001F642 na\u00efve caf\u00e9 \u00e6 ",
])
def test_bits_per_character_counts_every_scored_character_once(tiny_lm, text):
    model, tokenizer = tiny_lm
    first_token_end = tokenizer(text, return_offsets_mapping=True)["offset_mapping"][0][1]
    for length in (2, 5, 32):  # every window size scores the same characters: all but the first token's
        result = bits_per_character(model, tokenizer, text, length)
        assert result["chars"] == len(text) - first_token_end
        assert result["tokens"] == len(tokenizer(text)["input_ids"]) - 1
        assert result["bits_per_char"] == pytest.approx(result["loss"] * result["tokens"] / math.log(2) / result["chars"])


def test_character_error_rate_is_edit_distance_over_reference_length():
    assert character_error_rate(["sitting"], ["kitten"]) == pytest.approx(3 / 6)
    assert character_error_rate(["abc", "x"], ["abc", "y"]) == pytest.approx(1 / 4)  # summed, not averaged
    assert character_error_rate(["same line"], ["same line"]) == 0.0


def test_the_per_position_curve_averages_each_position_over_the_windows(tiny_lm):
    model, tokenizer = tiny_lm
    text = "To be, or not to be: that is the question: whether 'tis nobler in the mind to suffer\n" * 6
    window = window_losses(model, tokenizer, text, 16)
    curve = position_losses(window)
    assert len(curve) == 15  # positions 1..15 of a 16-token window
    ids = torch.tensor(tokenizer(text)["input_ids"])
    with torch.no_grad():  # the first window by hand: loss of token p given tokens 0..p-1
        logits = model(ids[None, :16]).logits[0]
    first = torch.nn.functional.cross_entropy(logits[:-1], ids[1:16], reduction="none")
    torch.testing.assert_close(window["nll"][0], first, rtol=0, atol=1e-5)
    full = window["scored"].all(1)  # windows without a ragged end: every position counted in each
    expected = window["nll"][full].mean(0)
    counts = window["scored"].sum(0)
    assert torch.allclose(torch.tensor(curve)[counts == full.sum()], expected[counts == full.sum()], atol=1e-4)
    result = bits_per_character(model, tokenizer, text, 16)
    assert result["loss"] == pytest.approx(float(window["nll"].sum()) / int(window["scored"].sum()))


def test_insensitive_cer_ignores_case_and_punctuation_only():
    assert plain_words("Hence: home, you idle Creatures!") == "hence home you idle creatures"
    assert insensitive_cer(["Hence: home you idle Creatures"], ["Hence! home, you idle creatures!"]) == 0.0
    assert insensitive_cer(["vnfold"], ["unfold"]) == pytest.approx(1 / 6)


def test_within_one_word_counts_dropped_words():
    references = ["I come to bury Caesar, not to praise him.", "Stand, and unfold yourself"]
    assert within_one_word(["I come to bury not", "Stand and unfold yourself"], references) == 0.5
    assert within_one_word(references, references) == 1.0


def test_in_context_figures_are_the_repeated_passages_losses_and_the_best_heads(tiny_lm, corpus):
    """Recomputed by hand: the passages are evenly spaced slices of the text's tokens, each read twice; the first
    copy's loss is over its tokens 1.., the second's over all of its tokens; the heads are the best of every head."""
    model, tokenizer = tiny_lm
    text = read_split("validation")[:20000]
    figures = in_context_scores(model, tokenizer, text)
    n = figures["passage_tokens"]
    assert n == model.config.context_length // 2 == 16 and figures["passages"] == 32
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    starts = [int(k * (len(ids) - n) / 33) for k in range(1, 33)]  # 32 evenly spaced, neither end
    first = second = 0.0
    for start in starts:
        passage = torch.tensor(ids[start: start + n] * 2)
        with torch.no_grad():
            logp = model(passage[None]).logits[0].log_softmax(-1)
        nll = -logp[:-1].gather(-1, passage[1:, None])[:, 0]  # nll[t - 1]: token t
        first += float(nll[: n - 1].mean()) / len(starts)
        second += float(nll[n - 1:].mean()) / len(starts)
    assert figures["first_copy_loss"] == pytest.approx(first, abs=1e-5)
    assert figures["second_copy_loss"] == pytest.approx(second, abs=1e-5)
    assert figures["repeated_passage_ratio"] == pytest.approx(figures["second_copy_loss"] / figures["first_copy_loss"])
    scores = head_scores(model)
    for kind, key in (("induction", "induction"), ("previous token", "previous_token")):
        best = figures[key]
        assert best["score"] == pytest.approx(float(scores[kind].max()))
        assert scores[kind][best["layer"], best["head"]] == pytest.approx(best["score"])


def test_an_experiment_seed_whose_model_is_not_here_keeps_its_recorded_figures(tmp_path):
    """The other seeds' models are not shipped: re-evaluating the shipped ones must not drop them from the experiment."""
    def result(bits):
        return {"bits_per_char": bits, "test_loss": bits, "training_context": 128, "position_encoding": "rope",
                "extrapolation": {"128": bits, "256": bits + 1}, "extrapolation_loss": {"128": bits, "256": bits + 1}}
    recorded_run = {**{k: v for k, v in result(2.1).items() if k != "position_encoding"},
                    "perplexity_ratio": {"128": 1.0, "256": math.e}}
    recorded = {"encodings": {"rope": {"runs": {"5678": recorded_run}}}}
    experiment = evaluate_experiment({"shakespeare-rope": result(2.0)}, "", tmp_path, tmp_path / "absent", recorded)
    entry = experiment["encodings"]["rope"]
    assert entry["runs"][5678] == recorded_run
    assert entry["bits_per_char"]["mean"] == pytest.approx(2.05) and entry["bits_per_char"]["spread"] == pytest.approx(0.1)
    without = evaluate_experiment({"shakespeare-rope": result(2.0)}, "", tmp_path, tmp_path / "absent")
    assert list(without["encodings"]["rope"]["runs"]) == [1234]
