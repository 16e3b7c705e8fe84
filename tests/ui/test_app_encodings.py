"""The Compare encodings tab through its API (a server on 127.0.0.1, tests/conftest.py, called with gradio_client):
the encodings' plots in their colours, the experiment as results.json recorded it, the extrapolation recomputed on
a user's text, and one prompt through the five encoding models."""

import json

import pytest

from support.app_client import figure
from explorer.views import experiment
from explorer.present import figures
from modeling import POSITION_ENCODINGS


def test_encoding_tab_draws_its_plots_in_each_encodings_colour(client):
    *plots, extrapolation, note = client.predict(api_name="/encoding_plots")
    assert [figure(p)["data"][0]["type"] for p in plots] == ["heatmap"] * 4 + ["scatter"]
    lines = figure(extrapolation)["data"]
    assert sorted(line["name"] for line in lines) == sorted(f"{e} (shakespeare-{e})" for e in POSITION_ENCODINGS)
    assert all(line["line"]["color"] == figures.ENCODING_COLOURS[line["name"].split()[0]] for line in lines)
    assert figure(extrapolation)["layout"]["shapes"][0]["x0"] == 64  # the training context, on the log axis
    assert "Traceback" not in note


def test_the_experiment_view_draws_results_json_per_position_and_tables_every_seed(client, tiny_checkpoints):
    recorded = json.loads((tiny_checkpoints / "results.json").read_text())
    plot, tables, note = client.predict(api_name="/encoding_experiment")
    lines = figure(plot)["data"]
    names = {f"{e} (shakespeare-{e})" for e in POSITION_ENCODINGS}
    assert {line["name"] for line in lines} == names and len(lines) == 2 * len(names)  # each position, and binned
    for raw, binned in zip(lines[::2], lines[1::2]):
        curve = recorded["models"][raw["name"].split("(")[1].rstrip(")")]["position_loss"]["loss"]
        assert raw["y"] == curve and raw["x"] == list(range(1, len(curve) + 1))  # the evaluation's numbers, as written
        width = experiment.POSITION_BIN
        assert binned["y"] == pytest.approx([sum(curve[i:i + width]) / len(curve[i:i + width]) for i in range(0, len(curve), width)])
    assert figure(plot)["layout"]["shapes"][0]["x0"] == 64
    for encoding, entry in recorded["experiment"]["encodings"].items():
        assert f"| **{encoding}** | {entry['bits_per_char']['mean']:.4f} | {entry['bits_per_char']['spread']:.4f} |" in tables
    assert "Press 2022" in tables and "Kazemnejad 2023" in tables and note.startswith("- Figures from")


def test_extrapolation_recomputes_on_the_users_text_step_by_step(client):
    job = client.submit("Shall I compare thee to a summer's day? " * 12, api_name="/recompute_extrapolation")
    updates = list(job)
    assert len(updates) == 2 + 6 * 5  # the start, one per (length, model), the end
    plot, note = job.result()
    lines = figure(plot)["data"]
    assert len(lines) == 5 and note.startswith("- Scored 30 of 30.")
    assert figure(plot)["layout"]["shapes"][0]["x0"] == 64
    assert client.predict("", api_name="/recompute_extrapolation")[1].startswith("⚠️ Type some text to score first")


def test_one_prompt_five_encodings_samples_with_one_seed_by_default(client):
    *outputs, note = client.predict("Shall I", 8, api_name="/compare_encodings")
    assert len(outputs) == 5 and all(o.startswith("Shall I") for o in outputs)
    assert note.startswith("- Done: 5 models, 8 new tokens each, sampling (temperature 0.8, top-k 40, top-p 0.95, seed 0)")
    again = client.predict("Shall I", 8, "Sampling", 0, api_name="/compare_encodings")
    assert again[:-1] == tuple(outputs)
    assert "greedy" in client.predict("Shall I", 8, "Greedy", 0, api_name="/compare_encodings")[-1]


def test_the_tab_says_which_settings_every_model_samples_with(client, app):
    """The status names settings this tab has no controls for: the text above the prompt says them, as used."""
    note = client.predict("Shall I", 2, api_name="/compare_encodings")[-1]
    teaching = next(c["props"]["value"] for c in app.demo.config["components"]
                    if c["props"].get("elem_id") == "compare-teaching")
    for setting in ("temperature 0.8", "top-k 40", "top-p 0.95", "repetition penalty 1.1"):
        assert setting in note and setting in teaching, setting
