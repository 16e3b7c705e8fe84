"""The three tabs of learning through the app's API (gradio_client on the tests' app server): One gradient step
gives explorer.learning.gradient_step's own numbers; Train one yourself streams every logged step, stops on Stop or when
its client leaves, queues a second job behind the first, and serves the trained model as a zip that loads with
from_pretrained; Watch it learn gives explorer.learning.watch_it_learn's own view of a recorded run. Bad input ends as a message
in the status line."""

import math
import re
import tempfile
import threading
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from gradio_client import Client
from gradio_client.utils import Status
from transformers import AutoModelForCausalLM

from checkpointing.loading import load_checkpoint
from support.app_client import call_raw, figure, plotly_array
from explorer.learning.gradient_step import gradient_step
from explorer.learning.live_data import SPECIAL_IDS
from explorer.learning.live_settings import DEFAULT
from explorer.learning.watch_it_learn import DEFAULT_TEXT, timeline_view
from support.fixtures_checkpoints import SEQ2SEQ_NAME
from ui.events import visible_breaks

# a tiny job: one layer, two heads, d_model 16, on repeating random tokens (the default vocabulary: 64 ids, 61 drawn)
TINY = dict(n_layers=1, n_heads=2, d_model=16, learning_rate=0.01, position_encoding="rope", data="random-repeats",
            text="", batch_size=4, context_length=16, log_every=2, seed=0, vocab_size=64, copy_share=0.5,
            attention_only=False, copies_only=False, preset="")
ORDER = ("n_layers", "n_heads", "d_model", "steps", "learning_rate", "position_encoding", "data", "text",
         "batch_size", "context_length", "log_every", "seed", "vocab_size", "copy_share", "attention_only",
         "copies_only", "preset")
TEXT = "To be, or not to be, that is the question"


def train(client, steps=8, **changes):
    values = TINY | {"steps": steps} | changes
    return client.submit(*[values[name] for name in ORDER], api_name="/train_live")


def training_threads():
    return [t for t in threading.enumerate() if t.name == "live-training" and t.is_alive()]


def wait_for_step(job, timeout=60):
    deadline = time.time() + timeout
    while not any(out[-1].startswith("- Step ") for out in job.outputs()):
        assert time.time() < deadline, job.outputs()[-1:] or job.status()
        time.sleep(0.02)


# ------------------------------------------------------------------------------------------------------------
# One gradient step
# ------------------------------------------------------------------------------------------------------------


def test_gradient_step_returns_the_engines_own_numbers(client, tiny_checkpoints):
    tokens, heads, tensors, numbers, note = client.predict(TEXT, "shakespeare-rope", 5, " the", 0.5,
                                                           api_name="/gradient_step")
    model, tokenizer = load_checkpoint(tiny_checkpoints / "shakespeare-rope")[:2]
    own = gradient_step(TEXT, model, tokenizer, 5, " the", 0.5).to_json()
    for key in ("loss_before", "loss_after", "p_before", "p_after"):
        assert numbers[key] == pytest.approx(own[key], rel=1e-6, abs=1e-9), key
    assert numbers["grad_norms"].keys() == own["grad_norms"].keys() and len(own["grad_norms"]) > 20
    for name, norm in own["grad_norms"].items():
        assert numbers["grad_norms"][name] == pytest.approx(norm, rel=1e-5), name
    for part, grid in own["head_grad_norms"].items():
        assert np.allclose(numbers["head_grad_norms"][part], grid, rtol=1e-5, atol=0), part
    assert numbers["top_before"][0][0] == own["top_before"][0][0] and numbers["tokens"] == own["tokens"]
    assert len(numbers["tokens"]) == 6  # tokens 0..5
    # the note shows the step the JSON holds (the app's process reduces in another order: own 16.247751, the
    # app's 16.247749, which round to different fourth decimals)
    assert f"loss {numbers['loss_before']:.4f} → {numbers['loss_after']:.4f}" in note
    # per head: one map per part and all four together, layers x heads of the tiny model
    head_maps = figure(heads)["data"]
    assert [m["type"] for m in head_maps] == ["heatmap"] * 5
    assert head_maps[-1]["z"]["shape"] == f"{model.config.n_layers}, {model.config.n_heads}"  # plotly's binary array
    # per tensor: every layer's tensors as a map, the rest as bars; together every state_dict name but the tied one
    layer_map, rest = figure(tensors)["data"]
    drawn = {name for row in layer_map["customdata"] for name in row if name} | {label.split(" (=")[0] for label in rest["y"]}
    assert drawn == set(own["grad_norms"]) - set(own["tied"])
    bars = figure(tokens)["data"]
    assert [b["name"] for b in bars] == ["before the step", "after the step"]
    assert bars[0]["y"][0] == pytest.approx(own["p_before"]) and bars[1]["y"][0] == pytest.approx(own["p_after"])


