"""Tokens on the figures' axes (explorer/present/figures.py: tick_text, token_ticks): a long token is cut to
TICK_CHARS characters on the axis, and hover names it whole, in every chart of next tokens (Sampling, seen; Head
ablation, both charts; One gradient step), on the routes graph and on the heat maps (Logit lens, Attention heads).
A vocabulary's longest tokens (Llama 3's runs of spaces) once pushed the sampling chart's axis title into the plot
below it. And the sampling chart's log axis reads whole numbers."""

from dataclasses import replace

import pytest
import torch

from explorer.learning.gradient_step import gradient_step
from explorer.present.ablation import ablation_figure, token_loss_figure
from explorer.present.figures import TICK_CHARS, tick_text, token_ticks
from explorer.present.gradient_step import before_after_figure
from explorer.present.routes import columns_of, routes_figure
from explorer.present.sampling import distribution_figure
from explorer.views.ablation import ablate_heads
from explorer.views.routes.graph import prediction_routes
from explorer.views.sampling import next_token_distribution, sampling_settings
from support.shipped import shipped

TEXT = "Thou art more lovely and more temperate. Thou art more lovely and more"
LONG = "␣" * 20 + "Westmoreland"  # 32 characters: a run of spaces, then a word
CUT = "␣" * 13 + "…"


@pytest.fixture(scope="module")
def main_model():
    return shipped("shakespeare-main")


def test_a_label_is_cut_to_tick_chars_with_an_ellipsis_and_a_short_one_kept():
    assert tick_text(LONG) == CUT and len(CUT) == TICK_CHARS == 14
    assert tick_text("␣Westmoreland") == "␣Westmoreland"  # 13 characters: whole
    assert tick_text("x" * 14) == "x" * 14 and tick_text("x" * 15) == "x" * 13 + "…"


def test_labels_equal_once_cut_keep_a_bar_each_and_hover_names_each_whole_as_text():
    other = "␣" * 20 + "Northumberland"
    ticks, whole = token_ticks([LONG, other, "<|reserved_special_token_12|>", "␣the"])
    assert ticks == [CUT, CUT + "#2", "&lt;|reserved_sp…", "␣the"]  # cut before escaping: no entity cut in half
    assert whole == [LONG, other, "&lt;|reserved_special_token_12|&gt;", "␣the"]


def test_the_sampling_chart_cuts_a_long_token_and_its_hover_names_it(main_model):
    d = next_token_distribution(*main_model, TEXT, sampling_settings(1.0, 0, 1.0))
    labels = [LONG, *d.labels[1:]]
    bars = distribution_figure(replace(d, labels=labels)).data[0]
    assert bars.x[0] == CUT and list(bars.x[1:]) == d.labels[1:]
    assert list(bars.hovertext) == labels and bars.hovertemplate.startswith("%{hovertext}<br>")
    assert list(bars.y) == list(d.tempered_probs)  # the model's numbers, one bar a token


def test_head_ablations_charts_cut_a_long_token_and_their_hover_names_it(main_model):
    a = ablate_heads(*main_model, TEXT, "4.7")
    fig = ablation_figure(replace(a, next_labels=[LONG, *a.next_labels[1:]]))
    assert all(bars.x[0] == CUT and bars.hovertext[0] == LONG for bars in fig.data)
    assert all("%{hovertext}" in bars.hovertemplate for bars in fig.data)
    tokens = [a.tokens[0], LONG, *a.tokens[2:]]
    per_token = token_loss_figure(replace(a, tokens=tokens)).data[0]
    assert per_token.x[0] == tick_text(f"1:{LONG}") and per_token.hovertext[0] == f"1:{LONG}"
    assert per_token.x[1] == f"2:{a.tokens[2]}" and len(per_token.x) == len(a.tokens) - 1


def test_the_gradient_steps_chart_cuts_a_long_token_and_its_hover_names_it(main_model):
    model, tokenizer = main_model
    step = gradient_step(TEXT, model, tokenizer, -1, " tem", 0.1)
    (first, p), *rest = step.top_before
    fig = before_after_figure(replace(step, top_before=[(LONG, p), *rest]))
    bars = fig.data[0]
    at = list(bars.hovertext).index(LONG)
    assert bars.x[at] == CUT and bars.y[at] == p  # the bar keeps the model's probability under its cut label
    assert all(len(x.split("#")[0]) <= TICK_CHARS for trace in fig.data for x in trace.x)


def test_the_routes_graph_cuts_a_long_token_on_its_axis(main_model):
    routes = prediction_routes(*main_model, TEXT)
    first = columns_of(routes)[0]  # the first token the graph has a column for
    tokens = list(routes.tokens)
    tokens[first] = LONG
    ticks = list(routes_figure(replace(routes, tokens=tokens)).layout.xaxis.ticktext)
    assert ticks[0] == tick_text(f"{first}:{LONG}") and ticks[0].endswith("…")
    assert all(len(text) <= TICK_CHARS for text in ticks)


def test_the_heat_maps_cut_a_long_token_on_their_axes_and_keep_each_position_apart(main_model):
    """Logit lens and Attention heads' one-token view (hover names the tokens whole), Attention heads' map:
    the labels carry their position ('3:␣…'), so cut ones stay apart."""
    from explorer.present.attention import token_centred_figure
    from explorer.present.figures import token_attention_figure
    from explorer.present.lens import lens_heatmap
    from explorer.views.lens import logit_lens

    lens = logit_lens(*main_model, TEXT)
    tokens = [lens.tokens[0], LONG, LONG, *lens.tokens[3:]]
    heat = lens_heatmap(replace(lens, tokens=tokens)).data[0]
    assert list(heat.x[:3]) == [f"0:{tokens[0]}", tick_text(f"1:{LONG}"), tick_text(f"2:{LONG}")]
    assert len(set(heat.x)) == len(heat.x) == len(tokens) - 1 and heat.customdata[0][1] == f"{LONG} → {LONG}"
    labels = [f"{p}:{token}" for p, token in enumerate(tokens)]
    grid = token_attention_figure([[1.0] * len(labels)] * len(labels), labels, labels, "map", "query", "key").data[0]
    assert grid.x[1] == grid.y[1] == tick_text(f"1:{LONG}") and len(set(grid.x)) == len(labels)
    centred = token_centred_figure(torch.ones(2, len(labels)).numpy(), labels[1], labels, 0).data[0]
    assert centred.x[2] == tick_text(f"2:{LONG}") and all(len(x) <= TICK_CHARS for x in centred.x)
    assert centred.customdata[1][2] == f"2:{LONG}" and "key %{customdata}" in centred.hovertemplate


def test_the_summed_probability_axis_reads_whole_numbers_on_its_log_scale(main_model):
    """Plotly's own log labels wrote 20, 200 and 2000 as '2': the axis is labelled 1, 2, 5, 10, 20, ... 2,000."""
    from explorer.present.sampling import log_ticks

    assert log_ticks(4096) == [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000]
    assert log_ticks(1) == [1] and log_ticks(60) == [1, 2, 5, 10, 20, 50]
    d = next_token_distribution(*main_model, TEXT, sampling_settings(1.0, 0, 1.0))
    axis = distribution_figure(d).layout.xaxis2
    assert axis.type == "log" and list(axis.tickvals) == log_ticks(d.vocab_size) and axis.tickvals[-1] == 2000
    assert list(axis.ticktext)[-4:] == ["200", "500", "1,000", "2,000"]
