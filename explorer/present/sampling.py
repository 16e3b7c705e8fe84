"""Sampling, seen: the next-token distribution as a figure, and the teaching text.
"""

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from explorer.present.figures import AFTER, CUT, KEPT, LAYOUT, probability, token_ticks
from explorer.views.sampling import NextTokenDistribution


SAMPLING = """### Sampling, seen
- **What you see:** the distribution of the next token after your prompt, redrawn as you move the controls.
  Bars: the probability after temperature, before any cut; the number on a bar is its height. Grey bars are
  the tokens top-k or top-p cut; hover a bar for the renormalised probability it is drawn with (its height
  divided by the kept tokens' sum, in the status line). Diamonds: the model's own probability at temperature 1.
  Below: the probabilities summed, most likely token first, over the whole vocabulary; the dashed line is
  where top-k or top-p cut (top-p 0.9 can keep hundreds of tokens, far past the bars above).
- **The formula:** p_i = exp(z_i / T) / Σ_j exp(z_j / T) for the logits z. T < 1 sharpens (T → 0 is greedy),
  T > 1 flattens. In this order (transformers' own processors, as `generate` applies them): the repetition
  penalty, temperature, *top-k* keeps the k most likely, *top-p* keeps the most likely tokens until their
  probability reaches p (of what top-k kept), and the kept ones are renormalised to sum to 1."""


def log_ticks(largest: int) -> list[int]:
    """1, 2, 5, 10, 20, 50, ... up to ``largest``: a log axis labelled in whole numbers (plotly's own labels write
    20 and 200 as '2', read as 2 by a learner)."""
    ticks, scale = [], 1
    while scale <= largest:
        ticks += [step * scale for step in (1, 2, 5) if step * scale <= largest]
        scale *= 10
    return ticks


def distribution_figure(d: NextTokenDistribution) -> go.Figure:
    """Top: the most likely next tokens, each bar's height and number its probability after temperature, before
    any cut (grey where top-k / top-p cut it; the renormalised probability it is drawn with in the hover);
    diamonds: the model's own probability (T = 1). Bottom: the probability summed over the tokens in order,
    over the whole vocabulary, with the cut drawn where it falls (top-p 0.9 may keep hundreds of tokens)."""
    labels, whole = token_ticks(d.labels)
    colours = [KEPT if kept else CUT for kept in d.kept]
    fig = make_subplots(rows=2, cols=1, row_heights=[0.62, 0.38], vertical_spacing=0.3)
    fig.add_bar(x=labels, y=d.tempered_probs, marker_color=colours, text=[probability(p) for p in d.tempered_probs],
                hovertext=whole, textposition="outside", cliponaxis=False,
                name=f"after temperature {d.settings.temperature:g}, before the cut",
                customdata=np.stack([d.final_probs, d.model_probs], 1),
                hovertemplate="%{hovertext}<br>after temperature %{y:.3~g}<br>drawn with %{customdata[0]:.3~g} (renormalised; 0: cut)"
                              "<br>model (T = 1) %{customdata[1]:.3~g}<extra></extra>", row=1, col=1)
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
    fig.update_yaxes(rangemode="tozero", title_text="probability", tickformat=".2~g", row=1, col=1)  # 0.0001, 0.2
    ticks = log_ticks(len(d.cumulative))
    fig.update_xaxes(type="log", title_text="tokens, most likely first (log scale)", tickvals=ticks,
                     ticktext=[f"{tick:,}" for tick in ticks], ticklabelstandoff=6, row=2, col=1)  # '1' clear of '0.0'
    fig.update_yaxes(range=[0, 1.02], title_text="summed", tickformat=".1f", row=2, col=1)
    return fig