@pytest.mark.parametrize("text, model, target, rate, expected", [
    (TEXT, "shakespeare-rope", " the question", 0.5, "exactly one token"),
    (TEXT, "shakespeare-rope", " the", math.nan, "The learning rate must be a number"),
    (TEXT, "shakespeare-rope", " the", -1, "The learning rate must be greater than 0"),
    ("word " * 20_000, "shakespeare-rope", " the", 0.5, "Shorten it"),
    (TEXT, SEQ2SEQ_NAME, " the", 0.5, "decoder-only"),
])
def test_gradient_step_bad_input_gets_a_message_and_no_figures(app_server, text, model, target, rate, expected):
    event, (*outputs, note) = call_raw(app_server, "gradient_step", [text, model, -1, target, rate])  # NaN as JSON NaN
    assert event == "complete"
    assert note.startswith("⚠️ ") and expected in note, note
    assert outputs == [None] * 4


# ------------------------------------------------------------------------------------------------------------
# Train one yourself
# ------------------------------------------------------------------------------------------------------------


def test_training_streams_every_logged_step_then_the_json_and_the_model(client):
    folders = set(Path(tempfile.gettempdir()).glob("live-model-*"))
    job = train(client, steps=8)
    curve, sample, attention, induction, numbers, download, note = job.result(timeout=120)
    assert set(Path(tempfile.gettempdir()).glob("live-model-*")) == folders  # the job's zip folder went with it
    updates = [out[-1].splitlines()[0] for out in job.outputs()]
    assert updates[0].startswith("- Starting: a fresh model (1 layer(s), 2 heads, d_model 16")
    assert [u.split(" ·")[0] for u in updates[1:-1]] == [f"- Step {k} of 8" for k in (2, 4, 6, 8)]
    assert note.startswith("- Done: 8 of 8 steps") and "at step 0 →" in note
    assert numbers["logged_steps"] == list(range(9)) and len(numbers["losses"]) == 9  # every step, from step 0
    assert numbers["settings"]["d_model"] == 16 and numbers["stopped"] is False
    # nothing learnt yet: about ln 61, the line a uniform guess draws on the plot
    assert numbers["losses"][0] == pytest.approx(math.log(DEFAULT.vocab_size - SPECIAL_IDS), abs=0.2)
    line = figure(curve)["data"][0]
    assert line["x"] == list(range(9)) and line["y"] == pytest.approx(numbers["losses"])
    prompt, written, copy, right = sample.splitlines()
    assert prompt.startswith("Prompt: ") and written.startswith("Writes: ") and copy.startswith("A copy: ")
    ends = lambda line: [m.end() for m in re.finditer(r"\d+", line)]
    assert ends(written) == ends(copy) and len(ends(written)) > 0  # each copy token right under the written one
    assert re.fullmatch(r"\d+ of \d+ right\.", right)
    assert figure(induction)["data"][0]["type"] == "heatmap"
    shown = figure(attention)["layout"]
    # the title names the head shown and its score, the induction map's number for that head
    named = re.match(r"L(\d+)\.H(\d+): (?:the best induction head \(score|score) (\d\.\d\d)", shown["title"]["text"])
    layer, head, score = int(named[1]), int(named[2]), named[3]
    assert f"{plotly_array(figure(induction)['data'][0]['z'])[layer, head]:.2f}" == score
    assert any(a["text"] == "second copy starts" for a in shown["annotations"])
    # the model: fetched by the client over HTTP from the app's file route, a save_pretrained folder zipped
    with zipfile.ZipFile(download) as archive:
        names = set(archive.namelist())
        assert {"config.json", "model.safetensors"} <= names
        archive.extractall(Path(download).parent / "unzipped")
    loaded = AutoModelForCausalLM.from_pretrained(Path(download).parent / "unzipped", trust_remote_code=True)
    assert (loaded.config.n_layers, loaded.config.n_heads, loaded.config.d_model) == (1, 2, 16)
    ids = torch.tensor([[3, 4, 5, 6]])
    assert torch.isfinite(loaded(ids).logits).all()


