"""app.py through its API: a server on 127.0.0.1 (tests/conftest.py) called with gradio_client."""

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from gradio_client import Client

import app

MODELS = ["shakespeare-alibi", "shakespeare-learned", "shakespeare-none", "shakespeare-rope", "shakespeare-sinusoidal",
          "folio-to-modern"]
SAMPLING = ("Sampling", 0.8, 40, 0.95, 1.1)


@pytest.fixture(scope="module")
def client(app_server):
    return Client(app_server, verbose=False)


def generate(client, prompt="Shall I", model="shakespeare-rope", settings=SAMPLING, max_new=12, seed=0):
    return client.predict(prompt, model, *settings, max_new, seed, api_name="/generate")


def figure(plot) -> dict:
    assert plot["type"] == "plotly"
    return json.loads(plot["plot"])


def test_every_event_is_named_and_the_named_ones_are_callable(client):
    names = {dep["api_name"] for dep in app.demo.config["dependencies"]}
    assert "unnamed" not in names and None not in names
    public = set(client.view_api(print_info=False, return_format="dict")["named_endpoints"])
    expected = {"/catalog", "/generate", "/generate_submit", "/stop_generation", "/folio_example", "/encoding_plots",
                "/recompute_extrapolation", "/compare_encodings", "/attention", "/attention_layer", "/attention_head",
                "/attention_kind", "/forward_trace", "/worked_example", "/attention_steps", "/attention_steps_query",
                "/logit_lens", "/logit_lens_position", "/ablate_heads", "/rank_heads", "/next_token_distribution",
                "/teach_catalog"}
    private = {"steps_pick_query", "lens_pick_position", "steps_fold_example"}  # a click's data, then the public event with it
    assert public == expected and names == {n.lstrip("/") for n in public} | private


def test_heavy_events_share_the_cores(client):
    heavy = {"generate", "encoding_plots", "recompute_extrapolation", "compare_encodings", "attention", "forward_trace"}
    for dep in app.demo.config["dependencies"]:
        if dep["api_name"] in heavy:
            assert app.demo.fns[dep["id"]].concurrency_id == "model"
            assert app.demo.fns[dep["id"]].concurrency_limit == 2


def test_catalog_lists_the_checkpoints_and_picks_the_main_model(client):
    gen_menu, attention_menu, trace_menu, note = client.predict(api_name="/catalog")
    for menu in (gen_menu, attention_menu, trace_menu):
        assert [c[1] for c in menu["choices"]] == MODELS and menu["value"] == "shakespeare-rope"
    assert "6 model(s)" in note


def test_generation_streams_token_by_token_and_reports_speed(client):
    job = client.submit("Shall I", "shakespeare-rope", *SAMPLING, 40, 0, api_name="/generate")
    updates = [output for output in job]
    texts = [text for text, _ in updates]
    assert len(updates) >= 20  # one update per token, not one at the end
    assert all(later.startswith(earlier) for earlier, later in zip(texts, texts[1:]))
    final_text, final_status = job.result()
    assert final_text == texts[-1] and "Done: **40 tokens**" in final_status and "tokens/s" in final_status


def test_seeded_sampling_is_reproducible_through_the_api(client):
    assert generate(client, seed=5, max_new=20)[0] == generate(client, seed=5, max_new=20)[0]


def test_folio_to_modern_rewrites(client):
    prompt, model, mode = client.predict(api_name="/folio_example")
    assert model == "folio-to-modern" and "Summers" in prompt
    text, note = generate(client, prompt, model, (mode, 1.0, 0, 1.0, 1.0), max_new=10)
    assert "Done" in note and isinstance(text, str)


@pytest.mark.parametrize("prompt, settings, max_new, expected", [  # (the learned model stops at 63 tokens: quick)
    ("", SAMPLING, 10, "Type a prompt first"),
    ("\x00\x01\x02", SAMPLING, 10, "Type a prompt first"),
    ("Shall I " * 200, SAMPLING, 10, "keeping its last 64 tokens"),
    ("Shall I 🙂🎭 \x07 thee\u200b", SAMPLING, 10, "Removed 1 control character"),
    ("Shall I", ("Greedy", 0.8, 50, 0.9, 1.0), 10, "Greedy decoding ignores temperature, top-k, top-p"),
    ("Shall I", ("Sampling", 0.0, 40, 0.9, 1.0), 10, "decoding greedily instead of sampling"),
    ("Shall I", SAMPLING, 0, "generating 1 token"),
    ("Shall I", SAMPLING, 10**7, "above the limit 512; generating 512.\n- This model has 64 positions"),
])
def test_bad_input_gets_a_clear_message(client, prompt, settings, max_new, expected):
    model = "shakespeare-learned" if max_new > 512 else "shakespeare-rope"
    _, note = generate(client, prompt, model=model, settings=settings, max_new=max_new)
    assert expected in note and "Traceback" not in note


def test_unknown_model_is_named_with_the_choices(client):
    _, note = generate(client, model="no-such-model")
    assert "Unknown model 'no-such-model'" in note and "shakespeare-rope" in note


def test_stop_ends_the_generation(client):
    job = client.submit("Shall I", "shakespeare-rope", *SAMPLING, 512, 0, api_name="/generate")
    while not job.outputs() or "tokens/s" not in job.outputs()[-1][1]:
        time.sleep(0.02)
    client.predict(api_name="/stop_generation")
    text, note = job.result(timeout=10)
    assert note.startswith("- Stopped: **") and int(note.split("**")[1].split()[0]) < 512
    deadline = time.time() + 5
    while any(t.name == "generate" for t in threading.enumerate()) and time.time() < deadline:
        time.sleep(0.05)
    assert not any(t.name == "generate" for t in threading.enumerate())


