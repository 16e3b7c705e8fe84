"""The Train one yourself tab: a tiny Transformer trained from scratch in the app (``explorer.learning.train_live``),
streamed at every logged step: the loss curve, a sample, one head's attention on the probe, every head's
induction score. One job runs at a time (its own queue); Stop, or leaving the page, ends it; the trained model
is offered as a zip of its ``save_pretrained`` folder."""

import math
import tempfile
import threading
from contextlib import closing

import gradio as gr

from explorer.models import registry
from explorer.generation import decoding
from explorer.present import train_live as present
from explorer.learning import live_data, live_result, live_settings, live_snapshots
from explorer.learning import train_live as live  # the loop; this tab's handler is train_live, its endpoint's name
from explorer.core.inputs import InputProblem
from explorer.learning.live_data import SPECIAL_IDS
from explorer.learning.live_result import LiveResult
from explorer.learning.live_settings import DATA_KINDS, DEFAULT, LIMITS, MAX_LEARNING_RATE
from explorer.learning.live_snapshots import THRESHOLD, Snapshot
from modeling import POSITION_ENCODINGS

from ui import trained_model
from ui.controls import DecodingControls
from ui.events import NO_FIGURE, NO_TEXT, TRAINING, UNCHECKED, guarded, status, visible_breaks
from ui.tab import TabParts

CHOICES = ("n_layers", "n_heads", "d_model", "steps", "learning_rate", "position_encoding", "data", "text",
           "batch_size", "context_length", "log_every", "seed", "vocab_size", "copy_share", "attention_only",
           "copies_only", "preset")  # the endpoint's parameters, in order (the later ones may be left out)
NO_DOWNLOAD = None  # the download button holds no file (and is disabled: ``download_ready``)
NO_JSON = None  # the JSON of the job, before it ends or after a failure
YOUR_CHOICES = ""  # the preset menu's "no preset": the choices as set below it
ROW_TOKENS = 8  # tokens per row of a random-token sample and the copy under it

stops = decoding.StopRegistry()  # browser session -> its running job's stop flag
running = threading.Semaphore(TRAINING["concurrency_limit"])  # held by the running job: who is waiting is told


def sample_text(sample: live_snapshots.Sample) -> str:
    """The prompt and what the model wrote, each on a line of its own; for random tokens also what a copy would
    be, each token under the one it is compared with, and how many the model got right."""
    if not sample:
        return NO_TEXT
    if not sample.copy:
        return f"Prompt: {visible_breaks(''.join(sample.prompt))}\nWrites: {visible_breaks(''.join(sample.tokens))}"
    width = max(len(t) for t in [*sample.tokens, *sample.copy])
    row = lambda tokens: " ".join(t.rjust(width) for t in tokens)
    pairs = [f"Writes: {row(sample.tokens[i:i + ROW_TOKENS])}\nA copy: {row(sample.copy[i:i + ROW_TOKENS])}"
             for i in range(0, len(sample.tokens), ROW_TOKENS)]  # short rows: a narrow page does not wrap them
    return f"Prompt: {' '.join(sample.prompt)}\n" + "\n".join(pairs) + f"\n{sample.right} of {len(sample.tokens)} right."


def preset_values(preset: str) -> list:
    """The tab's controls set to a preset's choices (its other controls unchanged)."""
    chosen = live_settings.PRESETS[preset][1] if preset else {}
    return [gr.update(value=chosen[name]) if name in chosen else gr.update() for name in CHOICES[:-1]]


def waiting_note() -> str:
    """Said at a click while another job holds the machine."""
    if running.acquire(blocking=False):
        running.release()
        return ""
    return status("Waiting: another learner's training job is running on this machine (one job at a time). "
                  "Yours starts as soon as it ends; Gradio's counter shows your place in the queue.")


def uniform_loss(settings, tokenizer) -> float:
    """ln V: the loss of guessing every token of the data's vocabulary equally."""
    return math.log(len(tokenizer) if tokenizer is not None else settings.vocab_size - SPECIAL_IDS)


