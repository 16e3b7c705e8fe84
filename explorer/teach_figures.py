"""Plotly figures of the teaching views: sampling, logit lens, ablation, head ranking, token-centred attention.

Token labels go through ``plotly_text``: plotly reads ``<...>`` as markup, and a label is user text.
"""

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .ablation import Ablation, HeadRanking
from .figures import LAYOUT, plotly_text
from .heads import HeadTypes
from .lens import LogitLens
from .sampling import NextTokenDistribution

KEPT, CUT, BEFORE, AFTER = "#2b6cb0", "#cbd5e0", "#718096", "#c53030"
TYPE_SHORT = {"previous token": "prev", "first-token sink": "sink", "same token": "self", "induction": "induct"}


def _unique(labels: list[str]) -> list[str]:
    """Category axes merge equal labels: number repeated ones (' the', ' the#2')."""
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        out.append(label if seen[label] == 1 else f"{label}#{seen[label]}")
    return out


def signed(value: float) -> str:
    """+0.123, or +4.6e-05 when three decimals would show nothing."""
    return f"{value:+.3f}" if value == 0 or abs(value) >= 5e-4 else f"{value:+.1e}"


def distribution_figure(d: NextTokenDistribution) -> go.Figure:
    """Top: the most likely next tokens, each bar's height and number its probability after temperature, before
    any cut (grey where top-k / top-p cut it; the renormalised probability it is drawn with in the hover);
    diamonds: the model's own probability (T = 1). Bottom: the probability summed over the tokens in order,
    over the whole vocabulary, with the cut drawn where it falls (top-p 0.9 may keep hundreds of tokens)."""
    labels = plotly_text(_unique(d.labels))
    colours = [KEPT if kept else CUT for kept in d.kept]
    fig = make_subplots(rows=2, cols=1, row_heights=[0.62, 0.38], vertical_spacing=0.3)
    fig.add_bar(x=labels, y=d.tempered_probs, marker_color=colours, text=[f"{p:.3f}" for p in d.tempered_probs],
                textposition="outside", cliponaxis=False, name=f"after temperature {d.settings.temperature:g}, before the cut",
                customdata=np.stack([d.final_probs, d.model_probs], 1),
                hovertemplate="%{x}<br>after temperature %{y:.4f}<br>drawn with %{customdata[0]:.4f} (renormalised; 0: cut)"
                              "<br>model (T = 1) %{customdata[1]:.4f}<extra></extra>", row=1, col=1)
    fig.add_scatter(x=labels, y=d.model_probs, mode="markers", marker=dict(symbol="diamond", size=9, color="#1a202c"),
                    name="model's own (T = 1)", hoverinfo="skip", row=1, col=1)
    ranks = np.arange(1, len(d.cumulative) + 1)
    for name, part, colour in (("kept", slice(0, d.n_kept), KEPT), ("cut", slice(d.n_kept, None), CUT)):
        if len(ranks[part]):
            fig.add_scatter(x=ranks[part], y=d.cumulative[part], mode="lines", line=dict(color=colour, width=3),
                            name=f"summed probability, {name}", hovertemplate="the %{x} most likely tokens hold %{y:.3f}"
                            "<extra></extra>", row=2, col=1)
    s = d.settings
    cuts = [f"top-k {s.top_k}" if s.top_k else "", f"top-p {s.top_p:g}" if s.top_p < 1 else ""]
    if any(cuts):
        fig.add_vline(x=d.n_kept + 0.5, line_dash="dash", line_color=AFTER, row=2, col=1)
        fig.add_annotation(x=np.log10(d.n_kept + 0.5), y=d.kept_mass, text=f"cut after token #{d.n_kept:,} (sum {d.kept_mass:.3f})",
                           showarrow=True, arrowhead=2, ax=40, ay=30, xanchor="left", row=2, col=1)
    kept = f"{d.n_kept:,} of {d.vocab_size:,} tokens kept" if any(cuts) else "nothing cut"
    fig.update_layout(title=f"T = {s.temperature:g}{''.join(', ' + c for c in cuts if c)}: {kept}", height=620,
                      legend=dict(orientation="h", y=1.02, x=1, xanchor="right", yanchor="bottom"),
                      **{**LAYOUT, "margin": dict(l=60, r=20, t=80, b=60)})
    fig.update_xaxes(type="category", tickangle=-45, title_text=f"the {len(d.labels)} most likely next tokens", row=1, col=1)
    fig.update_yaxes(rangemode="tozero", title_text="probability", tickformat=".3f", row=1, col=1)
    fig.update_xaxes(type="log", title_text="tokens, most likely first (log scale)", row=2, col=1)
    fig.update_yaxes(range=[0, 1.02], title_text="summed", tickformat=".1f", row=2, col=1)
    return fig


