"""Plotly figures of learning itself: the live loss curve, a head's attention on the probe, the induction scores
(``live_training``), what one gradient step did (``gradient_step``), and a recorded run at one snapshot
(``timeline``): its loss curves and head scores over training beside another run's, every head's attention; a Hub
repo's training revisions (``hub_timeline``'s JSON): the same head scores, its best induction head's attention.

Token labels go through ``plotly_text``: plotly reads ``<...>`` as markup, and a label is user text.
"""

import re
import textwrap

import numpy as np
import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from .figures import LAYOUT, attention_head_figure, heatmap_figure, percent, plotly_text, token_attention_figure
from .gradient_step import HEAD_PARTS, GradientStep
from .heads import THRESHOLD
from .hub_timeline import steps_of
from .live_training import Snapshot
from .teach_figures import AFTER, BEFORE, _unique
from .recorded_runs import CIRCUIT, TimelineView, step_label

LAYER_NAME = re.compile(r"^(?P<stack>.*\.layers)\.(?P<layer>\d+)\.(?P<tensor>.+)$")  # model.….layers.3.self_attn.qkv_proj.weight


def loss_curve_figure(logged_steps: list[int], losses: list[float], steps: int, uniform: float | None = None,
                      copies_only: bool = False) -> go.Figure:
    """The loss of every step, from step 0 (the fresh model), on an x axis as long as the job; ``uniform``: the
    loss of a model guessing every token of the vocabulary equally, ln V; ``copies_only``: the loss counts only
    the copyable tokens (said in the title)."""
    fig = go.Figure(go.Scatter(x=logged_steps, y=losses, mode="lines", name="training loss",
                               hovertemplate="step %{x}<br>loss %{y:.3f} nats<extra></extra>"))
    if uniform is not None:
        fig.add_hline(y=uniform, line_dash="dash", line_color=BEFORE,
                      annotation_text=f"guessing uniformly: ln V = {uniform:.2f}", annotation_position="top right")
    top = max([*losses, uniform or 0.0], default=1.0)
    fig.update_layout(title="Training loss on the copied tokens only" if copies_only else "Training loss (every step)",
                      xaxis_title="step", yaxis_title="loss (nats per token)", height=340,
                      xaxis=dict(range=[0, steps]), yaxis=dict(range=[0, top * 1.1 if np.isfinite(top) else None]), **LAYOUT)
    return fig


def probe_attention_figure(s: Snapshot) -> go.Figure:
    """(2L, 2L) attention of the watched head on the probe: random tokens r_0..r_{L-1}, then the same again.
    An induction head lights the diagonal L−1 below the main one: from r_i's copy to r_{i+1}'s first place. Lines
    mark where the second copy starts."""
    fig = heatmap_figure(s.attention, "", "key position", "query position", colorscale="Blues", zmid=None,
                         hover="weight %{z:.3f}", height=380)
    L = s.copy_start
    fig.add_hline(y=L - 0.5, line_color=AFTER, line_width=1)
    fig.add_vline(x=L - 0.5, line_color=AFTER, line_width=1)
    fig.add_annotation(x=0, y=L - 0.5, text="second copy starts", showarrow=False, xanchor="left", yanchor="top",
                       font=dict(color=AFTER, size=11))
    lines = [*textwrap.wrap(f"L{s.layer}.H{s.head}: {s.watched or 'the head shown'}", 40), "on the probe: random tokens, twice"]
    fig.update_layout(title="<br>".join(lines), margin=dict(LAYOUT["margin"], t=36 + 22 * len(lines)))  # fits half an 800 px page
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
    if step.induction_head:  # outline the induction head's cell in every map
        layer, head, score = step.induction_head
        for i in range(len(parts)):
            fig.add_shape(type="rect", x0=head - 0.5, x1=head + 0.5, y0=layer - 0.5, y1=layer + 0.5,
                          line=dict(color="black", width=2), row=1, col=i + 1)
        fig.add_annotation(text=f"outlined: L{layer}.H{head}, the induction head (score {score:.2f})",
                           xref="paper", yref="paper", x=0, y=-0.12, showarrow=False, xanchor="left", yanchor="top")
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


THIS_RUN, OTHER_RUN = "#D55E00", BEFORE  # the run on the slider, and the run it is compared with


def _mark_step(fig: go.Figure, step: int, **where) -> None:
    fig.add_vline(x=step, line=dict(color="#333333", width=1.5, dash="dot"), **where)


