"""app.py through its API: a server on 127.0.0.1 (tests/conftest.py) called with gradio_client, and raw HTTP
where a client could send what gradio_client cannot (lone surrogates, too few arguments)."""

import json
import re
import shutil
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
import torch
from gradio_client import Client

from support.app_client import call_raw, figure
from support.fixtures_checkpoints import SEQ2SEQ_NAME, SLOW_MODEL
from explorer.generation.decoding import MAX_REWRITE_LINES
from checkpointing.loading import load_checkpoint
from ui.tabs.trace import TRACE_HEADERS
from ui.controls import PROMPT_EXAMPLE
from ui.tabs.generate import FOLIO_EXAMPLE, generate_boxes

MODELS = ["shakespeare-alibi", "shakespeare-learned", "shakespeare-none", "shakespeare-rope", "shakespeare-sinusoidal",
          SLOW_MODEL, "timeline-plain", "timeline-repeats", SEQ2SEQ_NAME]
SAMPLING = ("Sampling", 0.8, 40, 0.95, 1.1)
GREEDY = ("Greedy", 1.0, 0, 1.0, 1.0)


def generate(client, prompt="Shall I", model="shakespeare-rope", settings=SAMPLING, max_new=12, seed=0):
    return client.predict(prompt, model, *settings, max_new, seed, api_name="/generate")


def test_every_event_is_named_and_the_public_ones_are_callable(client, app):
    names = {dep["api_name"] for dep in app.demo.config["dependencies"]}
    assert "unnamed" not in names and None not in names
    public = set(client.view_api(print_info=False, return_format="dict")["named_endpoints"])
    expected = {"/catalog", "/generate", "/generate_submit", "/stop_generation", "/folio_example", "/encoding_plots",
                "/encoding_experiment",                "/recompute_extrapolation", "/compare_encodings", "/attention", "/attention_layer", "/attention_head",
                "/attention_kind", "/forward_trace", "/worked_example", "/attention_steps", "/attention_steps_query",
                "/logit_lens", "/logit_lens_position", "/ablate_heads", "/rank_heads", "/next_token_distribution",
                "/attention_token", "/attention_token_layer", "/attention_token_kind", "/attention_token_query",
                "/attention_grid_head", "/gradient_step", "/train_live", "/stop_training", "/training_timeline",
                "/activation_patching", "/prediction_routes", "/open_model", "/open_upload", "/open_trained", "/push_to_hub", "/hub_timeline"}
    private = {"decoding_mode", "compare_mode", "gen_model_note", "att_model_note", "trace_model_note",  # UI only
               "steps_model_note", "lens_model_note", "ablation_model_note", "sampling_model_note",
               "steps_kinds", "ablation_kinds", "steps_fold_example", "steps_pick_query", "lens_pick_position",
               "attention_pick_head", "attention_pick_token", "generate_labels", "attention_decoder_note",
               "generate_stop_on", "generate_stop_off", "generate_submit_stop_on", "generate_submit_stop_off",
               "ablation_clear_rank", "ablation_clear_removal", "grad_model_note", "train_live_stop_on", "train_live_stop_off",
               "training_timeline_snapshot", "training_timeline_step", "training_timeline_open", "training_timeline_run_range",
               "training_timeline_run", "patching_model_note", "patching_cell", "patching_change_word",
               "patching_swap_half", "open_model_menus", "open_upload_menus", "open_trained_menus", "train_live_preset",
               "train_live_leave_preset", "train_live_sample_label", "hub_timeline_open", "hub_timeline_measure",
               "hub_timeline_revision", "patching_grids", "patching_example_note", "patching_example",
               "grad_example_target", "routes_model_note", "routes_node", "routes_teaching", "visitor_left"}
    assert public == expected and names == {n.lstrip("/") for n in public} | private