def lens_heatmap(lens: LogitLens) -> go.Figure:
    """Layer x position: the probability each layer's read-out gives to the token that came next."""
    reads = plotly_text(lens.tokens[:-1])
    nexts = plotly_text(lens.tokens[1:])
    columns = [f"{t}:{label}" for t, label in enumerate(reads)]
    hover = np.array([[f"{r} → {n}" for r, n in zip(reads, nexts)]] * len(lens.rows))
    fig = go.Figure(go.Heatmap(z=lens.next_token_probs, x=columns, y=lens.rows, colorscale="Blues", zmin=0, zmax=1,
                               customdata=hover, colorbar=dict(title="p(next)"),
                               hovertemplate="%{y}<br>%{customdata}<br>p = %{z:.3f}<extra></extra>"))
    fig.update_layout(title="Probability of the token that actually came next, by layer", xaxis_title="position (token read)",
                      height=max(330, 160 + 30 * len(lens.rows)), **{**LAYOUT, "margin": dict(l=90, r=20, t=50, b=110)})
    fig.update_xaxes(type="category", tickangle=-60, tickfont_size=10)
    fig.update_yaxes(type="category", autorange="reversed")
    return fig


def ablation_figure(a: Ablation) -> go.Figure:
    """Next-token probabilities after the text, with all heads and with the chosen ones removed."""
    labels = plotly_text(_unique(a.next_labels))
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


def ranking_figure(r: HeadRanking) -> go.Figure:
    """Layer x head: how much the loss rises when that head alone is removed; the value in each cell."""
    n_layers, n_heads = r.increase.shape
    limit = float(np.abs(r.increase).max()) or 1.0
    fig = go.Figure(go.Heatmap(
        z=r.increase, x=[f"H{h}" for h in range(n_heads)], y=[f"L{l}" for l in range(n_layers)], colorscale="RdBu_r",
        zmid=0, zmin=-limit, zmax=limit, text=[[signed(v) for v in row] for row in r.increase], texttemplate="%{text}",
        colorbar=dict(title="Δ loss"), hovertemplate="layer %{y}, head %{x}<br>loss %{z:+.4f} nats<extra></extra>"))
    fig.update_layout(title=f"Rise in loss, each head removed alone (full model {r.loss:.4f})",
                      xaxis_title="head", yaxis_title="layer", height=max(300, 140 + 46 * n_layers), **LAYOUT)
    fig.update_yaxes(autorange="reversed")
    return fig


def token_centred_figure(weights: np.ndarray, query_label: str, key_labels: list[str], layer: int,
                         types: HeadTypes | None = None) -> go.Figure:
    """Heads (rows) x keys (columns): what one query token attends to in every head of a layer.

    weights: (heads, keys) for that query."""
    rows = []
    for head in range(weights.shape[0]):
        found = types.labels(layer, head) if types is not None else []
        rows.append(f"H{head}" + "".join(f" · {TYPE_SHORT[k]} {s:.2f}" for k, s in found))
    keys = plotly_text(key_labels)
    fig = go.Figure(go.Heatmap(z=weights, x=keys, y=rows, colorscale="Blues", zmin=0, zmax=1, colorbar=dict(title="weight"),
                               hovertemplate="%{y}<br>key %{x}<br>weight %{z:.3f}<extra></extra>"))
    fig.update_layout(title=f"Layer {layer}: what {plotly_text([query_label])[0]} attends to, in every head",
                      xaxis_title="key token", height=max(330, 160 + 30 * len(rows)), **{**LAYOUT, "margin": dict(l=150, r=20, t=50, b=110)})
    fig.update_xaxes(type="category", tickangle=-60, tickfont_size=10)
    fig.update_yaxes(type="category", autorange="reversed")
    return fig
