"""Head ablation: the figures of an ablation and of the head ranking, and the teaching text.
"""

import numpy as np
import plotly.graph_objects as go

from explorer.views.ablation import Ablation, HeadRanking
from explorer.present.figures import AFTER, BEFORE, KEPT, LAYOUT, unique_labels, plotly_text, signed, wrapped_title


ABLATION = """### Head ablation: switch heads off
- **What you see:** the loss on your text (mean −log p of each next token, in nats) and the next-token
  probabilities, with and without the heads you remove; per token, how much harder the text became.
- **How it works:** removing head h multiplies its output softmax(q k^T/√d_k + bias) v by 0 before the heads
  are concatenated, so its slice of the input of W_O is zero (an edit at the heads' site, `modeling.ablate_heads`;
  the bias is the mask's, and ALiBi's where the model uses it). A head here is a query head: where query heads share
  a key/value head (Llama, Qwen2, Mistral) the shared keys and values stay for the rest of the group, as the status
  line says for such a model. *Rank every head* removes each head alone (the model run again from that head's layer
  on: the layers below compute what they did) and draws the rise in loss as a layer × head map, beside a
  first-order estimate that comes first.
- **How to read it:** red cells are heads the model needs on this text; near-zero ones it can do without
  here. A removal can also lower the loss: no head is tuned to one text."""


def ablation_figure(a: Ablation) -> go.Figure:
    """Next-token probabilities after the text, with all heads and with the chosen ones removed."""
    labels = plotly_text(unique_labels(a.next_labels))
    fig = go.Figure()
    fig.add_bar(x=labels, y=a.next_before, name="all heads", marker_color=BEFORE,
                hovertemplate="%{x}<br>all heads %{y:.4f}<extra></extra>")
    fig.add_bar(x=labels, y=a.next_after, name="heads removed", marker_color=AFTER,
                hovertemplate="%{x}<br>heads removed %{y:.4f}<extra></extra>")
    fig.update_layout(title="Next token after the text", yaxis_title="probability", barmode="group", height=380,
                      legend=dict(orientation="h", y=1.02, x=1, xanchor="right", yanchor="bottom"),
                      **{**LAYOUT, "margin": dict(l=60, r=20, t=70, b=90)})
    fig.update_xaxes(type="category", tickangle=-45)
    return fig


def token_loss_figure(a: Ablation) -> go.Figure:
    """Per predicted token: the rise in -log p when the heads are removed (positive: harder to predict)."""
    change = a.token_loss_after - a.token_loss_before
    labels = [f"{t + 1}:{label}" for t, label in enumerate(plotly_text(a.tokens[1:]))]
    fig = go.Figure(go.Bar(x=labels, y=change, marker_color=[AFTER if c > 0 else KEPT for c in change],
                           customdata=np.stack([a.token_loss_before, a.token_loss_after], 1),
                           hovertemplate="predicting %{x}<br>−log p: %{customdata[0]:.3f} → %{customdata[1]:.3f}"
                                         "<br>change %{y:+.3f}<extra></extra>"))
    fig.update_layout(title=f"Loss per token (mean {a.loss_before:.4f} → {a.loss_after:.4f})",
                      yaxis_title="change in −log p (nats)", height=360, **{**LAYOUT, "margin": dict(l=60, r=20, t=50, b=110)})
    fig.update_xaxes(type="category", tickangle=-60, tickfont_size=10)
    return fig


def ranking_figure(r: HeadRanking, heading: str = "", *details: str) -> go.Figure:
    """Layer x head: how much the loss rises when that head alone is removed; the value in each cell. ``heading`` and
    ``details`` (lines under it) replace the exact ranking's title."""
    n_layers, n_heads = r.increase.shape
    limit = float(np.abs(r.increase).max()) or 1.0
    fig = go.Figure(go.Heatmap(
        z=r.increase, x=[f"H{h}" for h in range(n_heads)], y=[f"L{l}" for l in range(n_layers)], colorscale="RdBu_r",
        zmid=0, zmin=-limit, zmax=limit, text=[[signed(v) for v in row] for row in r.increase], texttemplate="%{text}",
        colorbar=dict(title="Δ loss"), hovertemplate="layer %{y}, head %{x}<br>loss %{z:+.4f} nats<extra></extra>"))
    title, top = wrapped_title(heading or f"Rise in loss, each head removed alone (full model {r.loss:.4f})", *details)
    fig.update_layout(title=title, xaxis_title="head", yaxis_title="layer",
                      **{**LAYOUT, "height": max(300, top + 90 + 46 * n_layers), "margin": dict(LAYOUT["margin"], t=top)})
    fig.update_yaxes(autorange="reversed")
    return fig


ESTIMATE = """**The estimate, first.** *Rank every head* first shows each head's cost to first order (Michel et al. 2019):
give head h a mask m_h = 1 multiplying its output o_h; removing it sets m_h to 0, and the loss changes by about
−dL/dm_h = −(o_h · dL/do_h). One backward pass gives every head at once. The exact ranking (each head removed, the
model run again from that head's layer on) then appears beside it, with × on the heads whose estimate has the wrong
sign and ○ on the exact ranking's costliest heads that the estimate did not rank among its own costliest. A
first-order estimate misses what bends: a removed head changes the attention patterns of later layers (a saturated
softmax barely moves for a small change, then jumps), the norms divide by the stream's size, and later heads can
copy what the removed one wrote (the loss can then barely move: backup heads)."""


def estimate_ranking_figure(estimate: HeadRanking, agreement=None) -> go.Figure:
    """``ranking_figure`` of the first-order estimate; with ``agreement`` (``explorer.views.first_order``) its
    disagreement with the exact ranking marked on the map and said in the title."""
    details = () if agreement is None else (agreement.legend(),)
    fig = ranking_figure(estimate, f"Estimated rise in loss (first order: −o_h · dL/do_h; full model "
                                   f"{estimate.loss:.4f})", *details)
    fig.update_traces(hovertemplate="layer %{y}, head %{x}<br>estimated Δ loss %{z:+.4f} nats<extra></extra>",
                      selector=dict(type="heatmap"))
    if agreement is not None:
        for cells, symbol, name in ((agreement.wrong_sign, "x-thin-open", "wrong sign"),
                                    (agreement.off_rank, "circle-open", f"exact top {agreement.k}, not the estimate's")):
            fig.add_scatter(x=[f"H{h}" for _, h in cells], y=[f"L{l}" for l, _ in cells], mode="markers", name=name,
                            hoverinfo="skip", showlegend=False,  # the title says what × and ○ mark
                            marker=dict(symbol=symbol, size=16, color="#111111", line=dict(width=2, color="#111111")))
    return fig
