"""Attention heads: the clickable head grid with head types, the token-centred view, and the teaching text.
"""

import base64
import html
import io

import numpy as np
import plotly.graph_objects as go
from PIL import Image

from explorer.present.figures import LAYOUT, plotly_text, tick_text
from explorer.views.heads import HeadTypes


HEADS = """### What each head does
- **Grid:** every layer (rows) × head (columns) of the attention on your text; each thumbnail is coloured from
  0 (white) to its own largest weight (dark). Click one to enlarge it.
- **Token view:** click a token to see what it attends to in every head of the layer.
- **Head types**, where the evidence is clear: the score is the average weight the head puts, over the
  queries (from the third token on), where its type says it looks: the *previous token* (t−1), the *first
  token* (a "sink" that holds weight a head does not need elsewhere), the *same token* (t), or, for
  *induction*, the token that followed the earlier occurrence of the current token, on random tokens repeated
  twice. A label appears when the score reaches the threshold; the baseline is what a head spreading its
  weight evenly would score.
- **Grouped key/value heads** (Llama, Qwen2, Mistral): a model may have fewer key/value heads than query heads, each
  W_K, W_V shared by a group of query heads; the line above the grid says which heads share, where they do.
- **Look for the induction circuit** in shakespeare-main, which learned to copy from its context: an induction
  head in layer 4 and, in the layer below, the previous-token head whose output its keys read. Give it a text that
  repeats (a line, then the same line again) and its induction head looks, from each token of the repeat, at the
  token that followed the same token the first time. The position-encoding models never learned this: no induction
  label there."""


def token_centred_figure(weights: np.ndarray, query_label: str, key_labels: list[str], layer: int,
                         types: HeadTypes | None = None) -> go.Figure:
    """Heads (rows) x keys (columns): what one query token attends to in every head of a layer.

    weights: (heads, keys) for that query."""
    rows = []
    for head in range(weights.shape[0]):
        found = types.labels(layer, head) if types is not None else []
        rows.append(f"H{head}" + "".join(f" · {k} {s:.2f}" for k, s in found))  # each type named as the grid names it
    keys = plotly_text([tick_text(label) for label in key_labels])
    whole = np.array([plotly_text(list(key_labels))] * len(rows))  # hover names each key whole
    fig = go.Figure(go.Heatmap(z=weights, x=keys, y=rows, colorscale="Blues", zmin=0, zmax=1, colorbar=dict(title="weight"),
                               customdata=whole, hovertemplate="%{y}<br>key %{customdata}<br>weight %{z:.3f}<extra></extra>"))
    fig.update_layout(title=f"Layer {layer}: what {plotly_text([query_label])[0]} attends to, in every head",
                      xaxis_title="key token", height=max(330, 160 + 30 * len(rows)), **{**LAYOUT, "margin": dict(l=60, r=20, t=50, b=110)})
    fig.update_xaxes(type="category", tickangle=-60, tickfont_size=10)
    fig.update_yaxes(type="category", autorange="reversed", automargin=True)  # room for the longest head's types
    return fig


def _png(weights: np.ndarray) -> str:
    """A data URI: one pixel per (query, key), white at 0 to dark blue at the map's largest weight (a 256-colour
    palette image: a third of the bytes of RGB)."""
    levels = np.rint(weights / max(float(weights.max()), 1e-12) * 255).astype(np.uint8)
    ramp = np.linspace(0.0, 1.0, 256)[:, None]
    palette = (np.array([255.0, 255.0, 255.0]) + ramp * (np.array([8.0, 48.0, 107.0]) - 255.0)).astype(np.uint8)
    image = Image.frombytes("P", (levels.shape[1], levels.shape[0]), np.ascontiguousarray(levels).tobytes())
    image.putpalette(palette.flatten().tolist())
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def head_grid_html(weights: np.ndarray, types: HeadTypes | None, selected: tuple[int, int] | None = None) -> str:
    """Every layer x head as a clickable thumbnail of its attention, with its type labels (score, threshold).

    weights: (layers, heads, queries, keys)."""
    n_layers, n_heads = weights.shape[:2]
    cells = ['<div></div>'] + [f'<div class="colhead">H{h}</div>' for h in range(n_heads)]
    for layer in range(n_layers):
        cells.append(f'<div class="rowhead">L{layer}</div>')
        for head in range(n_heads):
            found = types.labels(layer, head) if types is not None else []
            badges = "".join(f'<span class="badge">{html.escape(kind)} {score:.2f}</span>' for kind, score in found)
            tip = f"layer {layer}, head {head}" + "".join(
                f"; {kind} {score:.2f} (threshold {types.threshold:g})" for kind, score in found)
            chosen = " selected" if selected == (layer, head) else ""
            cells.append(f'<button class="cell{chosen}" data-layer="{layer}" data-head="{head}" title="{html.escape(tip)}" '
                         f'aria-label="{html.escape(tip)}"><img alt="" src="{_png(weights[layer, head])}">'
                         f'<span class="name">L{layer} H{head}</span>{badges}</button>')
    style = f"grid-template-columns: 2.2em repeat({n_heads}, minmax(0, 1fr));"
    return f'<div class="head-grid" style="{style}">{"".join(cells)}</div>'


def head_types_html(types: HeadTypes) -> str:
    """One line per head type: the heads that reach the threshold with their scores, or the strongest head
    when none does, and the uniform baseline for scale."""
    lines = []
    for kind, scores in types.scores.items():
        found = sorted(((float(scores[l, h]), l, h) for l in range(scores.shape[0]) for h in range(scores.shape[1])
                        if scores[l, h] >= types.threshold), reverse=True)
        if found:
            heads = ", ".join(f"L{l}.H{h} {s:.2f}" for s, l, h in found)
        else:
            layer, head, score = types.strongest(kind)
            heads = f"none reaches it (strongest: L{layer}.H{head} {score:.2f})"
        lines.append(f"<li><b>{html.escape(kind)}</b>: {heads} <span class=base>(even spread: {types.baseline[kind]:.2f})</span></li>")
    for kind, why in types.unmeasured.items():
        lines.append(f"<li><b>{html.escape(kind)}</b>: not measured ({html.escape(why)})</li>")
    shared = ""
    if types.kv_sharing:
        shared = (f'<div class="note">Grouped key/value heads: {html.escape(types.kv_sharing)}. Heads of one group '
                  "read the same keys and values with queries of their own, so their maps can differ.</div>")
    return f'<div class="head-types">{shared}Head types, threshold {types.threshold:g}:<ul>{"".join(lines)}</ul></div>'
