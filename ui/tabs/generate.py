"""The Generate tab: a prompt continued (or, for an encoder-decoder, rewritten line by line), streamed token by
token, with the decoding controls the other tabs' encoder-decoder views read too, and a Stop button."""

import threading
from contextlib import closing

import gradio as gr

from explorer.models import catalog, registry
from explorer.generation import decoding, streaming
from explorer.core import inputs
from explorer.present import generate as present

from ui.controls import PROMPT_EXAMPLE, DecodingControls, sampling_controls
from ui.events import GENERATION, NO_TEXT, UNCHECKED, guarded, status
from ui.menus import model_menu, rewrites
from ui.tab import TabParts

FOLIO_EXAMPLE = "Shall I compare thee to a Summers day?\nThou art more louely and more temperate:"  # rewritten line by line

stops = decoding.StopRegistry()


@guarded(output=NO_TEXT)
def generate(prompt, model_name, mode, temperature, top_k, top_p, repetition_penalty, max_new_tokens, seed,
             request: gr.Request = None):
    """Stream the prompt and its continuation (or, for an encoder-decoder, the rewrite) token by token
    (``streaming.stream_generation``); the Stop button sets this session's flag."""
    text, notices = inputs.require_text(prompt)
    settings, more = decoding.sanitize_decoding(mode, temperature, top_k, top_p, repetition_penalty, max_new_tokens, seed)
    info, model, tokenizer = registry.resolve(model_name)
    notices += more
    session, stop = getattr(request, "session_hash", None), threading.Event()
    stops.register(session, stop)
    try:  # a client that leaves closes this generator, which closes the stream, which stops generate()
        with closing(streaming.stream_generation(model, tokenizer, text, settings, stop)) as stream:
            for state in stream:
                yield state.text, status(headline(state, info.name, settings), *notices, *state.notices)
    finally:
        stops.release(session, stop)


def headline(state: streaming.StreamState, name: str, settings: decoding.DecodingSettings) -> str:
    """The status line's first line for one update of the stream: a line starting, the count and speed so far,
    or the outcome with the whole generation's statistics."""
    line = f"line {state.line + 1} of {state.n_lines}, " if state.n_lines > 1 else ""
    if state.stats is not None:
        return f"{'Stopped' if state.stopped else 'Done'}: {state.stats.describe()} · {settings.describe()}"
    if state.starting:
        return (f"Generating with **{name}** ({line}{decoding.token_count(state.prompt_tokens)} of prompt, "
                f"{settings.describe()})…")
    return f"{line}{decoding.token_count(state.n_tokens)} · {state.tokens_per_second:.1f} tokens/s"


def stop_generation(request: gr.Request = None) -> None:
    """The Stop button: end this session's running generation after its current token."""
    stops.stop(getattr(request, "session_hash", None))


def folio_example():
    """Two First Folio lines, the encoder-decoder model, and greedy decoding without a repetition penalty: how
    its figures (results.json, the model menu) were measured. A rewrite repeats its source's words by design."""
    return FOLIO_EXAMPLE, catalog.seq2seq_model(catalog.discover_checkpoints()) or gr.skip(), "Greedy", 1.0


def generate_labels(name) -> decoding.GenerateLabels:
    """The Generate tab's labels for the model called ``name`` (a rewrite for an encoder-decoder)."""
    return decoding.GenerateLabels.of(rewrites(name))


def example_prompt(name) -> str:
    """The example the prompt starts with for the model called ``name``: First Folio lines for an encoder-decoder,
    which rewrites them into modern spelling (a modern line would come back unchanged), else a line to continue."""
    return FOLIO_EXAMPLE if rewrites(name) else PROMPT_EXAMPLE


def generate_boxes(name, prompt=None):
    """The prompt's and the output's labels and the rewrite note, following the model menu; a prompt that still
    holds one kind of model's example (``example_prompt``) becomes the picked model's, a text the learner typed stays."""
    labels = generate_labels(name)
    example = example_prompt(name)
    swap = dict(value=example) if prompt in (PROMPT_EXAMPLE, FOLIO_EXAMPLE) and prompt != example else {}
    return (gr.update(label=labels.prompt, **swap), gr.update(label=labels.output),
            gr.update(visible=labels.rewrite_note))


def tab(choices, value, decoding: DecodingControls | None) -> TabParts:
    """The tab; its model menu and the decoding controls it builds, which the views after it read (``decoding`` is
    None: Generate comes first)."""
    with gr.Tab("Generate", id="generate"):
        with gr.Row():
            with gr.Column(scale=3):
                labels = generate_labels(value)
                prompt = gr.Textbox(label=labels.prompt, lines=4, value=example_prompt(value), elem_id="gen-prompt")
                with gr.Row():
                    generate_button = gr.Button("Generate", variant="primary", elem_id="gen-button")
                    # small and grey, clickable only while a generation runs (the events below)
                    stop_button = gr.Button("Stop", variant="secondary", size="sm", interactive=False, elem_id="gen-stop")
                    folio_button = gr.Button("Folio example", size="sm", elem_id="gen-folio")
                gen_status = gr.Markdown(elem_id="gen-status", elem_classes="status-line")
                output = gr.Textbox(label=labels.output, lines=10, elem_id="gen-output")
                folio_note = gr.Markdown(present.FOLIO_REWRITE, visible=labels.rewrite_note, elem_id="gen-folio-note")
            with gr.Column(scale=2):
                menu = model_menu("gen-model", choices, value)
                controls = DecodingControls.build()
    request = [prompt, menu, *controls.all()]
    for trigger, name in ((generate_button.click, "generate"), (prompt.submit, "generate_submit")):
        # Stop is enabled before the generation starts (chained, not a second listener that could land after the
        # first tokens), and disabled once it ends
        trigger(lambda: gr.update(interactive=True), None, stop_button, api_name=f"{name}_stop_on", api_visibility="private",
                queue=False).then(
            generate, request, [output, gen_status], api_name=name, **GENERATION, **UNCHECKED).then(
            lambda: gr.update(interactive=False), None, stop_button, api_name=f"{name}_stop_off", api_visibility="private")
    menu.change(generate_boxes, [menu, prompt], [prompt, output, folio_note], api_name="generate_labels", api_visibility="private",
                **UNCHECKED)
    stop_button.click(stop_generation, None, None, api_name="stop_generation")
    folio_button.click(folio_example, None, [prompt, menu, controls.mode, controls.repetition_penalty],
                       api_name="folio_example")
    controls.mode.change(sampling_controls(4), controls.mode, [controls.temperature, controls.top_k, controls.top_p, controls.seed],
                         api_name="decoding_mode", api_visibility="private", **UNCHECKED)
    return TabParts(menus=(menu,), decoding=controls)