def test_long_jobs_have_slots_of_their_own_so_interactive_events_are_not_starved(app):
    groups = {app.demo.fns[dep["id"]].name: (app.demo.fns[dep["id"]].concurrency_id, app.demo.fns[dep["id"]].concurrency_limit)
              for dep in app.demo.config["dependencies"]}
    for interactive in ("encoding_plots", "show_attention", "show_head", "trace_forward", "training_timeline",
                        "grids_offered"):
        assert groups[interactive] == ("model", 1)  # one core for the views, one for the generations' decode thread
    assert groups["generate"] == ("generation", 16)  # the views never wait behind generations, decoded in one batch
    assert groups["recompute_extrapolation"] == ("extrapolation", 1)
    assert groups["compare_encodings"] == ("comparison", 1)
    assert groups["gradient_step"] == ("model", 1)
    for exact in ("activation_patching", "rank_heads", "measure_revisions"):
        assert groups[exact] == ("exact", 1)  # a pass per cell or revision: never in the views' way
    assert groups["train_live"] == ("training", 1)  # one training job at a time, never in the generation slots
    for opening in ("open_model", "open_upload", "open_trained", "push_to_hub", "timeline_of_revisions", "open_revisions"):
        assert groups[opening] == ("opening", 16)  # waits on the network, so never in the views' slot (16: requests that follow a stalled download leave room)


def test_catalog_lists_the_checkpoints_with_a_line_each_and_picks_the_main_model(client, tiny_checkpoints):
    *menus, gradient_menu, patching_menu, note = client.predict(api_name="/catalog")
    assert len(menus) == 8  # generate, attention, forward pass, steps, lens, ablation, sampling, routes
    # one gradient step and activation patching: the decoder-only models alone
    for decoder_menu in (gradient_menu, patching_menu):
        assert [value for _, value in decoder_menu["choices"]] == [m for m in MODELS if m != SEQ2SEQ_NAME]
        assert decoder_menu["value"] == "shakespeare-rope"
    for menu in menus:
        assert [value for _, value in menu["choices"]] == MODELS and menu["value"] == "shakespeare-rope"
        labels = dict((value, label) for label, value in menu["choices"])
        assert labels["shakespeare-rope"].startswith("shakespeare-rope · rope positions · ") and "the main model" in labels["shakespeare-rope"]
    assert note.startswith("- 9 model(s) ready: ") and str(tiny_checkpoints) not in note


def test_the_page_is_built_with_the_menus_filled_and_no_server_paths(app_server, tiny_checkpoints):
    """Nothing clickable that cannot work yet: the menus hold their choices and value before any event ran."""
    config = requests.get(app_server + "config", timeout=30).json()
    menus = [c["props"] for c in config["components"] if c["props"].get("elem_id") in ("gen-model", "att-model", "trace-model")]
    assert len(menus) == 3 and all(m["value"] == "shakespeare-rope" and len(m["choices"]) == len(MODELS) for m in menus)
    page = requests.get(app_server, timeout=30).text + json.dumps(config)
    assert str(tiny_checkpoints) not in page and str(tiny_checkpoints.parent) not in page


def test_the_generate_boxes_speak_of_the_model_chosen(app_server):
    """With a decoder-only model the page shows a prompt and its continuation and no word of First Folio rewriting;
    the Stop button is a small grey one, disabled until a generation runs."""
    config = requests.get(app_server + "config", timeout=30).json()
    props = {c["props"].get("elem_id"): c["props"] for c in config["components"] if c["props"].get("elem_id")}
    assert props["gen-model"]["value"] == "shakespeare-rope"
    assert props["gen-prompt"]["label"] == "Prompt" and props["gen-output"]["label"].startswith("Prompt and continuation")
    assert props["gen-folio-note"]["visible"] is False and props["att-decoder-note"]["visible"] is False
    assert "folio" not in props["att-kind"]["label"].lower()
    stop = props["gen-stop"]
    assert stop["variant"] == "secondary" and stop["size"] == "sm" and stop["interactive"] is False


