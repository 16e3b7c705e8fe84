"""What every tab shares: the event plumbing (``guarded``, ``UNCHECKED``, the concurrency groups), the status
line, the model menu, the decoding controls, the clickable HTML strips, and the page's CSS.

Every event is named (its ``api_name`` is the Space's public API), takes its inputs unprocessed
(``UNCHECKED``: the explorer checks them and says what is wrong instead of a bare error), and ends any failure
as a message in its status line, clearing the results of the request before (``guarded``).
"""

import functools
import inspect
import logging
import re
from contextlib import contextmanager
from dataclasses import dataclass

import gradio as gr

from explorer.views import attention
from explorer.generation import batching, decoding
from explorer.models import catalog
from explorer.present import clickable_html, figures
from explorer.core import inputs
from explorer.core.inputs import InputProblem
from modeling import POSITION_ENCODINGS

logger = logging.getLogger("app")

# concurrency (``explorer.core.machine.CORES`` cores, one torch thread per request): generations have slots of their own, so
# a view never waits behind a streaming generation; their handlers only stream what the model's ONE decode
# thread makes for all of them in one batch (explorer.generation.batching); the interactive views share one slot, the
# other core. The long jobs get a slot each of their own, so that however many are queued, a click on
# Generate starts at once
INTERACTIVE = dict(concurrency_id="model", concurrency_limit=1)
GENERATION = dict(concurrency_id="generation", concurrency_limit=batching.MAX_BATCH)
EXTRAPOLATION = dict(concurrency_id="extrapolation", concurrency_limit=1)
COMPARISON = dict(concurrency_id="comparison", concurrency_limit=1)
TRAINING = dict(concurrency_id="training", concurrency_limit=1)  # one live training job at a time; the rest queue
# opening models: downloads wait on the network, not the cores; their loads queue on catalog.LOAD_LOCK
OPENING = dict(concurrency_id="opening", concurrency_limit=4)
UNCHECKED = dict(preprocess=False)  # the explorer validates raw inputs and explains what is wrong

PROMPT_EXAMPLE = "Shall I compare thee to a summer's day?"
DEFAULTS = decoding.DecodingSettings(True, temperature=0.8, top_k=40, top_p=0.95, repetition_penalty=1.1,
                                       max_new_tokens=80, seed=0)  # what the Generate tab starts with

NO_FIGURE, NO_TEXT = None, ""  # what a plot or table, and a text box, show after a failed request: nothing
KEPT = gr.skip()  # a menu keeps its value


