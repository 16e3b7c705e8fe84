"""Plotly figures of what the other modules compute. Every label that comes from a user or a tokenizer goes
through ``plotly_text`` (plotly reads <...> as markup); every position encoding has one colour, here.
"""

import math

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio

from .attention import ATTENTION_KINDS, AttentionMaps, View
from .catalog import CheckpointInfo, encoding_models, load_model
from .encodings import (
    alibi_bias_table,
    alibi_weight_by_distance,
    learned_table,
    rope_angle_table,
    rope_similarity_by_distance,
    sinusoidal_table,
    table_similarity_by_distance,
)
from .experiment import POSITION_BIN, binned_curve
from .run import SITES
from .trace import ForwardTrace

# one colour per position encoding, in every plot of every tab (Okabe-Ito: told apart with colour blindness)
ENCODING_COLOURS = {"sinusoidal": "#0072B2", "learned": "#E69F00", "rope": "#009E73", "alibi": "#CC79A7", "none": "#666666"}
# Every figure's look: plotly_white as plotly's default template, which plotly writes into each figure's JSON as it
# sends it. Named on each figure instead (layout.template), the template is validated again every time: about 9 ms a
# figure, most of what a figure cost; the Watch it learn slider draws five.
pio.templates.default = "plotly_white"
LAYOUT = dict(margin=dict(l=60, r=20, t=50, b=50))


def plotly_text(text):
    """A label (or a list of them) as plotly shows it literally: it reads <...> as markup (a BOS token '<s>'
    would strike through, an '<a href>' would become a link)."""
    if isinstance(text, (list, tuple)):
        return [plotly_text(t) for t in text]
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _title(text: str, encoding: str | None = None, detail: str = "") -> dict:
    """A title (in the encoding's colour, if any), with an optional smaller second line that says more."""
    font = dict(color=ENCODING_COLOURS[encoding]) if encoding else {}
    return dict(text=plotly_text(text) + (f"<br><sup>{plotly_text(detail)}</sup>" if detail else ""), font=font)


def heatmap_figure(z, title: str, x_title: str, y_title: str, colorscale: str = "RdBu", zmid: float | None = 0.0,
                   hover: str = "%{z:.3f}", height: int = 380, encoding: str | None = None, detail: str = "") -> go.Figure:
    fig = go.Figure(go.Heatmap(z=np.asarray(z, dtype=np.float32), colorscale=colorscale, zmid=zmid,
                               hovertemplate=f"{y_title} %{{y}}<br>{x_title} %{{x}}<br>{hover}<extra></extra>"))
    fig.update_layout(title=_title(title, encoding, detail), xaxis_title=x_title, yaxis_title=y_title, height=height, **LAYOUT)
    fig.update_yaxes(autorange="reversed")
    return fig