@guarded(curve=NO_FIGURE, sample=NO_TEXT, attention=NO_FIGURE, induction=NO_FIGURE, numbers=NO_JSON, download=NO_DOWNLOAD)
def train_live(n_layers, n_heads, d_model, steps, learning_rate, position_encoding, data, text, batch_size=None,
               context_length=None, log_every=None, seed=None, vocab_size=None, copy_share=None, attention_only=None,
               copies_only=None, preset=None, request: gr.Request = None):
    """Train a fresh model with these choices (the ones left out take the defaults; a ``preset`` sets its own),
    streaming a snapshot at every logged step; the last update holds the JSON (``losses`` one per step from step
    0) and the zip."""
    values = dict(zip(CHOICES, (n_layers, n_heads, d_model, steps, learning_rate, position_encoding, data, text,
                                batch_size, context_length, log_every, seed, vocab_size, copy_share, attention_only,
                                copies_only, preset)))
    if preset:  # the preset's choices (the menu filled the controls with them; editing one leaves the preset)
        values = {"preset": preset}
    elif learning_rate is None:
        raise InputProblem(f"Type a learning rate: greater than 0, at most {MAX_LEARNING_RATE:g}.")
    settings = live_settings.check_settings(**values)
    tokenizer = None
    if settings.data in live_settings.TEXT_KINDS:  # text is read with the shipped main model's tokenizer
        registry.resolve(live_data.TOKENIZER_MODEL)  # there and usable, else a message naming what there is
        tokenizer = live_data.shipped_tokenizer()  # the job's own copy: a fast tokenizer is not shared across threads
    uniform = uniform_loss(settings, tokenizer)
    described = (f"{settings.n_layers} layer(s), {settings.n_heads} heads, d_model {settings.d_model}"
                 f"{', attention only' if settings.attention_only else ''}, {settings.position_encoding} positions, "
                 f"{DATA_KINDS[settings.data]}{', loss on the copies only' if settings.copies_only else ''}, "
                 f"learning rate {settings.learning_rate:g}")
    session, stop = getattr(request, "session_hash", None), threading.Event()
    stops.register(session, stop)
    # The zip is written into a folder of this job's own; gradio copies a returned file into its cache before it
    # asks the generator for more, so the folder goes when the job does.
    folder = tempfile.TemporaryDirectory(prefix="live-model-")
    running.acquire()
    try:  # a client that leaves closes this generator, which closes the job's, which stops the training loop
        yield (present.loss_curve_figure([], [], settings.steps, uniform, settings.copies_only), NO_TEXT,
               NO_FIGURE, NO_FIGURE, None, NO_DOWNLOAD, status(f"Starting: a fresh model ({described})…"))
        with closing(live.train_live(settings, stop, tokenizer=tokenizer)) as job:
            shown = (NO_TEXT, NO_FIGURE, NO_FIGURE)  # the last snapshot's sample, attention and induction scores
            formed = None  # the first snapshot with an induction head: (layer, head, score, step)
            for item in job:
                curve = present.loss_curve_figure(item.logged_steps, item.losses, settings.steps, uniform,
                                                        settings.copies_only)
                if isinstance(item, Snapshot):
                    formed = formed or live_snapshots.formed_head(item.induction, item.step)
                    shown = (sample_text(item.sample), present.probe_attention_figure(item),
                             present.induction_figure(item.induction, item.induction_baseline))
                    yield (curve, *shown, None, NO_DOWNLOAD,
                           status(f"Step {item.step} of {settings.steps} · loss {item.loss:.3f} · {item.seconds:.0f} s",
                                  described, f"The attention plot shows L{item.layer}.H{item.head}: {item.watched}.",
                                  *formed_line(formed)))
                else:
                    yield finished(item, curve, shown, folder.name, described, formed)
    finally:
        running.release()
        stops.release(session, stop)
        folder.cleanup()


def formed_line(formed) -> list[str]:
    """The status line naming the induction head, once one has formed (``explorer.learning.train_live_snapshots.formed_head``)."""
    if formed is None:
        return []
    layer, head, score, step = formed
    return [f"An induction head formed: L{layer}.H{head} scored {score:.2f} (at least {THRESHOLD}) at step {step:,}."]


def finished(result: LiveResult, curve, shown, folder: str, described, formed=None):
    """The last update: the curve, the JSON, the zip to download (written into ``folder``), and how the job ended."""
    archive = live_result.save_zip(result, folder)
    outcome = "Stopped" if result.stopped else "Done"
    last = (f"loss {result.losses[0]:.3f} at step 0 → {result.losses[-1]:.3f} at step {result.logged_steps[-1]}"
            if len(result.losses) > 1 else "stopped before its first step")
    return (curve, *shown, result.to_json(),
            str(archive),
            status(f"{outcome}: {result.steps_done} of {result.settings.steps} steps in {result.seconds:.0f} s, {last}.",
                   described, *formed_line(formed), "Download the model below; the tab's last paragraph says how to load it."))


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


