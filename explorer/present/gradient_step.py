"""One gradient step: what the step did, as figures, and the teaching text.
"""

import re

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from explorer.generation.labels import typed, visible
from explorer.present.figures import AFTER, BEFORE, LAYOUT, angled_label_depth, percent, plotly_text, token_ticks
from explorer.learning.gradient_step import GradientStep, HEAD_PARTS


GRADIENT_STEP = """### One gradient step: where learning pushes
- **The loss** is L = −log p(target | tokens 0..position of your text), in nats: near 0 when the model is sure
  of the target, large when it finds the target unlikely.
- **What a gradient is:** ∇L holds one number per weight, how fast L rises when that weight rises a little.
  The maps below draw its size (the L2 norm) for every parameter tensor, by its `state_dict` name (the status
  says what each is in this model), and for each head's slice of W_Q, W_K, W_V and W_O (in a model whose query
  heads share key/value heads, W_K and W_V per key/value head): the weights this one example pushes hardest.
- **Why the loss falls:** plain SGD moves every weight against its gradient, θ ← θ − lr·∇L, on a copy of the
  model (the model everyone uses never changes). For a small step the loss falls by about lr·‖∇L‖², because
  minus the gradient is the direction in which L falls fastest.
- **One text's gradient is thin:** a linear layer y = x·W^T that read the tokens x_1..x_T has
  ∇W = Σ_t δ_t^T x_t (δ_t: how L changes with that token's output), one outer product per token read: at most T
  directions, however large W is. So the step keeps the δ and the x, never the whole ∇W, and runs the stepped
  model as x·W^T − lr·Σ_t (x·x_t) δ_t. The token embedding moves only in the rows of the tokens read (and, where the
  LM head shares it, along the head's own outer product).
- **What the learning rate does:** it is the size of the step. The status line prints ‖∇L‖, the first-order
  prediction −lr·‖∇L‖² and the change measured, for the model and text shown. While the step is small the two
  agree; try 0.001, then 0.01, 1 and 10 on the example: the measured change leaves the prediction behind, the
  loss may end above where it started (the step overshot) and another token takes over. Far below 1e-9 nothing
  changes at all: the update is smaller than float32 can register.
- **The target is one token,** with its leading space: after a space the model predicts ` day`, and `day` is
  another token (the status says so when you type it).
- **The head maps** outline the model's induction head, when it has one (measured on random tokens read twice):
  the head that copies from the context is often among those a step on a copyable target pushes hardest."""


LAYER_NAME = re.compile(r"^(?P<stack>.*\.layers)\.(?P<layer>\d+)\.(?P<tensor>.+)$")  # model.….layers.3.self_attn.qkv_proj.weight


def before_after_figure(step: GradientStep) -> go.Figure:
    """The most likely next tokens before and after the step (the union of both top lists), the target first."""
    before, after = dict(step.top_before), dict(step.top_after)
    target = _target_label(step)
    labels = list(dict.fromkeys([target, *before, *after]))
    probability = {label: (before.get(label), after.get(label)) for label in labels}
    probability[target] = (step.p_before, step.p_after)
    shown, whole = token_ticks(labels)
    fig = go.Figure()
    for i, (name, colour) in enumerate((("before the step", BEFORE), ("after the step", AFTER))):
        values = [probability[label][i] for label in labels]
        fig.add_bar(x=shown, y=[v if v is not None else 0.0 for v in values], name=name, marker_color=colour,
                    text=[percent(v) if v is not None else "not in its top list" for v in values], hovertext=whole,
                    textposition="none", hovertemplate="%{hovertext}<br>" + name + ": %{text}<extra></extra>")
    # the bars are too thin to hold it: above the tallest bar, starting at the target's (centred, it met the axis'
    # numbers; level with the target's own top, it crossed a taller neighbour), in headroom the axis keeps for it
    top = max(v for pair in probability.values() for v in pair if v is not None)
    fig.add_annotation(x=shown[0], y=top, xanchor="left", xshift=-4, yanchor="bottom", yshift=3, showarrow=False,
                       text=f"{percent(step.p_before)} → {percent(step.p_after)}", font_size=12)
    fig.update_yaxes(range=[0, top * 1.2])
    fig.update_layout(title=plotly_text(f"Next token: the target {target}, then the top ones"),
                      yaxis_title="probability", barmode="group", height=380,
                      legend=dict(orientation="h", y=1.02, x=1, xanchor="right", yanchor="bottom"),
                      **{**LAYOUT, "margin": dict(l=60, r=20, t=70, b=90)})
    fig.update_xaxes(type="category", tickangle=-45)
    return fig


