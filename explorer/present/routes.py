"""How the prediction was made: the routes as a graph (layers bottom to top, tokens left to right, edge width by
share, heads named), a clicked node's panel (the logit lens there, what feeds it), and the teaching text.
"""

import html
from collections import defaultdict

import plotly.graph_objects as go

from explorer.present.figures import LAYOUT, percent, plotly_text, tick_text
from explorer.views.routes.graph import NodeReading, Routes, head_name

TEACHING = """### How the prediction was made: the routes through the model
- **What you see:** the residual stream of every token (columns) after every layer's attention and feed-forward
  (rows, bottom to top), and the paths by which the model reached its next token: the top node is the prediction.
  Blue lines are attention (head **{head}** = layer {layer}, head {number}, both counted from 0: this model's last
  head) carrying one token's information to another; orange
  lines a feed-forward block; grey lines the residual stream kept as it was; purple lines (an encoder-decoder)
  cross-attention reading the source from the encoder's output, the bottom row. A line's width is its share.
- **How it is measured (Ferrando & Voita 2024):** every vector y the model writes into the stream is a sum of parts:
  the stream x it is added to; for attention, each head's share of each token (the attention weight A[i,j] times
  that token's value, through W_O), and the output bias where the model has one; for a feed-forward, its output.
  The line above the graph gives this model's layer and the sums it splits. A part c's *share* is how much closer
  it brings the sum: max(0, |y|₁ − |y − c|₁), normalised over the parts. Only parts over the threshold are kept,
  traced back from the prediction: one forward pass, then arithmetic.
- **Click a node:** what the stream there would predict (the logit lens at that point), and the heads and blocks
  feeding it.
- **Its limits:** a share says how much a part *adds* to a vector, not that the prediction *needs* it: contribution
  is not causation. A part can be large and cancelled later, or small and decisive. To test a route causally, take
  the same texts to **Activation patching** (a clean text and a corrupted copy) or remove its head in **Head
  ablation**. In a post-norm model the stream is Norm(x + f(x)), and the sum before that norm is what is split."""



def teaching(n_layers: int, n_heads: int) -> str:
    """``TEACHING`` with its example head the model's own last one: its decoder's layer ``n_layers`` − 1, head
    ``n_heads`` − 1."""
    layer, number = max(n_layers - 1, 0), max(n_heads - 1, 0)
    return TEACHING.format(head=head_name(layer, number), layer=layer, number=number)


COLOURS = {"attention": "#2b6cb0", "cross": "#805ad5", "feed_forward": "#dd6b20", "residual": "#a0aec0"}
# the residual stream's own edges are drawn narrower (width 1 + 4 × share, against 1 + 9 × share): it keeps most of
# every vector, and at full width it would hide what the blocks add
BLOCK_OFFSET = 0.28  # a block's output is drawn this far beside its token's column, half a row down
HEADS_NAMED = 12  # the strongest attention edges get their head's name written on the graph
FULL_AXIS = 24  # texts up to this many tokens show every column; longer ones only the columns the route reaches
ENCODER_ROW = -1.2  # the encoder's output, below the embeddings
MARGIN = dict(l=150, r=20, t=70, b=110)
# Labels are placed for the graph at its narrowest, so that none touches another at any width from 800 px up.
# Measured in Chromium on the tab: the plotting area is 532 px wide at 800 px, 512 at 1024 and 1200, 728 at 1366,
# and (height − 210) px high; an 11 px label "L0.H3" with its background is 32 × 15 px (6.4 px a character).
NARROWEST_PLOT_PX = 500
PLOT_HEIGHT_LESS_PX = 210
LABEL_CHAR_PX, LABEL_PAD_PX, LABEL_HEIGHT_PX = 6.4, 2, 16  # per character at 11 px (10 px: × 10/11), padding, height
LABEL_GAP_PX = 6  # the least space between two labels


def columns_of(routes: Routes) -> list[int]:
    """The decoder positions drawn, left to right."""
    if len(routes.tokens) <= FULL_AXIS:
        return list(range(len(routes.tokens)))
    return sorted({n.position for n in routes.nodes.values() if n.stack == "decoder"})


