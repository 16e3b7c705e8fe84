"""explorer.present.figures: what each plot draws, one colour per encoding, labels shown as text."""

import math

import numpy as np
import pytest
import torch

from explorer.views import attention
from explorer.models import catalog
from explorer.present import encodings, figures, trace
from explorer.generation.decoding import DecodingSettings
from explorer.views.encodings import encoding_tables
from support.fixtures_checkpoints import checkpoint_config, train_tokenizer
from modeling import POSITION_ENCODINGS, ScratchTransformerForCausalLM

TEXT = "Shall I compare thee to a summer's day?"


@pytest.fixture(scope="module")
def maps():
    tokenizer = train_tokenizer()
    torch.manual_seed(0)
    model = ScratchTransformerForCausalLM(checkpoint_config(tokenizer, "rope")).eval()
    return attention.attention_maps(model, tokenizer, TEXT, DecodingSettings(False))


def test_every_encoding_has_one_distinct_colour():
    assert set(figures.ENCODING_COLOURS) == set(POSITION_ENCODINGS)
    assert len(set(figures.ENCODING_COLOURS.values())) == len(POSITION_ENCODINGS)


def test_every_figure_is_sent_in_the_plotly_white_look():
    """The figures name no template; plotly's default, set once, writes plotly_white's into the JSON the app sends,
    the same as a figure that names it (a heatmap, a line plot, subplots as the Watch it learn tab draws)."""
    import json

    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    named = json.loads(go.Figure(layout=dict(template="plotly_white")).to_json())["layout"]["template"]
    sent = [figures.heatmap_figure(np.eye(3), "identity", "key", "query"),
            go.Figure(go.Scatter(x=[0, 1], y=[1, 2]), layout=figures.LAYOUT), make_subplots(rows=1, cols=2)]
    for fig in sent:
        assert json.loads(fig.to_json())["layout"]["template"] == named


def test_the_enlarged_head_has_token_labels_and_hover_values(maps):
    head = figures.attention_head_figure(maps, attention.View("self", 1, None))
    assert list(head.data[0].x) == figures.plotly_text(maps.key_labels["self"])
    assert np.allclose(head.data[0].z, maps.weights["self"][1].mean(0))
    assert np.allclose(figures.attention_head_figure(maps, attention.View("self", 0, 2)).data[0].z, maps.weights["self"][0, 2])
    assert "query %{y}" in head.data[0].hovertemplate and "weight %{z" in head.data[0].hovertemplate


def test_labels_are_shown_as_text_not_markup():
    assert figures.plotly_text(["0:<s>", "a&b", "<a href='x'>"]) == ["0:&lt;s&gt;", "a&amp;b", "&lt;a href='x'&gt;"]
    chart = figures.top_tokens_figure([("<b>bold</b>", 0.5)], "<i>x</i>")
    assert chart.data[0].y[0] == "1. &lt;b&gt;bold&lt;/b&gt;" and "&lt;i&gt;" in chart.layout.title.text


def test_the_next_token_chart_prints_each_probability_in_one_format():
    chart = figures.top_tokens_figure([("the", 0.9712), ("a", 0.0213), ("x", 0.000437), ("↵", 0.00004)], "“day”")
    assert list(chart.data[0].x) == [0.9712, 0.0213, 0.000437, 0.00004]
    assert list(chart.data[0].text) == ["97.12%", "2.13%", "0.04%", "<0.01%"] and chart.data[0].textposition == "outside"


def test_the_next_token_chart_of_the_main_model_writes_every_probability_as_a_percentage():
    """The forward-pass tab's chart on the main model: its probabilities span several orders of magnitude, and
    every number on it is written the same way (a percentage with two decimals), none in exponent form."""
    from explorer.generation.decoding import DecodingSettings
    from explorer.views.trace import forward_trace
    from support.shipped import shipped

    model, tokenizer = shipped("shakespeare-main")
    steps = forward_trace(model, tokenizer, "Shall I compare thee to a summer's day?", DecodingSettings(False))
    probabilities = [p for _, p in steps.top_next]
    assert max(probabilities) / min(probabilities) > 10
    chart = figures.top_tokens_figure(steps.top_next, "day")
    assert list(chart.data[0].text) == [f"{p:.2%}" for p in probabilities]
    assert all(text.endswith("%") and "e" not in text for text in chart.data[0].text)
    # the axis: d3's percentage to two significant digits ("p"), trailing zeros trimmed ("~"): ticks 0.005% apart
    # read 0.005%, 0.01%, 0.015% (a fixed ".2%" wrote 0.01% for each)
    assert chart.layout.xaxis.tickformat == ".2~p"