def _target_label(step: GradientStep) -> str:
    """The target as the top lists label tokens (``labels``: a leading space shown as ␣), however it was typed."""
    for label, _ in [*step.top_before, *step.top_after]:
        if typed(label) == typed(step.target):
            return label
    return "".join(map(visible, typed(step.target)))


HEAD_MAP_CHROME = 140  # px of the head maps' height that is not the colour bar: margins, titles, the bar's own title
COLORBAR_TICK_GAP = 40  # px between the colour bar's ticks at least


def head_norms_figure(step: GradientStep) -> go.Figure:
    """Layer x head: the gradient norm of each head's slice of W_Q (rows, with b_Q where the model has it), W_O
    (columns), of each key/value head's slice of W_K, W_V (one column per key/value head: shared by a group of
    query heads in a grouped model), and of everything each query head uses."""
    parts, arch = [*HEAD_PARTS, "all"], step.architecture
    grouped = arch is not None and arch.grouped
    titles = [{"all": "all it uses"}.get(p, f"W_{p.upper()}" + (" (per KV head)" if grouped and p in "kv" else ""))
              for p in parts]
    fig = make_subplots(rows=1, cols=len(parts), subplot_titles=titles, horizontal_spacing=0.03)
    for i, part in enumerate(parts):
        z = np.asarray(step.head_grad_norms[part])
        prefix, which = ("KV", "key/value head") if grouped and part in "kv" else ("H", "head")
        fig.add_trace(go.Heatmap(z=z, x=[f"{prefix}{h}" for h in range(z.shape[1])], y=[f"L{l}" for l in range(z.shape[0])],
                                 coloraxis="coloraxis",
                                 hovertemplate=f"{part}: layer %{{y}}, {which} %{{x}}<br>‖∇‖ %{{z:.3g}}<extra></extra>"),
                      row=1, col=i + 1)
        fig.update_yaxes(autorange="reversed", showticklabels=i == 0, row=1, col=i + 1)
    n_layers = len(step.head_grad_norms["all"])
    if step.induction_head:  # outline the induction head's cell in every map (its key/value head's in K and V)
        layer, head, score = step.induction_head
        for i, part in enumerate(parts):
            column = arch.kv_head_of(head) if grouped and part in "kv" else head
            fig.add_shape(type="rect", x0=column - 0.5, x1=column + 0.5, y0=layer - 0.5, y1=layer + 0.5,
                          line=dict(color="black", width=2), row=1, col=i + 1)
        fig.add_annotation(text=f"outlined: L{layer}.H{head}, the induction head (score {score:.2f})",
                           xref="paper", yref="paper", x=0, y=-0.12, showarrow=False, xanchor="left", yanchor="top")
    height = max(260, 120 + 40 * n_layers)
    ticks = max(2, (height - HEAD_MAP_CHROME) // COLORBAR_TICK_GAP)  # a 2-layer map's bar is short: few ticks, not four in 50 px
    fig.update_layout(title="Gradient norm of each head's weights, per layer (one colour scale)",
                      coloraxis=dict(colorscale="Reds", cmin=0, colorbar=dict(title="‖∇‖", nticks=ticks)),
                      height=height, **LAYOUT)
    return fig


def parameters_text(step: GradientStep) -> str:
    """What this model's parameters are, each by its state_dict name, shape and role in the formulas
    (``Architecture.tensor_meaning``): one layer's tensors once (every layer holds the same), then the rest."""
    arch, layer_tensors, rest = step.architecture, {}, []
    for name, shape in step.shapes.items():
        match = LAYER_NAME.match(name)
        if match:
            layer_tensors.setdefault(match["tensor"], (name, shape))
        else:
            rest.append((name, name, shape))

    def entry(label, name, shape):
        meaning = arch.tensor_meaning(name)
        tied = f" = `{step.tied[name]}`" if name in step.tied else ""
        return f"`{label}`{tied} ({' × '.join(map(str, shape))})" + (f": {meaning}" if meaning else "")

    text = ("The parameters this step moves, and what each is in the formulas. In every layer: "
            + "; ".join(entry(label, name, shape) for label, (name, shape) in layer_tensors.items())
            + ". Besides the layers: " + "; ".join(entry(*item) for item in rest) + ".")
    if arch.grouped:
        text += (f" The W_K and W_V maps have one column per key/value head: {arch.kv_sharing()}; a query head's "
                 "\"all it uses\" counts the key/value head it reads.")
    return text


TOP, BOTTOM = 60, 40  # px of the tensor figure's margins: its title above, the bars' axis below


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
    # px: the map, the gap its slanted tensor names hang into (with the second title below them), the bars
    heat, bars = 120 + 24 * len(layers), 40 + 20 * len(rest)
    gap = angled_label_depth(max(map(len, tensors), default=0), font_size=10, angle=45) + 36
    fig = make_subplots(rows=2, cols=1, row_heights=[heat, bars], vertical_spacing=gap / (heat + gap + bars),
                        subplot_titles=["Every tensor of every layer", "The rest"])
    z = [[per_layer[t].get(l, (np.nan, ""))[0] for t in tensors] for l in layers]
    names = [[per_layer[t].get(l, (0, ""))[1] for t in tensors] for l in layers]
    fig.add_trace(go.Heatmap(z=z, x=tensors, y=[f"L{l}" for l in layers], customdata=names, colorscale="Reds", zmin=0,
                             text=[[_role(step, name) for name in row] for row in names],
                             colorbar=dict(title="‖∇‖", len=heat / (heat + gap + bars), y=1, yanchor="top"),
                             hovertemplate="%{customdata}<br>%{text}<br>‖∇‖ %{z:.3g}<extra></extra>"), row=1, col=1)
    tied_to = {shared: name for name, shared in step.tied.items()}
    labels = [f"{name} (= {tied_to[name]})" if name in tied_to else name for name in rest]
    fig.add_trace(go.Bar(x=list(rest.values()), y=labels, orientation="h", marker_color="#feb2b2", showlegend=False,
                         text=[f"{label}: {norm:.3g}" for label, norm in zip(labels, rest.values())],
                         textposition="auto", insidetextanchor="start", cliponaxis=False, textfont_color="black",
                         customdata=[_role(step, name) for name in rest],
                         hovertemplate="%{y}<br>%{customdata}<br>‖∇‖ %{x:.3g}<extra></extra>"), row=2, col=1)
    fig.update_yaxes(autorange="reversed", row=1, col=1)
    fig.update_yaxes(autorange="reversed", showticklabels=False, row=2, col=1)
    fig.update_xaxes(tickangle=-45, tickfont_size=10, row=1, col=1)
    fig.update_layout(title="Gradient norm of every parameter tensor (hover for its state_dict name and role)",
                      height=TOP + heat + gap + bars + BOTTOM, **{**LAYOUT, "margin": dict(l=60, r=20, t=TOP, b=BOTTOM)})
    return fig


def _role(step: GradientStep, name: str) -> str:
    """What the parameter ``name`` is in the formulas, for a hover ("" where unknown)."""
    return step.architecture.tensor_meaning(name) if step.architecture and name else ""
