"""explorer/views/patching/analysis on the shipped shakespeare-main: the answers checked as every tab checks them
(tokens.one_token), the empty boxes said, and a corruption that barely moves the answer said to leave nothing to
measure (no place ranked) rather than ranked as if it did."""

import pytest

from explorer.core.inputs import InputProblem
from explorer.present.patching import explanation
from explorer.views.patching.analysis import MIN_LOGIT_GAP, activation_patching
from explorer.views.patching.texts import DEFAULT_CLEAN, DEFAULT_CORRUPTED


def test_an_answer_without_its_leading_space_is_said_to_be_another_token(main):
    model, tokenizer = main
    r = activation_patching(model, tokenizer, DEFAULT_CLEAN, DEFAULT_CORRUPTED, "day", "", ["residual"])
    spaced = tokenizer(" day", add_special_tokens=False).input_ids[0]
    assert r.answer == "day" and r.answer_id != spaced
    said = [n for n in r.notices if "no leading space" in n]
    assert len(said) == 1 and f"id {r.answer_id}" in said[0] and f"id {spaced}" in said[0]
    assert "most likely next token other than the answer" in " ".join(r.notices)  # the empty wrong answer box
    with pytest.raises(InputProblem, match=r"`send` is 2 tokens.*With a leading space, ` send` is one token"):
        activation_patching(model, tokenizer, DEFAULT_CLEAN, DEFAULT_CORRUPTED, "send", "", ["residual"])


def test_both_answers_typed_leave_no_notice_about_the_boxes(main):
    model, tokenizer = main
    r = activation_patching(model, tokenizer, DEFAULT_CLEAN, DEFAULT_CORRUPTED, " send", " the", ["heads"])
    assert (r.answer, r.wrong_answer) == ("␣send", "␣the") and not any("box" in n for n in r.notices)


def test_a_corruption_that_barely_moves_the_answer_ranks_no_place(main, default_patching):
    """"My lord" -> "Good lord": the logit difference moves 0.032 nats (4.091 -> 4.060), under MIN_LOGIT_GAP."""
    model, tokenizer = main
    corrupted = DEFAULT_CLEAN.replace("My lord", "Good lord")
    r = activation_patching(model, tokenizer, DEFAULT_CLEAN, corrupted, grids=["residual", "heads"])
    gap = r.clean_metric - r.corrupted_metric
    assert gap == pytest.approx(0.0317, abs=2e-3) and gap < MIN_LOGIT_GAP and not r.measurable
    assert any(n.startswith("**Nothing to measure here.**") and f"{gap:.3f} apart" in n for n in r.notices)
    text = explanation(r)
    assert "No place is ranked" in text and "restore most" not in text and "restores most" not in text
    assert default_patching.measurable and "restore most" in explanation(default_patching)


def test_the_example_pairs_token_by_token_on_any_tokenizer(tokenizer):
    """On a tokenizer that reads "Portia" and "Norfolk" in different numbers of tokens (the tests' tiny BPE), the
    example's first Norfolk becomes a name read in as many: the two texts pair position by position, one word apart."""
    from explorer.views.patching.texts import DEFAULT_CLEAN, DEFAULT_CORRUPTED, example_texts

    def length(text):
        return len(tokenizer(text).input_ids)

    assert length(DEFAULT_CLEAN) != length(DEFAULT_CORRUPTED)  # the case this example is for
    clean, corrupted = example_texts(tokenizer)
    assert clean == DEFAULT_CLEAN and length(clean) == length(corrupted)
    assert [a == b for a, b in zip(clean.split(), corrupted.split())].count(False) == 1
