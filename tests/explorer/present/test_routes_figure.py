"""explorer.present.routes: the graph draws the computed routes (layers bottom to top, tokens left to right, every
edge as wide as its share, heads named), a clicked node's panel shows its numbers, user text stays text, and the
teaching text says what the measure is not."""

import pytest

from explorer.present.routes import (HEADS_NAMED, LABEL_GAP_PX, Labels, Layout, head_labels, node_html, routes_figure,
                                     source_labels, teaching)
from explorer.views.routes.graph import node_reading, prediction_routes
from support.shipped import shipped

REPEAT = "Thou art more lovely and more temperate. Thou art more lovely and more"
HOSTILE = "<img src=x onerror=alert(1)> and <b>bold</b>; <img src=x onerror=alert(1)> and <b>bold"


@pytest.fixture(scope="module")
def main_model():
    return shipped("shakespeare-main")


@pytest.fixture(scope="module")
def routes(main_model):
    return prediction_routes(*main_model, REPEAT)


def test_layers_go_bottom_to_top_and_tokens_left_to_right(routes):
    fig = routes_figure(routes)
    assert list(fig.layout.yaxis.tickvals) == list(range(len(routes.rows)))  # row 0 (embeddings) lowest
    assert fig.layout.yaxis.ticktext[0] == "embeddings" and fig.layout.yaxis.ticktext[-1] == "L5 feed-forward"
    assert list(fig.layout.xaxis.ticktext) == [f"{p}:{t}" for p, t in enumerate(routes.tokens)]  # 15 tokens: all shown
    nodes = next(trace for trace in fig.data if trace.customdata is not None)
    assert sorted(nodes.customdata) == sorted(routes.nodes)  # every node drawn, clickable by its id
    top = list(nodes.customdata).index(f"r{len(routes.rows) - 1}:{routes.position}")
    assert (nodes.x[top], nodes.y[top]) == (routes.position, len(routes.rows) - 1)  # the prediction: top right


def test_each_edge_is_as_wide_as_its_share_and_the_strongest_heads_are_named(routes):
    fig = routes_figure(routes)
    induction = next(e for e in routes.edges if (e.layer, e.head) == (4, 7))
    widths = {trace.line.width for trace in fig.data if trace.mode == "lines" and trace.line.color == "#2b6cb0"}
    assert round(1 + 9 * induction.weight) == max(widths)  # the widest attention line is L4.H7's
    named = [a.text for a in fig.layout.annotations]
    assert named[0] == "L4.H7" and "L3.H0" in named and len(named) <= HEADS_NAMED
    hover = next(trace for trace in fig.data if trace.mode == "markers" and trace.customdata is None)
    assert any(text.startswith("L4.H7: 6:␣tem → 14:␣more, share 0.5") for text in hover.text)


def apart(boxes) -> bool:
    """Whether every two (left, bottom, right, top) boxes keep LABEL_GAP_PX between them, across or up."""
    return all(a[2] + LABEL_GAP_PX <= b[0] or b[2] + LABEL_GAP_PX <= a[0] or a[3] + LABEL_GAP_PX <= b[1]
               or b[3] + LABEL_GAP_PX <= a[1] for i, a in enumerate(boxes) for b in boxes[i + 1:])


def test_the_labels_keep_apart_at_the_narrowest_the_graph_is_drawn(routes):
    """The bottom row's heads (layer 0's, one column apart) used to run together at 800 px ('L0.H2L0.H3'): a label
    is written only where its box keeps its distance from every other, heads first, then the source's tokens."""
    labels = Labels(Layout(routes))
    placed = head_labels(routes, labels)
    assert len(placed) >= 8 and apart(labels.boxes) and len(labels.boxes) == len(placed)
    bottom = sorted(x for x, y, _ in placed if y < 0.5)
    assert len(bottom) >= 2 and all(b - a >= 1.5 for a, b in zip(bottom, bottom[1:]))  # 15 columns: not side by side
    folio = prediction_routes(*shipped("folio-to-modern"), "Shall I compare thee to a Summers day? Thou art more louely",
                              -1, 0.001)
    labels = Labels(Layout(folio))
    heads, sources = head_labels(folio, labels), source_labels(folio, labels)
    assert heads and sources and apart(labels.boxes) and len(labels.boxes) == len(heads) + len(sources)
    assert len(sources) < len(Layout(folio).sources)  # some reached sources are too close to name: hover says them


def test_the_teaching_names_a_head_the_model_has():
    """The example head is the model's own last one: folio-to-modern's decoder has 3 layers of 8 heads."""
    assert "head **L2.H7** = layer 2, head 7, both counted from 0" in " ".join(teaching(3, 8).split())
    assert "**L5.H7** = layer 5, head 7" in " ".join(teaching(6, 8).split()) and "L4.H7" not in teaching(3, 8)


def test_a_clicked_nodes_panel_shows_its_lens_and_parts(routes):
    panel = node_html(node_reading(routes, "r9:14"))  # the last token after layer 4's attention
    assert "after L4 attention, token 14: ␣more" in panel and "␣tem" in panel
    assert "<td>L4.H7</td><td class=p>0.5" in panel and "&lt;" not in panel.split("would predict")[0]
    block = node_html(node_reading(routes, "b9:14:self"))
    assert "The edges through this block" in block and "L4.H7 from 6:␣tem" in block


def test_user_text_is_shown_as_text(main_model):
    hostile = prediction_routes(*main_model, HOSTILE)
    fig = routes_figure(hostile)
    texts = list(fig.layout.xaxis.ticktext) + [fig.layout.title.text] + list(
        next(t for t in fig.data if t.customdata is not None).text)
    assert not any("<img" in t or "<b>" in t for t in texts)
    for node_id in hostile.nodes:
        panel = node_html(node_reading(hostile, node_id))
        assert "<img" not in panel and "<b>" not in panel


def test_the_teaching_text_says_what_a_share_is_and_that_it_is_not_causation():
    text = " ".join(teaching(6, 8).split())
    assert "max(0, |y|₁ − |y − c|₁)" in text and "contribution is not causation" in text
    assert "Activation patching" in text and "Head ablation" in text and "L5.H7" in text