def test_a_client_that_leaves_ends_the_generation_thread(client, monkeypatch):
    from explorer import analysis

    runs = []
    start = analysis.start_generation
    monkeypatch.setattr(analysis, "start_generation", lambda *args: runs.append(start(*args)) or runs[-1])
    job = client.submit("Shall I", "shakespeare-rope", *SAMPLING, 512, 0, api_name="/generate")
    while not job.outputs() or "tokens/s" not in job.outputs()[-1][1]:
        time.sleep(0.02)
    job.cancel()
    runs[0].thread.join(timeout=10)
    assert not runs[0].thread.is_alive() and runs[0].stop.is_set() and runs[0].streamer.n_tokens < 512


def test_encoding_tab_draws_its_plots(client):
    *plots, extrapolation, note = client.predict(api_name="/encoding_plots")
    assert [figure(p)["data"][0]["type"] for p in plots] == ["heatmap"] * 4 + ["scatter"]
    lines = figure(extrapolation)["data"]
    assert sorted(line["name"] for line in lines) == sorted(MODELS[:-1])
    assert "Traceback" not in note


def test_extrapolation_recomputes_on_the_users_text(client):
    plot, note = client.predict("Shall I compare thee to a summer's day? " * 12, api_name="/recompute_extrapolation")
    lines = figure(plot)["data"]
    assert len(lines) == 5 and "Scored" in note
    assert client.predict("", api_name="/recompute_extrapolation")[1].startswith("⚠️ Type some text")


def test_one_prompt_five_encodings(client):
    *outputs, note = client.predict("Shall I", 8, api_name="/compare_encodings")
    assert len(outputs) == 5 and all(isinstance(o, str) and o != "…" for o in outputs)
    assert "Done: 5 models" in note


def test_attention_grid_and_enlarged_head(client):
    grid, head, kind, layer, heads, note = client.predict(
        "To be, or not to be", "shakespeare-rope", "self", "1", "2", api_name="/attention")
    assert len(figure(grid)["data"]) == 2 * 4
    enlarged = figure(head)
    assert "layer 1, head 2" in enlarged["layout"]["title"]["text"]
    assert [c[1] for c in heads["choices"]] == ["average", "0", "1", "2", "3"]
    average, _ = client.predict("To be, or not to be", "shakespeare-rope", "self", "0", "average", api_name="/attention_head")
    assert "mean over heads" in figure(average)["layout"]["title"]["text"]
    clamped, _ = client.predict("To be, or not to be", "shakespeare-rope", "cross", "junk", "99", api_name="/attention_head")
    assert "self-attention, layer 0, head 3" in figure(clamped)["layout"]["title"]["text"]


@pytest.mark.parametrize("kind", ["encoder", "decoder", "cross"])
def test_attention_of_folio_to_modern(client, kind):
    grid, head, kind_menu, *_ , note = client.predict(
        "Thou art more louely", "folio-to-modern", kind, "0", "average", api_name="/attention")
    assert kind_menu["value"] == kind and [c[1] for c in kind_menu["choices"]] == ["encoder", "decoder", "cross"]
    assert "folio-to-modern" in note


def test_attention_with_empty_text_says_so(client):
    *_, note = client.predict("", "shakespeare-rope", "self", "0", "average", api_name="/attention")
    assert note.startswith("⚠️ Type some text first")


def test_forward_trace_table(client):
    table, top, summary, note = client.predict("Shall I compare thee", "shakespeare-alibi", api_name="/forward_trace")
    assert table["headers"] == app.TRACE_HEADERS
    steps = {row[1]: row for row in table["data"]}
    n_tokens = int(steps["token ids"][2].strip("()").split(", ")[1])
    assert steps["logits"][2] == steps["probabilities"][2] == f"(1, {n_tokens}, 384)"
    assert steps["ALiBi bias (+ mask)"][3] == f"batch=1 × heads=4 × tokens={n_tokens} × tokens={n_tokens}"
    assert f"**(1, {n_tokens}, 384)**" in summary and note == "Forward pass done."
    assert figure(top)["data"][0]["type"] == "bar"


def test_eight_clients_at_once_all_get_their_answers(app_server):
    def one_client(i):
        client = Client(app_server, verbose=False)
        if i % 2:
            return "generate", client.predict(f"Shall I {i}", MODELS[i % 5], *SAMPLING, 16, i, api_name="/generate")
        return "attention", client.predict(f"To be {i}", MODELS[i % 6], "self", "0", "average", api_name="/attention")

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(one_client, range(8)))
    for kind, answer in answers:
        note = answer[-1]
        assert not note.startswith("⚠️"), note
        assert ("Done" in note) if kind == "generate" else ("layers" in note)


def test_app_without_checkpoints_explains_itself(client, monkeypatch, tmp_path):
    monkeypatch.setenv("SCRATCH_CHECKPOINTS", str(tmp_path))
    *menus, note = client.predict(api_name="/catalog")
    assert menus[0]["choices"] == [] and "No checkpoints found" in note and "No evaluation results" in note
    assert "No checkpoints found" in generate(client)[1]
    *plots, extrapolation, note = client.predict(api_name="/encoding_plots")
    assert "No checkpoints found" in note and "No extrapolation" in json.dumps(figure(extrapolation))
