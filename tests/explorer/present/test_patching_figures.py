"""explorer/present/patching: every grid's figure leaves its plot area room to draw, for 1 to 24 layers and 2 to 128
tokens (the margins gr.Plot imposes and the tick labels included), and the text says when nothing can be measured
and when colours are clipped."""

import pytest

from explorer.present import patching as present
from explorer.present.figures import MIN_PLOT_HEIGHT, TICK_CHARS, TITLED_TOP, angled_label_depth
from explorer.views.patching.analysis import MIN_LOGIT_GAP
from explorer.views.patching.grids import GRIDS
from support.patching_results import sized_result

def result_of(n_layers: int, n_tokens: int, **kwargs):
    return sized_result(n_layers, n_tokens, **kwargs)


def plot_height(layout: dict) -> int:
    """The plot area: what is left of the height inside the margins."""
    return layout["height"] - layout["margin"]["t"] - layout["margin"]["b"]


def test_every_layout_leaves_its_plot_area_room_from_1_to_24_layers_and_2_to_128_tokens():
    longest_tick = angled_label_depth(TICK_CHARS + 1)
    for n_layers in range(1, 25):
        heads = present.heads_layout(n_layers)
        assert heads["margin"]["t"] >= TITLED_TOP and plot_height(heads) >= max(MIN_PLOT_HEIGHT, 28 * n_layers)
        assert heads["height"] <= 1200
        for n_tokens in range(2, 129):
            layout = present.position_layout(result_of(n_layers, n_tokens, n_heads=1), n_layers)
            assert layout["margin"]["t"] >= TITLED_TOP, (n_layers, n_tokens)
            assert plot_height(layout) >= max(MIN_PLOT_HEIGHT, 28 * n_layers), (n_layers, n_tokens, layout)
            assert longest_tick + 30 >= layout["margin"]["b"] >= angled_label_depth(len("1:␣a")) + 30
            assert layout["height"] <= 1200


@pytest.mark.parametrize("n_layers, n_tokens", [(1, 2), (2, 30), (2, 128), (12, 64), (24, 128)])
def test_each_figure_carries_the_layout_and_labels_a_few_positions_apart(n_layers, n_tokens):
    result = result_of(n_layers, n_tokens)
    for name in GRIDS:
        layout = present.grid_figure(result, name, n_layers, 4).layout
        assert plot_height(layout.to_plotly_json()) >= max(MIN_PLOT_HEIGHT, 28 * n_layers)
    axis = present.grid_figure(result, "residual", n_layers, 4).layout.xaxis
    assert len(axis.tickvals) <= present.LABELLED_POSITIONS + len(result.changed) + 1
    assert axis.tickvals[-1] == f"{n_tokens - 1}:␣a" or axis.tickvals[-1].startswith(f"{n_tokens - 1}:")
    assert all(len(t.replace("<b>", "").replace("</b>", "").rstrip("*")) <= TICK_CHARS for t in axis.ticktext)
    assert "<b>0:␣extraordin…*</b>" in axis.ticktext  # changed: bold and starred, cut with an ellipsis


def test_every_position_is_labelled_where_the_labels_fit_a_grid_on_an_800_px_page():
    """The default example's 30 positions, three changed side by side: each its own label, the changed bold."""
    result = result_of(6, 30)
    result.changed = [6, 7, 8]
    values, labelled, ticks = present.token_axis(result)
    assert labelled == values and len(ticks) == 30
    assert [t for t in ticks if t.startswith("<b>")] == ["<b>6:␣extraordin…*</b>", "<b>7:␣a*</b>", "<b>8:␣a*</b>"]
    assert present.LABELLED_POSITIONS * present.LABEL_PX <= present.NARROWEST_PLOT


@pytest.mark.parametrize("n_tokens, changed", [(60, [12, 13, 14, 15]), (128, [0, 64, 127]), (100, [3, 50, 51, 53, 90]),
                                               (40, [38])])
def test_thinned_labels_sit_apart_and_name_every_changed_position(n_tokens, changed):
    """Past LABELLED_POSITIONS positions: labels at least k apart (so at least LABEL_PX px on an 800 px page), every
    changed position labelled, or named in the label of its run of changed neighbours ('50–51,53*')."""
    result = result_of(12, n_tokens)
    result.changed = changed
    values, labelled, ticks = present.token_axis(result)
    every = -(-n_tokens // present.LABELLED_POSITIONS)
    positions = [values.index(label) for label in labelled]
    assert every > 1 and len(labelled) == len(ticks) and positions == sorted(positions)
    assert all(b - a >= every for a, b in zip(positions, positions[1:]))
    named = set()
    for p, tick in zip(positions, ticks):
        if ":" not in tick:  # a run of changed positions: '<b>12–15*</b>', '<b>50–51,53*</b>'
            run = set()
            for stretch in tick.removeprefix("<b>").removesuffix("*</b>").split(","):
                first, _, last = stretch.partition("–")
                run |= set(range(int(first), int(last or first) + 1))
            assert min(run) == p and run <= set(changed)
            named |= run
        elif p in changed:
            assert tick.startswith(f"<b>{p}:") and tick.endswith("*</b>")
            named.add(p)
    assert named == set(changed)
    assert n_tokens - 1 in positions or n_tokens - 1 - positions[-1] < every  # the last, unless a changed one is beside it


def test_the_two_head_maps_share_one_layer_axis_titled_once():
    fig = present.grid_figure(result_of(12, 30, n_heads=12), "heads", 12, 12)
    assert fig.layout.yaxis.title.text == "layer" and not fig.layout.yaxis2.title.text
    assert fig.layout.yaxis2.matches == "y" or fig.layout.yaxis2.showticklabels is False


def test_runs_that_barely_differ_rank_no_place():
    close = result_of(2, 10, clean=0.057, corrupted=0.048)
    assert abs(close.clean_metric - close.corrupted_metric) < MIN_LOGIT_GAP and not close.measurable
    text = present.explanation(close)
    assert "No place is ranked" in text and "0.057 clean, 0.048 corrupted" in text
    assert "restores most" not in text and "restore most" not in text
    assert present.explanation(result_of(2, 10)).count("restore") >= 2  # 4 nats apart: ranked


def test_clipped_colours_are_counted_per_grid():
    result = result_of(2, 10)
    result.grids["heads"].values[0, 1] = 8.39
    result.grids["residual"].values[1, :3] = -1.5
    assert present.clipped_cells(result) == {"residual": 3, "heads": 1}
    note = present.colour_note(result)
    assert "4 cells lie beyond it" in note and "the largest 8.39" in note
    assert "3 in residual stream entering each layer" in note
    assert present.colour_note(result_of(2, 10, values=1.0)) == ""  # exactly 1 is on the scale
