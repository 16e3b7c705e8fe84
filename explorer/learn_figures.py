"""Plotly figures of learning itself: the live loss curve, a head's attention on the probe, the induction scores
(``live_training``), and what one gradient step did (``gradient_step``).

Token labels go through ``plotly_text``: plotly reads ``<...>`` as markup, and a label is user text.
"""

import re

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .figures import LAYOUT, heatmap_figure, percent, plotly_text
from .gradient_step import HEAD_PARTS, GradientStep
from .live_training import Snapshot
from .teach_figures import AFTER, BEFORE, _unique

LAYER_NAME = re.compile(r"^(?P<stack>.*\.layers)\.(?P<layer>\d+)\.(?P<tensor>.+)$")  # model.….layers.3.self_attn.q_proj.weight


def loss_curve_figure(logged_steps: list[int], losses: list[float], steps: int, uniform: float | None = None) -> go.Figure:
    """The loss at every logged step (the mean over the steps since the one before), on an x axis as long as
    the job; ``uniform``: the loss of a model guessing every token of the vocabulary equally, ln V."""
    fig = go.Figure(go.Scatter(x=logged_steps, y=losses, mode="lines+markers", name="training loss",
                               hovertemplate="step %{x}<br>loss %{y:.3f} nats<extra></extra>"))
    if uniform is not None:
        fig.add_hline(y=uniform, line_dash="dash", line_color=BEFORE,
                      annotation_text=f"guessing uniformly: ln V = {uniform:.2f}", annotation_position="top right")
    top = max([*losses, uniform or 0.0], default=1.0)
    fig.update_layout(title="Training loss", xaxis_title="step", yaxis_title="loss (nats per token)", height=340,
                      xaxis=dict(range=[0, steps]), yaxis=dict(range=[0, top * 1.1 if np.isfinite(top) else None]), **LAYOUT)
    return fig


def probe_attention_figure(s: Snapshot) -> go.Figure:
    """(2L, 2L) attention of the watched head on the probe: random tokens r_0..r_{L-1}, then the same again.
    An induction head lights the diagonal L−1 below the main one: from r_i's copy to r_{i+1}'s first place."""
    fig = heatmap_figure(s.attention, "", "key position", "query position", colorscale="Blues", zmid=None,
                         hover="weight %{z:.3f}", height=380)
    fig.update_layout(title=f"Layer {s.layer}, head {s.head}<br>on the probe: random tokens, twice",
                      margin=dict(LAYOUT["margin"], t=80))
    return fig


def induction_figure(scores: list[list[float]], baseline: float) -> go.Figure:
    """Layer x head: each head's induction score (its least over three offsets), the value in each cell."""
    z = np.asarray(scores, dtype=float)
    n_layers, n_heads = z.shape
    fig = go.Figure(go.Heatmap(
        z=z, x=[f"H{h}" for h in range(n_heads)], y=[f"L{l}" for l in range(n_layers)], colorscale="Blues", zmin=0,
        zmax=1, text=[[f"{v:.2f}" for v in row] for row in z], texttemplate="%{text}", colorbar=dict(title="score"),
        hovertemplate="layer %{y}, head %{x}<br>induction score %{z:.3f}<extra></extra>"))
    fig.update_layout(title=f"Induction score of every head<br>(spread evenly: {baseline:.2f})", xaxis_title="head",
                      yaxis_title="layer", height=max(240, 150 + 50 * n_layers), **{**LAYOUT, "margin": dict(LAYOUT["margin"], t=80)})
    fig.update_yaxes(autorange="reversed")
    return fig


def before_after_figure(step: GradientStep) -> go.Figure:
    """The most likely next tokens before and after the step (the union of both top lists), the target first."""
    before, after = dict(step.top_before), dict(step.top_after)
    target = _target_label(step)
    labels = list(dict.fromkeys([target, *before, *after]))
    probability = {label: (before.get(label), after.get(label)) for label in labels}
    probability[target] = (step.p_before, step.p_after)
    shown = plotly_text(_unique(labels))
    fig = go.Figure()
    for i, (name, colour) in enumerate((("before the step", BEFORE), ("after the step", AFTER))):
        values = [probability[label][i] for label in labels]
        fig.add_bar(x=shown, y=[v if v is not None else 0.0 for v in values], name=name, marker_color=colour,
                    text=[percent(v) if v is not None else "not in its top list" for v in values],
                    hovertemplate="%{x}<br>" + name + ": %{text}<extra></extra>")
    fig.update_layout(title=plotly_text(f"Next token: the target {target}, then the top ones"),
                      yaxis_title="probability", barmode="group", height=380,
                      legend=dict(orientation="h", y=1.02, x=1, xanchor="right", yanchor="bottom"),
                      **{**LAYOUT, "margin": dict(l=60, r=20, t=70, b=90)})
    fig.update_xaxes(type="category", tickangle=-45)
    return fig


