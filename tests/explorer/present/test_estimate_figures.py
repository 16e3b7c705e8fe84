"""The estimate's maps (explorer/present/patching.py, present/ablation.py): the estimate's own values drawn as the
exact grid is, and its disagreement with the exact grid marked on exactly the cells ``Agreement`` names."""

import re

import numpy as np
import pytest
import torch

from explorer.present import ablation as present_ablation
from explorer.present import patching as present_patching
from explorer.views.ablation import HeadRanking
from explorer.views.first_order import Agreement
from explorer.views.patching.estimates import attribution_patching
from modeling import ScratchTransformerForCausalLM
from support.fixtures_checkpoints import checkpoint_config, train_tokenizer

CLEAN = "Shall I compare thee to a summer's day? Thou art more lovely and more temperate. Shall I compare"
CORRUPTED = "Shall I shall thee to a summer's day? Thou art more lovely and more temperate. Shall I compare"


@pytest.fixture(scope="module")
def estimate():
    tokenizer = train_tokenizer()
    torch.manual_seed(0)
    model = ScratchTransformerForCausalLM(checkpoint_config(tokenizer, "rope", initializer_range=0.2)).eval()
    return attribution_patching(model, tokenizer, CLEAN, CORRUPTED), model.config


def title(fig) -> str:
    """The figure's title as one line of text (wrapped_title breaks it into lines to fit a half-page figure)."""
    return re.sub(r"<br>|</?sup>", lambda m: " " if m.group() == "<br>" else "", fig.layout.title.text)


def markers(fig, name):
    return [trace for trace in fig.data if trace.type == "scatter" and trace.name.startswith(name)]


def test_a_position_grid_estimate_marks_the_cells_agreement_names(estimate):
    result, config = estimate
    grid = result.grids["residual"]
    agreed = Agreement(0.5, wrong_sign=[(1, 3)], off_rank=[(0, 2), (1, 5)], k=2)
    fig = present_patching.estimate_figure(result, "residual", config.n_layers, config.n_heads, agreed)
    assert np.allclose(np.array(fig.data[0].z), grid.values)
    (wrong,), (off,) = markers(fig, "wrong sign"), markers(fig, "exact top 2")
    x_labels = present_patching.token_axis(result)[0]
    assert list(wrong.x) == [x_labels[3]] and list(wrong.y) == ["L1"]
    assert list(off.x) == [x_labels[2], x_labels[5]] and list(off.y) == ["L0", "L1"]
    assert "correlation with the exact grid 0.500" in title(fig)
    assert "click" not in fig.data[0].hovertemplate  # no patched run behind an estimated cell


def test_a_cell_both_wrong_signed_and_missed_reads_both_marks_side_by_side_with_its_colour_showing(estimate):
    """× left of the cell's centre, ○ right of it, as thin text glyphs: not one stacked over the other, nor a filled
    marker over the cell."""
    result, config = estimate
    agreed = Agreement(0.5, wrong_sign=[(1, 3)], off_rank=[(1, 3)], k=1)
    fig = present_patching.estimate_figure(result, "residual", config.n_layers, config.n_heads, agreed)
    (wrong,), (off,) = markers(fig, "wrong sign"), markers(fig, "exact top 1")
    assert (list(wrong.x), list(wrong.y)) == (list(off.x), list(off.y))  # the same cell
    assert (wrong.mode, list(wrong.text), wrong.textposition) == ("text", ["×"], "middle left")
    assert (off.mode, list(off.text), off.textposition) == ("text", ["○"], "middle right")
    assert "× wrong sign" in title(fig) and "○ exact top 1" in title(fig)  # the legend's glyphs


def test_a_heads_estimate_marks_each_head_on_its_own_map(estimate):
    result, config = estimate
    agreed = Agreement(0.1, wrong_sign=[(5, 0)], off_rank=[(6, 1)], k=3)  # row 5: L1.H1 (4 heads), row 6: L1.H2
    fig = present_patching.estimate_figure(result, "heads", config.n_layers, config.n_heads, agreed)
    wrong = [t for t in markers(fig, "wrong sign") if len(t.x)]
    off = [t for t in markers(fig, "exact top 3") if len(t.x)]
    assert [(list(t.x), list(t.y), t.xaxis) for t in wrong] == [(["H1"], ["L1"], "x")]
    assert [(list(t.x), list(t.y), t.xaxis) for t in off] == [(["H2"], ["L1"], "x2")]


def test_the_head_ranking_estimate_marks_heads():
    estimate = HeadRanking("self", 2.0, np.array([[0.1, -0.2], [0.3, 0.0]]))
    fig = present_ablation.estimate_ranking_figure(estimate, Agreement(0.9, [(0, 1)], [(1, 0)], 1))
    assert [list(row) for row in fig.data[0].text] == [["+0.100", "-0.200<br>×"], ["+0.300<br>○", "+0.000"]]
    outlined = [(s.name, s.x0, s.y0) for s in fig.layout.shapes if s.line.color != "white"]
    assert outlined == [("wrong sign", 0.5, -0.5), ("exact top 1, not the estimate's", -0.5, 0.5)]
    assert "Estimated rise in loss" in title(fig) and "correlation with the exact grid 0.900" in title(fig)
