"""Logit lens: the heat map, the table, and the teaching text.
"""

import html

import numpy as np
import plotly.graph_objects as go

from explorer.present.figures import LAYOUT, plotly_text, probability, tick_text
from explorer.views.lens import LogitLens


LENS = """### Logit lens: what the model would say if it stopped after each layer
- **What you see:** for each layer, the 5 most likely next tokens after the chosen position (click a token),
  and a heatmap of the probability each layer gives to the token that really came next, at every position.
- **How it works:** the stream after layer l is read out the way the model reads its last one:
  p_l = softmax(Norm_final(h_l) · W_U), with the model's own final norm (LayerNorm or RMSNorm) and its own LM head
  W_U: in a *tied* model W_U is the embedding matrix itself (E^T), in an *untied* one a matrix of its own. The line
  above the table says which this model has. The last row IS the model's prediction (a test holds it equal, bit
  for bit). The *embeddings* row reads the stream before any layer: with a tied head it mostly predicts the current
  token itself (a token's embedding scores highest against its own row of E); an untied head has no such pull.
- **How to read it:** top to bottom, the prediction forming layer by layer; in the heatmap, a column turns
  dark at the layer where the model "knows" the next token."""


def lens_heatmap(lens: LogitLens) -> go.Figure:
    """Layer x position: the probability each layer's read-out gives to the token that came next."""
    reads = plotly_text(lens.tokens[:-1])
    nexts = plotly_text(lens.tokens[1:])
    columns = [plotly_text(tick_text(f"{t}:{label}")) for t, label in enumerate(lens.tokens[:-1])]  # hover: whole
    hover = np.array([[f"{r} → {n}" for r, n in zip(reads, nexts)]] * len(lens.rows))
    fig = go.Figure(go.Heatmap(z=lens.next_token_probs, x=columns, y=lens.rows, colorscale="Blues", zmin=0, zmax=1,
                               customdata=hover, colorbar=dict(title="p(next)"),
                               hovertemplate="%{y}<br>%{customdata}<br>p = %{z:.3~g}<extra></extra>"))
    fig.update_layout(title="Probability of the token that actually came next, by layer", xaxis_title="position (token read)",
                      height=max(330, 160 + 30 * len(lens.rows)), **{**LAYOUT, "margin": dict(l=90, r=20, t=50, b=110)})
    fig.update_xaxes(type="category", tickangle=-60, tickfont_size=10)
    fig.update_yaxes(type="category", autorange="reversed")
    return fig


def lens_table_html(lens: LogitLens) -> str:
    """Rows: embeddings, layer 0, ...; cells: the top tokens with their probabilities."""
    body = []
    for row, labels, probs in zip(lens.rows, lens.top_labels, lens.top_probs):
        cells = "".join(f"<td>{html.escape(label)}</td><td class=p>{probability(p)}</td>" for label, p in zip(labels, probs))
        body.append(f"<tr><th>{html.escape(row)}</th>{cells}</tr>")
    head = "".join(f"<th>#{k + 1}</th><th>p</th>" for k in range(lens.top_probs.shape[1]))
    caption = f"Top {lens.top_probs.shape[1]} next tokens after {html.escape(lens.tokens[lens.position])} (position {lens.position})"
    if lens.readout:
        caption += f". Each row read out as {html.escape(lens.readout)}"
    return (f'<div class="note">{caption}</div><div class="teach-scroll"><table class="teach-values lens">'
            f"<thead><tr><th>read after</th>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>")