class Layout:
    """Where each node is drawn: x its column (the encoder's output on a row of its own below), y its row; the axes'
    ranges and the figure's height, and ``pixels`` at the narrowest the graph is drawn."""

    def __init__(self, routes: Routes):
        self.columns = {p: k for k, p in enumerate(columns_of(routes))}
        sources = sorted({n.position for n in routes.nodes.values() if n.stack == "encoder"})
        # the source's tokens spread over the decoder's width, in their own order: the first at the left edge, the
        # last at the right
        stretch = max(len(self.columns) - 1, 1) / max(len(routes.source_tokens) - 1, 1)
        self.sources = {p: p * stretch for p in sources}
        rows = len(routes.rows) + (1 if self.sources else 0)
        self.x_range = (-0.6, len(self.columns) - 0.4)
        self.y_range = ((ENCODER_ROW if self.sources else 0) - 0.8, len(routes.rows) - 0.4)
        self.height = max(420, 150 + 34 * rows)

    def where(self, node) -> tuple[float, float]:
        if node.stack == "encoder":
            return self.sources[node.position], ENCODER_ROW
        x = self.columns[node.position]
        if node.kind == "residual":
            return x, node.row
        return x + (BLOCK_OFFSET if node.kind == "feed_forward" else -BLOCK_OFFSET), node.row - 0.5

    def pixels(self, x: float, y: float) -> tuple[float, float]:
        """A point of the graph in px from its plotting area's bottom left, at the narrowest width it is drawn."""
        width, height = NARROWEST_PLOT_PX, self.height - PLOT_HEIGHT_LESS_PX
        return ((x - self.x_range[0]) / (self.x_range[1] - self.x_range[0]) * width,
                (y - self.y_range[0]) / (self.y_range[1] - self.y_range[0]) * height)


class Labels:
    """The labels written on a graph, as boxes in px (``Layout.pixels``): one is placed only where it keeps
    ``LABEL_GAP_PX`` from every label placed before it."""

    def __init__(self, layout: Layout):
        self.layout, self.boxes = layout, []

    def place(self, x: float, y: float, text: str, size: int = 11, yshift: float = 0) -> bool:
        """Place ``text`` centred at (x, y) (``yshift`` px up) where it fits; whether it did."""
        px, py = self.layout.pixels(x, y)
        half_width = (len(text) * LABEL_CHAR_PX * size / 11 + 2 * LABEL_PAD_PX) / 2
        box = (px - half_width, py + yshift - LABEL_HEIGHT_PX / 2, px + half_width, py + yshift + LABEL_HEIGHT_PX / 2)
        if any(box[0] < b[2] + LABEL_GAP_PX and b[0] < box[2] + LABEL_GAP_PX and box[1] < b[3] + LABEL_GAP_PX
               and b[1] < box[3] + LABEL_GAP_PX for b in self.boxes):
            return False
        self.boxes.append(box)
        return True


def _colour(edge) -> str:
    return COLOURS["cross"] if edge.source_stack == "encoder" else COLOURS[edge.kind]