def test_stop_ends_the_job_and_the_trainer_thread(client):
    job = train(client, steps=3000, log_every=5)
    wait_for_step(job)
    client.predict(api_name="/stop_training")
    *_, numbers, download, note = job.result(timeout=60)
    assert note.startswith("- Stopped: ") and numbers["stopped"] is True and numbers["steps_done"] < 3000
    assert len(numbers["losses"]) == len(numbers["logged_steps"]) >= 1
    assert download and Path(download).stat().st_size > 0  # a stopped model downloads too
    deadline = time.time() + 10
    while training_threads() and time.time() < deadline:
        time.sleep(0.05)
    assert not training_threads()


def test_a_client_that_leaves_ends_the_trainer_thread(client):
    job = train(client, steps=3000, log_every=5)
    wait_for_step(job)
    (thread,) = training_threads()
    job.cancel()
    thread.join(timeout=30)
    assert not thread.is_alive()


def test_a_second_job_waits_in_the_queue_told_its_place(app_server, client):
    first = train(client, steps=3000, log_every=5)
    wait_for_step(first)
    other = Client(app_server, verbose=False)  # another browser
    second = train(other, steps=4)
    deadline = time.time() + 30
    while second.status().code != Status.IN_QUEUE:
        assert time.time() < deadline, second.status()
        time.sleep(0.05)
    assert second.status().rank == 0 and len(training_threads()) == 1
    other.predict(api_name="/stop_training")  # the other browser's Stop stops nothing of the first's
    time.sleep(0.5)
    assert not first.done() and second.status().code == Status.IN_QUEUE
    client.predict(api_name="/stop_training")
    assert first.result(timeout=60)[-1].startswith("- Stopped: ")
    assert second.result(timeout=60)[-1].startswith("- Done: 4 of 4 steps")


@pytest.mark.parametrize("changes, expected", [
    (dict(steps=5000), "Steps must be a whole number from 1 to 3,000; got `5000`"),
    (dict(learning_rate=math.nan), "The learning rate must be a number"),
    (dict(learning_rate=-0.01), "The learning rate must be greater than 0 and at most 0.1"),
    (dict(n_layers=3), "Layers must be a whole number from 1 to 2"),
    (dict(learning_rate=None), "Type a learning rate"),
    (dict(d_model=17), "must be divisible by the number of heads"),
    (dict(data="own-text", text=""), "Paste your own text first"),
    (dict(data="own-text", text="x" * 100_001), "Your text is 100,001 characters; live training reads at most 100,000"),
    (dict(data="shakespeare"), "Unknown model `shakespeare-main`"),  # the tests' checkpoints have no tokenizer for text
])
def test_bad_training_choices_get_a_message_and_start_nothing(app_server, changes, expected):
    values = TINY | {"steps": 8} | changes
    event, (*outputs, note) = call_raw(app_server, "train_live", [values[name] for name in ORDER])
    assert event == "complete"
    assert note.startswith("⚠️ ") and expected in note, note
    assert outputs[:5] == [None, "", None, None, None]  # the failure's own update: nothing from a job
    assert not training_threads()


