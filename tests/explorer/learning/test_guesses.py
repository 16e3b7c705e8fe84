"""explorer/learning/guesses: Watch it learn's line of right guesses, its cells written as token labels are (spaces
kept), on a byte-level and a SentencePiece tokenizer."""

import torch

from explorer.learning.guesses import guessed_tokens, guesses_right, shown_tokens
from support.fixtures_checkpoints import train_tokenizer
from support.sentencepiece import sentencepiece_tokenizer


def ids_of(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False).input_ids


def test_a_right_guess_of_a_lone_sentencepiece_space_counts():
    """Before, a token whose text alone decodes to nothing (SentencePiece's ▁ between two spaces) counted as a miss
    where the model guessed it."""
    tokenizer = sentencepiece_tokenizer()
    ids = ids_of(tokenizer, "thee  thee")
    assert tokenizer.convert_ids_to_tokens(ids) == ["▁thee", "▁", "▁thee"]
    logits = torch.full((len(ids), len(tokenizer)), -1.0)
    logits[torch.arange(len(ids) - 1), torch.tensor(ids[1:])] = 1.0  # every next token guessed
    guessed = guessed_tokens(logits, torch.tensor(ids), tokenizer)
    assert guessed == [" ", " thee"] and guesses_right(guessed).startswith("Right on 2 of the 2")


def test_the_cells_keep_spaces_and_mark_what_draws_nothing():
    text = "Shall I, naïve\r\nthee"
    assert shown_tokens(train_tokenizer(), ids_of(train_tokenizer(), text)) == [
        "Sha", "ll", " I", ",", " n", "a", "⟨c3⟩", "⟨af⟩", "v", "e", "‹CR›", "↵", "t", "h", "e", "e"]
    cells = shown_tokens(sentencepiece_tokenizer(), ids_of(sentencepiece_tokenizer(), text))
    assert cells[:3] == [" ", "Shall", " I"] and "".join(cells) == " Shall I, na⟨c3⟩⟨af⟩ve‹CR›↵thee"