def test_extrapolation_lines_take_their_encodings_colour_and_mark_the_training_context():
    curves = {"m-rope": {128: 2.0, 256: 2.1, 512: 2.3}, "m-learned": {128: 2.2, 256: None, 512: None}}
    fig = encodings.extrapolation_figure(curves, {"m-rope": "rope", "m-learned": "learned"}, 128)
    assert [t.name for t in fig.data] == ["rope (m-rope)", "learned (m-learned)"]
    assert [t.line.color for t in fig.data] == [figures.ENCODING_COLOURS["rope"], figures.ENCODING_COLOURS["learned"]]
    assert list(fig.data[1].y) == [2.2, None, None]
    (marker,) = fig.layout.shapes
    assert marker.x0 == marker.x1 == 128 and fig.layout.xaxis.type == "log"  # shapes: data values on a log axis
    (label,) = fig.layout.annotations
    assert math.isclose(label.x, math.log10(128)) and label.text == "training context (128)"  # annotations: log10
    assert fig.layout.xaxis.range[0] < math.log10(128) < fig.layout.xaxis.range[1]
    assert "No extrapolation" in encodings.extrapolation_figure({}, {}).layout.annotations[0].text


def test_encoding_figures_use_each_encodings_colour(tiny_checkpoints):
    shown, notices = encodings.encoding_figures(encoding_tables(catalog.discover_checkpoints(tiny_checkpoints)))
    assert notices == [] and set(shown) == {"sinusoidal", "learned", "rope", "alibi", "similarity"}
    assert np.asarray(shown["sinusoidal"].data[0].z).shape == (64, 32)
    assert np.asarray(shown["learned"].data[0].z).shape == (64, 32)
    assert np.asarray(shown["alibi"].data[0].z).shape == (4, 64)
    for encoding in ("sinusoidal", "learned", "rope", "alibi"):
        assert shown[encoding].layout.title.font.color == figures.ENCODING_COLOURS[encoding]
    colours = [t.line.color for t in shown["similarity"].data]
    assert colours == [figures.ENCODING_COLOURS[e] for e in ("sinusoidal", "learned", "rope", "alibi")]


def test_encoding_figures_without_checkpoints_use_the_formulas():
    empty, notices = encodings.encoding_figures(encoding_tables({}))
    assert np.asarray(empty["sinusoidal"].data[0].z).shape == (256, 256) and len(notices) == 2


def test_the_trace_table_says_where_each_tensor_is_as_a_trail_that_can_wrap():
    assert trace.where_text("recording.decoder.layers[0].self_attention.query", "decoder") == "layers[0] › self_attention › query"
    assert trace.where_text("recording.encoder.embeddings.sum", "encoder") == "embeddings › sum"
    assert trace.where_text("logits", "") == "logits" and trace.where_text("input_ids", "decoder") == "input_ids"


def test_a_long_title_is_wrapped_to_fit_a_half_page_figure_and_its_margin_grows():
    title = "Estimate (AtP): Residual stream entering each layer"
    detail = "patched at one position at a time; * changed in the corrupted text: 12:␣Norfolk→␣Somerset, 15:␣the→␣a"
    hung, top = figures.wrapped_title(title, detail, "<b>not markup</b>")
    lines = hung["text"].split("<br>")
    titles = [line for line in lines if not line.startswith("<sup>")]
    smaller = [line[len("<sup>"):-len("</sup>")] for line in lines if line.startswith("<sup>")]
    assert len(titles) == 2 and all(len(line) <= figures.TITLE_CHARS for line in titles)
    assert len(smaller) == 3 and all(len(line.replace("&lt;", "<").replace("&gt;", ">")) <= figures.DETAIL_CHARS
                                     for line in smaller)
    assert " ".join(titles) == title and " ".join(smaller[:2]) == detail  # nothing lost, words kept whole
    assert smaller[2] == "&lt;b&gt;not markup&lt;/b&gt;"  # user text is never markup
    assert top == figures.LABEL_ROOM + 2 * figures.TITLE_LINE + 3 * figures.DETAIL_LINE + 12
    assert hung["yref"] == "container" and hung["yanchor"] == "top"  # hung from the top: lines grow down, into the margin
    assert figures.wrapped_title("Short")[1] == figures.TITLED_TOP  # gr.Plot's floor
    wide, wide_top = figures.wrapped_title(title, detail, width=2 * figures.HALF_PAGE_PX)  # a column twice as wide
    assert wide["text"] == f"{title}<br><sup>{detail}</sup>"  # one line each (51 and 101 characters)
    assert wide_top == figures.LABEL_ROOM + figures.TITLE_LINE + figures.DETAIL_LINE + 12


def test_a_probability_reads_three_decimals_or_two_significant_digits_under_001():
    texts = [figures.probability(p) for p in (0.5, 0.0123, 0.0093, 0.00093, 0.00090, 2.1e-5, 0.0)]
    assert texts == ["0.500", "0.012", "0.0093", "0.00093", "0.0009", "0.000021", "0.000"]
