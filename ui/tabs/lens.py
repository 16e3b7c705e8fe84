"""The Logit lens tab: the residual stream after the embeddings and after each layer, read through the model's own
final norm and unembedding: the top 5 next tokens per layer at one position, and the probability of the actual
next token at every position and layer (``explorer.views.lens``)."""

import gradio as gr

from explorer.views import lens
from explorer.present import clickable_html, lens as present
from explorer.generation.tokens import numbered

from ui.controls import PROMPT_EXAMPLE, DecodingControls, clickable, clicked, decoder_read, view_inputs
from ui.events import INTERACTIVE, NO_FIGURE, NO_TEXT, UNCHECKED, guarded, say_doing, status
from ui.menus import text_and_model
from ui.tab import TabParts


@guarded(strip=NO_TEXT, table=NO_TEXT, plot=NO_FIGURE)
def logit_lens(text, model_name, position, *decoding):
    """Top 5 next tokens per layer at one position; the probability of the actual next token everywhere."""
    text, info, model, tokenizer, settings, notices = view_inputs(text, model_name, decoding)
    say_doing(f"Reading every layer's residual stream of {info.name} through its final norm and LM head")
    result = lens.logit_lens(model, tokenizer, text, position, settings)
    return (clickable_html.token_strip_html(numbered(result.tokens), result.position), present.lens_table_html(result),
            present.lens_heatmap(result),
            status(f"**{info.name}**: {len(result.rows)} read-outs (the embeddings and {len(result.rows) - 1} layers) of "
                   f"{len(result.tokens)} tokens; the last row is the model's own prediction. Click a token to read after it.",
                   decoder_read(result.rewrite, result.decoded_with) if info.is_encoder_decoder else "",
                   *notices, *result.notices))


def tab(choices, value, decoding: DecodingControls) -> TabParts:
    """The tab; its model menu."""
    with gr.Tab("Logit lens", id="lens"):
        gr.Markdown(present.LENS)
        with text_and_model("lens", PROMPT_EXAMPLE, choices, value) as (text, menu):
            position = gr.Number(value=-1, precision=0, label="Position (−1: last)", elem_id="lens-position")
            button = gr.Button("Read every layer", variant="primary", elem_id="lens-button")
        strip = clickable("lens-tokens")
        status_line = gr.Markdown(elem_id="lens-status", elem_classes="status-line")
        table = gr.HTML(elem_id="lens-table", css_template=clickable_html.CSS)
        plot = gr.Plot(label="Probability of the actual next token", elem_id="plot-lens")
    request, outputs = [text, menu, position, *decoding.all()], [strip, table, plot, status_line]
    button.click(logit_lens, request, outputs, api_name="logit_lens", **INTERACTIVE, **UNCHECKED)
    strip.click(clicked("index"), None, position, api_name="lens_pick_position", api_visibility="private").then(
        logit_lens, request, outputs, api_name="logit_lens_position", **INTERACTIVE, **UNCHECKED)
    return TabParts(menus=(menu,))
