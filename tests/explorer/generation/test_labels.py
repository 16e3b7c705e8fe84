"""explorer/generation/labels: one way to write a token on screen for both kinds of tokenizer the app opens (byte-level
BPE: ours, as GPT-2's; SentencePiece with byte fallback, as Llama 2's), and a label typed back read as its token."""

import re
import unicodedata

import pytest

from explorer.generation.labels import NAMED, label_of, labelled, token_labels, typed, typed_bytes, visible
from explorer.generation.tokens import one_token
from support.fixtures_checkpoints import train_tokenizer
from support.sentencepiece import sentencepiece_tokenizer

TEXT = "Shall I compare thee\tto a naïve 🙂 day?\r\nThou art"  # spaces, a tab, split characters, CR LF


@pytest.fixture(scope="module", params=["byte-level", "sentencepiece"])
def tokenizer(request):
    return train_tokenizer() if request.param == "byte-level" else sentencepiece_tokenizer()


def ids_of(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False).input_ids


def test_every_label_draws_every_character_it_has(tokenizer):
    """Before, a control character was written as its Python escape ('\\r': a backslash and an r, which a token
    could hold), a SentencePiece space as ▁ and its bytes as <0xC3>."""
    labels = token_labels(tokenizer, range(len(tokenizer)))
    assert all(unicodedata.category(c)[0] not in "CZ" for label in labels for c in label)
    assert not any("▁" in label or re.search("<0x", label) for label in labels)
    by_bytes = {typed_bytes(label): label for label in labels}
    assert [by_bytes[c.encode()] for c in ("\x00", "\r", "\x1b", "\x7f", "\n", "\t")] == [
        "‹NUL›", "‹CR›", "‹ESC›", "‹DEL›", "↵", "⇥"]
    assert [visible(c) for c in "a\u200b\u00a0\u2028é\u2066"] == ["a", "‹ZWSP›", "‹NBSP›", "‹LS›", "é", "‹U+2066›"]


def test_the_labels_of_a_text_hold_exactly_its_bytes(tokenizer):
    """Read back (``typed_bytes``), a text's labels are its bytes, a SentencePiece text with the space its
    tokenizer puts before it: a split character's bytes as ⟨c3⟩ (before: the byte-level stand-in, '©' for byte
    a9, which reads as a character of the text), a word's leading space kept (before: 'thee' for ▁thee)."""
    labels = token_labels(tokenizer, ids_of(tokenizer, TEXT))
    spaced = tokenizer.convert_ids_to_tokens(ids_of(tokenizer, "x"))[0].startswith("▁")
    assert b"".join(map(typed_bytes, labels)) == ((" " if spaced else "") + TEXT).encode()
    assert "⟨c3⟩" in labels and "‹CR›" in labels and "␣thee" in labels
    assert "©" not in "".join(token_labels(tokenizer, range(len(tokenizer))))


def test_every_sentencepiece_word_start_is_labelled_with_its_space():
    tokenizer = sentencepiece_tokenizer()
    pieces = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    labels = token_labels(tokenizer, range(len(tokenizer)))
    starts = [label for piece, label in zip(pieces, labels) if piece.startswith("▁")]
    assert len(starts) > 50 and all(label.startswith("␣") for label in starts)
    assert labels[pieces.index("▁")] == "␣" and labels[pieces.index("<0xC3>")] == "⟨c3⟩"


def test_every_label_typed_back_is_its_token(tokenizer):
    """The logit lens shows a token; typed as an answer, that label is that token (or, where two tokens share a
    label, as SentencePiece's 'a' and its byte fallback <0x61> do, one with the same label)."""
    labels = token_labels(tokenizer, range(len(tokenizer)))
    found = [labelled(tokenizer, label) for label in labels]
    assert all(f is not None and labels[f] == label for f, label in zip(found, labels))
    unique = [i for i, label in enumerate(labels) if labels.count(label) == 1]
    assert len(unique) > 0.75 * len(labels) and all(found[i] == i for i in unique)


def test_an_answer_typed_as_a_label_is_that_token(tokenizer):
    """Before, '‹CR›' could not be typed at all, and a SentencePiece tokenizer read a word-internal piece typed
    alone as the word start (▁ put before it) or as two tokens."""
    for text in ("\r", "\t", "\n"):
        token, notices = one_token(tokenizer, visible(text), "The answer", len(tokenizer))
        assert token_labels(tokenizer, [token]) == [visible(text)] and notices == []
    split = ids_of(tokenizer, "ï")[-2]
    assert one_token(tokenizer, "⟨c3⟩", "The answer", len(tokenizer)) == (split, [])
    labels = token_labels(tokenizer, range(len(tokenizer)))
    inside, label = next((i, label) for i, label in enumerate(labels)
                         if len(label) > 1 and label.isalpha() and labelled(tokenizer, "␣" + label) is not None)
    token, notices = one_token(tokenizer, label, "The answer", len(tokenizer))
    assert token == inside and "has no leading space" in notices[0] and f"`␣{label}`" in notices[0]


def test_a_label_that_starts_with_an_accent_draws_it_on_a_dotted_circle():
    """Alone, a combining accent sits on what is written before the label ('3:́' puts it on the colon)."""
    assert [label_of(text) for text in ("\u0301", "e\u0301", "\u20dd")] == ["◌\u0301", "e\u0301", "◌\u20dd"]
    assert typed("◌\u0301") == "\u0301" and typed("◌") == "◌" and typed("◌a") == "◌a"


def test_typed_reads_every_mark_back():
    assert typed("␣the↵‹CR›‹U+2066›⇥‹FOO›‹U+110000›‹U+D800›") == " the\n\r\u2066\t‹FOO›‹U+110000›‹U+D800›"
    assert all(typed(visible(char)) == char for char in [*NAMED, " ", "\n", "\t", "\u2066", "\U000e0001"])
    assert typed_bytes("␣⟨e2⟩⟨80⟩⟨8b⟩") == " \u200b".encode()
