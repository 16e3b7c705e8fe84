"""The Sampling, seen tab: the next-token distribution after temperature, top-k, top-p and the repetition
penalty, exactly as ``generate`` samples from it, redrawn as the sliders move."""

import gradio as gr

from explorer.models import registry
from explorer.core import inputs
from explorer.views import sampling
from explorer.present import sampling as present

from ui.controls import DecodingControls
from ui.events import INTERACTIVE, NO_FIGURE, UNCHECKED, guarded, status
from ui.menus import model_menu
from ui.tab import TabParts

SAMPLING_EXAMPLE = "Shall I compare thee to a summer's"


@guarded(plot=NO_FIGURE)
def next_token_distribution(prompt, model_name, temperature, top_k, top_p, repetition_penalty):
    """The next-token distribution after temperature, top-k and top-p, as generate samples from it."""
    text, notices = inputs.require_text(prompt)
    settings = sampling.sampling_settings(temperature, top_k, top_p, repetition_penalty)
    info, model, tokenizer = registry.resolve(model_name)
    d = sampling.next_token_distribution(model, tokenizer, text, settings)
    first = "the first token of the rewrite" if info.is_encoder_decoder else "the next token"
    return present.distribution_figure(d), status(
        f"**{info.name}**: {first} is drawn from {d.n_kept:,} of {d.vocab_size:,} tokens "
        f"({d.kept_mass:.1%} of the probability after temperature, renormalised to 100%).", *notices, *d.notices)


def tab(choices, value, decoding: DecodingControls | None) -> TabParts:
    """The tab; its model menu (its own sampling controls, not Generate's)."""
    with gr.Tab("Sampling, seen", id="sampling"):
        gr.Markdown(present.SAMPLING)
        with gr.Row():
            with gr.Column(scale=3, min_width=520):
                prompt = gr.Textbox(label="Prompt", value=SAMPLING_EXAMPLE, lines=2, elem_id="sampling-prompt")
                plot = gr.Plot(label="Next-token distribution", elem_id="plot-sampling")
                status_line = gr.Markdown(elem_id="sampling-status", elem_classes="status-line")
            with gr.Column(scale=2):
                menu = model_menu("sampling-model", choices, value)
                controls = [
                    gr.Slider(0.05, sampling.MAX_TEMPERATURE, value=1.0, step=0.05, label="Temperature", elem_id="sampling-temperature"),
                    gr.Slider(0, 200, value=0, step=1, label="Top-k (0 = off)", elem_id="sampling-top-k"),
                    gr.Slider(0.01, 1.0, value=1.0, step=0.01, label="Top-p (1 = off)", elem_id="sampling-top-p"),
                    gr.Slider(0.5, 2.0, value=1.0, step=0.05, label="Repetition penalty (1 = off)", elem_id="sampling-penalty"),
                ]
                button = gr.Button("Show the distribution", variant="primary", elem_id="sampling-button")
    gr.on([button.click, prompt.submit, *(control.input for control in controls)], next_token_distribution,
          [prompt, menu, *controls], [plot, status_line], api_name="next_token_distribution", trigger_mode="always_last",
          **INTERACTIVE, **UNCHECKED)
    return TabParts(menus=(menu,))