def test_the_generate_labels_follow_the_model_menu(app):
    """The model menu's change event (private: it only relabels) gives an encoder-decoder rewrite's labels."""
    names = {dep["api_name"]: dep for dep in app.demo.config["dependencies"]}
    assert names["generate_labels"]["api_visibility"] == "private"
    prompt, output, note = generate_boxes(SEQ2SEQ_NAME)
    assert prompt["label"] == "First Folio lines to rewrite, one per line" and output["label"].startswith("Rewrite in modern")
    assert note["visible"] is True
    prompt, output, note = generate_boxes("shakespeare-rope")
    assert prompt["label"] == "Prompt" and output["label"].startswith("Prompt and continuation") and note["visible"] is False


def test_picking_the_encoder_decoder_puts_folio_lines_in_the_prompt_and_typed_text_stays(app):
    """The prompt still holding one kind of model's example becomes the picked model's: First Folio lines for the
    encoder-decoder (a modern line would come back unchanged), the modern line back for a decoder-only model; a
    text the learner typed, or an empty box, is never written over."""
    assert generate_boxes(SEQ2SEQ_NAME, PROMPT_EXAMPLE)[0]["value"] == FOLIO_EXAMPLE
    assert generate_boxes("shakespeare-rope", FOLIO_EXAMPLE)[0]["value"] == PROMPT_EXAMPLE
    for name in (SEQ2SEQ_NAME, "shakespeare-rope"):
        for typed in ("Thou art more louely", "", PROMPT_EXAMPLE + " ", None):
            assert "value" not in generate_boxes(name, typed)[0], (name, typed)
    assert "value" not in generate_boxes(SEQ2SEQ_NAME, FOLIO_EXAMPLE)[0]  # already its example: left as it is
    inputs = {dep["api_name"]: dep["inputs"] for dep in app.demo.config["dependencies"]}["generate_labels"]
    ids = {block._id: block.elem_id for block in app.demo.blocks.values()}
    assert [ids[i] for i in inputs] == ["gen-model", "gen-prompt"]


def test_generation_shows_the_prompt_then_streams_token_by_token(client):
    """An update per token while the reader keeps up, what queued meanwhile when it falls behind (test_batching.py):
    many steps, not one at the end; how many depends on the machine's pace (18 to 40 of 40 seen)."""
    job = client.submit("Shall I", "shakespeare-rope", *SAMPLING, 40, 0, api_name="/generate")
    updates = [output for output in job]
    texts = [text for text, _ in updates]
    assert texts[0] == "Shall I" and all(later.startswith(earlier) for earlier, later in zip(texts, texts[1:]))
    counts = [int(n[-1]) for _, status in updates[1:-1] if (n := re.findall(r"(\d+) tokens · ", status))]
    assert counts == sorted(counts) and len(set(counts)) >= 5 and counts[-1] <= 40
    final_text, final_status = job.result()
    assert final_text == texts[-1] and "Done: **40 tokens**" in final_status and "tokens/s" in final_status
    assert final_status.endswith("sampling (temperature 0.8, top-k 40, top-p 0.95, seed 0), repetition penalty 1.1")


def test_seeded_sampling_is_reproducible_through_the_api(client):
    assert generate(client, seed=5, max_new=20)[0] == generate(client, seed=5, max_new=20)[0]


def test_folio_to_modern_rewrites_without_the_prompt_and_without_a_spurious_notice(client):
    prompt, model, mode, penalty = client.predict(api_name="/folio_example")
    assert model == SEQ2SEQ_NAME and "Summers" in prompt and mode == "Greedy" and penalty == 1.0  # as measured
    text, note = generate(client, prompt, model, (mode, *SAMPLING[1:]), max_new=10)  # the sliders keep their values
    assert note.startswith("- Done: **") and note.count("\n") == 0 and "greedy, repetition penalty 1.1" in note
    assert not text.startswith(prompt)


