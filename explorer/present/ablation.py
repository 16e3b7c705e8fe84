"""Head ablation: the figures of an ablation and of the head ranking, the estimate's marks and verdict, and the
teaching text.
"""

import numpy as np
import plotly.graph_objects as go

from explorer.views.ablation import Ablation, HeadRanking
from explorer.present.figures import AFTER, BEFORE, KEPT, LAYOUT, PLOT_CHROME, angled_label_depth, signed, \
    tick_text, token_ticks, wrapped_title

FIGURE_MIN_WIDTH = 480  # px: each of the tab's figures is drawn at least this wide (its min_width); titles wrap to it


ABLATION = """### Head ablation: switch heads off
- **What you see:** the loss on your text (mean −log p of each next token, in nats; for folio-to-modern, of the
  tokens of its own rewrite of your text, which its decoder reads) and the next-token probabilities, with and without
  the heads you remove; per token, how much harder the text became.
- **How it works:** removing head h multiplies its output softmax(q k^T/√d_k + bias) v by 0 before the heads
  are concatenated, so its slice of the input of W_O is zero (an edit at the heads' site, `modeling.ablate_heads`;
  the bias is the mask's, and ALiBi's where the model uses it). A head here is a query head: where query heads share
  a key/value head (Llama, Qwen2, Mistral) the shared keys and values stay for the rest of the group, as the status
  line says for such a model. *Rank every head* removes each head alone (the model run again from that head's layer
  on: the layers below compute what they did) and draws the rise in loss as a layer × head map, beside a
  first-order estimate that comes first.
- **How to read it:** the plots appear below the buttons once you press one. In *Rank every head*'s maps, red cells
  are heads the model needs on this text; near-zero ones it can do without here. A removal can also lower the loss
  (blue): no head is tuned to one text."""

LABEL_FONT = 12  # px of the next-token labels


def ablation_figure(a: Ablation) -> go.Figure:
    """Next-token probabilities after the text, with all heads and with the chosen ones removed. The left margin
    holds the first tick label (cut: ``tick_text``; hover names each token whole): slanted at 45°, it reaches as
    far left of its bar as it reaches below the axis."""
    labels, whole = token_ticks(a.next_labels)
    fig = go.Figure()
    fig.add_bar(x=labels, y=a.next_before, hovertext=whole, name="all heads", marker_color=BEFORE,
                hovertemplate="%{hovertext}<br>all heads %{y:.4f}<extra></extra>")
    fig.add_bar(x=labels, y=a.next_after, hovertext=whole, name="heads removed", marker_color=AFTER,
                hovertemplate="%{hovertext}<br>heads removed %{y:.4f}<extra></extra>")
    left = max(LAYOUT["margin"]["l"], angled_label_depth(len(tick_text(a.next_labels[0])), LABEL_FONT, 45))
    fig.update_layout(title="Next token after the text", yaxis_title="probability", barmode="group", height=380,
                      legend=dict(orientation="h", y=1.02, x=1, xanchor="right", yanchor="bottom"),
                      **{**LAYOUT, "margin": dict(l=left, r=20, t=70, b=90)})
    fig.update_xaxes(type="category", tickangle=-45, tickfont_size=LABEL_FONT)
    return fig


