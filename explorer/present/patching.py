"""Activation patching: the grids as heat maps, one clicked cell's top tokens, and the teaching text (what patching
asks, the default example's note, what this result's grids show).
"""

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from explorer.present.figures import (LAYOUT, PLOT_CHROME, TITLED_TOP, angled_label_depth, fitted_layout, plotly_text,
                                      tick_text, top_tokens_figure, wrapped_title)
from explorer.views.patching.grids import HEAD_COLUMNS
from explorer.views.patching.analysis import PatchGrid, Patching
from explorer.core.inputs import echo


GRIDS_MIN_WIDTH = 600  # px: the grids' column is never narrower (its min_width); their titles wrap to it

# one scale for every grid: white at 0 (nothing restored), blue at 1 (all of it), red at -1; a cell beyond ±1
# (overshoot, or a patch that hurts more than the corruption did) is drawn at the scale's end, and ``colour_note``
# says how many are
COLOURS = [[0.0, "#b2182b"], [0.5, "#ffffff"], [1.0, "#08306b"]]
COLOUR_LIMIT = 1.0


def _range(values: np.ndarray) -> float:
    """The colour scale runs from -COLOUR_LIMIT to +COLOUR_LIMIT in every grid, so that 1 looks the same in each."""
    return COLOUR_LIMIT


def _heatmap(values: np.ndarray, x, y, limit: float, hover: str, show_scale: bool = True) -> go.Heatmap:
    return go.Heatmap(z=values, x=x, y=y, colorscale=COLOURS, zmid=0, zmin=-limit, zmax=limit, xgap=1, ygap=1,
                      showscale=show_scale, colorbar=dict(title="restored", thickness=12, len=0.9),
                      hovertemplate=hover + "<br>restored %{z:.3f}<br><i>click: top 5 next tokens</i><extra></extra>")


# the position axis: a tick label is cut to TICK_CHARS characters (tick_text); a label at -60 degrees needs LABEL_PX px of the
# axis to clear the next one (10 px text, about 13 px high, across its slant). A grid's plot area is at least
# NARROWEST_PLOT px wide (the grids' full width on an 800 px page), so up to LABELLED_POSITIONS positions are each
# labelled; past that every k-th one is, the changed ones and the last always (``token_axis``); hover names every cell
LABEL_PX, NARROWEST_PLOT = 16, 540
LABELLED_POSITIONS = NARROWEST_PLOT // LABEL_PX
ROW_HEIGHT = 28  # px of each row of a grid


def changed_runs(changed: list[int], every: int) -> list[list[int]]:
    """The changed positions in runs, each closer than ``every`` to the next: one label names a run."""
    runs: list[list[int]] = []
    for p in sorted(changed):
        if runs and p - runs[-1][-1] < every:
            runs[-1].append(p)
        else:
            runs.append([p])
    return runs


def run_text(run: list[int]) -> str:
    """A run of changed positions as a short label: '12–15', '50–51,53'."""
    stretches: list[list[int]] = []
    for p in run:
        if stretches and p == stretches[-1][-1] + 1:
            stretches[-1].append(p)
        else:
            stretches.append([p])
    return ",".join(str(s[0]) if len(s) == 1 else f"{s[0]}–{s[-1]}" for s in stretches)


