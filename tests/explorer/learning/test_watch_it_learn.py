"""The Watch it learn view of a training run (explorer.learning.watch_it_learn, explorer.present.watch_it_learn): every
number it shows is the snapshot's own (attention and sample recomputed here from the weights file, curves and scores
read from timeline.json), on the tiny training runs of tests/support/fixtures_checkpoints.py; bad input gets a message."""

import copy
import json

import numpy as np
import pytest
import torch
from transformers import AutoTokenizer

from checkpointing.loading import read_config
from checkpointing.training_run import TIMELINE_FILE, load_snapshot
from explorer.present import watch_it_learn
from explorer.core.inputs import InputProblem
from explorer.learning.guesses import MISSED, repeated_ending
from explorer.learning.training_runs import CONTROL_RUN, DEFAULT_RUN, TrainingRun, training_runs
from explorer.learning.watch_it_learn import DEFAULT_TEXT, MAX_TEXT_CHARS, SAMPLE_TOKENS, TimelineView, timeline_view

TOLERANCE = 1e-5  # float32


@pytest.fixture(scope="module")
def root(tiny_checkpoints):
    return tiny_checkpoints


def timeline_of(root, name) -> dict:
    return json.loads((root / name / TIMELINE_FILE).read_text())


def snapshot_of(root, name, index):
    """The snapshot's model loaded here, on its own, and the run's tokenizer."""
    folder = root / name
    entry = timeline_of(root, name)["snapshots"][index]
    return load_snapshot(folder, entry["file"], read_config(folder)), AutoTokenizer.from_pretrained(folder)


def test_the_training_runs_are_found_among_the_checkpoints_the_default_first(root):
    assert list(training_runs(root)) == [DEFAULT_RUN, CONTROL_RUN]  # the other checkpoints hold no timeline.json


@pytest.mark.parametrize("name", [DEFAULT_RUN, CONTROL_RUN])
def test_the_attention_grid_is_the_snapshots_own_attention_on_the_text(root, name):
    view = timeline_view(name, 1, DEFAULT_TEXT, root)
    model, tokenizer = snapshot_of(root, name, 1)
    ids = tokenizer(DEFAULT_TEXT, return_tensors="pt").input_ids
    assert ids.shape[1] == len(DEFAULT_TEXT.encode()) == 59  # one token per byte, the whole text within the context
    with torch.no_grad():
        own = torch.stack([a[0] for a in model(ids, output_attentions=True).attentions]).numpy()
    assert view.weights.shape == own.shape == (2, 4, 59, 59)
    np.testing.assert_allclose(view.weights, own, atol=TOLERANCE, rtol=0)
    assert view.tokens[:4] == ["0:I", "1:f", "2:␣", "3:m"] and view.tokens[-1] == "58:d"  # bytes as characters
    grid = watch_it_learn.timeline_attention_figure(view)
    assert len(grid.data) == 8
    for i, trace in enumerate(grid.data):  # row by row: layer, then head
        np.testing.assert_allclose(trace.z, own[i // 4, i % 4], atol=TOLERANCE, rtol=0)
        assert list(trace.x) == list(trace.y) == view.tokens
    scores = timeline_of(root, name)["snapshots"][1]
    assert grid.layout.annotations[6].text == (f"L1 H2<br>ind {scores['induction'][1][2]:.2f} · "
                                               f"prev {scores['previous_token'][1][2]:.2f}")


def test_the_enlarged_heads_are_the_best_previous_token_and_induction_heads_of_the_snapshot(root):
    view = timeline_view(DEFAULT_RUN, 2, DEFAULT_TEXT, root)
    scores = timeline_of(root, DEFAULT_RUN)["snapshots"][2]
    figures = watch_it_learn.circuit_head_figures(view)
    for score, figure in figures.items():
        grid = np.asarray(scores[score])
        layer, head = np.unravel_index(np.argmax(grid), grid.shape)
        np.testing.assert_allclose(figure.data[0].z, view.weights[layer, head], atol=TOLERANCE, rtol=0)
        assert f"layer {layer}, head {head} (score {grid.max():.2f})" in figure.layout.title.text


def test_the_sample_is_model_generate_greedy_from_the_snapshot_within_its_context(root):
    text = (DEFAULT_TEXT + " ") * 2
    view = timeline_view(DEFAULT_RUN, 2, text, root)
    model, tokenizer = snapshot_of(root, DEFAULT_RUN, 2)
    ids = tokenizer(text, return_tensors="pt").input_ids
    room = model.config.context_length - ids.shape[1]
    assert room == 8 < SAMPLE_TOKENS  # 120 tokens of a 128-token context: 8 new ones fit
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=room, do_sample=False,
                             pad_token_id=model.config.pad_token_id)
    assert out.shape[1] == 128 or int(out[0, -1]) == model.config.eos_token_id
    assert view.sample == tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True) and view.sample


