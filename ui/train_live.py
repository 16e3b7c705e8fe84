"""The Train one yourself tab: a tiny Transformer trained from scratch in the app (``explorer.live_training``),
streamed at every logged step: the loss curve, a sample, one head's attention on the probe, every head's
induction score. One job runs at a time (its own queue); Stop, or leaving the page, ends it; the trained model
is offered as a zip of its ``save_pretrained`` folder."""

import math
import tempfile
import threading
from contextlib import closing

import gradio as gr

from explorer import catalog, generation, learn_figures, live_data, live_training, teaching
from explorer.live_data import SPECIAL_IDS
from explorer.live_training import DATA_KINDS, DEFAULT, LIMITS, MAX_LEARNING_RATE, LiveResult, Snapshot
from modeling import POSITION_ENCODINGS

from .common import NO_FIGURE, NO_TEXT, TRAINING, UNCHECKED, guarded, status, visible_breaks
from .open_model import trained_actions

CHOICES = ("n_layers", "n_heads", "d_model", "steps", "learning_rate", "position_encoding", "data", "text",
           "batch_size", "context_length", "log_every", "seed")  # the endpoint's parameters, in order
NO_DOWNLOAD = None  # the download button holds no file (and is disabled: ``download_ready``)

stops = generation.StopRegistry()  # browser session -> its running job's stop flag


def uniform_loss(settings, tokenizer) -> float:
    """ln V: the loss of guessing every token of the data's vocabulary equally."""
    return math.log(len(tokenizer) if tokenizer is not None else settings.vocab_size - SPECIAL_IDS)


@guarded(NO_FIGURE, NO_TEXT, NO_FIGURE, NO_FIGURE, None, NO_DOWNLOAD)
def train_live(n_layers, n_heads, d_model, steps, learning_rate, position_encoding, data, text, batch_size=None,
               context_length=None, log_every=None, seed=None, request: gr.Request = None):
    """Train a fresh model with these choices (the ones left out take the defaults), streaming a snapshot at
    every logged step; the last update holds the JSON (``losses`` one per logged step) and the zip."""
    values = dict(zip(CHOICES, (n_layers, n_heads, d_model, steps, learning_rate, position_encoding, data, text,
                                batch_size, context_length, log_every, seed)))
    settings = live_training.check_settings(**values)
    tokenizer = None
    if settings.data in live_training.TEXT_KINDS:  # text is read with the shipped main model's tokenizer
        catalog.resolve(live_data.TOKENIZER_MODEL)  # there and usable, else a message naming what there is
        tokenizer = live_data.shipped_tokenizer()  # the job's own copy: a fast tokenizer is not shared across threads
    uniform = uniform_loss(settings, tokenizer)
    described = (f"{settings.n_layers} layer(s), {settings.n_heads} heads, d_model {settings.d_model}, "
                 f"{settings.position_encoding} positions, {DATA_KINDS[settings.data]}, learning rate {settings.learning_rate:g}")
    session, stop = getattr(request, "session_hash", None), threading.Event()
    stops.register(session, stop)
    # The zip is written into a folder of this job's own; gradio copies a returned file into its cache before it
    # asks the generator for more, so the folder goes when the job does.
    folder = tempfile.TemporaryDirectory(prefix="live-model-")
    try:  # a client that leaves closes this generator, which closes the job's, which stops the Trainer
        yield (learn_figures.loss_curve_figure([], [], settings.steps, uniform), NO_TEXT, NO_FIGURE, NO_FIGURE, None,
               NO_DOWNLOAD, status(f"Starting: a fresh model ({described})…"))
        with closing(live_training.train_live(settings, stop, tokenizer=tokenizer)) as job:
            shown = (NO_TEXT, NO_FIGURE, NO_FIGURE)  # the last snapshot's sample, attention and induction scores
            for item in job:
                curve = learn_figures.loss_curve_figure(item.logged_steps, item.losses, settings.steps, uniform)
                if isinstance(item, Snapshot):
                    shown = (visible_breaks(item.sample), learn_figures.probe_attention_figure(item),
                             learn_figures.induction_figure(item.induction, item.induction_baseline))
                    yield (curve, *shown, None, NO_DOWNLOAD,
                           status(f"Step {item.step} of {settings.steps} · loss {item.loss:.3f} · {item.seconds:.0f} s",
                                  described))
                else:
                    yield finished(item, curve, shown, folder.name, described)
    finally:
        stops.release(session, stop)
        folder.cleanup()