def timeline_loss_figure(view: TimelineView) -> go.Figure:
    """The training loss (every logged step, on the run's own data) and the validation loss (every snapshot, on
    the same held-out text for every run) of this run and the other one; a dotted line at the current step."""
    fig = go.Figure()
    for run, colour, role in ((view.other, OTHER_RUN, "the other run"), (view.run, THIS_RUN, "this run")):
        if run is None:
            continue
        name = plotly_text(run.name)
        curve = np.asarray(run.timeline["train_curve"], dtype=float).reshape(-1, 2)
        fig.add_scatter(x=curve[:, 0], y=curve[:, 1], mode="lines", name=f"{name}: training loss", opacity=0.45,
                        line=dict(color=colour, width=1),
                        hovertemplate=f"{name} ({role})<br>step %{{x}}<br>training loss %{{y:.3f}}<extra></extra>")
        fig.add_scatter(x=run.steps, y=[s["validation_loss"] for s in run.snapshots], mode="lines+markers",
                        name=f"{name}: validation loss", line=dict(color=colour, width=2.5),
                        hovertemplate=f"{name} ({role})<br>step %{{x}}<br>validation loss %{{y:.3f}}<extra></extra>")
    _mark_step(fig, view.step)
    fig.add_scatter(x=[view.step], y=[view.snapshot["validation_loss"]], mode="markers", showlegend=False,
                    marker=dict(color=THIS_RUN, size=13, line=dict(color="white", width=2)), hoverinfo="skip")
    fig.update_layout(title=f"Loss (nats per token) · step {view.step:,}", xaxis_title="step", yaxis_title="loss",
                      height=380, legend=dict(orientation="h", y=-0.22), **LAYOUT)
    return fig


HEAD_PALETTE = qualitative.Dark24  # 24 hues that are told apart at a glance


def head_colours(n_layers: int, n_heads: int) -> list[list[str]]:
    """A distinct colour per head (a qualitative palette, heads of a layer next to each other in it)."""
    return [[HEAD_PALETTE[(l * n_heads + h) % len(HEAD_PALETTE)] for h in range(n_heads)] for l in range(n_layers)]


def timeline_heads_figure(view: TimelineView) -> go.Figure:
    """``heads_figure`` of a recorded run at a snapshot: the scores from its timeline.json, the other run's best head
    dashed, and the composition of every earlier/later head pair."""
    other = None
    if view.other is not None:
        other = (view.other.name, view.other.steps,
                 {what: [float(np.max(s[what])) for s in view.other.snapshots] for what in ("induction", "previous_token")})
    return heads_figure(view.run.steps, [s["induction"] for s in view.run.snapshots],
                        [s["previous_token"] for s in view.run.snapshots], view.step, other, view.composition)


def heads_figure(steps: list, induction, previous, at, other: tuple | None = None,
                 composition: dict | None = None) -> go.Figure:
    """Every head's induction score (top) and previous-token score (middle) at every step, one line per head
    (``induction``, ``previous``: one layers x heads array per step; a step that is not a number, such as a revision
    named ``main``, is a category of the x axis); a dotted line at the step ``at``. ``other``: (name, its steps,
    {"induction", "previous_token": its best head's score at each}) dashed. ``composition``: {(l1, h1, l2, h2): one
    score per step}, drawn below (``recorded_runs.composition_scores``): a pair that ever reaches 0.1 in the later
    head's colour and named, the rest thin and grey."""
    rows = 3 if composition else 2
    fig = make_subplots(rows=rows, cols=1, shared_xaxes=True, vertical_spacing=0.08,
                        subplot_titles=["Induction score of every head", "Previous-token score of every head",
                                        "K-composition: what a later head's induction score loses without an earlier head"][:rows])
    induction, previous = np.asarray(induction, dtype=float), np.asarray(previous, dtype=float)  # (steps, layers, heads)
    colours = head_colours(*induction.shape[1:])
    for row, (scores, what) in enumerate(((induction, "induction"), (previous, "previous_token")), start=1):
        for layer in range(scores.shape[1]):
            for head in range(scores.shape[2]):
                name = f"layer {layer}, head {head}"
                fig.add_scatter(x=steps, y=scores[:, layer, head], mode="lines+markers", name=name,
                                legendgroup=name, showlegend=row == 1, marker_size=4,
                                line=dict(color=colours[layer][head], width=2),
                                hovertemplate=f"{name}<br>step %{{x}}<br>score %{{y:.3f}}<extra></extra>", row=row, col=1)
        if other is not None:
            name, other_steps, best = other
            label = plotly_text(f"{name}: its best head")
            fig.add_scatter(x=other_steps, y=best[what], mode="lines", name=label, legendgroup="other",
                            showlegend=row == 1, line=dict(color=OTHER_RUN, width=2, dash="dash"),
                            hovertemplate=f"{label}<br>step %{{x}}<br>score %{{y:.3f}}<extra></extra>", row=row, col=1)
    for (l1, h1, l2, h2), scores in (composition or {}).items():
        strong = max(scores) >= 0.1
        name = f"L{l1}.H{h1} → L{l2}.H{h2}"
        fig.add_scatter(x=steps, y=scores, mode="lines", name=name, showlegend=strong,
                        line=dict(color=colours[l2][h2] if strong else "#cccccc", width=2.5 if strong else 1,
                                  dash="solid" if h1 % 2 == 0 else "dashdot"),
                        hovertemplate=f"{name}<br>step %{{x}}<br>loses %{{y:.3f}}<extra></extra>", row=3, col=1)
    fig.add_hline(y=THRESHOLD, line=dict(color="#999999", width=1, dash="dot"), row=1, col=1,
                  annotation_text=f"labelled induction from {THRESHOLD:g}", annotation_position="top left")
    for row in range(1, rows + 1):
        _mark_step(fig, at, row=row, col=1)
    if not all(isinstance(step, int) for step in steps):
        fig.update_xaxes(type="category")
    fig.update_yaxes(range=[0, 1.02], title_text="score")
    fig.update_yaxes(range=[-0.05, 1.02], title_text="loses", row=3, col=1)
    fig.update_xaxes(title_text="step", row=rows, col=1)
    fig.update_layout(height=520 + 220 * (rows - 2), legend=dict(orientation="h", y=-0.12),
                      **{**LAYOUT, "margin": dict(LAYOUT["margin"], t=60)})
    return fig


