"""Plot basics every view shares: the layout, the colour of each position encoding, a heat map, a message in place
of a figure, token labels made safe for plotly (it reads ``<...>`` as markup, and a label is user text) and cut to
fit an axis, titles wrapped to a half-page figure, and probabilities written so that small ones still differ.
"""

import math
import textwrap

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio

from explorer.views.attention import ATTENTION_KINDS, AttentionMaps, View


# one colour per position encoding, in every plot of every tab (Okabe-Ito: told apart with colour blindness)
ENCODING_COLOURS = {"sinusoidal": "#0072B2", "learned": "#E69F00", "rope": "#009E73", "alibi": "#CC79A7", "none": "#666666"}


# Every figure's look: plotly_white as plotly's default template, which plotly writes into each figure's JSON as it
# sends it. Named on each figure instead (layout.template), the template is validated again every time: about 9 ms a
# figure, most of what a figure cost; the Watch it learn slider draws five.
pio.templates.default = "plotly_white"


LAYOUT = dict(margin=dict(l=60, r=20, t=50, b=50))
# gr.Plot raises the top margin of a figure with a title to at least 100 px (where its label shows, as in this app)
# and lets plotly widen the margins for long tick labels: a figure whose height does not leave room for that
# draws an axis of negative length ("Something went wrong with axis scaling") and nothing at all.
TITLED_TOP = 100
MIN_PLOT_HEIGHT = 120  # px of plot area (inside the margins) every figure keeps


def fitted_layout(plot_height: int, left: int = 60, right: int = 20, bottom: int = 50, top: int = TITLED_TOP) -> dict:
    """``height`` and ``margin`` for a figure whose plot area (inside the margins) is ``plot_height`` px, at least
    ``MIN_PLOT_HEIGHT``: the top margin is what gr.Plot will make it (``TITLED_TOP``), so the plot area stays."""
    top = max(top, TITLED_TOP)
    return dict(height=top + bottom + max(MIN_PLOT_HEIGHT, int(plot_height)), margin=dict(l=left, r=right, t=top, b=bottom))


def angled_label_depth(characters: int, font_size: int = 10, angle: int = 60) -> int:
    """px a tick label of ``characters`` characters reaches below its axis when drawn at ``angle`` degrees: about
    0.6 font sizes a character along the slant (a font size across it)."""
    slant = math.radians(angle)
    return int(characters * 0.6 * font_size * math.sin(slant) + font_size * math.cos(slant)) + 8


def plotly_text(text):
    """A label (or a list of them) as plotly shows it literally: it reads <...> as markup (a BOS token '<s>'
    would strike through, an '<a href>' would become a link)."""
    if isinstance(text, (list, tuple)):
        return [plotly_text(t) for t in text]
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# characters a line holds in a figure half a page wide (about 330 px at 1366): plotly never wraps a title, and cuts
# what runs past the figure's edge. A figure whose column is never narrower (its gr.Plot's ``min_width``) holds more,
# in proportion (``wrapped_title``'s ``width``).
HALF_PAGE_PX = 330
TITLE_CHARS, DETAIL_CHARS = 34, 54
TITLE_LINE, DETAIL_LINE = 22, 17  # px a title line and a smaller (<sup>) line take
LABEL_ROOM = 60  # px at the top of a gr.Plot that its label covers (two lines of it in a narrow column)
PLOT_CHROME = 60  # px of a column's width that is not its figure's title line: the block's padding, the title's indent, slack