def test_gradient_step_says_which_tokens_of_the_text_it_quotes(client):
    """The status quotes the last tokens before the target, marked as cut where the text read is longer: a quote
    starting mid-word ('are' of 'compare') never reads as the whole text."""
    *_, numbers, note = client.predict(TEXT, "shakespeare-rope", 8, " the", 0.5, api_name="/gradient_step")
    tokens = numbers["tokens"]
    assert len(tokens) == 9
    assert f"after `…{''.join(tokens[-6:])}` (the last 6 of 9 tokens read)" in note
    *_, note = client.predict(TEXT, "shakespeare-rope", 5, " the", 0.5, api_name="/gradient_step")
    assert "after `" + "".join(numbers["tokens"][:6]) + "` (6 tokens)" in note


def test_the_training_samples_label_says_what_its_prompt_is():
    from explorer.present.train_live import sample_label

    assert "The prompt is the probe's first copy of random tokens" in sample_label("random-repeats")
    assert sample_label("shakespeare").endswith("It continues “ROMEO.”") and "probe" not in sample_label("shakespeare")
    assert sample_label("own-text").endswith("It continues the first 8 tokens of your text")


def test_the_defaults_are_the_engines(app):
    """The tab starts on the engine's defaults (the job measured to finish within a minute)."""
    props = {c["props"].get("elem_id"): c["props"] for c in app.demo.config["components"] if c["props"].get("elem_id")}
    assert props["live-steps"]["value"] == DEFAULT.steps == 300 and props["live-rate"]["value"] == DEFAULT.learning_rate
    assert props["live-layers"]["value"] == DEFAULT.n_layers and props["live-d-model"]["value"] == DEFAULT.d_model
    assert props["live-data"]["value"] == DEFAULT.data and props["live-encoding"]["value"] == DEFAULT.position_encoding


def test_generation_is_answered_while_a_job_trains(app_server, client):
    """Training has a slot of its own: a generate request from another browser does not wait for it."""
    job = train(client, steps=3000, log_every=5)
    wait_for_step(job)
    other = Client(app_server, verbose=False)
    start = time.perf_counter()
    text, note = other.predict("Shall I", "shakespeare-rope", "Greedy", 1.0, 0, 1.0, 1.0, 4, 0, api_name="/generate")
    waited = time.perf_counter() - start
    assert note.startswith("- Done: ") and not job.done() and waited < 10  # measured here: well under a second
    client.predict(api_name="/stop_training")
    assert job.result(timeout=60)[-1].startswith("- Stopped: ")


# ------------------------------------------------------------------------------------------------------------
# Watch it learn
# ------------------------------------------------------------------------------------------------------------