def test_folio_to_modern_rewrites_a_passage_line_by_line(client, tiny_checkpoints):
    """The model was trained on single lines: each non-empty line of a passage is rewritten on its own, and the
    app's text is those rewrites, one per line, exactly as ``generate`` gives them for each line."""
    passage = "Shall I compare thee to a Summers day?\n\n  Thou art more louely and more temperate:\n"
    text, note = generate(client, passage, SEQ2SEQ_NAME, GREEDY, max_new=5)
    model, tokenizer = load_checkpoint(tiny_checkpoints / SEQ2SEQ_NAME)
    lines = ["Shall I compare thee to a Summers day?", "Thou art more louely and more temperate:"]
    with torch.inference_mode():
        rewrites = [tokenizer.decode(model.generate(tokenizer(line, return_tensors="pt").input_ids, do_sample=False,
                                                    max_new_tokens=5)[0], skip_special_tokens=True) for line in lines]
    assert text == "\n".join(rewrites)
    assert note.startswith("- Done: **10 tokens**") and note.count("\n") == 0
    many = "\n".join(["Stand & vnfold your selfe"] * (MAX_REWRITE_LINES + 6))
    assert f"The text has {MAX_REWRITE_LINES + 6} lines; rewriting the first {MAX_REWRITE_LINES}." in generate(
        client, many, SEQ2SEQ_NAME, GREEDY, max_new=1)[1]


@pytest.mark.parametrize("prompt, settings, max_new, seed, expected", [  # (the learned model stops at 63 tokens: quick)
    ("", SAMPLING, 10, 0, "⚠️ Type a prompt first: the box is empty."),
    ("\x00\x01\x02", SAMPLING, 10, 0, "⚠️ Type a prompt first: the box is empty (after removing characters that are not text)."),
    ("Shall I " * 200, SAMPLING, 10, 0, "keeping its last 64 tokens"),
    ("Shall I 🙂🎭 \x07 thee\u200b", SAMPLING, 10, 0, "Removed 1 control character(s) from the input."),
    ("Shall I", ("Sampling", 0.0, 40, 0.9, 1.0), 10, 0, "decoding greedily instead of sampling"),
    ("Shall I", SAMPLING, 0, 0, "Max new tokens was 0; using 1, the least allowed."),
    ("Shall I", SAMPLING, 10**7, 0, "above the limit 512; using 512.\n- This model has 64 positions"),
    ("Shall I", SAMPLING, 10, 2**64, "⚠️ Seed must be a whole number from 0 to 4,294,967,295; got `18446744073709551616`."),
    ("Shall I", SAMPLING, 10, -2**63 - 1, "⚠️ Seed must be a whole number from 0 to 4,294,967,295; got `-9223372036854775809`."),
    ("Shall I", ("Sampling", "hot", 40, 0.9, 1.0), 10, 0, "⚠️ Temperature must be a number (0 to 5; 0 is greedy); got `hot` (a text)."),
    ("Shall I", ("Sampling", 0.8, None, 0.9, 1.0), 10, 0, "⚠️ Top-k must be a number (0 = off, or a whole number of tokens); got `None` (nothing)."),
    ("Shall I", ("Sampling", 0.8, 40, 9.0, 1.0), 10, 0, "Top-p must be above 0 and at most 1; got 9, using 1 (off)."),
    ("Shall I", ("Beam", 0.8, 40, 0.9, 1.0), 10, 0, "⚠️ Decoding must be 'Sampling' or 'Greedy'; got `Beam`."),
])
def test_bad_input_gets_a_clear_message(client, prompt, settings, max_new, seed, expected):
    model = "shakespeare-learned" if max_new > 512 else "shakespeare-rope"
    text, note = generate(client, prompt, model=model, settings=settings, max_new=max_new, seed=seed)
    assert expected in note and "Traceback" not in note
    if note.startswith("⚠️"):
        assert text == ""  # nothing from an earlier request is left looking like this one's answer


@pytest.mark.parametrize("model, expected", [
    ("no-such-model", "⚠️ Unknown model `no-such-model`; pick one of: shakespeare-alibi, "),
    (["shakespeare-rope"], "⚠️ Pick a model: its name is a text such as 'shakespeare-main'; got a list (`['shakespeare-rope']`)."),
    ({"name": "shakespeare-rope"}, "⚠️ Pick a model: its name is a text such as 'shakespeare-main'; got a dictionary"),
    (None, "⚠️ Pick a model: its name is a text such as 'shakespeare-main'; got nothing."),
    ("<img src=x onerror=alert(1)>", "⚠️ Unknown model `<img src=x onerror=alert(1)>`; pick one of"),
])
def test_a_model_name_that_names_nothing_is_named_with_the_choices(client, model, expected):
    assert generate(client, model=model)[1].startswith(expected)


