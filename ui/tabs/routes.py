"""The How the prediction was made tab: the routes of one next-token prediction as a graph (``explorer.views.routes``),
a click on a node shows what the stream there would predict and what feeds it; the graph's numbers as JSON."""

import time

import gradio as gr

from explorer.core import inputs
from explorer.models import catalog, registry
from explorer.present import clickable_html, routes as present
from explorer.views.routes import graph

from ui.controls import DecodingControls, decoder_read
from ui.events import INTERACTIVE, NO_FIGURE, NO_TEXT, UNCHECKED, guarded, status
from ui.menus import text_and_model
from ui.tab import TabParts

NO_JSON, NO_RESULT = None, None
EXAMPLE = "Thou art more lovely and more temperate. Thou art more lovely and more"

# A click on a node of the graph: the gr.HTML beside it listens to plotly's own 'plotly_click' on the plot (attached
# again whenever the plot is drawn anew) and sends a 'click' event with the node's id (the node trace's customdata)
CLICK_BRIDGE_JS = """
let settle = null, watched = null;
const inSight = (panel) => {  // after a click, once the answer is in the panel (no change for 150 ms): into sight
  if (!panel.__afterClick) return;
  clearTimeout(settle);
  settle = setTimeout(() => {
    panel.__afterClick = false;
    const box = panel.getBoundingClientRect();
    if (box.top < 0 || box.bottom > window.innerHeight) panel.scrollIntoView({block: 'center'});
  }, 150);
};
const attach = () => {
  document.querySelectorAll('#routes-plot .js-plotly-plot').forEach((plot) => {
    if (typeof plot.on !== 'function' || (plot._ev && plot.__routesClick &&
        plot._ev.listeners('plotly_click').includes(plot.__routesClick))) return;
    plot.__routesClick = (data) => {
      const point = data && data.points && data.points.find((p) => typeof p.customdata === 'string');
      if (!point) return;
      const panel = document.querySelector('#routes-node');  // below the graph on a narrow page
      if (panel && watched !== panel) {
        watched = panel;
        new MutationObserver(() => inSight(panel)).observe(panel, {childList: true, subtree: true, characterData: true});
      }
      if (panel) panel.__afterClick = true;
      trigger('click', {node: point.customdata});
    };
    plot.on('plotly_click', plot.__routesClick);
  });
};
new MutationObserver(attach).observe(document.body, {childList: true, subtree: true});
attach();
"""
CLICK_HINT = "<p class='note'>Click a node of the graph (a circle: the stream; a square: a block's output).</p>"


@guarded(plot=NO_FIGURE, numbers=NO_JSON, result=NO_RESULT, node=NO_TEXT)
def prediction_routes(model_name, text, position, threshold):
    """The routes of the prediction after ``position`` (−1: the last token), edges over ``threshold``: the graph,
    its JSON (threshold, nodes, edges), the prediction's own node in the side panel."""
    text, notices = inputs.require_text(text, "some text")
    info, model, tokenizer = registry.resolve(model_name)
    started = time.perf_counter()
    routes = graph.prediction_routes(model, tokenizer, text, position, threshold)
    seconds = time.perf_counter() - started
    heads = len({(e.layer, e.head) for e in routes.edges if e.kind == "attention"})
    through = (f"through {heads} head{'' if heads == 1 else 's'}" if heads else
               "through no attention head (none carries a share over the threshold: lower it to see them)")
    line = (f"**{info.name}**: the prediction {inputs.echo(routes.predicted)} after token {routes.position} "
            f"({inputs.echo(routes.tokens[routes.position])}): {len(routes.edges)} edges over {routes.threshold:g} "
            f"{through}, in {seconds:.2f} s. Click a node.")
    read = routes.run.read
    rewrite = (decoder_read(read.rewrite, read.decoded_with, "always, in this view") + " Purple lines are "
               "cross-attention from the source." if info.is_encoder_decoder else "")
    top = graph.node_reading(routes, f"r{len(routes.rows) - 1}:{routes.position}")
    return (present.routes_figure(routes), routes.to_json(), routes, present.node_html(top),
            status(line, rewrite, *notices, *routes.notices))


@guarded(node=NO_TEXT)
def show_node(routes, evt: gr.EventData):
    """The clicked node: what the stream there would predict (the logit lens), what feeds it."""
    if routes is None:
        return NO_TEXT, "Trace the routes first: there is no graph yet."
    reading = graph.node_reading(routes, getattr(evt, "node", None))
    return present.node_html(reading), ""


def head_counts(name) -> tuple[int, int] | None:
    """(decoder layers, heads) of the model called ``name``: a shipped one's from its config, one the visitor opened
    from the model itself (held already); None where there is no such model."""
    info = catalog.discover_checkpoints().get(name) if isinstance(name, str) else None
    config = info.config if info is not None else None
    if config is None and registry.opened(name) is not None:
        config = registry.resolve(name)[1].config
    return None if config is None else (config.n_layers, config.n_heads)


def teaching_for(name):
    """The teaching text with a head of the picked model as its example (unchanged where there is no such model)."""
    counts = head_counts(name)
    return present.teaching(*counts) if counts else gr.skip()


def tab(choices, value, decoding: DecodingControls | None) -> TabParts:
    """The tab; its model menu."""
    with gr.Tab("How the prediction was made", id="routes"):
        with gr.Accordion("What the routes are, and what they are not", open=True):
            teaching = gr.Markdown(present.teaching(*(head_counts(value) or (1, 1))), elem_id="routes-teaching")
        with text_and_model("routes", EXAMPLE, choices, value) as (text, menu):
            with gr.Row():
                position = gr.Number(value=-1, precision=0, label="Position (−1: last)", elem_id="routes-position",
                                     min_width=120)
                threshold = gr.Slider(0.01, 0.5, value=graph.DEFAULT_THRESHOLD, step=0.01, min_width=220,
                                      label="Threshold (the share an edge needs)", elem_id="routes-threshold")
            button = gr.Button("Trace the routes", variant="primary", elem_id="routes-button")
        status_line = gr.Markdown(elem_id="routes-status", elem_classes="status-line")
        with gr.Row():
            with gr.Column(scale=3, min_width=480):
                plot = gr.Plot(label="The routes of the prediction", elem_id="routes-plot")
            with gr.Column(scale=1, min_width=260):
                bridge = gr.HTML(CLICK_HINT, elem_id="routes-click", js_on_load=CLICK_BRIDGE_JS)
                node = gr.HTML(elem_id="routes-node", css_template=clickable_html.CSS)
                node_line = gr.Markdown(elem_id="routes-node-status", elem_classes="status-line")
        numbers = gr.JSON(label="The graph (threshold, nodes, edges: kind, layer, head, source, target, weight)",
                          open=False, max_height=320, elem_id="routes-json")
        result = gr.State(NO_RESULT)
    button.click(prediction_routes, [menu, text, position, threshold], [plot, numbers, result, node, status_line],
                 api_name="prediction_routes", **INTERACTIVE, **UNCHECKED)
    bridge.click(show_node, result, [node, node_line], api_name="routes_node", api_visibility="private")
    menu.change(teaching_for, menu, teaching, api_name="routes_teaching", api_visibility="private", **UNCHECKED)
    return TabParts(menus=(menu,))
