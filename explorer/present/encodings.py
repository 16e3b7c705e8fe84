"""Compare encodings: the encodings' tables and curves as figures, and the experiment's teaching text.
"""

import math

import numpy as np
import plotly.graph_objects as go

from explorer.views.encodings import (
    EncodingTables, alibi_bias_table, alibi_weight_by_distance, rope_angle_table, rope_similarity_by_distance,
    table_similarity_by_distance)
from explorer.views.experiment import POSITION_BIN, binned_curve
from explorer.present.figures import ENCODING_COLOURS, LAYOUT, figure_title, heatmap_figure, message_figure, plotly_text


def encoding_figures(tables: EncodingTables) -> tuple[dict[str, go.Figure], list[str]]:
    """The four heatmaps (sinusoidal, learned, RoPE angles, ALiBi biases) and the similarity-vs-distance curves of
    ``tables`` (``explorer.views.encodings.encoding_tables``), with its notices."""
    n_positions, d_model, d_head, n_heads, theta = (tables.n_positions, tables.d_model, tables.d_head, tables.n_heads,
                                                    tables.rope_theta)
    figures = {
        "sinusoidal": heatmap_figure(tables.sinusoidal, "Sinusoidal PE", "dimension", "position", encoding="sinusoidal",
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

    curve("sinusoidal", distances, table_similarity_by_distance(tables.sinusoidal, n_positions - 1), "sinusoidal: cos(PE_p, PE_p+d)")
    if tables.learned is not None:
        table = tables.learned
        figures["learned"] = heatmap_figure(table, "Learned position table", "dimension", "position", encoding="learned",
                                            detail=f"{tables.learned_model}: {len(table)} positions × {table.shape[1]}")
        curve("learned", distances[: len(table)], table_similarity_by_distance(table, len(table) - 1), "learned: cos(P_p, P_p+d)")
    else:
        figures["learned"] = message_figure("No checkpoint with a learned position table yet.")
    curve("rope", distances, rope_similarity_by_distance(n_positions - 1, d_head, theta), "RoPE: cos angle between R(m)x and R(m+d)x")
    curve("alibi", distances, alibi_weight_by_distance(n_positions - 1, n_heads), "ALiBi: exp(−slope·d), mean over heads")
    similarity.update_layout(title="Similarity between positions d apart", xaxis_title="distance d (tokens)",
                             yaxis_title="similarity", height=380, legend=dict(orientation="h", y=-0.25), **LAYOUT)
    figures["similarity"] = similarity
    return figures, list(tables.notices)


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
    fig.update_layout(title=figure_title("Loss at each position of long windows",
                                   detail=f"faint: each position; bold: the mean of every {POSITION_BIN} positions"),
                      xaxis_title="position in the window (tokens of context)", yaxis_title="mean loss (nats per token)",
                      height=420, legend=dict(orientation="h", y=-0.25), **LAYOUT)
    return fig


EXPERIMENT = """### The experiment: five encodings, two seeds each
- **What you see:** five decoder-only models that are identical (size, data, steps) except for the position
  encoding, each trained twice with different seeds. The plot below (Loss by position) is the picture the
  length-extrapolation papers draw: the mean loss of the token at position p of a long window (p tokens of context
  before it; windows 8 times the training context, over the whole test split), for the seed the app serves. The
  tables give bits per character for every seed, and the perplexity ratios at longer windows beside the published
  ones.
- **How it works:** up to the training context a token with more context before it is easier to predict, so
  every curve falls. Past the dotted line the model meets what it never trained on: combinations of sines and
  cosines no training position had, as the slow dimensions move on (sinusoidal); distances between query and
  key, so rotation angles, beyond any in training (RoPE); more tokens to average over (none, whose only clue
  to position is that count). ALiBi meets only larger distance penalties, which push attention further
  towards the nearby tokens it was trained on. A learned table has no row past its end: its curve stops there.
- **How to read it:** a curve that rises past the dotted line belongs to an encoding that does not extend;
  a flat one does. A gap between two encodings means something only when it is larger than the spread between
  two seeds of the same encoding: the tables say which gaps are."""