def labelled_positions(n: int, changed: list[int]) -> dict[int, list[int] | None]:
    """The positions of an ``n``-position axis that carry a label, at least k = ceil(n / LABELLED_POSITIONS) apart
    (k = 1, every one, when all fit): each run of changed positions closer than k, labelled at its first position
    (the value: the run); the last position; every k-th one (None: a position of its own). A label closer than k to
    one before it in that order is left out."""
    every = -(-n // LABELLED_POSITIONS)
    runs = changed_runs(changed, every)
    inside = {p for run in runs for p in range(run[0], run[-1] + 1)}
    labels: dict[int, list[int] | None] = {run[0]: run for run in runs}
    for p in [n - 1, *range(0, n, every)]:
        if p not in inside and all(abs(p - q) >= every for q in labels):
            labels[p] = None
    return dict(sorted(labels.items()))


def token_axis(result: Patching) -> tuple[list[str], list[str], list[str]]:
    """(category values, the values labelled, their tick labels) for the position axis: 'p:token', changed tokens
    bold with a star; changed neighbours too close to label each, one label for them all: '12–15*', '50–51,53*'
    (``labelled_positions``)."""
    values = [plotly_text(f"{p}:{clean}") for p, clean in enumerate(result.tokens)]
    labelled, ticks = [], []
    for p, run in labelled_positions(len(values), result.changed).items():
        labelled.append(values[p])
        label = plotly_text(tick_text(f"{p}:{result.tokens[p]}")) if run is None or len(run) == 1 else tick_text(run_text(run))
        ticks.append(label if run is None else f"<b>{label}*</b>")
    return values, labelled, ticks


def position_layout(result: Patching, rows: int, top: int = TITLED_TOP) -> dict:
    """Height and margins of a layer x position grid: a row of ROW_HEIGHT px per layer, ``top`` px for the title,
    the bottom margin as deep as the longest angled tick label and the axis title under it (``fitted_layout``)."""
    longest = max(len(tick_text(f"{p}:{token}")) + 1 for p, token in enumerate(result.tokens))
    return fitted_layout(ROW_HEIGHT * rows, left=50, bottom=angled_label_depth(longest) + 30, top=top)


def position_figure(result: Patching, grid: PatchGrid, *details: str) -> go.Figure:
    """Layer x position: how much of the clean run's answer patching that one place restores; ``details``: more
    lines under the title."""
    x, labelled, ticks = token_axis(result)
    limit = _range(grid.values)
    fig = go.Figure(_heatmap(grid.values, x, grid.rows, limit, "%{y} at %{x}"))
    changed = ", ".join(f"{p}:{result.tokens[p]}→{result.corrupted_tokens[p]}" for p in result.changed[:4])
    title, top = wrapped_title(grid.title, f"patched at one position at a time; * changed in the corrupted text: "
                                           f"{changed}", *details, width=GRIDS_MIN_WIDTH - PLOT_CHROME)
    fig.update_layout(title=title, xaxis_title="position patched (clean token)", yaxis_title="layer",
                      **{**LAYOUT, **position_layout(result, len(grid.rows), top)})
    fig.update_xaxes(type="category", tickmode="array", tickvals=labelled, ticktext=ticks, tickangle=-60, tickfont_size=10)
    fig.update_yaxes(type="category", autorange="reversed")
    return fig


HEAD_MAP_TITLES = 25  # px above the two head maps for their own titles


def heads_layout(n_layers: int, top: int = TITLED_TOP) -> dict:
    """Height and margins of the two layer x head maps: a row per layer, ``top`` px for the title and room under it
    for the two maps' titles."""
    return fitted_layout(ROW_HEIGHT * n_layers, left=50, bottom=50, top=top + HEAD_MAP_TITLES)


def heads_figure(result: Patching, grid: PatchGrid, n_layers: int, n_heads: int, *details: str) -> go.Figure:
    """Two layer x head maps, sharing the layer axis: each head's output patched at every position, and at the last
    position only; ``details``: more lines under the title."""
    fig = make_subplots(1, 2, subplot_titles=[f"at {c}" for c in HEAD_COLUMNS], horizontal_spacing=0.06,
                        shared_yaxes=True)
    limit = _range(grid.values)
    heads, layers = [f"H{h}" for h in range(n_heads)], [f"L{l}" for l in range(n_layers)]
    for column in range(2):
        values = grid.values[:, column].reshape(n_layers, n_heads)
        fig.add_trace(_heatmap(values, heads, layers, limit, "%{y}.%{x}", show_scale=column == 1), 1, column + 1)
    title, top = wrapped_title(grid.title, f"one head at a time: at every position, then at the last position "
                                           f"({result.tokens[-1]}) only", *details, width=GRIDS_MIN_WIDTH - PLOT_CHROME)
    fig.update_layout(title=title, **{**LAYOUT, **heads_layout(n_layers, top)})
    fig.update_annotations(font_size=11)  # the two maps' titles, side by side even in a half-width column
    fig.update_xaxes(title_text="head", type="category")
    fig.update_yaxes(type="category", autorange="reversed")
    fig.update_yaxes(title_text="layer", col=1)
    return fig


def grid_figure(result: Patching, name: str, n_layers: int, n_heads: int) -> go.Figure:
    grid = result.grids[name]
    return heads_figure(result, grid, n_layers, n_heads) if name == "heads" else position_figure(result, grid)


def cell_figure(result: Patching, name: str, row: int, column: int) -> go.Figure:
    """The top next tokens of one cell's patched run, its title wrapped to the narrow panel beside the grids."""
    grid = result.grids[name]
    where = f"{grid.rows[row]} at {grid.columns[column]}"
    top_next = result.cell_top(name, row, column)
    fig = top_tokens_figure(top_next, "the corrupted text")
    title, top = wrapped_title(f"Patched {where}: restored {grid.values[row, column]:.3f}", grid.title,
                               "that run's most likely next tokens")
    fig.update_layout(title=title, **fitted_layout(32 * len(top_next), left=20, right=60, top=top))
    fig.update_yaxes(automargin=True)  # the token labels take what they need, the bars the rest
    return fig


TEACHING = """**What patching asks.** Run the *corrupted* text, but at one place inside the model write in the value that
place had on the *clean* text. If the clean answer comes back, what the clean run carried **there** was enough to
decide it. Each cell of a grid is one such patched run.

**How it differs from ablation.** Ablation (the Head ablation tab) removes a head and asks what breaks: is the head
*needed*? Patching starts from a broken run and puts back one clean value: is that place *enough* to carry what
the changed tokens told the model? Two texts that differ in a few tokens isolate that one piece of information.

**The metric.** LD = logit(answer) − logit(wrong answer) at the last position; restored =
(LD patched − LD corrupted) / (LD clean − LD corrupted): 0 is the corrupted run (white), 1 the clean run (blue).
A patch can overshoot (above 1) or hurt (below 0, red).

**How to read a grid.** *Residual stream*: row L is the stream entering layer L (row 0: the embeddings), a column
one position. Row 0 lights up only where the texts differ (their embeddings); where the bright cell jumps to a later
position between two rows, an attention layer moved the information there. *Attention* and *feed-forward*: what that
sublayer writes into the stream at that position, Sublayer(Norm(x)) in a pre-norm layer's x + Sublayer(Norm(x))
(a post-norm layer normalises after the add instead; a parallel-residual one, GPT-NeoX's, feeds both sublayers the
same x; a model trained attention only has no feed-forward, so no feed-forward grid).
*Heads*: one head's output (before W_O) patched alone, at every position and at the last position only."""


# beside the default example (``explorer.views.patching.texts.DEFAULT_CLEAN`` and ``DEFAULT_CORRUPTED``)
DEFAULT_NOTE = ("**The example.** The text ends by naming \"the duke of Norfolk\" a second time; the first time, "
                "\" sends\" came next. Only copying that earlier passage predicts \" send\", and the corrupted text names "
                "another duke where the first copy is. Press Patch and follow the information: from the earlier name, "
                "to the token after it, to the last position.")


def clipped_cells(result: Patching) -> dict[str, int]:
    """Per grid, how many cells lie beyond ±COLOUR_LIMIT (drawn in the scale's end colour)."""
    counts = {name: int((np.abs(grid.values) > COLOUR_LIMIT + 5e-4).sum()) for name, grid in result.grids.items()}
    return {name: n for name, n in counts.items() if n}


def colour_note(result: Patching) -> str:
    """Which cells' colours are clipped, and how many; empty when none are."""
    counts = clipped_cells(result)
    if not counts:
        return ""
    where = ", ".join(f"{n} in {result.grids[name].title.lower()}" for name, n in counts.items())
    extreme = max((float(np.abs(g.values).max()) for g in result.grids.values()), default=0.0)
    return (f"**Colours clipped.** The colour scale runs from −{COLOUR_LIMIT:g} to +{COLOUR_LIMIT:g}; "
            f"{sum(counts.values())} cells lie beyond it ({where}; the largest {extreme:.2f}) and are drawn in its "
            "end colour. Hover a cell, or read the numbers below, for its value.")


def symbol_note(what: str) -> str:
    """Beside the example of a model trained on random symbols (``texts.symbol_example``): what it is."""
    return (f"**The example.** This model was trained on random symbols with runs repeated, so its example is "
            f"{what}. Press Patch and follow the information: from the changed symbol, to the symbol after its "
            "second copy, to the last position.")


def explanation(result: Patching) -> str:
    """What this result's grids show, in numbers computed from it; where the two runs barely differ
    (``Patching.measurable``), that, and no ranking of places."""
    if not result.measurable:
        lines = [f"**No place is ranked:** the corruption barely moves the answer's lead over the wrong answer "
                 f"(logit difference {result.clean_metric:.3f} clean, {result.corrupted_metric:.3f} corrupted), so the "
                 "grids below show noise; the line above says what to change."]
        return "\n\n".join(line for line in [*lines, colour_note(result)] if line)
    lines = []
    residual = result.grids.get("residual")
    if residual is not None:
        best = residual.values.argmax(axis=1)
        path = ", ".join(f"{row} at {echo(residual.columns[p], 24)} ({residual.values[i, p]:.2f})"
                         for i, (row, p) in enumerate(zip(residual.rows, best)))
        lines.append(f"**This run.** Residual stream, the position that restores most in each layer: {path}.")
    heads = result.grids.get("heads")
    if heads is not None:
        for column, where in enumerate(HEAD_COLUMNS):
            order = np.argsort(-heads.values[:, column])[:3]
            tops = ", ".join(f"{heads.rows[i]} ({heads.values[i, column]:.2f})" for i in order)
            lines.append(f"Heads patched at {where}, the three that restore most: {tops}.")
    return "\n\n".join(line for line in [*lines, colour_note(result)] if line)


# ----------------------------------------------------------------------------------------------
# The first-order estimate (attribution patching) beside the exact grids
# ----------------------------------------------------------------------------------------------

ESTIMATE_TEACHING = """**The estimate, first.** Before the patched runs finish, each grid is *estimated* by attribution
patching (AtP; Nanda 2023, Kramár et al. 2024): restored ≈ (a_clean − a_corrupted) · dLD/da at the corrupted run,
over the patched value a, normalised as the exact grid. One backward pass of the corrupted run gives every cell of
every grid at once. It is the first-order term of a Taylor expansion, so it is exact only where LD is linear in a
(the last layer's feed-forward output at the last position, in a model without a final norm). It misses what bends:
an attention softmax that **saturates** (a patched key or query that moves the pattern a lot, where the gradient of a
saturated softmax is near 0), and the **norms**, which divide by the size of the stream they read. AtP\\* recomputes
the attention pattern for patched queries and keys to fix part of the first; nothing first-order fixes all of it.
When the exact grid arrives, the estimate's map marks where it was wrong: × its sign (on a cell the exact grid
says matters), ○ one of the exact grid's largest cells that the estimate did not rank among its own largest."""

# each mark a glyph of the title's legend (``Agreement.legend``) drawn as text beside the cell's centre, × on its left
# and ○ on its right: a cell that is both reads '×○', the cell's colour shows around them (a shadow keeps them
# legible on a dark cell)
WRONG_SIGN, OFF_RANK = ("×", "middle left"), ("○", "middle right")  # (glyph, where beside the centre)


def _mark_trace(x, y, mark: tuple[str, str], name: str) -> go.Scatter:
    glyph, position = mark
    return go.Scatter(x=x, y=y, mode="text", text=[glyph] * len(x), textposition=position, name=name,
                      hoverinfo="skip", showlegend=False, textfont=dict(size=15, color="#111111", shadow="auto"))


def mark_disagreement(fig: go.Figure, grid: PatchGrid, agreement, n_heads: int, x_labels: list[str] | None) -> None:
    """Marks on ``fig``'s heat map(s): × the cells of the wrong sign, ○ the exact top cells ranked outside
    the estimate's top (``explorer.views.first_order.Agreement``). ``x_labels``: a position grid's column values."""
    for cells, mark, name in ((agreement.wrong_sign, WRONG_SIGN, "wrong sign"),
                              (agreement.off_rank, OFF_RANK, f"exact top {agreement.k}, not the estimate's")):
        if x_labels is not None:
            fig.add_trace(_mark_trace([x_labels[c] for _, c in cells], [grid.rows[r] for r, _ in cells], mark, name))
            continue
        for column in range(2):
            picked = [(r // n_heads, r % n_heads) for r, c in cells if c == column]
            fig.add_trace(_mark_trace([f"H{h}" for _, h in picked], [f"L{l}" for l, _ in picked], mark, name),
                          1, column + 1)


def estimate_figure(estimate, name: str, n_layers: int, n_heads: int, agreement=None) -> go.Figure:
    """One grid's first-order estimate (``explorer.views.patching.estimates.PatchingEstimate``), drawn as the exact
    grid is; with ``agreement``, its disagreement with the exact grid marked and said in the title."""
    grid = estimate.grids[name]
    grid = PatchGrid(grid.name, f"Estimate (AtP): {grid.title}", grid.rows, grid.columns, grid.values,
                     grid.top_ids, grid.top_probs)
    details = () if agreement is None else (agreement.legend(),)
    fig = (heads_figure(estimate, grid, n_layers, n_heads, *details) if name == "heads"
           else position_figure(estimate, grid, *details))
    fig.update_traces(hovertemplate="%{y}, %{x}<br>estimated restored %{z:.3f}<extra></extra>",
                      selector=dict(type="heatmap"))
    if agreement is not None:
        mark_disagreement(fig, grid, agreement, n_heads, None if name == "heads" else token_axis(estimate)[0])
    return fig
