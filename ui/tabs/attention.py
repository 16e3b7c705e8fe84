"""The Attention heads tab: every layer x head of one text as a clickable grid with the heads' types, one head
enlarged, and one token's attention in every head of a layer. The pickers read the text's recorded run."""

import gradio as gr

from explorer.views import attention, heads
from explorer.models import registry
from explorer.present import attention as present, clickable_html, figures
from explorer.core import inputs

from ui.controls import DecodingControls, clickable, clicked, decoder_read, decoding_of
from ui.events import INTERACTIVE, KEPT, NO_FIGURE, NO_TEXT, UNCHECKED, guarded, status
from ui.menus import kind_menu, rewrites, text_and_model
from ui.tab import TabParts

ATTENTION_EXAMPLE = "To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer"

def attention_of(text, model_name, decoding):
    """(info, maps) of a text, read from its recorded run (recorded once per (checkpoint, text, decoding))."""
    text, notices = inputs.require_text(text, "some text")
    settings, more = decoding_of(decoding)
    info, model, tokenizer = registry.resolve(model_name)
    maps = attention.attention_maps(model, tokenizer, text, settings)
    return info, maps, notices + (more if info.is_encoder_decoder else [])


def head_types_of(model_name, maps, kind: str):
    """The head types of ``kind`` (None for cross-attention, which has none), scored on the maps' text."""
    if attention.ATTENTION_KINDS[kind].is_cross:
        return None
    _, model, _ = registry.resolve(model_name)
    return heads.head_types(model, maps.weights[kind], kind)


def head_labels(types, layer: int, head: int | None) -> str:
    """'Layer 4, head 2: previous token 0.58 (threshold 0.4).' for the status line of an enlarged head."""
    if types is None or head is None:
        return ""
    found = types.labels(layer, head)
    what = "; ".join(f"{kind} {score:.2f}" for kind, score in found) or "no type reaches the threshold"
    return f"Layer {layer}, head {head}: {what} (threshold {types.threshold:g})."


@guarded(grid=NO_TEXT, head_plot=NO_FIGURE, kind=KEPT, layer=KEPT, head=KEPT)
def show_attention(text, model_name, kind, layer, head, *decoding):
    """Every layer × head as a clickable grid with the heads' types, and one head (or the mean over heads)
    enlarged with token labels."""
    info, maps, notices = attention_of(text, model_name, decoding)
    view, more = attention.pick_view(maps, kind, layer, head)
    weights = maps.weights[view.kind]
    n_layers, n_heads = weights.shape[:2]
    kinds = attention.kinds_of(info.is_encoder_decoder)
    rewrite = decoder_read(maps.rewrite, maps.decoded_with) if info.is_encoder_decoder else ""
    types = head_types_of(model_name, maps, view.kind)
    grid = present.head_grid_html(weights, types, None if view.head is None else (view.layer, view.head))
    return (
        grid if types is None else present.head_types_html(types) + grid,
        figures.attention_head_figure(maps, view),
        gr.update(choices=[(attention.ATTENTION_KINDS[k].label, k) for k in kinds], value=view.kind),
        gr.update(choices=[str(i) for i in range(n_layers)], value=str(view.layer)),
        gr.update(choices=["average"] + [str(h) for h in range(n_heads)], value="average" if view.head is None else str(view.head)),
        status(f"{info.name}: {n_layers} layers × {n_heads} heads, {weights.shape[2]} query × {weights.shape[3]} key "
               f"tokens ({attention.ATTENTION_KINDS[view.kind].label}). Click a head in the grid to enlarge it; hover a cell "
               "for query, key and weight.", head_labels(types, view.layer, view.head), rewrite, *notices, *more, *maps.notices),
    )


@guarded(head_plot=NO_FIGURE)
def show_head(text, model_name, kind, layer, head, *decoding):
    """Only the enlarged head, for the layer and head pickers and the grid (the grid stays)."""
    info, maps, notices = attention_of(text, model_name, decoding)
    view, more = attention.pick_view(maps, kind, layer, head)
    labels = head_labels(head_types_of(model_name, maps, view.kind), view.layer, view.head)
    return figures.attention_head_figure(maps, view), status(labels, *notices, *more) or gr.skip()