def timeline_attention_figure(view: TimelineView) -> go.Figure:
    """Every head's attention on the text at this snapshot (rows: layers, columns: heads; one colour scale from 0
    to 1), each titled with its induction and previous-token scores at this snapshot (from timeline.json)."""
    n_layers, n_heads, n = view.weights.shape[:3]
    s = view.snapshot
    titles = [f"L{l} H{h}<br>ind {s['induction'][l][h]:.2f} · prev {s['previous_token'][l][h]:.2f}"
              for l in range(n_layers) for h in range(n_heads)]
    fig = make_subplots(rows=n_layers, cols=n_heads, subplot_titles=titles, horizontal_spacing=0.03,
                        vertical_spacing=0.16 / max(n_layers - 1, 1))
    labels = plotly_text(view.tokens)
    for layer in range(n_layers):
        for head in range(n_heads):
            fig.add_trace(go.Heatmap(z=view.weights[layer, head].astype(np.float32), x=labels, y=labels, coloraxis="coloraxis",
                                     hovertemplate=f"layer {layer}, head {head}<br>query %{{y}}<br>key %{{x}}"
                                                   "<br>weight %{z:.3f}<extra></extra>"),
                          row=layer + 1, col=head + 1)
    fig.update_xaxes(type="category", showticklabels=False)
    fig.update_yaxes(type="category", autorange="reversed", showticklabels=False)
    fig.update_yaxes(title_text="query token", col=1)
    fig.update_xaxes(title_text="key token", row=n_layers)
    for i in range(n_layers * n_heads):  # square maps: the diagonal at 45 degrees
        fig.layout[f"yaxis{i + 1 if i else ''}"].update(scaleanchor=f"x{i + 1 if i else ''}", constrain="domain")
        fig.layout[f"xaxis{i + 1 if i else ''}"].update(constrain="domain")
    fig.update_annotations(font_size=11)
    fig.update_layout(title=f"Every head's attention on your text ({n} tokens) at step {view.step:,}<br><sup>ind, prev: "
                            "the head's induction and previous-token scores at this step (on the probe); hover for "
                            "the tokens</sup>",
                      coloraxis=dict(colorscale="Blues", cmin=0, cmax=1, colorbar=dict(title="weight")),
                      height=150 + 290 * n_layers, **{**LAYOUT, "margin": dict(LAYOUT["margin"], t=110)})
    return fig


def circuit_head_figures(view: TimelineView) -> dict[str, go.Figure]:
    """The best previous-token head and the best induction head at this snapshot, enlarged with every token."""
    figures = {}
    for score, view_of in view.circuit_views().items():
        fig = attention_head_figure(view.maps, view_of)
        value = view.snapshot[score][view_of.layer][view_of.head]
        fig.update_layout(title=f"Best {CIRCUIT[score]}, step {view.step:,}:<br>layer {view_of.layer}, head "
                                f"{view_of.head} (score {value:.2f})")
        figures[score] = fig
    return figures


def hub_heads_figure(timeline: dict, index: int) -> go.Figure:
    """``heads_figure`` of a Hub repo's revisions (``hub_timeline``'s JSON), a dotted line at revision ``index``."""
    views, steps = timeline["revisions"], steps_of(timeline)
    return heads_figure(steps, [v["induction"] for v in views], [v["previous_token"] for v in views], steps[index])


def hub_attention_figure(timeline: dict, index: int) -> go.Figure:
    """The attention of revision ``index``'s best induction head on the learner's text, every token on the axes."""
    view, top = timeline["revisions"][index], timeline["revisions"][index]["best_induction"]
    return token_attention_figure(view["attention_of_best_induction_head"], timeline["tokens"], timeline["tokens"],
                                  f"Best {CIRCUIT['induction']}, {plotly_text(step_label(steps_of(timeline)[index]))}:<br>layer "
                                  f"{top['layer']}, head {top['head']} (score {top['score']:.2f})", "token", "token")