def finished(result: LiveResult, curve, shown, folder: str, described):
    """The last update: the curve, the JSON, the zip to download (written into ``folder``), and how the job ended."""
    archive = live_training.save_zip(result, folder)
    outcome = "Stopped" if result.stopped else "Done"
    last = (f"loss {result.losses[0]:.3f} → {result.losses[-1]:.3f}" if result.losses else
            f"no loss logged: it is logged every {result.settings.log_every} steps (More choices)")
    return (curve, *shown, result.to_json(),
            str(archive),
            status(f"{outcome}: {result.steps_done} of {result.settings.steps} steps in {result.seconds:.0f} s, {last}.",
                   described, "Download the model below; the tab's last paragraph says how to load it."))


def download_ready(download):
    """After a job: the Stop button off; the download button on when the job left a model to download."""
    return gr.update(interactive=False), gr.update(interactive=download is not None)


def stop_training(request: gr.Request = None) -> None:
    """The Stop button: end this session's running job after its current step."""
    stops.stop(getattr(request, "session_hash", None))


def number(name: str, label: str, **kwargs) -> gr.Number:
    low, high = LIMITS[name]
    return gr.Number(value=getattr(DEFAULT, name), precision=0, minimum=low, maximum=high,
                     label=f"{label} ({low}–{high:,})", elem_id=f"live-{name.replace('_', '-')}", **kwargs)


def tab() -> None:
    with gr.Tab("Train one yourself", id="train-live"):
        with gr.Row():
            with gr.Column(scale=3):
                data = gr.Dropdown([(label, kind) for kind, label in DATA_KINDS.items()], value=DEFAULT.data,
                                   label="Data", elem_id="live-data")
                with gr.Row():
                    layers = gr.Radio(list(range(LIMITS["n_layers"][0], LIMITS["n_layers"][1] + 1)), value=DEFAULT.n_layers,
                                      label="Layers", elem_id="live-layers")
                    heads = number("n_heads", "Heads")
                    width = number("d_model", "d_model (a multiple of heads)")
                with gr.Row():
                    encoding = gr.Dropdown(list(POSITION_ENCODINGS), value=DEFAULT.position_encoding,
                                           label="Position encoding", elem_id="live-encoding")
                    steps = number("steps", "Steps")
                    rate = gr.Number(value=DEFAULT.learning_rate, label=f"Learning rate (above 0, at most {MAX_LEARNING_RATE:g})",
                                     elem_id="live-rate")
                text = gr.Textbox(label=f"Your own text (for the data “{DATA_KINDS['own-text']}”; at most "
                                        f"{live_training.MAX_TEXT_CHARS:,} characters)", lines=3, elem_id="live-text")
                with gr.Accordion("More choices", open=False):
                    with gr.Row():
                        batch = number("batch_size", "Batch size")
                        context = number("context_length", "Context length")
                        log_every = number("log_every", "Log every … steps")
                        seed = number("seed", "Seed")
                with gr.Row():
                    start = gr.Button("Train", variant="primary", elem_id="live-button")
                    stop = gr.Button("Stop", variant="secondary", size="sm", interactive=False, elem_id="live-stop")
                status_line = gr.Markdown(elem_id="live-status", elem_classes="status-line")
                curve = gr.Plot(label="Loss", elem_id="plot-live-loss")
                sample = gr.Textbox(label="A sample from the current weights (greedy; ⏎ marks a line break)", lines=3,
                                    max_lines=6, elem_id="live-sample")
            with gr.Column(scale=2):
                gr.Markdown(teaching.TRAIN_LIVE, elem_id="live-teaching")
        with gr.Row(elem_classes="plot-row"):
            attention = gr.Plot(label="One head's attention on the probe", elem_id="plot-live-attention")
            induction = gr.Plot(label="Induction scores", elem_id="plot-live-induction")
        with gr.Row():
            numbers = gr.JSON(label="The job (losses: one per logged step)", open=False, max_height=320, elem_id="live-json")
            download = gr.DownloadButton("Download the model (zip)", interactive=False, elem_id="live-download")
        trained_actions(download, numbers)  # Open in every tab; Push to the Hub
    request = [layers, heads, width, steps, rate, encoding, data, text, batch, context, log_every, seed]
    start.click(lambda: (gr.update(interactive=True), gr.update(interactive=False)), None, [stop, download],
                api_name="train_live_stop_on", api_visibility="private", queue=False)
    start.click(train_live, request, [curve, sample, attention, induction, numbers, download, status_line],
                api_name="train_live", show_progress="full", **TRAINING, **UNCHECKED).then(
        download_ready, download, [stop, download], api_name="train_live_stop_off", api_visibility="private", **UNCHECKED)
    stop.click(stop_training, None, None, api_name="stop_training")