def _target_label(step: GradientStep) -> str:
    """The target as the top lists label tokens (a leading space shown as ␣)."""
    for label, _ in [*step.top_before, *step.top_after]:
        if label.replace("␣", " ") == step.target:
            return label
    return step.target.replace(" ", "␣")


def head_norms_figure(step: GradientStep) -> go.Figure:
    """Layer x head: the gradient norm of each head's slice of W_Q, W_K, W_V (rows, with their biases), W_O
    (columns), and of the four together."""
    parts = [*HEAD_PARTS, "all"]
    fig = make_subplots(rows=1, cols=len(parts), subplot_titles=[f"W_{p.upper()}" if p != "all" else "all four" for p in parts],
                        horizontal_spacing=0.03)
    for i, part in enumerate(parts):
        z = np.asarray(step.head_grad_norms[part])
        fig.add_trace(go.Heatmap(z=z, x=[f"H{h}" for h in range(z.shape[1])], y=[f"L{l}" for l in range(z.shape[0])],
                                 coloraxis="coloraxis",
                                 hovertemplate=f"{part}: layer %{{y}}, head %{{x}}<br>‖∇‖ %{{z:.3g}}<extra></extra>"),
                      row=1, col=i + 1)
        fig.update_yaxes(autorange="reversed", showticklabels=i == 0, row=1, col=i + 1)
    n_layers = len(step.head_grad_norms["all"])
    fig.update_layout(title="Gradient norm of each head's weights, per layer (one colour scale)",
                      coloraxis=dict(colorscale="Reds", cmin=0, colorbar=dict(title="‖∇‖")),
                      height=max(240, 120 + 40 * n_layers), **LAYOUT)
    return fig


def parameter_norms_figure(step: GradientStep) -> go.Figure:
    """The gradient norm of every parameter tensor by its state_dict name: the layers' tensors as a layer x
    tensor map, the rest (embedding, final norm) as bars. A tied name is drawn once, under the name it shares."""
    per_layer, rest = {}, {}
    for name, norm in step.grad_norms.items():
        if name in step.tied:
            continue
        match = LAYER_NAME.match(name)
        if match:
            per_layer.setdefault(match["tensor"], {})[int(match["layer"])] = (norm, name)
        else:
            rest[name] = norm
    tensors, layers = list(per_layer), sorted({l for cells in per_layer.values() for l in cells})
    fig = make_subplots(rows=2, cols=1, row_heights=[0.72, 0.28], vertical_spacing=0.28,
                        subplot_titles=["Every tensor of every layer", "The rest"])
    z = [[per_layer[t].get(l, (np.nan, ""))[0] for t in tensors] for l in layers]
    names = [[per_layer[t].get(l, (0, ""))[1] for t in tensors] for l in layers]
    fig.add_trace(go.Heatmap(z=z, x=tensors, y=[f"L{l}" for l in layers], customdata=names, colorscale="Reds", zmin=0,
                             colorbar=dict(title="‖∇‖", len=0.6, y=0.75),
                             hovertemplate="%{customdata}<br>‖∇‖ %{z:.3g}<extra></extra>"), row=1, col=1)
    tied_to = {shared: name for name, shared in step.tied.items()}
    labels = [f"{name} (= {tied_to[name]})" if name in tied_to else name for name in rest]
    fig.add_trace(go.Bar(x=list(rest.values()), y=labels, orientation="h", marker_color="#feb2b2", showlegend=False,
                         text=[f"{label}: {norm:.3g}" for label, norm in zip(labels, rest.values())],
                         textposition="auto", insidetextanchor="start", cliponaxis=False, textfont_color="black",
                         hovertemplate="%{y}<br>‖∇‖ %{x:.3g}<extra></extra>"), row=2, col=1)
    fig.update_yaxes(autorange="reversed", row=1, col=1)
    fig.update_yaxes(autorange="reversed", showticklabels=False, row=2, col=1)
    fig.update_xaxes(tickangle=-45, tickfont_size=10, row=1, col=1)
    fig.update_layout(title="Gradient norm of every parameter tensor (hover for its state_dict name)",
                      height=420 + 24 * len(layers) + 20 * len(rest), **{**LAYOUT, "margin": dict(l=60, r=20, t=60, b=40)})
    return fig
