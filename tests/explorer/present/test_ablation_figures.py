"""Head ablation's figures and words (explorer/present/ablation.py): the estimate's marks leave each cell's number
uncovered, the estimate is coloured on the exact map's scale, a poor agreement is said in plain words, the per-token
chart's title says its bars are changes, and the first next-token label has room."""

import re
from dataclasses import replace

import numpy as np
import pytest
import torch

from explorer.present import ablation as present
from explorer.present.figures import angled_label_depth
from explorer.views.ablation import HeadRanking, ablate_heads
from explorer.views.first_order import Agreement
from modeling import ScratchTransformerForCausalLM
from support.fixtures_checkpoints import checkpoint_config, train_tokenizer

# shakespeare-main's numbers on the default text (layers 2 to 4 of 6, heads 0, 1, 6, 7): an estimate far beyond
# the exact map's range (L4.H7: estimate -1.726, exact +0.368)
ESTIMATE = np.array([[-0.091, 0.237, 0.118, 0.253], [0.123, -0.025, 0.114, 0.101], [0.031, 0.083, -0.017, -1.726]])
EXACT = np.array([[-0.104, 0.195, 0.091, 0.229], [0.126, 0.080, 0.105, 0.085], [0.036, 0.096, 0.026, 0.368]])
POOR = Agreement(-0.05, wrong_sign=[(1, 1), (2, 3)], off_rank=[(2, 3), (0, 0)], k=3)


def title(fig) -> str:
    return re.sub(r"<br>|</?sup>", lambda m: " " if m.group() == "<br>" else "", fig.layout.title.text)


def test_the_marks_are_lines_of_the_cells_text_and_outlines_along_their_edges():
    """Nothing is drawn over a cell's middle, where its number is: each marked cell's text gets a second line with
    its glyph (× wrong sign, ○ a rank miss, both where both), and an outline along the cell's edge (a white halo
    under a black line: solid for the wrong sign, dashed for a rank miss; the halos first)."""
    fig = present.estimate_ranking_figure(HeadRanking("self", 5.5, ESTIMATE), POOR)
    assert [trace.type for trace in fig.data] == ["heatmap"]  # no marker trace over the cells
    heat = fig.data[0]
    np.testing.assert_array_equal(heat.z, ESTIMATE)
    assert heat.text[2][3] == "-1.726<br>× ○" and heat.text[1][1] == "-0.025<br>×" and heat.text[0][0] == "-0.091<br>○"
    assert heat.text[0][1] == "+0.237"  # an unmarked cell: its number alone
    shapes = fig.layout.shapes
    assert [s.line.color for s in shapes] == ["white"] * 4 + ["#111111"] * 4  # the lines over every halo
    for name, cells, dash in (("wrong sign", POOR.wrong_sign, "solid"), ("exact top 3", POOR.off_rank, "dash")):
        lines = [s for s in shapes if s.name.startswith(name) and s.line.color != "white"]
        assert [(s.x0, s.x1, s.y0, s.y1) for s in lines] == [(h - 0.5, h + 0.5, l - 0.5, l + 0.5) for l, h in cells]
        assert all(s.line.dash == dash for s in lines)
    assert "× wrong sign (2), ○ exact top 3 not in the estimate's (2)" in title(fig)


def test_with_the_exact_map_the_estimate_takes_its_colour_scale():
    """One colour, one change of the loss on both maps: the estimate's colours run over the exact map's range, the
    colour bar and the title say so and count the cells beyond it; its numbers stay its own."""
    exact = HeadRanking("self", 5.5, EXACT)
    alone = present.estimate_ranking_figure(HeadRanking("self", 5.5, ESTIMATE)).data[0]
    assert (alone.zmin, alone.zmax) == (-1.726, 1.726)  # before the exact map is in: its own range
    fig = present.estimate_ranking_figure(HeadRanking("self", 5.5, ESTIMATE), POOR, exact)
    exact_heat = present.ranking_figure(exact).data[0]
    assert (fig.data[0].zmin, fig.data[0].zmax) == (exact_heat.zmin, exact_heat.zmax) == (-0.368, 0.368)
    np.testing.assert_array_equal(fig.data[0].z, ESTIMATE)
    assert fig.data[0].colorbar.title.text.replace("<br>", " ") == "Δ loss, the exact map's scale"
    assert "Coloured on the exact map's scale (±0.368); beyond it (1 cell): its darkest colours." in title(fig)
    within = present.estimate_ranking_figure(HeadRanking("self", 5.5, EXACT / 2), POOR, exact)
    assert "Coloured on the exact map's scale (±0.368). " in title(within) + " " and "beyond" not in title(within)
    tiny = present.estimate_ranking_figure(HeadRanking("self", 5.5, ESTIMATE / 1000), POOR, HeadRanking("self", 5.5, EXACT / 1000))
    assert "Coloured on the exact map's scale (±0.000368)" in title(tiny)  # a random model's: never "±0.000"


@pytest.mark.parametrize("correlation, said", [
    (-0.05, "The estimate disagrees with the exact answer here** (correlation -0.05, below 0.7): trust the exact map"),
    (float("nan"), "disagrees with the exact answer here** (correlation undefined, below 0.7)"),
    (0.69, "disagrees with the exact answer here** (correlation 0.69, below 0.7)"),
    (0.7, "The estimate agrees with the exact answer here (correlation 0.70, at least 0.7)"),
    (0.95, "The estimate agrees with the exact answer here (correlation 0.95, at least 0.7)"),
])
def test_a_poor_agreement_is_said_in_plain_words(correlation, said):
    agreed = Agreement(correlation, [], [], 10)
    verdict = present.estimate_verdict(agreed)
    assert said in verdict
    poor = correlation != correlation or correlation < present.AGREEING_CORRELATION
    assert ("misses what bends" in verdict) == poor  # why, from the teaching text
    fig = present.estimate_ranking_figure(HeadRanking("self", 5.5, ESTIMATE), agreed)
    assert ("Far from the exact map here: trust the exact one." in title(fig)) == poor


@pytest.fixture(scope="module")
def ablation():
    tokenizer = train_tokenizer()
    torch.manual_seed(0)
    model = ScratchTransformerForCausalLM(checkpoint_config(tokenizer, "rope", initializer_range=0.2)).eval()
    return ablate_heads(model, tokenizer, "Shall I compare thee to a summer's day? Thou art more lovely", "0.1, 1.2")


def test_the_per_token_chart_says_its_bars_are_changes_and_gives_their_mean(ablation):
    fig = present.token_loss_figure(ablation)
    bars = np.asarray(fig.data[0].y)
    change = ablation.loss_after - ablation.loss_before
    assert float(bars.mean()) == pytest.approx(change, abs=1e-6)  # the bars' mean is the change the title gives
    assert title(fig).startswith("Change in −log p of each token, heads removed")
    assert (f"mean change {change:+.4f} nats (loss {ablation.loss_before:.4f} → {ablation.loss_after:.4f})"
            in title(fig))
    assert fig.layout.height - fig.layout.margin.t == 310  # the plot keeps its height under a longer title


def test_the_first_next_token_label_has_room_on_the_left(ablation):
    """Slanted at 45°, the first label reaches as far left of its bars as it reaches below the axis: the margin
    holds it even where its bars sit at the plot's very edge (an end-of-text token is 13 characters)."""
    fig = present.ablation_figure(replace(ablation, next_labels=["<|endoftext|>", *ablation.next_labels[1:]]))
    assert fig.layout.margin.l >= angled_label_depth(13, fig.layout.xaxis.tickfont.size, 45) > 60
    assert fig.data[0].x[0] == "&lt;|endoftext|&gt;"