def token_loss_figure(a: Ablation) -> go.Figure:
    """Per predicted token: the rise in -log p when the heads are removed (positive: harder to predict); the title
    says so and gives the mean rise, the loss before and after it."""
    change = a.token_loss_after - a.token_loss_before
    labels, whole = token_ticks([f"{t + 1}:{label}" for t, label in enumerate(a.tokens[1:])])
    fig = go.Figure(go.Bar(x=labels, y=change, marker_color=[AFTER if c > 0 else KEPT for c in change],
                           customdata=np.stack([a.token_loss_before, a.token_loss_after], 1), hovertext=whole,
                           hovertemplate="predicting %{hovertext}<br>−log p: %{customdata[0]:.3f} → %{customdata[1]:.3f}"
                                         "<br>change %{y:+.3f}<extra></extra>"))
    title, top = wrapped_title("Change in −log p of each token, heads removed",
                               f"mean change {a.loss_after - a.loss_before:+.4f} nats (loss {a.loss_before:.4f} → "
                               f"{a.loss_after:.4f})", width=FIGURE_MIN_WIDTH - PLOT_CHROME)
    fig.update_layout(title=title, yaxis_title="change in −log p (nats)", height=top + 310,
                      **{**LAYOUT, "margin": dict(l=60, r=20, t=top, b=110)})
    fig.update_xaxes(type="category", tickangle=-60, tickfont_size=10)
    return fig


def colour_limit(r: HeadRanking) -> float:
    """The largest |rise in loss| of a ranking: its map's colours run from -that to +that (1 for a grid of zeros)."""
    return float(np.abs(r.increase).max()) or 1.0


def ranking_figure(r: HeadRanking, heading: str = "", *details: str, limit: float | None = None,
                   scale_title: str = "Δ loss") -> go.Figure:
    """Layer x head: how much the loss rises when that head alone is removed; the value in each cell. ``heading`` and
    ``details`` (lines under it) replace the exact ranking's title; ``limit`` (default ``colour_limit(r)``) and
    ``scale_title`` set the colour bar."""
    n_layers, n_heads = r.increase.shape
    limit = colour_limit(r) if limit is None else limit
    fig = go.Figure(go.Heatmap(
        z=r.increase, x=[f"H{h}" for h in range(n_heads)], y=[f"L{l}" for l in range(n_layers)], colorscale="RdBu_r",
        zmid=0, zmin=-limit, zmax=limit, text=[[signed(v) for v in row] for row in r.increase], texttemplate="%{text}",
        colorbar=dict(title=scale_title), hovertemplate="layer %{y}, head %{x}<br>loss %{z:+.4f} nats<extra></extra>"))
    title, top = wrapped_title(heading or f"Rise in loss, each head removed alone (full model {r.loss:.4f})", *details,
                               width=FIGURE_MIN_WIDTH - PLOT_CHROME)
    fig.update_layout(title=title, xaxis_title="head", yaxis_title="layer",
                      **{**LAYOUT, "height": max(300, top + 90 + 46 * n_layers), "margin": dict(LAYOUT["margin"], t=top)})
    fig.update_yaxes(autorange="reversed")
    return fig


ESTIMATE = """**The estimate, first.** *Rank every head* first shows each head's cost to first order (Michel et al. 2019):
give head h a mask m_h = 1 multiplying its output o_h; removing it sets m_h to 0, and the loss changes by about
−dL/dm_h = −(o_h · dL/do_h). One backward pass gives every head at once. The exact ranking (each head removed, the
model run again from that head's layer on) then appears beside it. The estimate is then coloured on the exact map's
scale, so one colour means one change of the loss on both (an estimate beyond that scale takes its darkest colour:
read its number), and marked: a solid outline and × under the number on the heads whose estimate has the wrong
sign, a dashed outline and ○ on the exact ranking's costliest heads that the estimate did not rank among its own.
A first-order estimate misses what bends: a removed head changes the attention patterns of later layers (a saturated
softmax barely moves for a small change, then jumps), the norms divide by the stream's size, and later heads can
copy what the removed one wrote (the loss can then barely move: backup heads)."""

AGREEING_CORRELATION = 0.7  # below this correlation with the exact map (or none), the estimate is said to disagree


def disagrees(agreement) -> bool:
    """Whether the estimate's map correlates with the exact one below ``AGREEING_CORRELATION`` (or not at all)."""
    return bool(np.isnan(agreement.correlation) or agreement.correlation < AGREEING_CORRELATION)


