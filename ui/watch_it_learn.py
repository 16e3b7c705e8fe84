"""The Watch it learn tab: a recorded training run (``explorer.recorded_runs``) snapshot by snapshot. A slider picks the
snapshot; the loss curves and every head's scores over training mark it, and the attention grid and the sample
are that snapshot's own on the learner's text. The other recorded run is drawn beside it for comparison."""

import gradio as gr

from explorer import learn_figures, recorded_runs, teaching
from explorer.inputs import InputProblem

from .common import INTERACTIVE, NO_FIGURE, NO_TEXT, UNCHECKED, guarded, status, visible_breaks


@guarded(NO_FIGURE, NO_FIGURE, NO_TEXT, NO_TEXT, NO_FIGURE, NO_FIGURE, NO_FIGURE)
def training_timeline(snapshot, text, run=None):
    """The run (default: timeline-repeats) at snapshot index ``snapshot`` (−1: the last) on ``text``: the loss
    curves, every head's scores over training, the greedy sample, the next tokens of the text it guesses right, every
    head's attention on the text, the best previous-token and induction heads enlarged, and a status line."""
    view = recorded_runs.timeline_view(run, snapshot, text)
    other = f"Dashed and grey: {view.other.name}, for comparison." if view.other else "No other recorded run to compare with."
    circuit = learn_figures.circuit_head_figures(view)
    return (learn_figures.timeline_loss_figure(view), learn_figures.timeline_heads_figure(view), visible_breaks(view.sample),
            view.guesses_line(), learn_figures.timeline_attention_figure(view), circuit["previous_token"],
            circuit["induction"],
            status(view.summary(), view.formed_line(), view.composition_line(), view.guesses_count(),
                   f"{view.run.name} trained on: {view.run.timeline['run']['data']}. " + other, *view.notices))


def slider_label(run: recorded_runs.RecordedRun, index: int) -> str:
    """What the slider says it is on: the snapshot and its step."""
    return f"Snapshot {index} of 0–{len(run.steps) - 1}: step {run.steps[index]:,} of {run.steps[-1]:,}"


def step_label(index, run):
    """The slider's label, for the snapshot it is on now, and the step it shows (kept when the run changes)."""
    try:
        chosen = recorded_runs.pick_run(run)
        index = recorded_runs.pick_snapshot(index, chosen)
        return gr.update(label=slider_label(chosen, index)), chosen.steps[index]
    except InputProblem:
        return gr.skip(), gr.skip()


def slider_for(run, step):
    """The slider for the run picked: its snapshots, on the one nearest the step shown before, its label."""
    try:
        chosen = recorded_runs.pick_run(run)
    except InputProblem:
        return gr.skip()
    kept = chosen.nearest(step if isinstance(step, (int, float)) else 0)
    return gr.update(maximum=len(chosen.snapshots) - 1, value=kept, label=slider_label(chosen, kept))


def tab() -> None:
    runs = recorded_runs.timeline_runs()
    first = recorded_runs.recorded(next(iter(runs.values()))) if runs else None
    last = len(first.snapshots) - 1 if first else 1
    context = f"{first.info.config.context_length} tokens" if first else "its context"
    with gr.Tab("Watch it learn", id="timeline") as page:
        with gr.Row():  # on a narrow page the explanation goes below the curves
            with gr.Column(scale=3, min_width=420):
                run = gr.Radio(list(runs), value=first and first.name, label="Recorded run", elem_id="timeline-run")
                snapshot = gr.Slider(0, last, value=0, step=1, elem_id="timeline-snapshot",
                                     label=slider_label(first, 0) if first else "Snapshot")
                status_line = gr.Markdown(recorded_runs.no_runs_message() if not runs else "", elem_id="timeline-status",
                                          elem_classes="status-line")
                losses = gr.Plot(label="Loss", elem_id="plot-timeline-loss")
                heads = gr.Plot(label="Every head's scores over training", elem_id="plot-timeline-heads")
            with gr.Column(scale=2, min_width=360):
                gr.Markdown(teaching.TIMELINE, elem_id="timeline-teaching")
        with gr.Row():
            text = gr.Textbox(value=recorded_runs.DEFAULT_TEXT, lines=2, scale=4, elem_id="timeline-text",
                              label=f"Your text (at most {recorded_runs.MAX_TEXT_CHARS:,} characters; the model reads the "
                                    f"first {context}, one per byte)")
            show = gr.Button("Show", variant="primary", scale=1, elem_id="timeline-button")
        sample = gr.Textbox(label=f"What this snapshot writes next (greedy: at most {recorded_runs.SAMPLE_TOKENS} tokens, as many as "
                                  f"fit the model's {context}; ⏎ is a line break, ␣ a space)", lines=2, max_lines=4,
                            elem_id="timeline-sample")
        guesses = gr.Textbox(label=f"Reading your text (top line): under each token, the token again where this snapshot "
                                   f"guessed it (its most likely next token), {recorded_runs.MISSED} where it guessed wrong; "
                                   "⟨c3⟩ is one byte of a character outside ASCII", lines=2, max_lines=4,
                             elem_id="timeline-guesses", elem_classes="monospace")
        grid = gr.Plot(label="Every head's attention on your text", elem_id="plot-timeline-grid")
        with gr.Row(elem_classes="plot-row"):
            previous = gr.Plot(label="The best previous-token head, enlarged", elem_id="plot-timeline-previous")
            induction = gr.Plot(label="The best induction head, enlarged", elem_id="plot-timeline-induction")
    request, outputs = [snapshot, text, run], [losses, heads, sample, guesses, grid, previous, induction, status_line]
    show.click(training_timeline, request, outputs, api_name="training_timeline", **INTERACTIVE, **UNCHECKED)
    # a drag sends a change per position; "always_last" (a change's default) runs the last one after the running one
    snapshot.change(training_timeline, request, outputs, api_name="training_timeline_snapshot",
                    api_visibility="private", **INTERACTIVE, **UNCHECKED)
    shown_step = gr.State(first.steps[0] if first else 0)
    snapshot.change(step_label, [snapshot, run], [snapshot, shown_step], api_name="training_timeline_step",
                    api_visibility="private", queue=False, show_progress="hidden", **UNCHECKED)
    page.select(training_timeline, request, outputs, api_name="training_timeline_open", api_visibility="private",
                **INTERACTIVE, **UNCHECKED)
    run.input(slider_for, [run, shown_step], snapshot, api_name="training_timeline_run_range", api_visibility="private",
              **UNCHECKED).then(training_timeline, request, outputs, api_name="training_timeline_run",
                                api_visibility="private", **INTERACTIVE, **UNCHECKED)