def _edge_traces(routes: Routes, layout: Layout) -> list[go.Scatter]:
    """The edges as lines, one trace per colour and width (plotly draws one width per trace), and an invisible
    marker at each edge's middle that says what it is on hover."""
    segments = defaultdict(lambda: ([], []))  # (colour, width) -> x, y lists with None between segments
    through = defaultdict(float)  # a block node -> the shares through it
    hover_x, hover_y, hover_text = [], [], []
    for edge in routes.edges:
        source, target = routes.nodes[edge.source_node], routes.nodes[edge.target_node]
        points = [layout.where(source)] + ([layout.where(routes.nodes[edge.through])] if edge.through else []) + [
            layout.where(target)]
        width = round(1 + (4 if edge.kind == "residual" else 9) * edge.weight)
        xs, ys = segments[_colour(edge), width]
        xs += [points[0][0], points[1][0], None]
        ys += [points[0][1], points[1][1], None]
        if edge.through:
            through[edge.through] += edge.weight
        middle = ((points[0][0] + points[1][0]) / 2, (points[0][1] + points[1][1]) / 2)
        hover_x.append(middle[0]), hover_y.append(middle[1])
        hover_text.append(plotly_text(f"{edge_name(edge)}: {source.position}:{source.token} → {target.position}:"
                                      f"{target.token}, share {edge.weight:.3f}"))
    for block, share in through.items():  # block output -> the stream it adds into
        node = routes.nodes[block]
        start, end = layout.where(node), layout.where(routes.nodes[f"r{node.row}:{node.position}"])
        colour = COLOURS["cross"] if node.kind == "cross_attention" else COLOURS[
            "feed_forward" if node.kind == "feed_forward" else "attention"]
        xs, ys = segments[colour, round(1 + 9 * min(share, 1))]
        xs += [start[0], end[0], None]
        ys += [start[1], end[1], None]
    traces = [go.Scatter(x=xs, y=ys, mode="lines", line=dict(color=colour, width=width), hoverinfo="skip",
                         showlegend=False) for (colour, width), (xs, ys) in sorted(segments.items())]
    traces.append(go.Scatter(x=hover_x, y=hover_y, mode="markers", marker=dict(size=8, opacity=0), text=hover_text,
                             hovertemplate="%{text}<extra></extra>", showlegend=False))
    return traces


def edge_name(edge) -> str:
    if edge.kind == "attention":
        return head_name(edge.layer, edge.head) + (" (cross-attention)" if edge.source_stack == "encoder" else "")
    return f"L{edge.layer} feed-forward" if edge.kind == "feed_forward" else "residual"


def _node_trace(routes: Routes, layout: Layout) -> go.Scatter:
    """Every node, clickable: its id rides in customdata (the tab's click bridge sends it)."""
    nodes = list(routes.nodes.values())
    top = f"r{len(routes.rows) - 1}:{routes.position}"
    points = [layout.where(n) for n in nodes]
    colours = ["#c53030" if n.id == top else COLOURS["residual"] if n.kind == "residual" and n.stack == "decoder"
               else COLOURS["cross"] if n.kind in ("cross_attention",) or n.stack == "encoder"
               else COLOURS["feed_forward"] if n.kind == "feed_forward" else COLOURS["attention"] for n in nodes]
    text = [plotly_text(f"{n.stage} · {n.position}:{n.token}" + (" (source)" if n.stack == "encoder" else ""))
            for n in nodes]
    return go.Scatter(x=[p[0] for p in points], y=[p[1] for p in points], mode="markers", customdata=[n.id for n in nodes],
                      marker=dict(size=[16 if n.id == top else 11 if n.kind == "residual" else 9 for n in nodes],
                                  color=colours, symbol=["circle" if n.kind == "residual" else "square" for n in nodes],
                                  line=dict(color="white", width=1)),
                      text=text, hovertemplate="%{text}<br><i>click: what it would predict, what feeds it</i><extra></extra>",
                      showlegend=False)


def head_labels(routes: Routes, labels: Labels) -> list[tuple[float, float, object]]:
    """(x, y, edge): the strongest attention edges' heads, written at the middle of each edge, at most
    ``HEADS_NAMED`` of them, none touching another (``labels``: an edge whose label would touch one goes unnamed)."""
    placed = []
    for edge in (e for e in routes.edges if e.kind == "attention"):
        source, block = (labels.layout.where(routes.nodes[n]) for n in (edge.source_node, edge.through))
        x, y = (source[0] + block[0]) / 2, (source[1] + block[1]) / 2
        if labels.place(x, y, head_name(edge.layer, edge.head)):
            placed.append((x, y, edge))
        if len(placed) == HEADS_NAMED:
            break
    return placed


def source_labels(routes: Routes, labels: Labels) -> list[tuple[float, int]]:
    """(x, source position): the encoder's output tokens the route reaches, named under their nodes, those whose
    cross-attention edges carry the most first; one that would touch a label already placed goes unnamed (its
    node still says it on hover)."""
    carried = defaultdict(float)
    for edge in routes.edges:
        if edge.source_stack == "encoder":
            carried[edge.source] += edge.weight
    placed = []
    for position in sorted(labels.layout.sources, key=lambda p: -carried[p]):
        x = labels.layout.sources[position]
        if labels.place(x, ENCODER_ROW, tick_text(f"{position}:{routes.source_tokens[position]}"), size=10, yshift=-16):
            placed.append((x, position))
    return placed


