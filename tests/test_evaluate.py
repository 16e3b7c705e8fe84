"""The evaluation's bookkeeping: every character counted once, whatever the window or the alphabet."""

import math

import pytest
import torch

from checkpointing.scoring import bits_per_character, window_losses
from training.build import build_model
from training.evaluate import character_error_rate, insensitive_cer, plain_words, position_losses, within_one_word
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
