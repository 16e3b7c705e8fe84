"""The Inside the forward pass tab: the real shape of every step of one forward pass over the user's text, in the
order the model computed them, and the next-token chart."""

import gradio as gr

from explorer.models import catalog
from explorer.present import figures, trace as present
from explorer.views import trace

from ui.controls import PROMPT_EXAMPLE, DecodingControls, decoder_read, view_inputs
from ui.events import INTERACTIVE, NO_FIGURE, NO_TEXT, UNCHECKED, guarded, status
from ui.menus import text_and_model
from ui.tab import TabParts

TRACE_HEADERS = ["stack", "step", "shape", "dimensions", "what it is", "where in the model's output"]  # present.trace_table's columns


@guarded(table=NO_FIGURE, top_plot=NO_FIGURE, summary=NO_TEXT)
def trace_forward(text, model_name, *decoding):
    """The real shape of every step of one forward pass over the user's text, and the next-token chart."""
    text, info, model, tokenizer, settings, notices = view_inputs(text, model_name, decoding)
    steps = trace.forward_trace(model, tokenizer, text, settings)
    last = steps.decoder_tokens[-1] if steps.decoder_tokens else ""
    summary = [catalog.config_summary(info.name, model.config),
               f"Logits from the model's output: **{steps.logits_shape}**. Every shape below is read from the recording "
               "of this pass (`with record() as recording: model(...)`): layer 0 in detail, then every "
               "layer's output. The last column says where: `layers[0] › self_attention › query` is "
               "`recording.decoder.layers[0].self_attention.query`."]
    if info.is_encoder_decoder:
        summary.append(decoder_read(steps.rewrite, steps.decoded_with))
    chart = figures.top_tokens_figure(steps.top_next, f"“{last}” (the last token the decoder read)")
    return (present.trace_table(steps), chart, "\n\n".join(summary),
            status(*notices, *steps.notices) or "Forward pass done.")


def tab(choices, value, decoding: DecodingControls) -> TabParts:
    """The tab; its model menu."""
    with gr.Tab("Inside the forward pass", id="forward"):
        with text_and_model("trace", PROMPT_EXAMPLE, choices, value) as (text, menu):
            button = gr.Button("Run one forward pass", variant="primary", elem_id="trace-button")
        status_line = gr.Markdown(elem_id="trace-status", elem_classes="status-line")
        summary = gr.Markdown(elem_id="trace-summary")
        top_plot = gr.Plot(label="Next token", elem_id="plot-top")
        table = gr.Dataframe(headers=TRACE_HEADERS, label="Tensor shapes, in the order they were computed", wrap=True,
                             max_height=100_000, column_widths=["9%", "15%", "11%", "15%", "25%", "25%"],
                             elem_id="trace-table", interactive=False)
    button.click(trace_forward, [text, menu, *decoding.all()], [table, top_plot, summary, status_line],
                 api_name="forward_trace", **INTERACTIVE, **UNCHECKED)
    return TabParts(menus=(menu,))
