"""The Watch it learn tab: a recorded training run (``explorer.learning.watch_it_learn``) snapshot by snapshot. A slider picks the
snapshot; the loss curves and every head's scores over training mark it, and the attention grid and the sample
are that snapshot's own on the learner's text. The other training run is drawn beside it for comparison.

Below it, a real model learning (``explorer.learning.hub_revisions``): a Hub repo's training checkpoints, its revisions
(Pythia's ``step…``), opened (``open_revisions``, streaming the downloads) and measured (``measure_revisions``): every
head's scores over training, and a menu picking the revision whose best induction head, sample and guesses on the
learner's text are shown (``show_revision``); the API's ``hub_timeline`` gives the same numbers as JSON
(``timeline_of_revisions``)."""

import gradio as gr

from explorer.generation.labels import TEXT_MARKS
from explorer.learning import hub_revisions, training_runs, watch_it_learn
from explorer.learning.guesses import MISSED, guesses_line, guesses_right
from explorer.learning.timeline import step_label as name_of_step
from explorer.present import watch_it_learn as present
from explorer.core.inputs import InputProblem, echo, whole_number

from ui.controls import DecodingControls
from ui.events import EXACT, INTERACTIVE, NO_FIGURE, NO_TEXT, OPENING, UNCHECKED, guarded, say_doing, status, visible_breaks
from ui.tab import TabParts


@guarded(losses=NO_FIGURE, heads=NO_FIGURE, sample=NO_TEXT, guesses=NO_TEXT, grid=NO_FIGURE, previous=NO_FIGURE,
         induction=NO_FIGURE)
def training_timeline(snapshot, text, run=None):
    """The run (default: timeline-repeats) at snapshot index ``snapshot`` (−1: the last) on ``text``: the loss
    curves, every head's scores over training, the greedy sample, the next tokens of the text it guesses right, every
    head's attention on the text, the best previous-token and induction heads enlarged, and a status line."""
    view = watch_it_learn.timeline_view(run, snapshot, text)
    other = f"Dashed and grey: {view.other.name}, for comparison." if view.other else "No other recorded run to compare with."
    circuit = present.circuit_head_figures(view)
    return (present.timeline_loss_figure(view), present.timeline_heads_figure(view), visible_breaks(view.sample),
            view.guesses_line(), present.timeline_attention_figure(view), circuit["previous_token"],
            circuit["induction"],
            status(view.summary(), view.formed_line(), view.composition_line(), view.guesses_count(),
                   f"{view.run.name} trained on: {view.run.timeline_json['run']['data']}. " + other, *view.notices))


def slider_label(run: training_runs.TrainingRun, index: int) -> str:
    """What the slider says it is on: the snapshot and its step."""
    return f"Snapshot {index} of 0–{len(run.steps) - 1}: step {run.steps[index]:,} of {run.steps[-1]:,}"


def step_label(index, run):
    """The slider's label, for the snapshot it is on now, and the step it shows (kept when the run changes)."""
    try:
        chosen = training_runs.pick_run(run)
        index = training_runs.pick_snapshot(index, chosen)
        return gr.update(label=slider_label(chosen, index)), chosen.steps[index]
    except InputProblem:
        return gr.skip(), gr.skip()


def slider_for(run, step):
    """The slider for the run picked: its snapshots, on the one nearest the step shown before, its label."""
    try:
        chosen = training_runs.pick_run(run)
    except InputProblem:
        return gr.skip()
    kept = chosen.nearest(step if isinstance(step, (int, float)) else 0)
    return gr.update(maximum=len(chosen.snapshots) - 1, value=kept, label=slider_label(chosen, kept))


NO_REQUEST = NO_TIMELINE = None
NO_REVISIONS = gr.update(choices=[], value=None)


@guarded(asked=NO_REQUEST)
def open_revisions(repo_id, revisions, text):
    """A Hub repo's revisions (empty: its ``step<N>`` ones, evenly spaced), each opened (downloaded once, cached),
    the progress streamed; then the checked request, for ``measure_revisions``. Runs in the opening slots: it waits
    on the network, not on the cores."""
    asked = hub_revisions.request(repo_id, revisions, text)
    for line in asked.opening():
        yield NO_REQUEST, status(f"⏳ {echo(asked.repo_id, 90)}, {line}…")
    yield asked, status(f"⏳ Opened {len(asked.names)} revisions of {echo(asked.repo_id, 90)}: measuring every head of "
                        "each, and reading your text…")


