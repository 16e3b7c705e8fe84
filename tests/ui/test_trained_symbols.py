"""Train one yourself's one-click induction setting (random tokens): its model gets a tokenizer of one symbol per
token id (explorer/generation/symbols.py), so "Open in every tab" opens it and every view works on it, Activation
patching included, on the example that model reads (a repeat of random symbols). Through gradio_client against the
app server (tests/conftest.py), as a browser session would."""

import pytest
from gradio_client import Client, handle_file

from explorer.core.visitor import Visitor, visiting
from explorer.generation.symbols import reads_symbols
from explorer.views.patching.analysis import MIN_LOGIT_GAP
from explorer.views.patching.texts import symbol_example


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """The zip of a real job of the induction preset, 3 steps, and its tokenizer."""
    from explorer.learning import live_result, live_settings, train_live

    settings = live_settings.check_settings(preset="induction", steps=3, log_every=3, sample_tokens=2)
    *_, result = train_live.train_live(settings)
    return live_result.save_zip(result, tmp_path_factory.mktemp("trained-symbols")), result.tokenizer


@pytest.fixture(scope="module")
def opened(app_server, trained):
    """(a client of one session, the menu name of the model it opened)."""
    mine = Client(app_server, verbose=False)
    result, line = mine.predict(handle_file(str(trained[0])), api_name="/open_trained")
    assert result is not None and result["source"] == "trained", line
    return mine, result["name"]


def test_the_model_of_random_tokens_is_saved_with_its_symbols(trained):
    import zipfile

    archive, tokenizer = trained
    assert reads_symbols(tokenizer) and len(tokenizer) == 259
    assert "tokenizer.json" in zipfile.ZipFile(archive).namelist()


VIEWS = {  # endpoint -> its arguments after (text, model); the text is the model's example, its symbols
    "/generate": ("Greedy", 1.0, 0, 1.0, 1.0, 8, 0),
    "/attention": ("self", "0", "average"),
    "/forward_trace": (),
    "/attention_steps": ("self", 1, 2, -1, False),
    "/logit_lens": (3,),
    "/ablate_heads": ("self", "0.1, 1"),
    "/rank_heads": ("self",),
    "/next_token_distribution": (0.7, 5, 1.0, 1.0),
}


@pytest.mark.parametrize("endpoint", list(VIEWS))
def test_every_view_reads_its_symbols(opened, trained, endpoint):
    mine, name = opened
    clean, _, _ = symbol_example(trained[1])
    *_, note = mine.predict(clean, name, *VIEWS[endpoint], api_name=endpoint)
    assert "⚠" not in note and "Something went wrong" not in note, note
    if endpoint not in ("/generate", "/forward_trace"):  # their status lines do not name the model
        assert name in note


def test_one_gradient_step_takes_a_symbol_as_its_target(opened, trained):
    mine, name = opened
    clean, _, _ = symbol_example(trained[1])
    *_, note = mine.predict(clean, name, -1, clean[-1], 0.5, api_name="/gradient_step")
    assert "⚠" not in note and name in note, note
    *_, note = mine.predict(clean, name, -1, " day", 0.5, api_name="/gradient_step")
    assert "` day` is 3 tokens: `d` `a` `y`. Type one of them, such as the first, `d`." in note


def test_activation_patching_draws_every_grid_on_its_example(opened, trained):
    mine, name = opened
    clean, corrupted, what = symbol_example(trained[1])
    answer = what.split("the answer is ")[1][0]
    residual, heads, attention, feed_forward, numbers, explained, *_, line = mine.predict(
        name, clean, corrupted, answer, "", None, api_name="/activation_patching")
    assert "⚠" not in line and "patched runs in" in line, line
    assert residual is not None and heads is not None and attention is not None
    assert feed_forward is None  # the preset trains attention only: no feed-forward grid, and a notice says so
    assert "feed-forward grid is left out" in line
    assert numbers["answer"] == answer and len(numbers["tokens"]) == 23 and numbers["changed_positions"] == [11]
    # 3 steps in, no induction head yet: the changed symbol barely moves the answer, and the tab says so
    gap = abs(numbers["clean_metric"] - numbers["corrupted_metric"])
    assert 0 < gap < MIN_LOGIT_GAP and "Nothing to measure here" in line and "No place is ranked" in explained


def test_the_patching_tab_puts_in_the_example_each_model_reads_and_the_note_beside_it(opened, trained):
    from explorer.present.patching import DEFAULT_NOTE
    from explorer.models import registry
    from explorer.views.patching.texts import DEFAULT_CLEAN, DEFAULT_CORRUPTED, example_texts
    from ui.events import KEPT
    from ui.tabs import patching as tab

    mine, name = opened
    clean, corrupted, what = symbol_example(trained[1])
    shown = [DEFAULT_CLEAN, DEFAULT_CORRUPTED]
    with visiting(Visitor(mine.session_hash)):  # the handlers, called here as the page's session calls them
        assert tab.example_texts(name, *shown, shown) == (clean, corrupted, [clean, corrupted])
        back = list(example_texts(registry.resolve("shakespeare-rope")[2]))  # the default, paired for its tokenizer
        assert back[0] == DEFAULT_CLEAN
        assert tab.example_texts("shakespeare-rope", clean, corrupted, [clean, corrupted]) == (*back, back)  # back
        assert tab.example_texts(name, "a text of my own", DEFAULT_CORRUPTED, shown) == (KEPT, KEPT, KEPT)
        note = tab.example_note(name, clean, corrupted)
        assert note["visible"] is True and what in note["value"]
        assert tab.example_note("shakespeare-main", *shown) == {"__type__": "update", "value": DEFAULT_NOTE,
                                                                "visible": True}
        for model, texts in ((name, shown), ("shakespeare-main", [DEFAULT_CLEAN + " again", DEFAULT_CORRUPTED]),
                             ("shakespeare-rope", shown), (name, [clean, clean])):
            assert tab.example_note(model, *texts)["visible"] is False, (model, texts)  # Norfolk's note goes


def test_one_gradient_step_offers_a_target_the_model_reads_as_one_token(opened):
    from ui.events import KEPT
    from ui.tabs import gradient_step as tab

    mine, name = opened
    day = tab.EXAMPLE_TARGET
    with visiting(Visitor(mine.session_hash)):  # the handler, called here as the page's session calls it
        assert tab.example_target(name, day, day) == ("d", "d")  # " day" is 3 symbols here: its first
        # the tiny checkpoints' BPE reads " day" as " da" + "y": its first token, "␣da"
        assert tab.example_target("shakespeare-rope", "d", "d") == ("␣da", "␣da")
        assert tab.example_target(name, "Q", "d") == (KEPT, KEPT)  # a target the learner typed stays
    assert tab.example_target(name, day, day) == (KEPT, KEPT)  # another visitor (here: none) cannot read that model