def test_training_timeline_gives_the_views_own_numbers_for_the_default_run(client, tiny_checkpoints):
    """The run is optional: gradio_client fills in the tab's default, timeline-repeats."""
    losses, heads, sample, guesses, grid, previous, induction, note = client.predict(1, DEFAULT_TEXT,
                                                                                     api_name="/training_timeline")
    view = timeline_view("timeline-repeats", 1, DEFAULT_TEXT, tiny_checkpoints)
    assert note.splitlines()[0] == f"- {view.summary()}" and note.startswith("- **Step 10** of 20 (snapshot 1 of 0–2)")
    assert "Dashed and grey: timeline-plain, for comparison." in note
    assert sample == visible_breaks(view.sample) and len(sample) > 0
    assert guesses == view.guesses_line() and view.guesses_count() in note
    maps = figure(grid)["data"]
    assert len(maps) == 8 and maps[0]["x"] == view.tokens
    for i, heatmap in enumerate(maps):
        np.testing.assert_allclose(plotly_array(heatmap["z"]), view.weights[i // 4, i % 4], atol=1e-5, rtol=0)
    for plot, score in ((previous, "previous_token"), (induction, "induction")):
        layer, head, value = view.best_head(score)
        np.testing.assert_allclose(plotly_array(figure(plot)["data"][0]["z"]), view.weights[layer, head], atol=1e-5, rtol=0)
    validation = {trace["name"]: trace["y"] for trace in figure(losses)["data"] if trace.get("name")}
    assert validation["timeline-repeats: validation loss"] == [s["validation_loss"] for s in view.run.snapshots]
    assert validation["timeline-plain: validation loss"] == [s["validation_loss"] for s in view.other.snapshots]
    assert len([trace for trace in figure(heads)["data"] if trace["type"] == "scatter"]) == 2 * 8 + 2 + 4 * 4  # + every pair


@pytest.mark.parametrize("sample, shown", [("ab\ncd", "ab↵\ncd"), ("   ", "␣␣␣"), (" \n ", "␣↵\n␣"), ("a b", "a b"), ("", ""),
                                           (" thee", "␣thee"), ("to  be", "to␣␣be"), ("be \nor", "be␣↵\nor"),
                                           ("a\r\nb\tc\u200bd", "a‹CR›↵\nb⇥c‹ZWSP›d")])
def test_a_sample_shows_every_space_a_text_box_would_hide(sample, shown):
    """Line breaks marked as token labels mark them (↵: before, ⏎), and every other character that draws nothing
    too (before, a \\r or a zero-width space was kept and drew nothing)."""
    assert visible_breaks(sample) == shown


def test_training_timeline_shows_the_run_asked_for_at_the_snapshot_asked_for(client):
    *_, note = client.predict(-1, "To be, or not to be", "timeline-plain", api_name="/training_timeline")
    assert note.startswith("- **Step 20** of 20 (snapshot 2 of 0–2)") and "Dashed and grey: timeline-repeats" in note


@pytest.mark.parametrize("snapshot, text, run, expected", [
    (3, DEFAULT_TEXT, "timeline-repeats", "The snapshot (timeline-repeats has 3: 0 is step 0, 2 is step 20; −1 is the last)"),
    (0, "", "timeline-repeats", "Type some text first"),
    (0, "a" * 2001, "timeline-repeats", "this view takes at most 2,000"),
    (0, DEFAULT_TEXT, "<img src=x onerror=alert(1)>", "`<img src=x onerror=alert(1)>` is not a checkpoint here"),
])
def test_training_timeline_bad_input_gets_a_message_and_no_figures(app_server, snapshot, text, run, expected):
    event, (*outputs, note) = call_raw(app_server, "training_timeline", [snapshot, text, run])
    assert event == "complete"
    assert note.startswith("⚠️ ") and expected in note, note
    assert outputs == [None, None, "", "", None, None, None]


def test_the_induction_preset_runs_through_the_api_and_returns_the_model(client, app):
    """The preset is one of train_live's inputs, its menu label names it; the job it starts is attention-only on
    random tokens with the loss on the copies, stopped here after its first snapshot, and still returns the zip."""
    menu = next(c["props"] for c in app.demo.config["components"] if c["props"].get("elem_id") == "live-preset")
    assert any("induction" in label.lower() and value == "induction" for label, value in menu["choices"])
    job = train(client, preset="induction")
    wait_for_step(job, timeout=120)
    client.predict(api_name="/stop_training")
    curve, sample, attention, induction, numbers, download, note = job.result(timeout=120)
    assert numbers["settings"]["attention_only"] and numbers["settings"]["copies_only"]
    assert numbers["settings"]["d_model"] == 64 and figure(curve)["layout"]["title"]["text"].endswith("copied tokens only")
    with zipfile.ZipFile(download) as archive:
        assert {"config.json", "model.safetensors"} <= set(archive.namelist())
