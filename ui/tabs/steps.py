"""The Attention, step by step tab: the notes' worked example done right (no model needed), then one head and one
query token of the user's text, every step of the attention computation with the model's own numbers."""

import gradio as gr

from explorer.views import attention, steps
from explorer.core import inputs
from explorer.core.parity import Parity
from explorer.present import clickable_html, concepts, steps as present
from explorer.views.worked_example import worked_example as compute_worked_example

from ui.controls import DecodingControls, clickable, clicked, decoder_read, view_inputs
from ui.events import INTERACTIVE, NO_TEXT, UNCHECKED, guarded, status
from ui.menus import kind_choices, kind_menu, text_and_model
from ui.tab import TabParts

STEPS_EXAMPLE = "To be, or not to be, that is the question"


def worked_example():
    """The notes' Hello World example, computed with the model's own functions (no model needed)."""
    example, where_wrong = compute_worked_example()
    return where_wrong, present.steps_html(example)


@guarded(strip=NO_TEXT, body=NO_TEXT)
def attention_steps(text, model_name, kind, layer, head, query, full_precision, *decoding):
    """One head, one query token: every step of the attention computation with the model's numbers."""
    text, info, model, tokenizer, settings, notices = view_inputs(text, model_name, decoding)
    view = steps.attention_steps(model, tokenizer, text, kind, layer, head, query, settings)
    return (clickable_html.token_strip_html(view.query_tokens, view.query),
            present.steps_html(view.steps, full=full_precision is True, architecture=view.architecture),
            status(f"**{info.name}**, {attention.ATTENTION_KINDS[view.kind].label}, layer {view.layer}, head {view.head}, query "
                   f"token {inputs.echo(view.query_tokens[view.query])}: {len(view.steps)} steps; {_agreement(view.parity)}. "
                   "Click a token to follow another query.",
                   decoder_read(view.rewrite, view.decoded_with) if info.is_encoder_decoder else "",
                   *notices, *view.notices))


def _agreement(parity: Parity) -> str:
    """How the recomputed numbers stand against the model's own, all steps together."""
    said = f"within {parity.gap:.1e} (on numbers up to {parity.size:.2g}"
    if parity.rounding:
        return f"every number the model also computed matches it {said}: float32 rounding)"
    return f"a number the model also computed is not matched {said}: more than rounding, report it)"


def tab(choices, value, decoding: DecodingControls) -> TabParts:
    """The tab; its model menu."""
    with gr.Tab("Attention, step by step", id="steps") as panel:
        gr.Markdown(present.STEPS.split("\n\n")[0])
        with gr.Accordion("Worked example: attention on “Hello World” by hand (no model needed)", open=True) as example_box:
            gr.Markdown(present.WORKED_EXAMPLE)
            example_wrong = gr.Markdown(elem_id="example-wrong")
            example_steps = gr.HTML(elem_id="example-steps", css_template=clickable_html.CSS)
        with text_and_model("steps", STEPS_EXAMPLE, choices, value) as (text, menu):
            kind = kind_menu("steps-kind")
        with gr.Row():
            layer = gr.Number(value=0, precision=0, label="Layer (−1: last)", elem_id="steps-layer", min_width=100)
            head = gr.Number(value=0, precision=0, label="Head", elem_id="steps-head", min_width=100)
            query = gr.Number(value=-1, precision=0, label="Query token (−1: last)", elem_id="steps-query", min_width=100)
            full = gr.Checkbox(label="Every digit (float32)", value=False, elem_id="steps-full")
            button = gr.Button("Show the steps", variant="primary", elem_id="steps-button")
        strip = clickable("steps-tokens")
        status_line = gr.Markdown(elem_id="steps-status", elem_classes="status-line")
        body = gr.HTML(elem_id="steps-body", css_template=clickable_html.CSS)
        with gr.Accordion("The concepts behind these steps", open=False):
            gr.Markdown("\n\n".join(concepts.CONCEPTS))
    request, outputs = [text, menu, kind, layer, head, query, full, *decoding.all()], [strip, body, status_line]
    panel.select(worked_example, None, [example_wrong, example_steps], api_name="worked_example")
    menu.change(kind_choices, [menu, kind], kind, api_name="steps_kinds", api_visibility="private", **UNCHECKED)
    gr.on([button.click, full.input], attention_steps, request, outputs, api_name="attention_steps", **INTERACTIVE, **UNCHECKED)
    button.click(lambda: gr.Accordion(open=False), None, example_box, api_name="steps_fold_example", api_visibility="private")
    strip.click(clicked("index"), None, query, api_name="steps_pick_query", api_visibility="private").then(
        attention_steps, request, outputs, api_name="attention_steps_query", **INTERACTIVE, **UNCHECKED)
    return TabParts(menus=(menu,))