@guarded(token_strip=NO_TEXT, token_plot=NO_FIGURE)
def attention_token(text, model_name, kind, layer, query, *decoding):
    """Token-centred: what one query token attends to in every head of a layer."""
    info, maps, notices = attention_of(text, model_name, decoding)
    view, more = attention.pick_view(maps, kind, layer, "average")
    queries = maps.query_labels[view.kind]
    last = query is None or str(query).strip() == "-1"  # the default: the last token, whatever the text's length
    t, moved = (len(queries) - 1, []) if last else inputs.index(query, len(queries), "query token")
    more += moved
    types = head_types_of(model_name, maps, view.kind)
    figure = present.token_centred_figure(maps.weights[view.kind][view.layer, :, t, :], queries[t],
                                                maps.key_labels[view.kind], view.layer, types)
    return clickable_html.token_strip_html(queries, t), figure, status(
        f"Layer {view.layer}: what {inputs.echo(queries[t])} attends to in each of its {figure.data[0].z.shape[0]} heads. "
        "Click another token to follow it.", *notices, *more)


def clicked_head(evt: gr.EventData):
    """A click on a head of the grid: its layer and head, as the layer and head menus hold them."""
    return str(int(evt.layer)), str(int(evt.head))


def tab(choices, value, decoding: DecodingControls) -> TabParts:
    """The tab; its model menu."""
    with gr.Tab("Attention heads", id="attention"):
        with text_and_model("att", ATTENTION_EXAMPLE, choices, value) as (text, menu):
            button = gr.Button("Show attention", variant="primary", elem_id="att-button")
        status_line = gr.Markdown(elem_id="att-status", elem_classes="status-line")
        with gr.Row():
            # menus that accept any value: their choices follow the model
            kind = kind_menu("att-kind")
            layer = gr.Dropdown(["0"], value="0", label="Layer", allow_custom_value=True, elem_id="att-layer")
            head = gr.Dropdown(["average"], value="average", label="Head (or average over heads)", allow_custom_value=True,
                               elem_id="att-head")
        decoder_note = gr.Markdown("For folio-to-modern the decoder reads the model's own rewrite of your text, decoded "
                                   "with the settings of the Generate tab.", visible=rewrites(value), elem_id="att-decoder-note")
        with gr.Accordion("How to read this view", open=False):
            gr.Markdown(present.HEADS)
        grid = clickable("att-grid")
        head_plot = gr.Plot(label="One head, enlarged", elem_id="plot-head")
        gr.Markdown("### One token, every head\nClick a token: what it attends to in each head of the layer chosen above.")
        query = gr.Number(value=-1, precision=0, visible=False)
        token_strip = clickable("att-tokens")
        token_status = gr.Markdown(elem_id="att-token-status", elem_classes="status-line")
        token_plot = gr.Plot(label="One token, every head of the layer", elem_id="plot-token")
    request = [text, menu, kind, layer, head, *decoding.all()]
    token_request, token_outputs = [text, menu, kind, layer, query, *decoding.all()], [token_strip, token_plot, token_status]
    everything = [grid, head_plot, kind, layer, head, status_line]
    menu.change(lambda name: gr.update(visible=rewrites(name)), menu, decoder_note, api_name="attention_decoder_note",
                api_visibility="private", **UNCHECKED)
    button.click(show_attention, request, everything, api_name="attention", **INTERACTIVE, **UNCHECKED).then(
        attention_token, token_request, token_outputs, api_name="attention_token", **INTERACTIVE, **UNCHECKED)
    for picker, name in ((layer, "attention_layer"), (head, "attention_head")):
        picker.input(show_head, request, [head_plot, status_line], api_name=name, **INTERACTIVE, **UNCHECKED)
    layer.input(attention_token, token_request, token_outputs, api_name="attention_token_layer", **INTERACTIVE, **UNCHECKED)
    grid.click(clicked_head, None, [layer, head], api_name="attention_pick_head", api_visibility="private").then(
        show_head, request, [head_plot, status_line], api_name="attention_grid_head", **INTERACTIVE, **UNCHECKED)
    token_strip.click(clicked("index"), None, query, api_name="attention_pick_token", api_visibility="private").then(
        attention_token, token_request, token_outputs, api_name="attention_token_query", **INTERACTIVE, **UNCHECKED)
    kind.input(show_attention, request, everything, api_name="attention_kind", **INTERACTIVE, **UNCHECKED).then(
        attention_token, token_request, token_outputs, api_name="attention_token_kind", **INTERACTIVE, **UNCHECKED)
    return TabParts(menus=(menu,))
