"""explorer/generation/tokens.one_token, the one check of every answer and target a user types (Activation patching's
answers, One gradient step's target), on shakespeare-main's tokenizer and on a tokenizer of symbols; and
explorer/generation/symbols, the tokenizer of a model trained on random tokens."""


import pytest

from explorer.core.inputs import InputProblem
from explorer.generation.symbols import SYMBOLS, reads_symbols, repeated_example, symbol_tokenizer
from explorer.generation.labels import token_labels
from explorer.generation.tokens import one_token
from support.shipped import SHIPPED_ROOT


@pytest.fixture(scope="module")
def main_tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(SHIPPED_ROOT / "shakespeare-main")


def test_a_word_typed_without_its_space_is_kept_with_a_notice_naming_both_tokens(main_tokenizer):
    bare, notices = one_token(main_tokenizer, "Juliet", "The answer", len(main_tokenizer))
    spaced, none = one_token(main_tokenizer, " Juliet", "The answer", len(main_tokenizer))
    assert (bare, spaced) == (2236, 3395) and none == []  # two different single tokens
    assert len(notices) == 1 and "id 2236" in notices[0] and "id 3395" in notices[0] and "`␣Juliet`" in notices[0]
    assert one_token(main_tokenizer, "␣Juliet", "The answer", len(main_tokenizer)) == (3395, [])  # as the app labels it
    assert not reads_symbols(main_tokenizer)


def test_a_word_of_two_tokens_hints_at_the_spaced_one(main_tokenizer):
    with pytest.raises(InputProblem, match=r"The target must be exactly one token.*`send` is 2 tokens.*"
                                           r"With a leading space, ` send` is one token"):
        one_token(main_tokenizer, "send", "The target", len(main_tokenizer))
    with pytest.raises(InputProblem, match=r"`␣Norfolk` is 3 tokens.*Type one of them, such as the first, `␣Nor`"):
        one_token(main_tokenizer, "␣Norfolk", "The answer", len(main_tokenizer))


def test_several_words_hint_at_one_word_that_is_one_token(main_tokenizer):
    """'summer day' is 4 tokens (`s` `um` `mer` `␣day`): the hint is a word, ` summer`, not the useless first `s`."""
    with pytest.raises(InputProblem, match=r"`summer day` is 4 tokens: `s` `um` `mer` `␣day`\. It is 2 words: type one, "
                                           r"such as ` summer` \(one token\)\."):
        one_token(main_tokenizer, "summer day", "The target", len(main_tokenizer))


def test_one_character_a_token_suggests_the_first_token():
    tokenizer = symbol_tokenizer(64)
    with pytest.raises(InputProblem, match=r"` day` is 3 tokens: `d` `a` `y`\. Type one of them, such as the first, `d`"):
        one_token(tokenizer, " day", "The target", len(tokenizer))
    assert one_token(tokenizer, "d", "The target", len(tokenizer)) == (3 + SYMBOLS.index("d"), [])


def test_the_symbol_tokenizer_shows_one_symbol_per_id_and_survives_saving(tmp_path):
    from transformers import AutoTokenizer

    tokenizer = symbol_tokenizer(259)
    assert len(tokenizer) == 259 and SYMBOLS[:13] == tuple("0123456789ABC")
    assert tokenizer("AB C\nD", add_special_tokens=False).input_ids == [13, 14, 15, 16]  # spaces, breaks skipped
    assert token_labels(tokenizer, [0, 1, 2, 3, 13, 258]) == ["<s>", "<pad>", "<unk>", "0", "A", SYMBOLS[255]]
    assert tokenizer("A.", add_special_tokens=False).input_ids == [13, 2]  # outside the alphabet: <unk>
    tokenizer.save_pretrained(tmp_path)
    again = AutoTokenizer.from_pretrained(tmp_path)
    assert reads_symbols(again) and again.decode([13, 14, 15]) == "ABC"
    assert len(set(SYMBOLS)) == len(SYMBOLS) == 509


def test_the_symbol_example_is_a_repeat_whose_answer_follows_the_earlier_copy():
    tokenizer = symbol_tokenizer(259)
    clean, corrupted, what = repeated_example(tokenizer)
    first, second = clean.split(" ")
    assert len(first) == 12 and second == first[:-1] and len(set(first)) == 12
    assert corrupted.split(" ")[1] == second and corrupted[:11] == first[:11] and corrupted[11] not in first
    assert len(tokenizer(clean).input_ids) == len(tokenizer(corrupted).input_ids) == 23
    assert f"the answer is {first[-1]}" in what
