"""explorer.core.inputs: what users type, checked with messages that say what was wrong and what is allowed."""

import pytest

from explorer.core import inputs
from explorer.core.inputs import InputProblem


def test_clean_text_removes_control_characters_but_keeps_emoji_and_newlines():
    text, notices = inputs.clean_text("a\x00b\x07c\r\nd\te 🙂\u200d")
    assert text == "abc\nd\te 🙂\u200d" and notices == ["Removed 2 control character(s) from the input."]
    assert inputs.clean_text("plain") == ("plain", [])
    cut, notices = inputs.clean_text("x" * 50, max_chars=10)
    assert cut == "x" * 10 and "first 10" in notices[0]


def test_clean_text_drops_lone_surrogates_so_the_text_can_be_encoded():
    text, notices = inputs.clean_text("Shall\ud800 I\udfff\x01 compare")
    assert text == "Shall I compare" and text.encode("utf-8")
    assert notices == ["Removed 1 control character(s) and 2 lone surrogate(s) from the input."]
    assert inputs.clean_text("🙂")[0] == "🙂"  # a real pair is one character, category So


@pytest.mark.parametrize("value, kind", [(["a"], "a list"), ({"a": 1}, "a dictionary"), (3, "a number")])
def test_clean_text_refuses_what_is_not_text(value, kind):
    with pytest.raises(InputProblem, match=f"Expected text in this box, got {kind}"):
        inputs.clean_text(value)


@pytest.mark.parametrize("value, after", [("", ""), (None, ""), ("  \n", ""), ("\x00\ud800", " (after removing")])
def test_require_text_says_the_box_is_empty(value, after):
    with pytest.raises(InputProblem, match="Type a prompt first: the box is empty") as problem:
        inputs.require_text(value)
    assert after in str(problem.value)


@pytest.mark.parametrize("value, expected", [(0, 0), (7.0, 7), ("42", 42), (" 3 ", 3), (2**32 - 1, 2**32 - 1)])
def test_whole_number_accepts_integers_in_range(value, expected):
    assert inputs.whole_number(value, "Seed", 0, 2**32 - 1) == expected


@pytest.mark.parametrize("value", [2**64, -2**63 - 1, -1, float("inf"), float("nan"), "Infinity", "NaN", 1.5, None,
                                   "abc", [1], True, "9" * 5000])
def test_whole_number_says_what_is_allowed(value):
    with pytest.raises(InputProblem, match=r"Seed must be a whole number from 0 to 4,294,967,295; got "):
        inputs.whole_number(value, "Seed", *inputs.SEED_RANGE)


def test_count_moves_numbers_into_range_and_refuses_text():
    assert inputs.count(0, "Max new tokens", 1, 512) == (1, ["Max new tokens was 0; using 1, the least allowed."])
    assert inputs.count(10**7, "Max new tokens", 1, 512) == (512, ["Max new tokens 10,000,000 is above the limit 512; using 512."])
    assert inputs.count("12", "Max new tokens", 1, 512) == (12, [])
    for bad in ("junk", None, float("nan"), [3]):
        with pytest.raises(InputProblem, match="Max new tokens must be a whole number from 1 to 512"):
            inputs.count(bad, "Max new tokens", 1, 512)


@pytest.mark.parametrize("value", [float("inf"), float("nan"), "abc", None, [0.5]])
def test_number_refuses_what_is_not_a_finite_number(value):
    with pytest.raises(InputProblem, match=r"Temperature must be a number \(0 to 5\); got"):
        inputs.number(value, "Temperature", "0 to 5")
    assert inputs.number("0.5", "Temperature", "0 to 5") == 0.5


@pytest.mark.parametrize("value, kind", [(["shakespeare-main"], "a list"), ({"name": "x"}, "a dictionary"),
                                         (None, "nothing"), ("", "a text"), (3, "a number")])
def test_model_name_must_be_text(value, kind):
    with pytest.raises(InputProblem, match=f"Pick a model: its name is a text such as 'shakespeare-main'; got {kind}"):
        inputs.model_name(value)


@pytest.mark.parametrize("value, expected, notice", [
    ("1", 1, None), (2, 2, None), ("99", 3, "Head 99 does not exist (this model has heads 0 to 3); showing head 3."),
    (-1, 0, "Head -1 does not exist"), ("Infinity", 0, "Head `Infinity` is not a whole number"),
    (float("nan"), 0, "Head `nan` is not a whole number"), ("junk", 0, "(this model has heads 0 to 3); showing head 0."),
])
def test_index_keeps_layers_and_heads_in_range_and_says_so(value, expected, notice):
    index, notices = inputs.index(value, 4, "head")
    assert index == expected and (notices == [] if notice is None else notice in notices[0])


def test_echo_shows_user_text_as_a_code_span():
    assert inputs.echo("<img src=x onerror=alert(1)>") == "`<img src=x onerror=alert(1)>`"
    assert inputs.echo("a `b` c") == "``a `b` c``" and inputs.echo("`x") == "`` `x ``"
    assert inputs.echo("a\nb\ud800") == "`a↵b`" and inputs.echo("") == "nothing (an empty text)"
    assert inputs.echo("x" * 100, limit=10) == "`" + "x" * 9 + "…`"
    assert inputs.echo(["a"]) == "`['a']`"


def test_error_text_names_the_error_but_not_the_servers_paths():
    assert inputs.error_text(ValueError("bad <b>")) == "`ValueError: bad <b>`"
    assert inputs.error_text(FileNotFoundError(2, "No such file or directory", "/srv/secret/x")) == \
        "`FileNotFoundError: No such file or directory`"