def message_figure(message: str, height: int = 300) -> go.Figure:
    fig = go.Figure()
    fig.add_annotation(text=plotly_text(message), showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper", font=dict(size=15))
    fig.update_layout(height=height, xaxis_visible=False, yaxis_visible=False, **LAYOUT)
    return fig


def encoding_figures(catalog: dict[str, CheckpointInfo], max_positions_shown: int = 256) -> tuple[dict[str, go.Figure], list[str]]:
    """The four heatmaps (sinusoidal, learned, RoPE angles, ALiBi biases) and the similarity-vs-distance
    curves, at the sizes of the encoding checkpoints (d_model 256, 4 heads when there are none)."""
    notices = []
    family = encoding_models(catalog)
    reference = next((catalog[name].config for name in family.values()), None)
    d_model, n_heads, theta, n_positions = 256, 4, 10000.0, max_positions_shown
    if reference is not None:
        d_model, n_heads, theta = reference.d_model, reference.n_heads, reference.rope_theta
        n_positions = min(max_positions_shown, max(reference.context_length, 16))
    else:
        notices.append("No checkpoints found: showing the formula encodings at d_model=256, 4 heads.")
    d_head = d_model // n_heads
    sinusoidal = sinusoidal_table(n_positions, d_model)
    figures = {
        "sinusoidal": heatmap_figure(sinusoidal, "Sinusoidal PE", "dimension", "position", encoding="sinusoidal",
                                     detail=f"{n_positions} positions × d_model {d_model}"),
        "rope": heatmap_figure(rope_angle_table(n_positions, d_head, theta), "RoPE rotation angle m·θ_i", "pair i", "position m",
                               colorscale="Twilight", zmid=None, hover="angle %{z:.3f} rad", encoding="rope",
                               detail=f"wrapped to [−π, π); d_head {d_head}"),
        "alibi": heatmap_figure(alibi_bias_table(n_positions, n_heads), "ALiBi bias −slope_h·distance", "distance to key", "head",
                                colorscale="Viridis", zmid=None, hover="bias %{z:.3f}", height=260, encoding="alibi",
                                detail=f"{n_heads} heads"),
    }
    similarity = go.Figure()
    distances = np.arange(n_positions)

    def curve(encoding: str, x, y, name: str):
        similarity.add_scatter(x=x, y=y, name=plotly_text(name), line=dict(color=ENCODING_COLOURS[encoding]))

    curve("sinusoidal", distances, table_similarity_by_distance(sinusoidal, n_positions - 1), "sinusoidal: cos(PE_p, PE_p+d)")
    if "learned" in family:
        model, _ = load_model(catalog[family["learned"]])
        table = learned_table(model)[:n_positions]
        figures["learned"] = heatmap_figure(table, "Learned position table", "dimension", "position", encoding="learned",
                                            detail=f"{family['learned']}: {len(table)} positions × {table.shape[1]}")
        curve("learned", distances[: len(table)], table_similarity_by_distance(table, len(table) - 1), "learned: cos(P_p, P_p+d)")
    else:
        figures["learned"] = message_figure("No checkpoint with a learned position table yet.")
        notices.append("No learned-position checkpoint found: its table will appear once it is trained.")
    curve("rope", distances, rope_similarity_by_distance(n_positions - 1, d_head, theta), "RoPE: cos angle between R(m)x and R(m+d)x")
    curve("alibi", distances, alibi_weight_by_distance(n_positions - 1, n_heads), "ALiBi: exp(−slope·d), mean over heads")
    similarity.update_layout(title="Similarity between positions d apart", xaxis_title="distance d (tokens)",
                             yaxis_title="similarity", height=380, legend=dict(orientation="h", y=-0.25), **LAYOUT)
    figures["similarity"] = similarity
    return figures, notices


def extrapolation_figure(curves: dict[str, dict[int, float | None]], encodings: dict[str, str],
                         training_context: int | None = None,
                         title: str = "Extrapolation: bits per character against context length") -> go.Figure:
    """One line per model in its encoding's colour (``encodings[name]``); a gap where the model cannot run
    (None); a dotted line at the training context. On a log axis plotly places shapes at data values but
    annotations at log10 of them: the marker and its label are placed accordingly."""
    lengths = sorted({n for curve in curves.values() for n in curve})
    if not lengths:
        return message_figure("No extrapolation results to show yet.")
    fig = go.Figure()
    for name, curve in curves.items():
        encoding = encodings.get(name)
        xs = sorted(curve)
        label = f"{encoding} ({name})" if encoding else name
        fig.add_scatter(x=xs, y=[curve[n] for n in xs], mode="lines+markers", name=plotly_text(label),
                        line=dict(color=ENCODING_COLOURS.get(encoding)),
                        hovertemplate=f"{plotly_text(label)}<br>context %{{x}}<br>%{{y:.3f}} bits/char<extra></extra>")
    if training_context:
        fig.add_shape(type="line", x0=training_context, x1=training_context, y0=0, y1=1, xref="x", yref="paper",
                      line=dict(dash="dot", color="#333333"))
        fig.add_annotation(x=math.log10(training_context), y=1, xref="x", yref="paper", yanchor="bottom", showarrow=False,
                           text=f"training context ({training_context})")
    span = [math.log10(lengths[0]) - 0.1, math.log10(lengths[-1]) + 0.1]
    fig.update_layout(title=plotly_text(title), xaxis_title="context length (tokens)", yaxis_title="bits per character",
                      xaxis=dict(type="log", tickvals=lengths, range=span), height=400, **LAYOUT)
    return fig


def attention_head_figure(maps: AttentionMaps, view: View) -> go.Figure:
    """One head (or the mean over heads) with token labels; hover shows query, key and weight."""
    weights = maps.weights[view.kind][view.layer]
    z = weights.mean(0) if view.head is None else weights[view.head]
    which = "mean over heads" if view.head is None else f"head {view.head}"
    return token_attention_figure(z, maps.query_labels[view.kind], maps.key_labels[view.kind],
                                  f"{ATTENTION_KINDS[view.kind]}, layer {view.layer}, {which}", *SITES[view.kind].axis_labels)


def token_attention_figure(z, queries: list[str], keys: list[str], title: str, query: str, key: str) -> go.Figure:
    """A (queries, keys) attention map with the tokens on its axes (``query``, ``key``: what they are); hover
    shows query, key and weight."""
    z, queries, keys = np.asarray(z, dtype=np.float32), plotly_text(queries), plotly_text(keys)
    fig = go.Figure(go.Heatmap(z=z, x=keys, y=queries, colorscale="Blues", zmin=0, zmax=float(z.max()),
                               hovertemplate="query %{y}<br>key %{x}<br>weight %{z:.3f}<extra></extra>"))
    size = max(420, min(900, 14 * max(len(queries), len(keys)) + 160))
    fig.update_layout(title=title, xaxis_title=f"key: {key}", yaxis_title=f"query: {query}", height=size, **LAYOUT)
    fig.update_xaxes(type="category", tickangle=-60, tickfont_size=10)
    fig.update_yaxes(type="category", autorange="reversed", tickfont_size=10)
    return fig


def percent(p: float) -> str:
    """A probability as a percentage with two decimals, one format for every bar: '97.12%', '0.06%', '<0.01%'."""
    return f"{p:.2%}" if p >= 0.00005 else "<0.01%"


def top_tokens_figure(top_next: list[tuple[str, float]], after: str) -> go.Figure:
    """The most likely next tokens as bars, each with its probability printed beside it."""
    labels = plotly_text([f"{i + 1}. {token}" for i, (token, _) in enumerate(top_next)])
    probabilities = [p for _, p in top_next]
    fig = go.Figure(go.Bar(x=probabilities, y=labels, orientation="h", text=[percent(p) for p in probabilities],
                           textposition="outside", cliponaxis=False, marker_color="#0072B2",
                           hovertemplate="%{y}<br>p = %{x:.4f}<extra></extra>"))
    top = max(probabilities, default=1.0)
    fig.update_layout(title=plotly_text(f"Most likely next tokens after {after}"), xaxis_title="probability",
                      xaxis=dict(range=[0, min(1.0, top * 1.25)], tickformat=".0%" if top >= 0.2 else ".1%" if top >= 0.02 else ".2%"),
                      height=80 + 32 * len(labels), **{**LAYOUT, "margin": dict(l=140, r=60, t=50, b=50)})
    fig.update_yaxes(autorange="reversed", tickfont_size=13)
    return fig


def where_text(source: str, stack: str) -> str:
    """A tensor's place in the model's output as a trail that wraps between its parts:
    'recording.decoder.layers[0].self_attention.query' -> 'layers[0] › self_attention › query'."""
    prefix = f"recording.{stack}."
    return (source[len(prefix):] if stack and source.startswith(prefix) else source).replace(".", " › ")


def trace_table(trace: ForwardTrace) -> list[list[str]]:
    """Rows for a table: stack, step, shape, what each dimension is, meaning, where it is in the model's output."""
    return [[s.stack, s.step, "(" + ", ".join(map(str, s.shape)) + ")" if s.shape else "—", s.dims_text(), s.meaning,
             where_text(s.source, s.stack)] for s in trace.steps]


def position_loss_figure(curves: dict[str, list[float]], encodings: dict[str, str], training_context: int | None = None) -> go.Figure:
    """The papers' picture: mean loss at token position p (p tokens of context before it) over windows longer
    than the training context, one colour per model: each position faint, its mean over bins of
    ``POSITION_BIN`` positions bold; a dotted line at the training context."""
    if not curves:
        return message_figure("No per-position losses to show yet.")
    fig = go.Figure()
    for name, curve in curves.items():
        encoding = encodings.get(name)
        label = plotly_text(f"{encoding} ({name})" if encoding else name)
        colour = ENCODING_COLOURS.get(encoding)
        fig.add_scatter(x=list(range(1, len(curve) + 1)), y=curve, mode="lines", name=label, legendgroup=label,
                        showlegend=False, opacity=0.25, line=dict(color=colour, width=1),
                        hovertemplate=f"{label}<br>position %{{x}}<br>%{{y:.3f}} nats/token<extra></extra>")
        bins = binned_curve(curve)
        fig.add_scatter(x=[(first + last) / 2 for first, last, _ in bins], y=[mean for _, _, mean in bins], mode="lines",
                        name=label, legendgroup=label, line=dict(color=colour, width=2.5),
                        customdata=[[first, last] for first, last, _ in bins],
                        hovertemplate=f"{label}<br>positions %{{customdata[0]}}–%{{customdata[1]}}<br>mean %{{y:.3f}} nats/token<extra></extra>")
    if training_context:
        fig.add_vline(x=training_context, line=dict(dash="dot", color="#333333"),
                      annotation_text=f"training context ({training_context})", annotation_position="top")
    fig.update_layout(title=_title("Loss at each position of long windows",
                                   detail=f"faint: each position; bold: the mean of every {POSITION_BIN} positions"),
                      xaxis_title="position in the window (tokens of context)", yaxis_title="mean loss (nats per token)",
                      height=420, legend=dict(orientation="h", y=-0.25), **LAYOUT)
    return fig