@guarded(timeline=NO_TIMELINE, picked=NO_REVISIONS, heads=NO_FIGURE, attention=NO_FIGURE, sample=NO_TEXT, guesses=NO_TEXT)
def measure_revisions(asked):
    """The opened revisions measured (a ``HubTimeline``, kept for ``show_revision``), the revision menu on the last
    one, and its views. Runs in the exact answers' slot (``EXACT``): one pass per revision, never in the views' way."""
    if asked is None:  # the opening failed, and its status line says why
        return (gr.skip(),) * 7
    measured = asked.measure(lambda line: say_doing(f"Measuring {line}"))
    last = len(measured.revisions) - 1
    menu = gr.update(choices=[(name_of_step(step), i) for i, step in enumerate(measured.steps)], value=last)
    return (measured, menu, *revision_views(measured, last))


@guarded(heads=NO_FIGURE, attention=NO_FIGURE, sample=NO_TEXT, guesses=NO_TEXT)
def show_revision(timeline, index):
    """The views of revision ``index`` (0: the earliest step) of the opened ``HubTimeline``."""
    if not isinstance(timeline, hub_revisions.HubTimeline) or not timeline.revisions:
        raise InputProblem("Open a Hub repo's revisions first.")
    n = len(timeline.revisions)
    return revision_views(timeline, whole_number(index, f"The revision (0–{n - 1}, in step order)", 0, n - 1))


def revision_views(measured: hub_revisions.HubTimeline, index: int) -> tuple:
    """Every head over training marked at the revision, its best induction head's attention on the text, its sample,
    its guesses, and the status line: the revision's best heads, every induction head formed and when."""
    view, steps = measured.revisions[index], measured.steps
    induction, previous = view.best_induction, view.best_previous_token
    commit = f"commit `{view.commit[:12]}`; " if view.commit else ""
    line = status(
        f"**{name_of_step(steps[index])}** ({commit}{index + 1} of {len(steps)} opened, "
        f"{name_of_step(steps[0])} to {name_of_step(steps[-1])}) · best induction head: layer "
        f"{induction.layer}, head {induction.head} ({induction.score:.2f}) · best previous-token head: layer "
        f"{previous.layer}, head {previous.head} ({previous.score:.2f}) · a head spreading its attention "
        f"evenly on the probe scores {measured.induction_baseline:.2f}",
        measured.formed_line(echo(measured.repo_id, 90)),
        guesses_right(view.guessed), *measured.notices)
    return (present.hub_heads_figure(measured, index), present.hub_attention_figure(measured, index),
            visible_breaks(view.sample), guesses_line(view.read_tokens, view.guessed), line)


def timeline_of_revisions(repo_id: str, revisions: str = "", text: str = watch_it_learn.DEFAULT_TEXT) -> dict:
    """The API's ``hub_timeline``: a Hub repo's training checkpoints (revisions, at most 12; empty: its ``step<N>``
    revisions, 12 evenly spaced) on ``text``: for each, every head's induction and previous-token score, the best
    induction head's attention on the text, and a greedy sample (``explorer.learning.hub_revisions``), as JSON."""
    try:
        return hub_revisions.hub_timeline(repo_id, revisions, text).to_json()
    except InputProblem as problem:
        raise gr.Error(str(problem)) from None


def hub_section(text: gr.Textbox) -> None:
    """The accordion of a Hub repo's training checkpoints, read on the tab's ``text``, and its events."""
    with gr.Accordion("A real model learning: a Hub repo's training checkpoints", open=False, elem_id="hub-timeline"):
        gr.Markdown(present.HUB_TIMELINE, elem_classes="model-note")
        with gr.Row(equal_height=True):
            repo = gr.Textbox(label="Hub repo id", placeholder="EleutherAI/pythia-14m", scale=3, elem_id="hub-timeline-repo")
            revisions = gr.Textbox(label=f"Revisions, with commas (at most {hub_revisions.MAX_REVISIONS}; empty: the repo's "
                                         f"step<N> revisions, {hub_revisions.MAX_REVISIONS} evenly spaced)",
                                   placeholder="step0, step1000, step143000", scale=3, elem_id="hub-timeline-revisions")
            button = gr.Button("Open and measure", variant="primary", scale=1, min_width=120, elem_id="hub-timeline-button")
        line = gr.Markdown(elem_id="hub-timeline-status", elem_classes="status-line")
        heads = gr.Plot(label="Every head's scores over training", elem_id="plot-hub-timeline-heads")
        picked = gr.Dropdown(choices=[], label="Revision (its training step): its attention, sample and guesses below",
                             elem_id="hub-timeline-revision")
        sample = gr.Textbox(label=f"What this revision writes next (greedy; {TEXT_MARKS})", lines=2,
                            max_lines=4, elem_id="hub-timeline-sample")
        guesses = gr.Textbox(label=f"Reading your text (top line): under each token, the token again where this revision "
                                   f"guessed it (its most likely next token), {MISSED} where it guessed wrong",
                             lines=2, max_lines=4, elem_id="hub-timeline-guesses", elem_classes=["monospace", "aligned"])
        attention = gr.Plot(label="The best induction head's attention on your text", elem_id="plot-hub-timeline-attention")
    timeline, asked = gr.State(NO_TIMELINE), gr.State(NO_REQUEST)
    gr.on([button.click, repo.submit, revisions.submit], open_revisions, [repo, revisions, text], [asked, line],
          api_name="hub_timeline_open", api_visibility="private", show_progress="minimal", **OPENING, **UNCHECKED).then(
        measure_revisions, asked, [timeline, picked, heads, attention, sample, guesses, line],
        api_name="hub_timeline_measure", api_visibility="private", **EXACT, **UNCHECKED)
    picked.input(show_revision, [timeline, picked], [heads, attention, sample, guesses, line],
                 api_name="hub_timeline_revision", api_visibility="private", **UNCHECKED)
    gr.api(timeline_of_revisions, api_name="hub_timeline", **OPENING)  # the section's numbers, as JSON


