"""What a tab gives ``app.py``: one ``TabParts``, the same shape for every tab in ``ui.tabs``. Every tab is built by
``tab(choices, value, decoding)`` (the model menus' choices and default value, and the Generate tab's decoding
controls, None until that tab is built) and returns its parts: its model menus, those that list the decoder-only
models apart, and what another part of the page reads (the decoding controls; the trained model's actions)."""

from dataclasses import dataclass

import gradio as gr

from ui.controls import DecodingControls
from ui.trained_model import TrainedPanel


@dataclass(frozen=True)
class TabParts:
    """A tab's parts that the page wires: ``menus`` list every model, ``decoder_only`` the decoder-only ones (the page
    load and every opened model refresh both); ``decoding``: the decoding controls the other tabs read (Generate's);
    ``trained``: the trained model's actions, wired to the menus and the sign-in (Train one yourself's)."""

    menus: tuple[gr.Dropdown, ...] = ()
    decoder_only: tuple[gr.Dropdown, ...] = ()
    decoding: DecodingControls | None = None
    trained: TrainedPanel | None = None