@pytest.mark.parametrize("api_name, data, at", [
    ("generate", ["Sh\ud800all I", "shakespeare-rope", *SAMPLING, 5, 0], -1),
    ("generate_submit", ["\ud800Shall I", "shakespeare-rope", *SAMPLING, 5, 0], -1),
    ("compare_encodings", ["Shall\ud800 I", 3, "Sampling", 0], -1),
    ("recompute_extrapolation", ["Shall I compare thee\udfff " * 12], -1),
    ("attention", ["To be\ud800", "shakespeare-rope", "self", "0", "average", *GREEDY, 10, 0], -1),
    ("attention_head", ["To be\ud800", "shakespeare-rope", "self", "0", "1", *GREEDY, 10, 0], -1),
    ("forward_trace", ["To be\ud800", "shakespeare-rope", *GREEDY, 10, 0], -1),
])
def test_a_lone_surrogate_in_any_text_box_is_dropped_with_a_notice(app_server, api_name, data, at):
    event, payload = call_raw(app_server, api_name, data)
    assert event == "complete", payload
    note = payload[at]
    assert "lone surrogate(s) from the input" in note and "⚠️" not in note, note


@pytest.mark.parametrize("api_name, data, expected", [
    ("attention", ["To be", "shakespeare-rope", "self", "Infinity", "NaN", *GREEDY, 10, 0],
     ["Layer `Infinity` is not a whole number (this model has layers 0 to 1); showing layer 0.",
      "Head `NaN` is not a whole number (this model has heads 0 to 3); showing head 0."]),
    ("attention_layer", ["To be", "shakespeare-rope", "self", 1e308 * 10, "2", *GREEDY, 10, 0], ["Layer `inf` is not a whole number"]),
    ("attention", ["To be", "shakespeare-rope", "cross", "7", "99", *GREEDY, 10, 0],
     ["This model has no attention kind `cross`", "Layer 7 does not exist (this model has layers 0 to 1); showing layer 1.",
      "Head 99 does not exist (this model has heads 0 to 3); showing head 3."]),
])
def test_infinite_or_missing_layers_and_heads_are_explained(app_server, api_name, data, expected):
    event, payload = call_raw(app_server, api_name, data)
    assert event == "complete" and all(e in payload[-1] for e in expected), payload[-1]


def test_too_few_arguments_get_gradios_message_not_a_bare_error(app_server):
    event, payload = call_raw(app_server, "generate", ["Shall I", "shakespeare-rope"])
    assert event == "error" and "didn't receive enough input values (needed: 9, got: 2)" in payload["error"]


def test_api_clients_may_leave_out_the_arguments_added_later(client):
    """gradio_client fills parameters left out with their defaults: the five-argument /attention of old still works."""
    *_, note = client.predict("To be, or not", "shakespeare-rope", "self", "0", "average", api_name="/attention")
    assert note.startswith("- shakespeare-rope: 2 layers × 4 heads")
    assert client.predict("Shall I", 3, api_name="/compare_encodings")[-1].startswith("- Done: 5 models, 3 new tokens each, sampling")


def test_uploads_are_bounded_by_the_hubs_weight_limit(app_server, app):
    """Open a model takes a zip: uploads up to the weight limit and 50 MB for the rest of a model folder."""
    from explorer.models import uploads

    assert app.LAUNCH_OPTIONS["max_file_size"] == uploads.max_upload_bytes() == 1_050_000_000
    response = requests.post(app_server + "gradio_api/upload", files={"files": ("a.zip", b"x" * 2000)}, timeout=30)
    assert response.status_code == 200