def tab(choices, value, decoding: DecodingControls | None) -> TabParts:
    """The tab (no model menu: it trains a fresh model); the trained model's actions, for the page to wire."""
    with gr.Tab("Train one yourself", id="train-live"):
        with gr.Row():
            with gr.Column(scale=3):
                preset = gr.Dropdown([("Your choices below", YOUR_CHOICES)] + [(label, key) for key, (label, _) in
                                                                              live_settings.PRESETS.items()],
                                     value=YOUR_CHOICES, label="One click: a setting we measured (it fills the choices)",
                                     elem_id="live-preset")
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
                with gr.Row():
                    attention_only = gr.Checkbox(value=DEFAULT.attention_only, label="Attention only (no feed-forward)",
                                                 elem_id="live-attention-only")
                    copies_only = gr.Checkbox(value=DEFAULT.copies_only, label="Loss on the copies only",
                                              elem_id="live-copies-only")
                text = gr.Textbox(label=f"Your own text (for the data “{DATA_KINDS['own-text']}”; at most "
                                        f"{live_settings.MAX_TEXT_CHARS:,} characters)", lines=3, elem_id="live-text")
                with gr.Accordion("More choices", open=False):
                    with gr.Row():
                        vocab = number("vocab_size", "Vocabulary size (random tokens; 3 are special)")
                        share = gr.Number(value=DEFAULT.copy_share, minimum=0.02, maximum=0.5,
                                          label="Share of copied tokens (0.02–0.5)", elem_id="live-copy-share")
                        batch = number("batch_size", "Batch size")
                        context = number("context_length", "Context length")
                        log_every = number("log_every", "Snapshot every … steps")
                        seed = number("seed", "Seed")
                with gr.Row():
                    start = gr.Button("Train", variant="primary", elem_id="live-button")
                    stop = gr.Button("Stop", variant="secondary", size="sm", interactive=False, elem_id="live-stop")
                status_line = gr.Markdown(elem_id="live-status", elem_classes="status-line")
                curve = gr.Plot(label="Loss", elem_id="plot-live-loss")
                sample = gr.Textbox(label=present.sample_label(DEFAULT.data), lines=3, max_lines=6, elem_id="live-sample",
                                    elem_classes="monospace")
            with gr.Column(scale=2):
                gr.Markdown(present.TRAIN_LIVE, elem_id="live-teaching")
        with gr.Row(elem_classes="plot-row"):
            attention = gr.Plot(label="One head's attention on the probe", elem_id="plot-live-attention")
            induction = gr.Plot(label="Induction scores", elem_id="plot-live-induction")
        with gr.Row():
            numbers = gr.JSON(visible=False, elem_id="live-json")  # the API's numbers; the plots show them
            download = gr.DownloadButton("Download the model (zip)", interactive=False, elem_id="live-download")
        trained = trained_model.panel(download, numbers)  # Open in every tab; Push to the Hub
    request = [layers, heads, width, steps, rate, encoding, data, text, batch, context, log_every, seed, vocab, share,
               attention_only, copies_only, preset]
    preset.change(preset_values, preset, request[:-1], api_name="train_live_preset", api_visibility="private",
                  queue=False)
    gr.on([control.input for control in request[:-1]], lambda: YOUR_CHOICES, None, preset,  # an edited choice
          api_name="train_live_leave_preset", api_visibility="private", queue=False)  # leaves the preset
    # Stop on and the waiting note first, chained: a second listener could land after training's first status
    start.click(lambda: (gr.update(interactive=True), gr.update(interactive=False), waiting_note()), None,
                [stop, download, status_line], api_name="train_live_stop_on", api_visibility="private", queue=False).then(
        train_live, request, [curve, sample, attention, induction, numbers, download, status_line],
        api_name="train_live", show_progress="full", **TRAINING, **UNCHECKED).then(
        download_ready, download, [stop, download], api_name="train_live_stop_off", api_visibility="private", **UNCHECKED)
    stop.click(stop_training, None, None, api_name="stop_training")
    data.change(lambda kind: gr.update(label=present.sample_label(kind)), data, sample, api_name="train_live_sample_label",
                api_visibility="private", queue=False)
    return TabParts(trained=trained)
