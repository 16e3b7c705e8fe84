"""The evaluation's bookkeeping: every character counted once, whatever the window or the alphabet."""

import math

import pytest
import torch

from training import train
from training.evaluate import bits_per_character, character_error_rate
from training.tokenization import train_tokenizer


@pytest.fixture(scope="module")
def tiny_lm(corpus):
    tokenizer = train_tokenizer()
    torch.manual_seed(0)
    return train.build_model(train.PRESETS["tiny"]["model"], tokenizer, 32).eval(), tokenizer


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