def test_stop_ends_the_generation(client):
    job = client.submit("Shall I", SLOW_MODEL, *SAMPLING, 512, 0, api_name="/generate")
    while not job.outputs() or "tokens/s" not in job.outputs()[-1][1]:
        time.sleep(0.02)
    client.predict(api_name="/stop_generation")
    text, note = job.result(timeout=60)
    assert note.startswith("- Stopped: **") and int(note.split("**")[1].split()[0]) < 512
    deadline = time.time() + 10
    while any(t.name == "generate" for t in threading.enumerate()) and time.time() < deadline:
        time.sleep(0.05)
    assert not any(t.name == "generate" for t in threading.enumerate())


def test_a_view_answers_while_generations_fill_their_slots(app_server):
    """Three long generations (more than the generation slots), each from its own session; /attention answers
    while all of them are still streaming, then each is stopped."""
    clients = [Client(app_server, verbose=False) for _ in range(3)]
    jobs = [c.submit("Shall I", "shakespeare-rope", *SAMPLING, 512, seed, api_name="/generate") for seed, c in enumerate(clients)]
    while sum(bool(job.outputs()) and "tokens/s" in job.outputs()[-1][1] for job in jobs) < 2:
        time.sleep(0.02)
    *_, note = clients[0].predict("To be, or not to be", "shakespeare-rope", "self", "0", "average", api_name="/attention")
    running = [not job.done() for job in jobs]
    for c in clients:
        c.predict(api_name="/stop_generation")
    notes = [job.result(timeout=60)[1] for job in jobs]
    assert note.startswith("- ") and all(running), (note, running)
    assert all(n.startswith("- Stopped: **") for n in notes), notes


def test_a_client_that_leaves_ends_the_generation_thread(client):
    before = set(threading.enumerate())
    job = client.submit("Shall I", SLOW_MODEL, *SAMPLING, 512, 0, api_name="/generate")
    while not job.outputs() or "tokens/s" not in job.outputs()[-1][1]:
        time.sleep(0.02)
    (thread,) = [t for t in threading.enumerate() if t.name == "generate" and t not in before]
    job.cancel()
    thread.join(timeout=30)
    assert not thread.is_alive()


def test_attention_grid_and_enlarged_head(client):
    grid, head, kind, layer, heads, note = client.predict(
        "To be, or not to be", "shakespeare-rope", "self", "1", "2", api_name="/attention")
    assert grid.count("<button") == 2 * 4 and 'class="cell selected" data-layer="1" data-head="2"' in grid
    assert "Head types, threshold 0.4" in grid and "Layer 1, head 2:" in note
    assert "layer 1, head 2" in figure(head)["layout"]["title"]["text"]
    assert [c[1] for c in heads["choices"]] == ["average", "0", "1", "2", "3"]
    average, _ = client.predict("To be, or not to be", "shakespeare-rope", "self", "0", "average", api_name="/attention_head")
    assert "mean over heads" in figure(average)["layout"]["title"]["text"]


@pytest.mark.parametrize("kind", ["encoder", "decoder", "cross"])
def test_attention_of_folio_to_modern_shows_the_rewrite_it_read(client, kind):
    grid, head, kind_menu, *_, note = client.predict(
        "Thou art more louely", SEQ2SEQ_NAME, kind, "0", "average", *GREEDY, 20, 0, api_name="/attention")
    assert kind_menu["value"] == kind and [c[1] for c in kind_menu["choices"]] == ["encoder", "decoder", "cross"]
    assert f"{SEQ2SEQ_NAME}: 2 layers" in note and "The decoder read the model's own rewrite (greedy, set on the Generate tab)" in note


def test_attention_with_empty_text_says_so_and_clears_the_plots(client):
    grid, head, *_, note = client.predict("", "shakespeare-rope", "self", "0", "average", api_name="/attention")
    assert note.startswith("⚠️ Type some text first") and not grid and head is None