def tab(choices, value, decoding: DecodingControls | None) -> TabParts:
    """The tab (no model menu: its models are the training runs and a Hub repo's revisions)."""
    runs = training_runs.training_runs()
    first = training_runs.read_training_run(next(iter(runs.values()))) if runs else None
    last = len(first.snapshots) - 1 if first else 1
    context = f"{first.info.config.context_length} tokens" if first else "its context"
    with gr.Tab("Watch it learn", id="timeline") as page:
        with gr.Row():  # on a narrow page the explanation goes below the curves
            with gr.Column(scale=3, min_width=420):
                run = gr.Radio(list(runs), value=first and first.name, label="Recorded run", elem_id="timeline-run")
                snapshot = gr.Slider(0, last, value=0, step=1, elem_id="timeline-snapshot",
                                     label=slider_label(first, 0) if first else "Snapshot")
                status_line = gr.Markdown(training_runs.no_runs_message() if not runs else "", elem_id="timeline-status",
                                          elem_classes="status-line")
                losses = gr.Plot(label="Loss", elem_id="plot-timeline-loss")
                heads = gr.Plot(label="Every head's scores over training", elem_id="plot-timeline-heads")
            with gr.Column(scale=2, min_width=360):
                gr.Markdown(present.TIMELINE, elem_id="timeline-teaching")
        with gr.Row():
            text = gr.Textbox(value=watch_it_learn.DEFAULT_TEXT, lines=2, scale=4, elem_id="timeline-text",
                              label=f"Your text (at most {watch_it_learn.MAX_TEXT_CHARS:,} characters; the model reads the "
                                    f"first {context}, one per byte)")
            show = gr.Button("Show", variant="primary", scale=1, elem_id="timeline-button")
        sample = gr.Textbox(label=f"What this snapshot writes next (greedy: at most {watch_it_learn.SAMPLE_TOKENS} tokens, as many as "
                                  f"fit the model's {context}; {TEXT_MARKS})", lines=2, max_lines=4,
                            elem_id="timeline-sample")
        guesses = gr.Textbox(label=f"Reading your text (top line): under each token, the token again where this snapshot "
                                   f"guessed it (its most likely next token), {MISSED} where it guessed wrong; "
                                   "⟨c3⟩ is one byte of a character outside ASCII", lines=2, max_lines=4,
                             elem_id="timeline-guesses", elem_classes=["monospace", "aligned"])
        grid = gr.Plot(label="Every head's attention on your text", elem_id="plot-timeline-grid")
        with gr.Row(elem_classes="plot-row"):
            previous = gr.Plot(label="The best previous-token head, enlarged", elem_id="plot-timeline-previous")
            induction = gr.Plot(label="The best induction head, enlarged", elem_id="plot-timeline-induction")
        hub_section(text)
        shown_step = gr.State(first.steps[0] if first else 0)  # inside the tab: the tab bar counts the tabs' children
    request, outputs = [snapshot, text, run], [losses, heads, sample, guesses, grid, previous, induction, status_line]
    show.click(training_timeline, request, outputs, api_name="training_timeline", **INTERACTIVE, **UNCHECKED)
    # a drag sends a change per position; "always_last" (a change's default) runs the last one after the running one
    snapshot.change(training_timeline, request, outputs, api_name="training_timeline_snapshot",
                    api_visibility="private", **INTERACTIVE, **UNCHECKED)
    snapshot.change(step_label, [snapshot, run], [snapshot, shown_step], api_name="training_timeline_step",
                    api_visibility="private", queue=False, show_progress="hidden", **UNCHECKED)
    page.select(training_timeline, request, outputs, api_name="training_timeline_open", api_visibility="private",
                **INTERACTIVE, **UNCHECKED)
    run.input(slider_for, [run, shown_step], snapshot, api_name="training_timeline_run_range", api_visibility="private",
              **UNCHECKED).then(training_timeline, request, outputs, api_name="training_timeline_run",
                                api_visibility="private", **INTERACTIVE, **UNCHECKED)
    return TabParts()