def test_the_loss_curves_are_timeline_json_of_both_runs_with_the_step_marked(root):
    view = timeline_view(DEFAULT_RUN, 1, DEFAULT_TEXT, root)
    fig = watch_it_learn.timeline_loss_figure(view)
    traces = {trace.name: trace for trace in fig.data if trace.name}
    for name in (DEFAULT_RUN, CONTROL_RUN):
        timeline = timeline_of(root, name)
        curve = np.asarray(timeline["train_curve"])
        np.testing.assert_array_equal(traces[f"{name}: training loss"].x, curve[:, 0])
        np.testing.assert_array_equal(traces[f"{name}: training loss"].y, curve[:, 1])
        assert list(traces[f"{name}: validation loss"].x) == [s["step"] for s in timeline["snapshots"]]
        assert list(traces[f"{name}: validation loss"].y) == [s["validation_loss"] for s in timeline["snapshots"]]
    step = timeline_of(root, DEFAULT_RUN)["snapshots"][1]["step"]
    assert step == 10 and [shape.x0 for shape in fig.layout.shapes] == [step]
    assert fig.data[-1].x == (step,) and fig.data[-1].y == (timeline_of(root, DEFAULT_RUN)["snapshots"][1]["validation_loss"],)


def test_every_heads_scores_over_training_are_timeline_json_with_the_other_runs_best_head(root):
    view = timeline_view(CONTROL_RUN, 0, DEFAULT_TEXT, root)
    fig = watch_it_learn.timeline_heads_figure(view)
    own, other = timeline_of(root, CONTROL_RUN)["snapshots"], timeline_of(root, DEFAULT_RUN)["snapshots"]
    lines = [trace for trace in fig.data if trace.legendgroup not in ("other", None)]
    assert len(lines) == 2 * 8  # every head, induction then previous-token
    pairs = [trace for trace in fig.data if trace.name and "→" in trace.name]
    assert [t.name for t in pairs] == [f"L0.H{a} → L1.H{b}" for a in range(4) for b in range(4)]
    assert [list(t.y) for t in pairs] == [view.composition[(0, a, 1, b)] for a in range(4) for b in range(4)]
    assert len(set(str(colour) for row in watch_it_learn.head_colours(2, 4) for colour in row)) == 8  # 8 distinct
    for i, trace in enumerate(lines):
        score, layer, head = ("induction", "previous_token")[i // 8], i % 8 // 4, i % 4
        assert trace.name == f"layer {layer}, head {head}"
        assert list(trace.x) == [s["step"] for s in own] and list(trace.y) == [s[score][layer][head] for s in own]
    dashed = [trace for trace in fig.data if trace.legendgroup == "other"]
    assert [list(t.y) for t in dashed] == [[max(map(max, s[score])) for s in other] for score in ("induction", "previous_token")]
    assert dashed[0].name == f"{DEFAULT_RUN}: its best head" and dashed[0].line.dash == "dash"


def test_the_summary_is_the_snapshots_record(root):
    snapshot = timeline_of(root, DEFAULT_RUN)["snapshots"][2]
    view = timeline_view(DEFAULT_RUN, -1, DEFAULT_TEXT, root)  # −1: the last
    induction = np.asarray(snapshot["induction"])
    layer, head = np.unravel_index(np.argmax(induction), induction.shape)
    assert view.index == 2 and view.summary() == (
        f"**Step 20** of 20 (snapshot 2 of 0–2) · {snapshot['tokens']:,} tokens seen · training loss "
        f"{snapshot['train_loss']:.3f}, validation loss {snapshot['validation_loss']:.3f} nats/token · best induction "
        f"head: layer {layer}, head {head} ({induction.max():.2f}) · repeated-passage ratio "
        f"{snapshot['repeated_passage_ratio']:.2f}")
    assert snapshot["tokens"] == 20 * 4 * 128 and "training loss none yet" in timeline_view(None, 0, "a b", root).summary()


def test_the_step_where_a_head_forms_is_the_first_snapshot_reaching_the_threshold(root):
    run = timeline_view(DEFAULT_RUN, 0, DEFAULT_TEXT, root).run
    assert run.formed() is None and "No head of timeline-repeats reaches" in TimelineView(
        run, None, 0, None, "", []).formed_line()  # a few steps of training form nothing
    formed = copy.deepcopy(run.timeline_json)
    formed["snapshots"][2]["induction"][1][3] = 0.9
    formed["snapshots"][1]["induction"][1][3] = 0.39  # just below the label threshold, 0.4
    formed["snapshots"][1]["induction"][1][0] = 0.5  # a second head, formed earlier: both are named
    view = TimelineView(TrainingRun(run.info, formed), None, 0, None, "", [])
    steps = view.run.steps
    assert view.run.formed() == 1 and view.run.heads_formed() == [(1, 0, steps[1]), (1, 3, steps[2])]
    assert f"2 induction heads (score at least 0.4 at a snapshot): L1.H0 from step {steps[1]:,}, L1.H3 from step " \
           f"{steps[2]:,}" in view.formed_line()


def test_the_guesses_are_the_snapshot_own_most_likely_next_tokens(root):
    view = timeline_view(DEFAULT_RUN, 2, DEFAULT_TEXT, root)
    folder = root / DEFAULT_RUN
    model = load_snapshot(folder, view.run.snapshots[2]["file"], read_config(folder))
    tokenizer = AutoTokenizer.from_pretrained(folder)
    ids = tokenizer(DEFAULT_TEXT, return_tensors="pt").input_ids[0]
    with torch.no_grad():
        best = model(ids[None]).logits[0, :-1].argmax(-1)
    right = best == ids[1:]
    assert len(view.guessed) == len(ids) - 1 and 0 < int(right.sum()) < len(right)  # some right, some wrong
    for token, is_right, actual in zip(view.guessed, right, ids[1:]):
        assert token == (tokenizer.decode([int(actual)]) if is_right else "")
    text_line, guess_line = view.guesses_line().split("\n")
    assert text_line == DEFAULT_TEXT and len(guess_line) == len(text_line)  # one byte a cell, from the first character
    assert guess_line[0] == " " and guess_line.count(MISSED) == int((~right).sum())
    assert all(g in (MISSED, t) for g, t in zip(guess_line[1:], text_line[1:]))
    # the repeated ending: "If music be the food" twice; right guesses counted in each copy from its second byte
    first, repeat = DEFAULT_TEXT.index("If music"), DEFAULT_TEXT.rindex("If music")
    L = len(DEFAULT_TEXT) - repeat
    count = lambda start: int(right[start: start + L - 1].sum())  # right[t - 1]: token t
    assert view.guess_counts() == {"first copy": (count(first), L - 1), "repeat": (count(repeat), L - 1)}
    assert view.guesses_count().startswith(f"Right on {int(right.sum())} of the {len(right)} next tokens of your text.")


def test_a_text_longer_than_the_context_is_cut_to_it_and_leaves_no_room_for_a_sample(root):
    view = timeline_view(DEFAULT_RUN, 0, "x" * 300, root)
    assert view.weights.shape[-1] == 128 and view.sample == ""
    assert view.notices == ["The text is 300 tokens; showing its first 128.",
                            "The text fills the model's context (128 tokens), so there is no room to continue it: "
                            "shorten it to see a sample."]


def test_tokens_are_bytes_and_markup_is_shown_as_text(root):
    view = timeline_view(DEFAULT_RUN, 0, "<b>é</b>", root)
    assert len(view.tokens) == len("<b>é</b>".encode()) == 9
    labels = watch_it_learn.timeline_attention_figure(view).data[0].x
    assert labels[0] == "0:&lt;" and not any("<" in label for label in labels)


@pytest.mark.parametrize("run, snapshot, text, expected", [
    (DEFAULT_RUN, 3, DEFAULT_TEXT, "The snapshot (timeline-repeats has 3: 0 is step 0, 2 is step 20; −1 is the last) "
                                   "must be a whole number from -1 to 2; got `3`."),
    (DEFAULT_RUN, -2, DEFAULT_TEXT, "must be a whole number from -1 to 2; got `-2`."),
    (DEFAULT_RUN, 1.5, DEFAULT_TEXT, "got `1.5`"),
    (DEFAULT_RUN, "last", DEFAULT_TEXT, "got `last`"),
    (DEFAULT_RUN, 0, "", "Type some text first: the box is empty."),
    (DEFAULT_RUN, 0, " \n ", "Type some text first: the box is empty."),
    (DEFAULT_RUN, 0, "a" * (MAX_TEXT_CHARS + 1), "The text is 2,001 characters; this view takes at most 2,000 (and the "
                                                 "model reads only its first 128 tokens, one per byte): shorten it."),
    ("nope", 0, DEFAULT_TEXT, "`nope` is not a checkpoint here; pick a recorded run: timeline-repeats, timeline-plain."),
    ("shakespeare-rope", 0, DEFAULT_TEXT, "`shakespeare-rope` has no recorded training (no timeline.json)"),
    (5, 0, DEFAULT_TEXT, "The run is named by a text, one of: timeline-repeats, timeline-plain; got a number."),
])
def test_bad_input_gets_a_message_saying_what_is_allowed(root, run, snapshot, text, expected):
    with pytest.raises(InputProblem) as problem:
        timeline_view(run, snapshot, text, root)
    assert expected in str(problem.value)


def test_no_training_run_says_how_to_make_one(tmp_path):
    with pytest.raises(InputProblem, match="No recorded training run found among the checkpoints"):
        timeline_view(None, 0, DEFAULT_TEXT, tmp_path)


def test_the_default_text_repeats_its_line_where_the_teaching_says():
    line = DEFAULT_TEXT.split(". ")[0] + ". "
    assert DEFAULT_TEXT.startswith(line) and DEFAULT_TEXT[len(line):] == line[:len(DEFAULT_TEXT) - len(line)]
    assert f"L = {len(line.encode())}" in watch_it_learn.TIMELINE and len(line) == 39 < 64  # within the repeats the run trained on


def test_a_byte_of_a_character_outside_ascii_is_shown_as_hex_and_keeps_the_alignment(root):
    view = timeline_view(DEFAULT_RUN, 2, "café, café", root)
    text_line, guess_line = view.guesses_line().split("\n")
    assert text_line == "caf⟨c3⟩⟨a9⟩, caf⟨c3⟩⟨a9⟩" and len(guess_line) == len(text_line)
    assert "\ufffd" not in view.guesses_line()


def test_the_repeated_ending_is_the_longest_that_occurred_before():
    assert repeated_ending([1, 2, 3, 4, 5, 9, 1, 2, 3, 4, 5]) == (0, 6, 5)
    assert repeated_ending([7, 1, 2, 3, 4, 8, 1, 2, 3, 4]) == (1, 6, 4)
    assert repeated_ending([1, 2, 3, 4, 5, 6]) is None


def test_the_nearest_snapshot_to_a_step(root):
    run = timeline_view(DEFAULT_RUN, -1, DEFAULT_TEXT, root).run
    assert run.nearest(run.steps[-1]) == len(run.steps) - 1 and run.nearest(-5) == 0
    middle = (run.steps[1] + run.steps[2]) / 2
    assert run.nearest(middle) == 1 and run.nearest(middle + 1) == 2


def test_switching_the_shipped_runs_keeps_the_step_not_the_index():
    """The slider moves to the snapshot of the new run nearest the step shown (the issue: timeline-plain at step
    8,000 went to timeline-repeats at step 250)."""
    from explorer.learning.training_runs import pick_run
    from ui.tabs.watch_it_learn import slider_for

    plain, repeats = pick_run(CONTROL_RUN), pick_run(DEFAULT_RUN)
    update = slider_for(DEFAULT_RUN, plain.steps[-1])
    assert repeats.steps[update["value"]] == plain.steps[-1] == 8000
    assert update["maximum"] == len(repeats.steps) - 1


def test_composition_is_the_induction_score_a_later_head_loses_without_an_earlier_one(root):
    """Recomputed another way: the earlier head removed by zeroing its columns of W_O in a copy of the model."""
    from checkpointing.in_context import INDUCTION_LENGTH, attention_weights, induction_probe, induction_scores_from
    from explorer.learning.composition import composition_scores

    folder = root / DEFAULT_RUN
    model = load_snapshot(folder, json.loads((folder / TIMELINE_FILE).read_text())["snapshots"][-1]["file"],
                          read_config(folder))
    ids = induction_probe(model.config.vocab_size, INDUCTION_LENGTH)
    base = induction_scores_from(attention_weights(model, ids), INDUCTION_LENGTH)
    scores = composition_scores(model)
    d = model.config.d_head
    for h1 in range(model.config.n_heads):
        edited = copy.deepcopy(model)
        with torch.no_grad():
            edited.model.decoder.stack.layers[0].self_attn.out_proj.weight[:, h1 * d:(h1 + 1) * d] = 0
        ablated = induction_scores_from(attention_weights(edited, ids), INDUCTION_LENGTH)
        for h2 in range(model.config.n_heads):
            assert scores[(0, h1, 1, h2)] == pytest.approx(float(base[1, h2] - ablated[1, h2]), abs=1e-5)


def test_the_shipped_circuit_pair_rises_when_the_induction_head_forms():
    """timeline-repeats: the pair feeding the first induction head to form goes from nothing to nearly all of its
    score, at the snapshot where that head forms; the control's pairs stay low."""
    from explorer.models import registry
    from explorer.learning.composition import run_composition
    from explorer.learning.training_runs import pick_run

    run = pick_run(DEFAULT_RUN)
    composition = run_composition(run, registry.resolve(DEFAULT_RUN)[1])
    layer, head, step = run.heads_formed()[0]
    pair = max((p for p in composition if p[2:] == (layer, head)), key=lambda p: composition[p][-1])
    formed = run.steps.index(step)
    assert composition[pair][0] < 0.05 and composition[pair][formed - 1] < 0.2 and composition[pair][-1] > 0.9
    control = pick_run(CONTROL_RUN)
    assert max(max(v) for v in run_composition(control, registry.resolve(CONTROL_RUN)[1]).values()) < 0.3
