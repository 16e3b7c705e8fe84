"""Watch it learn: a training run at one snapshot (loss curves, head scores over training beside the control run,
every head's attention) and a Hub repo's training revisions, and the teaching text.
"""

import numpy as np
import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from explorer.present.figures import BEFORE, LAYOUT, attention_head_figure, plotly_text, token_attention_figure
from explorer.views.heads import THRESHOLD
from explorer.learning.hub_revisions import HubTimeline
from explorer.learning.timeline import CIRCUIT, Timeline, step_label
from explorer.learning.watch_it_learn import TimelineView


TIMELINE = """### Watch it learn: an induction head forms
- **What you see:** a two-layer Transformer that reads one token per byte, trained from scratch and saved at
  snapshots along the way. The slider picks a snapshot: the curves mark its step, and the attention grid and
  the sample are computed by that snapshot's weights on your text.
- **An induction head** completes a pattern seen before: having read "… A B … A", it predicts B. It is how a
  model copies from its context, so a passage read a second time costs far less than the first time (the
  *repeated-passage ratio*: the loss on the second copy over the loss on the first).
- **Two heads in two layers make it.** A *previous-token head* in layer 0 attends from each token to the one
  before and writes "the token before me was A" into that token's stream. An *induction head* in layer 1 reads
  this through its keys (*K-composition*: its keys are computed from the stream layer 0 wrote into). At a
  token A, its query matches the key of the token that came after an earlier A; it attends there and copies that
  token, B, into the prediction. These models add no position to the stream: RoPE turns the queries and keys
  inside each attention layer, which is how the layer-0 head finds the token before; what it passes on is which
  token that was.
- **Why it appears suddenly:** neither head helps alone. A previous-token head that nothing reads does not change
  the prediction, and an induction head has nothing to match until the previous-token head writes it. So the
  loss on what could be copied stays flat while the model learns which bytes follow which; once both heads begin
  to form, each makes the other useful, they grow together, and that loss drops: a *phase change*
  (Olsson et al. 2022).
- **What to look for:** in the curves, layer-1 heads' induction scores jumping (the status line names every
  head that forms, and when) at the steps where a layer-0 head's previous-token score rises; in the lowest plot,
  the pair that makes the circuit rising with them: how much of a layer-1 head's induction score it loses when
  that layer-0 head is removed (K-composition, measured on the probe: with RoPE the weights alone cannot say);
  and the training loss of timeline-repeats dropping there (four in five of its sequences are random tokens,
  which only copying predicts). In the grid, on the default text (a line, then the
  same line again cut a few words in): a layer-0 stripe just below the diagonal (each token looks at the one
  before), and in layer 1, in the rows of the repeat, a stripe L − 1 below the diagonal (L = 39: the bytes from
  one copy's start to the next), each token looking at the token after its first occurrence. Under the sample, the
  next bytes the snapshot guesses right as it reads your text, each under its byte: after the phase change more
  of the repeat than of the first line (the status line counts both). This small model copies random tokens almost perfectly but text only in part (it read few
  repeated passages, and repeats at most 64 bytes apart), so on text its greedy sample copies a few words at best.
  timeline-plain, the same model trained on the plays alone, is the control: its best head (dashed) stays low and
  its guesses are no better in the repeat, so the data decide.
- **Scores and losses:** the head scores are measured on a fixed probe, random tokens read twice (the standard
  induction score), not on your text. The validation loss is on the same held-out plays for both runs; each
  training loss is on its run's own data.
- **A real model learning** (the section at the foot of this tab): Pythia publishes the checkpoints of its training as
  revisions of its Hub repo (`step0` … `step143000`). Name a repo and the revisions, and each is downloaded once,
  converted into this app's Transformer and measured on the same probe: every head's scores over training, and for
  the revision you pick, its best induction head on your text, its sample and its guesses."""


HUB_TIMELINE = """A repo that publishes its training checkpoints as revisions, as Pythia does (`step0` … `step143000`;
EleutherAI/pythia-14m is small enough for this CPU): each revision asked for is downloaded once (then cached for
everyone), converted into this app's Transformer, and measured as the training runs are: every head's induction and
previous-token score on the probe (random tokens read twice), and on your text above (read with the repo's own
tokenizer) the attention of the revision's best induction head, its greedy sample and its right guesses."""


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
        curve = np.asarray(run.timeline_json["train_curve"], dtype=float).reshape(-1, 2)
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
    """``heads_figure`` of a training run at a snapshot: the scores from its timeline.json, the other run's best head
    dashed, and the composition of every earlier/later head pair."""
    return heads_figure(view.run, view.step, view.other, view.composition)


def heads_figure(timeline: Timeline, at, other: Timeline | None = None, composition: dict | None = None) -> go.Figure:
    """Every head's induction score (top) and previous-token score (middle) at every step of ``timeline``, one line
    per head (a step that is not a number, such as a revision named ``main``, is a category of the x axis); a dotted
    line at the step ``at``. ``other``: another timeline, its best head at each step dashed. ``composition``:
    {(l1, h1, l2, h2): one score per step}, drawn below (``explorer.learning.composition``): a pair that ever reaches
    0.1 in the later head's colour and named, the rest thin and grey."""
    rows = 3 if composition else 2
    fig = make_subplots(rows=rows, cols=1, shared_xaxes=True, vertical_spacing=0.08,
                        subplot_titles=["Induction score of every head", "Previous-token score of every head",
                                        "K-composition: what a later head's induction score loses without an earlier head"][:rows])
    steps = timeline.steps
    colours = head_colours(*timeline.scores("induction").shape[1:])
    for row, what in enumerate(("induction", "previous_token"), start=1):
        scores = timeline.scores(what)  # (steps, layers, heads)
        for layer in range(scores.shape[1]):
            for head in range(scores.shape[2]):
                name = f"layer {layer}, head {head}"
                fig.add_scatter(x=steps, y=scores[:, layer, head], mode="lines+markers", name=name,
                                legendgroup=name, showlegend=row == 1, marker_size=4,
                                line=dict(color=colours[layer][head], width=2),
                                hovertemplate=f"{name}<br>step %{{x}}<br>score %{{y:.3f}}<extra></extra>", row=row, col=1)
        if other is not None:
            label = plotly_text(f"{other.name}: its best head")
            fig.add_scatter(x=other.steps, y=other.best_scores(what), mode="lines", name=label, legendgroup="other",
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


def hub_heads_figure(timeline: HubTimeline, index: int) -> go.Figure:
    """``heads_figure`` of a Hub repo's revisions, a dotted line at revision ``index``."""
    return heads_figure(timeline, timeline.steps[index])


def hub_attention_figure(timeline: HubTimeline, index: int) -> go.Figure:
    """The attention of revision ``index``'s best induction head on the learner's text, every token on the axes."""
    view = timeline.revisions[index]
    top = view.best_induction
    return token_attention_figure(view.attention_of_best_induction_head, timeline.tokens, timeline.tokens,
                                  f"Best {CIRCUIT['induction']}, {plotly_text(step_label(timeline.steps[index]))}:<br>layer "
                                  f"{top.layer}, head {top.head} (score {top.score:.2f})", "token", "token")