def routes_figure(routes: Routes) -> go.Figure:
    """The graph: rows (the stream after each update) bottom to top, the tokens' columns left to right."""
    layout = Layout(routes)
    labels = Labels(layout)
    fig = go.Figure(_edge_traces(routes, layout) + [_node_trace(routes, layout)])
    for x, y, edge in head_labels(routes, labels):
        fig.add_annotation(x=x, y=y, text=head_name(edge.layer, edge.head), showarrow=False,
                           font=dict(size=11, color=_colour(edge)), bgcolor="rgba(255,255,255,0.8)")
    columns = columns_of(routes)
    rows = list(range(len(routes.rows)))
    row_labels = list(routes.rows)
    if layout.sources:
        rows, row_labels = [ENCODER_ROW] + rows, ["encoder output"] + row_labels
        for x, position in source_labels(routes, labels):
            fig.add_annotation(x=x, y=ENCODER_ROW, yshift=-16, text=plotly_text(tick_text(f"{position}:{routes.source_tokens[position]}")),
                               showarrow=False, font=dict(size=10, color=COLOURS["cross"]))
    skipped = "" if len(columns) == len(routes.tokens) else f"; only the {len(columns)} tokens the route reaches"
    title = (f"How the model predicted {routes.predicted!r} after {routes.position}:{routes.tokens[routes.position]}")
    fig.update_layout(
        title=dict(text=plotly_text(title) + f"<br><sup>edges with a share over {routes.threshold:g}{skipped}; "
                                             "blue attention, orange feed-forward, grey the residual stream"
                                             + (", purple cross-attention" if layout.sources else "") + "</sup>"),
        height=layout.height, hovermode="closest", dragmode="pan", **{**LAYOUT, "margin": MARGIN})
    fig.update_xaxes(tickvals=list(range(len(columns))), ticktext=[plotly_text(tick_text(f"{p}:{routes.tokens[p]}")) for p in columns],
                     tickangle=-50, tickfont_size=11, range=list(layout.x_range), showgrid=False, zeroline=False)
    fig.update_yaxes(title=dict(text="the residual stream after", font_size=11), tickvals=rows, ticktext=[plotly_text(r) for r in row_labels], tickfont_size=10, zeroline=False,
                     range=list(layout.y_range))
    return fig


def node_html(reading: NodeReading) -> str:
    """A clicked node: where it is, what the stream there would predict, and what feeds it (shares)."""
    node = reading.node
    where = f"{node.stage}, token {node.position}: {node.token}" + (" (the source)" if node.stack == "encoder" else "")
    parts = [f"<h4>{html.escape(where)}</h4>"]
    if reading.top is None:
        parts.append("<p class='note'>The encoder's output: cross-attention reads it, the LM head does not, so there "
                     "is no lens here.</p>")
    else:
        rows = "".join(f"<tr><td>{html.escape(label)}</td><td class=p>{html.escape(percent(p))}</td></tr>"
                       for label, p in reading.top)
        where = "here" if node.kind == "residual" else "at the stream this block adds into (the node above it)"
        parts.append(f"<div class='note'>The logit lens {where}, read by the final norm and the LM head: the stream "
                     "would predict</div>"
                     f"<table class='teach-values lens'><tbody>{rows}</tbody></table>")
    if reading.feeding:
        what = ("Its parts' shares (each head summed over its source tokens; the graph draws the edges over the "
                "threshold)" if node.kind == "residual" else "The edges through this block")
        rows = "".join(f"<tr><td>{html.escape(name)}</td><td class=p>{share:.3f}</td></tr>" for name, share in reading.feeding)
        parts.append(f"<div class='note'>{what}:</div><table class='teach-values lens'><tbody>{rows}</tbody></table>")
    elif node.row == 0:
        parts.append("<p class='note'>The embeddings: the token's vector (and its position's), where every route "
                     "starts.</p>")
    return "".join(parts)