def guarded(*on_failure):
    """Run an event handler whose LAST output is a status line so that any failure ends as a message there
    (what was wrong, what is allowed), never a traceback, and the other outputs take ``on_failure`` (one
    value each): results of an earlier request are cleared rather than left looking like the answer to this
    one. Works for plain and generator (streaming) handlers."""

    def failure(error: Exception):
        if isinstance(error, InputProblem):
            message = str(error)
        else:
            logger.exception("event failed")
            message = f"Something went wrong ({inputs.error_text(error)}). The app is still running: try other input."
        return (*(dict(value) if isinstance(value, dict) else value for value in on_failure), f"⚠️ {message}")

    def wrap(fn):
        if inspect.isgeneratorfunction(fn):
            @functools.wraps(fn)
            def run_generator(*args, **kwargs):
                try:
                    yield from fn(*args, **kwargs)
                except Exception as error:  # noqa: BLE001 - every failure becomes a message
                    yield failure(error)
            return run_generator

        @functools.wraps(fn)
        def run(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except Exception as error:  # noqa: BLE001
                return failure(error)
        return run

    return wrap


def status(*lines: str) -> str:
    """A status line: one markdown bullet per non-empty line."""
    return "\n".join(f"- {line}" for line in lines if line)


def visible_breaks(sample: str) -> str:
    """A sample with its line breaks marked (⏎) and every space a text box would hide shown as ␣: at the start or
    end of a line, and in a run of two or more (an early model's sample is often such spaces alone)."""
    hidden = re.compile(r"^ +| +$| {2,}", re.MULTILINE)
    return hidden.sub(lambda m: "␣" * len(m.group()), sample).replace("\n", "⏎\n")


def decoding_of(controls: tuple):
    """The Generate tab's decoding controls as passed to another tab's event (its defaults when left out)."""
    return decoding.sanitize_decoding(*controls) if controls else (DEFAULTS, [])


def view_inputs(text, model_name, controls):
    """(text, info, model, tokenizer, decoding settings, notices) for a view of one text."""
    text, notices = inputs.require_text(text, "some text")
    settings, more = decoding_of(controls)
    info, model, tokenizer = catalog.resolve(model_name)
    return text, info, model, tokenizer, settings, notices + (more if info.is_encoder_decoder else [])


def decoder_read(rewrite: str, decoded_with: str) -> str:
    """The status line's note on what an encoder-decoder's decoder read: its own rewrite of the text."""
    return f"The decoder read the model's own rewrite ({decoded_with}, set on the Generate tab): «{inputs.echo(rewrite, 300)}»."


# ----------------------------------------------------------------------------------------------
# The model menus
# ----------------------------------------------------------------------------------------------


def session_of(request) -> str | None:
    """The browser session of a request (None outside one): whose own opened models a menu lists."""
    return getattr(request, "session_hash", None)


def menus_now(session: str | None = None):
    """(choices, default value, status line) of the model menus: the checkpoints on disk now, then the models opened
    in the app that this browser session sees (everyone's from the Hub, and its own)."""
    found, results = catalog.discover_checkpoints(), catalog.read_results()
    notes = [] if found else [catalog.no_checkpoints_message()]
    damaged = [f"⚠ {info.name} cannot be used: {'; '.join(info.problems)}"
               for info in found.values() if not info.usable]
    missing = [e for e in POSITION_ENCODINGS if e not in catalog.encoding_models(found)]
    if found and missing:
        notes.append(f"No usable checkpoint yet for: {', '.join(missing)}.")
    if results.notice:
        notes.append(results.notice)
    usable = [name for name, info in found.items() if info.usable]
    summary = f"{len(usable)} model(s) ready: {', '.join(usable)}." if usable else ""
    opened = catalog.opened_choices(session)
    if opened:
        summary += f" Opened in the app: {', '.join(inputs.echo(name, 60) for _, name in opened)}."
    return (catalog.menu_choices(found, results) + opened, catalog.default_model(found, results),
            status(summary, *damaged, *notes))


def decoder_only(choices, value) -> tuple[list[tuple[str, str]], str | None]:
    """A menu's choices and value kept to the decoder-only models (what reads one text and predicts its next
    token: every model opened in the app is one); the value None when it names an encoder-decoder."""
    found = catalog.discover_checkpoints()
    kept = [(label, name) for label, name in choices
            if (name in found and not found[name].is_encoder_decoder) or catalog.is_opened(name)]
    return kept, value if value in [name for _, name in kept] else None


def menu_updates(n_menus: int, n_decoder_menus: int, session: str | None, value=None):
    """Updates for ``n_menus`` model menus and ``n_decoder_menus`` decoder-only ones, listing what ``session`` sees,
    set to ``value`` (None: the default model), and the status line."""
    choices, default, note = menus_now(session)
    value = value if value in [name for _, name in choices] else default
    decoders, decoder_value = decoder_only(choices, value)
    return (*(gr.update(choices=choices, value=value) for _ in range(n_menus)),
            *(gr.update(choices=decoders, value=decoder_value) for _ in range(n_decoder_menus)), note)


def catalog_event(n_menus: int, n_decoder_menus: int = 0):
    """The page-load event: refresh ``n_menus`` model menus, then ``n_decoder_menus`` of decoder-only models,
    from the checkpoints on disk and the models opened in the app, and say what is missing or damaged (the page
    was built with them filled; this picks up checkpoints added since)."""

    @guarded(*[KEPT] * (n_menus + n_decoder_menus))
    def load_catalog(request: gr.Request = None):
        return menu_updates(n_menus, n_decoder_menus, session_of(request))

    return load_catalog


def model_note(name, request: gr.Request = None) -> str:
    """The chosen model's line in full, under its menu (a menu shows only the start of a long line)."""
    choices = catalog.menu_choices(catalog.discover_checkpoints(), catalog.read_results())
    lines = {value: label for label, value in choices + catalog.opened_choices(session_of(request))}
    return lines.get(name, "") if isinstance(name, str) else ""


def model_menu(elem_id: str, choices, value) -> gr.Dropdown:
    """A model menu with its chosen model's line written out beneath it."""
    menu = gr.Dropdown(choices=choices, value=value, label="Model", elem_id=elem_id)
    note = gr.Markdown(dict((v, label) for label, v in choices).get(value, ""), elem_id=f"{elem_id}-note",
                       elem_classes="model-note")
    menu.change(model_note, menu, note, api_name=f"{elem_id.replace('-', '_')}_note", api_visibility="private", **UNCHECKED)
    return menu


@contextmanager
def text_and_model(prefix: str, example: str, choices, value):
    """The row a view of one text opens with: the text box ``<prefix>-text``, and beside it the model menu
    ``<prefix>-model`` with whatever the tab puts under it (its options, its button). Yields (text, menu)."""
    with gr.Row():
        text = gr.Textbox(label="Text", value=example, lines=2, scale=4, elem_id=f"{prefix}-text")
        with gr.Column(scale=2):
            yield text, model_menu(f"{prefix}-model", choices, value)


def rewrites(name) -> bool:
    """Whether the model called ``name`` is an encoder-decoder (folio-to-modern), which rewrites its input."""
    info = catalog.discover_checkpoints().get(name) if isinstance(name, str) else None
    return bool(info and info.is_encoder_decoder)


def kind_choices(model_name, current=None):
    """The attention kinds of the picked model for a kind menu (keeping the current one where it exists)."""
    info = catalog.discover_checkpoints().get(model_name) if isinstance(model_name, str) else None
    kinds = attention.kinds_of(bool(info and info.is_encoder_decoder))
    return gr.update(choices=[(attention.ATTENTION_KINDS[k].label, k) for k in kinds],
                     value=current if current in kinds else kinds[-1])


def kind_menu(elem_id: str, label: str = "Attention") -> gr.Dropdown:
    """An attention-kind menu that accepts any value: its choices follow the model (``kind_choices``)."""
    return gr.Dropdown([(attention.ATTENTION_KINDS["self"].label, "self")], value="self", allow_custom_value=True,
                       label=label, elem_id=elem_id)


# ----------------------------------------------------------------------------------------------
# The decoding controls: on the Generate tab, read by every view of an encoder-decoder
# ----------------------------------------------------------------------------------------------


@dataclass
class DecodingControls:
    """The Generate tab's decoding widgets; the other tabs' encoder-decoder views decode with them too."""

    mode: gr.Radio
    temperature: gr.Slider
    top_k: gr.Slider
    top_p: gr.Slider
    repetition_penalty: gr.Slider
    max_new_tokens: gr.Number
    seed: gr.Number

    @classmethod
    def build(cls) -> "DecodingControls":
        """The widgets, set to ``DEFAULTS``, where the current layout context puts them."""
        return cls(
            gr.Radio(["Sampling", "Greedy"], value="Sampling", label="Decoding", elem_id="gen-mode"),
            gr.Slider(0.0, 2.0, value=DEFAULTS.temperature, step=0.05, label="Temperature (0 = greedy)", elem_id="gen-temperature"),
            gr.Slider(0, 200, value=DEFAULTS.top_k, step=1, label="Top-k (0 = off)", elem_id="gen-top-k"),
            gr.Slider(0.0, 1.0, value=DEFAULTS.top_p, step=0.01, label="Top-p (1 = off)", elem_id="gen-top-p"),
            gr.Slider(1.0, 2.0, value=DEFAULTS.repetition_penalty, step=0.05, label="Repetition penalty (1 = off)"),
            gr.Number(value=DEFAULTS.max_new_tokens, precision=0, minimum=1, maximum=decoding.MAX_NEW_TOKENS,
                      label=f"Max new tokens (1–{decoding.MAX_NEW_TOKENS})", elem_id="gen-max-new"),
            gr.Number(value=DEFAULTS.seed, precision=0, minimum=inputs.SEED_RANGE[0], maximum=inputs.SEED_RANGE[1],
                      label=f"Seed (sampling; 0–{inputs.SEED_RANGE[1]:,})", elem_id="gen-seed"),
        )

    def all(self) -> list:
        return [self.mode, self.temperature, self.top_k, self.top_p, self.repetition_penalty, self.max_new_tokens, self.seed]


def sampling_controls(n: int):
    """An event handler for a Decoding radio: in Greedy mode its ``n`` sampling controls (temperature, top-k,
    top-p, seed) are disabled, since greedy decoding takes the most likely token and they do nothing."""

    def toggle(mode):
        update = gr.update(interactive=not (isinstance(mode, str) and mode.strip().lower().startswith("greedy")))
        return update if n == 1 else tuple(dict(update) for _ in range(n))

    return toggle


# ----------------------------------------------------------------------------------------------
# Clickable HTML: token strips and head grids
# ----------------------------------------------------------------------------------------------


def clickable(elem_id: str) -> gr.HTML:
    """A gr.HTML whose items (data-layer/data-head, data-index) send click events (``clickable_html.CLICK_JS``)."""
    return gr.HTML(elem_id=elem_id, js_on_load=clickable_html.CLICK_JS, css_template=clickable_html.CSS)


def clicked(field: str):
    """The handler of a click on a clickable gr.HTML (``clickable_html.CLICK_JS``): the clicked item's number."""
    def pick(evt: gr.EventData):
        return int(getattr(evt, field))
    pick.__name__ = f"clicked_{field}"
    return pick


CSS = "\n".join([
    # the theme's first font, Source Sans Pro, may arrive as a subset with a few glyphs in its semibold cut: a heading
    # then mixes two fonts ("A" in one, the rest in another); the system's sans-serif has every glyph in every weight
    ":root, .gradio-container {--font: ui-sans-serif, system-ui, sans-serif !important}",
    ".status-line {min-height: 1.5em}",
    ".plot-row {gap: 8px}",
    ".monospace textarea {font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace !important}",
    # lines aligned token under token (the guesses) scroll sideways rather than wrap out of alignment
    ".aligned textarea {white-space: pre !important; overflow-x: auto !important}",
    "#experiment-tables table {display: block; overflow-x: auto; max-width: 100%}",
    "#experiment-tables td, #experiment-tables th {white-space: nowrap; word-break: normal !important}",
    ".model-note {font-size: 0.85em; color: var(--body-text-color-subdued)}",
    "#trace-table [role=gridcell], #trace-table [role=gridcell] *, #trace-table [role=columnheader] * {font-family: var(--font)"
    " !important; font-size: 13px; word-break: normal !important; overflow-wrap: normal !important}",
    *(f"#compare-{e} textarea {{border-left: 5px solid {c}}} #compare-{e} label span {{color: {c}; font-weight: 600}}"
      for e, c in figures.ENCODING_COLOURS.items()),
])
