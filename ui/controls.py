"""The controls more than one tab uses: the decoding controls (on the Generate tab, read by every view of an
encoder-decoder: ``DecodingControls``, ``view_inputs``), the Decoding radio that turns the sampling controls off
(``sampling_controls``), and the clickable HTML strips and grids (``clickable``, ``clicked``)."""

from dataclasses import dataclass

import gradio as gr

from explorer.core import inputs
from explorer.generation import decoding
from explorer.models import registry
from explorer.present import clickable_html

PROMPT_EXAMPLE = "Shall I compare thee to a summer's day?"
DEFAULTS = decoding.DecodingSettings(True, temperature=0.8, top_k=40, top_p=0.95, repetition_penalty=1.1,
                                     max_new_tokens=80, seed=0)  # what the Generate tab starts with


@dataclass(frozen=True)
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
        """The widgets in the order ``decoding.sanitize_decoding`` (and every event that reads them) takes them."""
        return [self.mode, self.temperature, self.top_k, self.top_p, self.repetition_penalty, self.max_new_tokens, self.seed]


def decoding_of(controls: tuple):
    """The Generate tab's decoding controls as passed to another tab's event (its defaults when left out)."""
    return decoding.sanitize_decoding(*controls) if controls else (DEFAULTS, [])


def view_inputs(text, model_name, controls):
    """(text, info, model, tokenizer, decoding settings, notices) for a view of one text."""
    text, notices = inputs.require_text(text, "some text")
    settings, more = decoding_of(controls)
    info, model, tokenizer = registry.resolve(model_name)
    return text, info, model, tokenizer, settings, notices + (more if info.is_encoder_decoder else [])


def decoder_read(rewrite: str, decoded_with: str, chosen: str = "set on the Generate tab") -> str:
    """The status line's note on what an encoder-decoder's decoder read: its own rewrite of the text (decoded
    ``decoded_with``, as ``chosen``), from its start token to its last word, before the end-of-text token."""
    return (f"The decoder read the model's own rewrite ({decoded_with}, {chosen}): «{inputs.echo(rewrite, 300)}», "
            "after its start token (position 0). After the rewrite's last word it predicts whether to stop: the "
            "end-of-text token ends the line.")


def sampling_controls(n: int):
    """An event handler for a Decoding radio: in Greedy mode its ``n`` sampling controls (temperature, top-k,
    top-p, seed) are disabled, since greedy decoding takes the most likely token and they do nothing."""

    def toggle(mode):
        update = gr.update(interactive=not (isinstance(mode, str) and mode.strip().lower().startswith("greedy")))
        return update if n == 1 else tuple(dict(update) for _ in range(n))

    return toggle


def clickable(elem_id: str) -> gr.HTML:
    """A gr.HTML whose items (data-layer/data-head, data-index) send click events (``clickable_html.CLICK_JS``)."""
    return gr.HTML(elem_id=elem_id, js_on_load=clickable_html.CLICK_JS, css_template=clickable_html.CSS)


def clicked(field: str):
    """The handler of a click on a clickable gr.HTML (``clickable_html.CLICK_JS``): the clicked item's number."""
    def pick(evt: gr.EventData):
        return int(getattr(evt, field))
    pick.__name__ = f"clicked_{field}"
    return pick