def estimate_verdict(agreement) -> str:
    """The status line's plain words on how far the estimate's map can be trusted, beside the numbers."""
    r = "undefined" if np.isnan(agreement.correlation) else f"{agreement.correlation:.2f}"
    if disagrees(agreement):
        return (f"**The estimate disagrees with the exact answer here** (correlation {r}, below "
                f"{AGREEING_CORRELATION}): trust the exact map (*Every head, removed alone*). A first-order estimate "
                "treats removing a head as a small straight-line change; it misses what bends: later layers' attention "
                "shifting (a saturated softmax jumps), the norms rescaling the stream, later heads copying what the "
                "removed one wrote (see *Rank every head: the estimate first, and what it misses*).")
    return (f"The estimate agrees with the exact answer here (correlation {r}, at least {AGREEING_CORRELATION}); "
            "where the two maps differ, the exact one is right.")


# how the estimate's disagreement is marked: (the Agreement's cells, the glyph under the number, the outline's dash)
MARKS = (("wrong_sign", "×", "solid"), ("off_rank", "○", "dash"))


def mark_cells(fig: go.Figure, agreement) -> None:
    """Each cell of ``agreement.wrong_sign`` outlined (solid) with × under its number, each of ``agreement.off_rank``
    outlined (dashed) with ○ under it: a mark is a line of the cell's own text, so it never covers the number, and
    the outline runs along the cell's edge, black on a white halo (seen on the darkest cell too; the halos go first,
    so a cell marked both ways keeps its solid line)."""
    text = [list(row) for row in fig.data[0].text]
    lines = []
    for field, glyph, dash in MARKS:
        name = "wrong sign" if field == "wrong_sign" else f"exact top {agreement.k}, not the estimate's"
        for layer, head in getattr(agreement, field):
            text[layer][head] += f" {glyph}" if "<br>" in text[layer][head] else f"<br>{glyph}"
            cell = dict(type="rect", name=name, xref="x", yref="y", x0=head - 0.5, x1=head + 0.5, y0=layer - 0.5,
                        y1=layer + 0.5)
            fig.add_shape(**cell, line=dict(color="white", width=5))
            lines.append(dict(**cell, line=dict(color="#111111", width=2.5, dash=dash)))
    for line in lines:
        fig.add_shape(**line)
    fig.data[0].text = text


def estimate_ranking_figure(estimate: HeadRanking, agreement=None, exact: HeadRanking | None = None) -> go.Figure:
    """``ranking_figure`` of the first-order estimate; with ``agreement`` (``explorer.views.first_order``) its
    disagreement with the exact ranking marked on the map (``mark_cells``) and said in the title; with ``exact``
    coloured on the exact map's scale (``colour_limit(exact)``), which the title and the colour bar say."""
    details = () if agreement is None else (agreement.legend(),)
    if agreement is not None and disagrees(agreement):
        details += ("Far from the exact map here: trust the exact one.",)
    limit, scale_title = None, "Δ loss"
    if exact is not None:
        limit, scale_title = colour_limit(exact), "Δ loss,<br>the exact<br>map's scale"
        beyond = int((np.abs(estimate.increase) > limit).sum())
        beyond_it = f"; beyond it ({beyond} cell{'' if beyond == 1 else 's'}): its darkest colours" if beyond else ""
        details += (f"Coloured on the exact map's scale (±{limit:.3g}){beyond_it}.",)  # 3 digits: ±0.000304, not ±0.000
    fig = ranking_figure(estimate, f"Estimated rise in loss (first order: −o_h · dL/do_h; full model "
                                   f"{estimate.loss:.4f})", *details, limit=limit, scale_title=scale_title)
    fig.update_traces(hovertemplate="layer %{y}, head %{x}<br>estimated Δ loss %{z:+.4f} nats<extra></extra>",
                      selector=dict(type="heatmap"))
    if agreement is not None:
        mark_cells(fig, agreement)
    return fig