def wrapped_title(title: str, *details: str, width: int = HALF_PAGE_PX) -> tuple[dict, int]:
    """A title and its smaller lines (``details``, each its own paragraph) broken at spaces to fit a figure drawn at
    least ``width`` px wide (a half-page one by default), made safe (``plotly_text``), hung from under gr.Plot's
    label; and the top margin they need above the plot (at least ``TITLED_TOP``): plotly neither wraps a title nor
    makes room for a second line."""
    title_chars, detail_chars = (chars * width // HALF_PAGE_PX for chars in (TITLE_CHARS, DETAIL_CHARS))
    lines = textwrap.wrap(title, title_chars, break_long_words=False)
    small = [line for detail in details for line in textwrap.wrap(detail, detail_chars, break_long_words=False)]
    text = "<br>".join(plotly_text(line) for line in lines) + "".join(f"<br><sup>{plotly_text(l)}</sup>" for l in small)
    top = LABEL_ROOM + TITLE_LINE * len(lines) + DETAIL_LINE * len(small) + 12
    hung = dict(text=text, x=0.02, xanchor="left", y=1, yref="container", yanchor="top", pad=dict(t=LABEL_ROOM))
    return hung, max(TITLED_TOP, top)


def figure_title(text: str, encoding: str | None = None, detail: str = "") -> dict:
    """A title (in the encoding's colour, if any), with an optional smaller second line that says more."""
    font = dict(color=ENCODING_COLOURS[encoding]) if encoding else {}
    return dict(text=plotly_text(text) + (f"<br><sup>{plotly_text(detail)}</sup>" if detail else ""), font=font)


def heatmap_figure(z, title: str, x_title: str, y_title: str, colorscale: str = "RdBu", zmid: float | None = 0.0,
                   hover: str = "%{z:.3f}", height: int = 380, encoding: str | None = None, detail: str = "") -> go.Figure:
    fig = go.Figure(go.Heatmap(z=np.asarray(z, dtype=np.float32), colorscale=colorscale, zmid=zmid,
                               hovertemplate=f"{y_title} %{{y}}<br>{x_title} %{{x}}<br>{hover}<extra></extra>"))
    fig.update_layout(title=figure_title(title, encoding, detail), xaxis_title=x_title, yaxis_title=y_title, height=height, **LAYOUT)
    fig.update_yaxes(autorange="reversed")
    return fig


def message_figure(message: str, height: int = 300) -> go.Figure:
    fig = go.Figure()
    fig.add_annotation(text=plotly_text(message), showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper", font=dict(size=15))
    fig.update_layout(height=height, xaxis_visible=False, yaxis_visible=False, **LAYOUT)
    return fig


def attention_head_figure(maps: AttentionMaps, view: View) -> go.Figure:
    """One head (or the mean over heads) with token labels; hover shows query, key and weight."""
    weights = maps.weights[view.kind][view.layer]
    z = weights.mean(0) if view.head is None else weights[view.head]
    which = "mean over heads" if view.head is None else f"head {view.head}"
    return token_attention_figure(z, maps.query_labels[view.kind], maps.key_labels[view.kind],
                                  f"{ATTENTION_KINDS[view.kind].label}, layer {view.layer}, {which}", *ATTENTION_KINDS[view.kind].axis_labels)


def token_attention_figure(z, queries: list[str], keys: list[str], title: str, query: str, key: str) -> go.Figure:
    """A (queries, keys) attention map with the tokens on its axes (``query``, ``key``: what they are; each label
    'position:token', cut by ``tick_text``); hover shows query, key and weight."""
    z = np.asarray(z, dtype=np.float32)
    queries, keys = (plotly_text([tick_text(label) for label in labels]) for labels in (queries, keys))
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
                      # two significant digits: ticks 0.005% apart stay apart (a fixed ".2%" printed 0.01% thrice)
                      xaxis=dict(range=[0, min(1.0, top * 1.25)], tickformat=".2~p"),
                      **fitted_layout(32 * len(labels), left=140, right=60))
    fig.update_yaxes(autorange="reversed", tickfont_size=13)
    return fig


KEPT, CUT, BEFORE, AFTER = "#2b6cb0", "#cbd5e0", "#718096", "#c53030"


# a token on an axis shows at most TICK_CHARS characters ('␣Westmorelan…'): a vocabulary's longest tokens (Llama 3's
# runs of spaces, code's long names) would push a bar chart's axis title into the plot below; hover names it whole
TICK_CHARS = 14


def tick_text(label: str) -> str:
    """A token's label cut to ``TICK_CHARS`` characters, '…' last where cut."""
    return label if len(label) <= TICK_CHARS else label[:TICK_CHARS - 1] + "…"


def token_ticks(labels: list[str]) -> tuple[list[str], list[str]]:
    """Tokens on a category axis: (the x values, their hover texts). The values are the labels cut (``tick_text``),
    equal ones numbered (``unique_labels``: one bar each); the hover texts name each whole (%{hovertext} in a
    hovertemplate). Both escaped for plotly."""
    return plotly_text(unique_labels([tick_text(label) for label in labels])), plotly_text(list(labels))


def unique_labels(labels: list[str]) -> list[str]:
    """Category axes merge equal labels: number repeated ones (' the', ' the#2')."""
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        out.append(label if seen[label] == 1 else f"{label}#{seen[label]}")
    return out


def probability(p: float) -> str:
    """A probability to three decimals, or under 0.01 to two significant digits, where three decimals would write
    0.001 or 0.000 on a flat distribution's every bar ('0.0093', '0.00021'); never in exponent form."""
    return f"{p:.3f}" if p >= 0.01 or p == 0 else np.format_float_positional(p, precision=2, fractional=False, trim="-")


def signed(value: float) -> str:
    """+0.123, or +4.6e-05 when three decimals would show nothing."""
    return f"{value:+.3f}" if value == 0 or abs(value) >= 5e-4 else f"{value:+.1e}"