def test_forward_trace_table(client):
    table, top, summary, note = client.predict("Shall I compare thee", "shakespeare-alibi", api_name="/forward_trace")
    assert table["headers"] == TRACE_HEADERS
    steps = {row[1]: row for row in table["data"]}
    n_tokens = int(steps["token ids"][2].strip("()").split(", ")[1])
    assert steps["logits"][2] == steps["probabilities"][2] == f"(1, {n_tokens}, 384)"
    assert steps["layer 0 masked self-attention: bias"][3] == f"batch=1 × heads=4 × tokens={n_tokens} × tokens={n_tokens}"
    assert steps["layer 0 masked self-attention: Q per head"][5] == "layers[0] › self_attention › query"
    assert f"**(1, {n_tokens}, 384)**" in summary and note == "Forward pass done."
    bars = figure(top)["data"][0]
    assert bars["type"] == "bar" and len(bars["x"]) == 10 and all(t.endswith("%") or "e-" in t for t in bars["text"])


def test_forward_trace_of_folio_to_modern_says_which_tokens_the_decoder_read(client):
    table, top, summary, note = client.predict("Thou art more louely", SEQ2SEQ_NAME, *GREEDY, 20, 0, api_name="/forward_trace")
    assert "The decoder read the model's own rewrite (greedy, set on the Generate tab): «`" in summary
    assert "the last token the decoder read" in figure(top)["layout"]["title"]["text"]


def test_eight_clients_at_once_all_get_their_answers(app_server):
    def one_client(i):
        client = Client(app_server, verbose=False)
        if i % 2:
            return "generate", client.predict(f"Shall I {i}", MODELS[i % 5], *SAMPLING, 16, i, api_name="/generate")
        return "attention", client.predict(f"To be {i}", MODELS[i % 7], "self", "0", "average", api_name="/attention")

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(one_client, range(8)))
    for kind, answer in answers:
        note = answer[-1]
        assert not note.startswith("⚠️"), note
        assert ("Done" in note) if kind == "generate" else ("layers" in note)


def test_a_damaged_checkpoint_is_marked_and_refused(client, monkeypatch, tiny_checkpoints, tmp_path):
    shutil.copytree(tiny_checkpoints / "shakespeare-rope", tmp_path / "shakespeare-rope")
    shutil.copytree(tiny_checkpoints / "shakespeare-none", tmp_path / "broken")
    weights = tmp_path / "broken" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    monkeypatch.setenv("SCRATCH_CHECKPOINTS", str(tmp_path))
    menu, *_, note = client.predict(api_name="/catalog")
    labels = dict((value, label) for label, value in menu["choices"])
    assert labels["broken"].startswith("broken · ⚠ cannot be used: model.safetensors is damaged or truncated")
    assert "⚠ broken cannot be used: model.safetensors is damaged or truncated" in note and str(tmp_path) not in note
    assert menu["value"] == "shakespeare-rope"
    text, message = generate(client, model="broken")
    assert message.startswith("⚠️ broken cannot be used: model.safetensors is damaged or truncated") and text == ""


def test_app_without_checkpoints_explains_itself(client, monkeypatch, tmp_path):
    monkeypatch.setenv("SCRATCH_CHECKPOINTS", str(tmp_path))
    *menus, note = client.predict(api_name="/catalog")
    assert menus[0]["choices"] == [] and "No checkpoints found" in note and "No evaluation results" in note
    assert "No checkpoints found" in generate(client)[1] and str(tmp_path) not in note
    *plots, extrapolation, note = client.predict(api_name="/encoding_plots")
    assert "No checkpoints found" in note and "No extrapolation" in json.dumps(figure(extrapolation))


def test_concurrent_traces_through_the_server_are_all_whole(app_server):
    """As a concurrency probe ran it: four clients looping on /forward_trace; every table equals a lone one."""
    alone = Client(app_server, verbose=False).predict("Shall I compare thee", "shakespeare-rope", api_name="/forward_trace")[0]

    def one_client(i):
        client = Client(app_server, verbose=False)
        return [client.predict("Shall I compare thee", "shakespeare-rope", api_name="/forward_trace")[0] for _ in range(5)]

    with ThreadPoolExecutor(4) as pool:
        tables = [table for tables in pool.map(one_client, range(4)) for table in tables]
    assert len(tables) == 20 and all(table["data"] == alone["data"] for table in tables)
    assert sum(" per head" in row[1] for row in alone["data"]) == 3
