"""The Activation patching tab: a clean and a corrupted text, the grids of patched runs as heat maps (a click on a
cell shows that run's top next tokens), the numbers as JSON, and what it all means beside them."""

import time

import gradio as gr

from explorer.models import registry
from explorer.views.first_order import agreement
from explorer.views.patching import analysis, estimates, grids, texts
from explorer.core.inputs import InputProblem, echo
from explorer.core.machine import Deadline, OverBudget
from explorer.present import patching as present

from ui.controls import DecodingControls
from ui.events import EXACT, INTERACTIVE, KEPT, NO_FIGURE, NO_TEXT, UNCHECKED, guarded, status
from ui.menus import decoder_only, model_menu
from ui.tab import TabParts

NO_JSON, NO_RESULT = None, None
GRID_CHOICES = [("Residual stream (layer × position)", "residual"), ("Each head (layer × head)", "heads"),
                ("Attention output (layer × position)", "attention"), ("Feed-forward output (layer × position)", "feed_forward")]
GRID_SAID = {name: label.split(" (")[0].lower() for label, name in GRID_CHOICES}  # a grid in a sentence: "each head"
PLOT_IDS = {name: f"patching-plot-{name.replace('_', '-')}" for name in grids.GRIDS}
ESTIMATE_IDS = {name: f"patching-estimate-{name.replace('_', '-')}" for name in grids.GRIDS}  # not clicked: no run

# A click on a cell of a grid's plotly heat map: the gr.HTML beside the plots listens to every plot of this tab
# (plotly's own 'plotly_click' event, attached again whenever a plot is drawn anew) and sends a 'click' event
# with the grid's name, the heat map (curve) and the cell's row and column. The panel it sits in stays in sight beside
# the grids (sticky); where the page is too narrow for both, a click scrolls the answer into sight below them
CLICK_BRIDGE_JS = """
const attach = () => {
  document.querySelectorAll('[id^="patching-plot-"] .js-plotly-plot').forEach((plot) => {
    if (typeof plot.on !== 'function' || (plot._ev && plot.__patchingClick &&
        plot._ev.listeners('plotly_click').includes(plot.__patchingClick))) return;
    const grid = plot.closest('[id^="patching-plot-"]').id.slice('patching-plot-'.length).replace('-', '_');
    plot.__patchingClick = (data) => {
      const point = data && data.points && data.points[0];
      if (!point || !Array.isArray(point.pointNumber)) return;
      trigger('click', {grid: grid, curve: point.curveNumber, row: point.pointNumber[0], column: point.pointNumber[1]});
      const cell = document.querySelector('#patching-plot-cell');  // below the grids on a narrow page: wholly in sight
      const box = cell && cell.getBoundingClientRect();
      if (box && (box.top < 0 || box.bottom > window.innerHeight)) cell.scrollIntoView({behavior: 'smooth', block: 'center'});
    };
    plot.on('plotly_click', plot.__patchingClick);
  });
};
new MutationObserver(attach).observe(document.body, {childList: true, subtree: true});
attach();
const panel = document.querySelector('#patching-cell-panel');  // beside the grids: it stays in sight as they scroll
if (panel) Object.assign(panel.style, {position: 'sticky', top: '8px', zIndex: '2', alignSelf: 'flex-start',
                                       background: 'var(--background-fill-primary)'});
"""
# px: the grids' column and the clicked cell's panel sit side by side only where both fit (a 1366 px page: the grids
# three quarters of it); on a narrower page (800 px) the panel goes under the grids, which keep the whole width
PANEL_MIN_WIDTH = 300
CLICK_HINT = "<p class='patching-hint'>Click a cell of any grid: that patched run's five most likely next tokens appear here.</p>"


def _figures(result, names, config):
    return [present.grid_figure(result, name, config.n_layers, config.n_heads) if name in names else NO_FIGURE
            for name in grids.GRIDS]


def _estimate_figures(estimate, config, agreements=None):
    """The estimate's map of each grid asked for (its disagreement with the exact grid marked, once known)."""
    return [present.estimate_figure(estimate, name, config.n_layers, config.n_heads,
                                    None if agreements is None else agreements[name])
            if name in estimate.grids else NO_FIGURE for name in grids.GRIDS]


NOTHING_EXACT_YET = (*dict.fromkeys(grids.GRIDS, NO_FIGURE).values(), NO_JSON, NO_TEXT, NO_RESULT, NO_FIGURE, NO_TEXT)


@guarded(**dict.fromkeys(grids.GRIDS, NO_FIGURE), numbers=NO_JSON, explained=NO_TEXT, result=NO_RESULT, cell_plot=NO_FIGURE,
         cell_line=NO_TEXT, **{f"estimate_{name}": NO_FIGURE for name in grids.GRIDS}, estimate_numbers=NO_JSON)
def activation_patching(model_name, clean_text, corrupted_text, answer, wrong_answer, sites, progress=gr.Progress()):
    """The first-order estimate of every chosen grid at once (shown first), then every patched run: one heat map per
    grid under its estimate's, the estimate's disagreement marked, the numbers as JSON, what they show.
    ``sites``: the grids' names; the endpoint's parameter is named after it, so the name stays."""
    info, model, tokenizer = registry.resolve(model_name)
    started = time.perf_counter()
    estimate = estimates.attribution_patching(model, tokenizer, clean_text, corrupted_text, answer, wrong_answer, sites)
    estimated = time.perf_counter() - started
    estimated_only = (*NOTHING_EXACT_YET, *_estimate_figures(estimate, model.config), {"estimate": estimate.to_json()})
    yield (*estimated_only,
           status(f"**{info.name}**: every grid estimated to first order in {estimated:.2f} s (one backward pass). "
                  "The exact patched runs are running; each grid appears under its estimate when they finish.",
                  *estimate.runs.notices))
    started = time.perf_counter()
    deadline = Deadline("The exact patched runs", "shorten the two texts (each grid has a run per token) or choose "
                        "fewer grids")
    try:
        result = analysis.activation_patching(model, tokenizer, clean_text, corrupted_text, answer, wrong_answer, sites,
                                              progress=deadline.watching(lambda f, d: progress(f, desc=d)))
    except OverBudget as stopped:
        yield *estimated_only, status(f"**{info.name}**: ⚠️ {stopped}", *estimate.runs.notices)
        return
    seconds = time.perf_counter() - started
    agreements = {name: agreement(estimate.grids[name].values, grid.values) for name, grid in result.grids.items()}
    runs = sum(grid.values.size for grid in result.grids.values())
    line = (f"**{info.name}**, {len(result.tokens)} tokens: answer {echo(result.answer)} against "
            f"{echo(result.wrong_answer)}; logit difference clean {result.clean_metric:.3f}, corrupted "
            f"{result.corrupted_metric:.3f}. {runs} patched runs in {seconds:.1f} s (the estimate: {estimated:.2f} s).")
    numbers = {"estimate": estimate.to_json(), "agreement": {name: a.to_json() for name, a in agreements.items()}}
    yield (*_figures(result, result.grids, model.config), result.to_json(), present.explanation(result), result,
           NO_FIGURE, NO_TEXT, *_estimate_figures(estimate, model.config, agreements), numbers,
           status(line, *result.notices) + "\n\n" + agreement_table(agreements))


def agreement_table(agreements: dict) -> str:
    """Each grid's estimate against its exact grid, a row per grid (``first_order.Agreement``: the correlation, the
    cells of the wrong sign, the exact top k the estimate ranks outside its own top k), as a markdown table."""
    k = next(iter(agreements.values())).k
    rows = [f"| {GRID_SAID[name].capitalize()} | {a.said_correlation()} | {len(a.wrong_sign)} | {len(a.off_rank)} |"
            for name, a in agreements.items()]
    return "\n".join([f"| Estimate against exact | correlation | cells of the wrong sign (×) | exact top {k} outside the "
                      f"estimate's top {k} (○) |", "|---|---|---|---|", *rows])


@guarded(cell_plot=NO_FIGURE)
def show_cell(result, evt: gr.EventData):
    """The clicked cell's patched run: its top next tokens (the line under it says which cell)."""
    if result is None:
        return NO_FIGURE, "Patch first: the grids are not computed yet."
    grid, row, column = str(evt.grid), int(evt.row), int(evt.column)
    if grid not in result.grids:
        return NO_FIGURE, "That grid was not computed in this run."
    if grid == "heads":  # two maps, every position and last position, each layer x head: (layer, head) -> row
        row, column = row * result.n_heads + column, int(evt.curve)
    cells = result.grids[grid]
    return present.cell_figure(result, grid, row, column), (
        f"{cells.title}, patched at {cells.rows[row]}, {cells.columns[column]}: restored {cells.values[row, column]:.3f}.")


@guarded(corrupted=KEPT)
def corrupted_copy(model_name, clean_text, how):
    """The clean text made into a corrupted one: one word changed, or the first half's words swapped in pairs."""
    _, _, tokenizer = registry.resolve(model_name)
    make = texts.change_one_word if how == "word" else texts.swap_repeated_half
    corrupted, note = make(tokenizer, clean_text)
    return corrupted, status(f"Corrupted copy: {note}.")


def example_note(model_name, clean_text, corrupted_text):
    """The note beside the example: the default example's on the model it describes, a symbol model's beside its
    own example; hidden beside any other text or model."""
    if texts.is_default_example(model_name, clean_text, corrupted_text):
        return gr.update(value=present.DEFAULT_NOTE, visible=True)
    if texts.may_be_symbols(clean_text):
        try:
            _, _, tokenizer = registry.resolve(model_name)
        except InputProblem:
            return gr.update(visible=False)
        found = texts.symbol_example(tokenizer)
        if found and (clean_text, corrupted_text) == found[:2]:
            return gr.update(value=present.symbol_note(found[2]), visible=True)
    return gr.update(visible=False)


def example_texts(model_name, clean_text, corrupted_text, shown):
    """On another model, the example it can read (``texts.example_texts``), where the boxes still hold the example
    the tab put there last (``shown``); a text the learner typed stays."""
    if shown is None or [clean_text, corrupted_text] != list(shown):
        return KEPT, KEPT, KEPT
    try:
        _, _, tokenizer = registry.resolve(model_name)
    except InputProblem:
        return KEPT, KEPT, KEPT  # the Patch button says what is wrong with the name
    clean, corrupted = texts.example_texts(tokenizer)
    return clean, corrupted, [clean, corrupted]


def grids_offered(name, ticked, offered):
    """The Grids checkboxes for the model picked: the grids it has (``grids.grids_of``), those ticked kept ticked
    and one it gains (back from an attention-only model) ticked; the grids now offered; the feed-forward grid's plot,
    shown only for a model that has one (with its estimate's above it: the block of both). Unchanged: nothing."""
    try:
        _, model, _ = registry.resolve(name)
    except InputProblem:
        return KEPT, KEPT, KEPT  # the Patch button says what is wrong with the name
    has = grids.grids_of(model)
    if offered is not None and has == list(offered):
        return KEPT, KEPT, KEPT
    ticked = [] if not isinstance(ticked, list) else ticked
    value = [grid for grid in has if grid in ticked or (offered is not None and grid not in offered)]
    return (gr.update(choices=[c for c in GRID_CHOICES if c[1] in has], value=value), has,
            gr.update(visible="feed_forward" in has))


def tab(choices, value, decoding: DecodingControls | None) -> TabParts:
    """The tab; its model menu, of the decoder-only models."""
    decoders, value = decoder_only(choices, value)
    with gr.Tab("Activation patching", id="patching"):
        with gr.Accordion("What patching asks, and how to read its grids", open=True, elem_id="patching-teaching-box"):
            gr.Markdown(present.TEACHING, elem_id="patching-teaching")
            gr.Markdown(present.ESTIMATE_TEACHING, elem_id="patching-estimate-teaching")
        with gr.Row():
            with gr.Column(scale=3):
                clean = gr.Textbox(label="Clean text (the model gets the answer right)", value=texts.DEFAULT_CLEAN,
                                   lines=2, elem_id="patching-clean")
                corrupted = gr.Textbox(label="Corrupted text (same number of tokens, a few changed)",
                                       value=texts.DEFAULT_CORRUPTED, lines=2, elem_id="patching-corrupted")
                with gr.Row():
                    change_word = gr.Button("Corrupt: change one word", size="sm", elem_id="patching-change-word")
                    swap_half = gr.Button("Corrupt: swap the words of the first half", size="sm", elem_id="patching-swap-half")
                note = gr.Markdown(present.DEFAULT_NOTE, elem_id="patching-example-note",
                                   visible=texts.is_default_example(value, texts.DEFAULT_CLEAN, texts.DEFAULT_CORRUPTED))
            with gr.Column(scale=2):
                menu = model_menu("patching-model", decoders, value)
                with gr.Row():
                    answer = gr.Textbox(label="Answer (one token)", placeholder="empty: the clean run's top token",
                                        elem_id="patching-answer", min_width=120)
                    wrong = gr.Textbox(label="Wrong answer (one token)", placeholder="empty: its second", elem_id="patching-wrong",
                                       min_width=120)
                grid_boxes = gr.CheckboxGroup(GRID_CHOICES, value=list(grids.GRIDS), label="Grids", elem_id="patching-grids")
                button = gr.Button("Patch", variant="primary", elem_id="patching-button")
        status_line = gr.Markdown(elem_id="patching-status", elem_classes="status-line")
        explained = gr.Markdown(elem_id="patching-explanation")
        with gr.Row(equal_height=True):  # the side column as tall as the grids: its panel stays in sight
            with gr.Column(scale=3, min_width=present.GRIDS_MIN_WIDTH):
                plots, estimate_plots, rows = {}, {}, {}
                for name in grids.GRIDS:  # each grid under its first-order estimate, which comes first: full width
                    with gr.Column() as rows[name]:
                        estimate_plots[name] = gr.Plot(label=f"Estimate (AtP): {grids.GRIDS[name].title}",
                                                       elem_id=ESTIMATE_IDS[name])
                        plots[name] = gr.Plot(label=grids.GRIDS[name].title, elem_id=PLOT_IDS[name])
            with gr.Column(scale=1, min_width=PANEL_MIN_WIDTH):
                with gr.Column(elem_id="patching-cell-panel"):  # kept in sight beside the grids (CLICK_BRIDGE_JS)
                    bridge = gr.HTML(CLICK_HINT, elem_id="patching-click", js_on_load=CLICK_BRIDGE_JS)
                    cell_plot = gr.Plot(label="The clicked cell's patched run", elem_id="patching-plot-cell")
                    cell_line = gr.Markdown(elem_id="patching-cell-status", elem_classes="status-line")
        numbers = gr.JSON(label="The numbers (clean_metric, corrupted_metric, each grid: [row][position], normalised)",
                          open=False, max_height=320, elem_id="patching-json")
        estimate_numbers = gr.JSON(label="The estimate's numbers (each grid as above), and its agreement with the exact "
                                   "grid", open=False, max_height=320, elem_id="patching-estimate-json")
        result = gr.State(NO_RESULT)
        offered = gr.State(list(grids.GRIDS))  # the grids the checkboxes offer now
        shown = gr.State([texts.DEFAULT_CLEAN, texts.DEFAULT_CORRUPTED])  # the example the tab put in the boxes last
    button.click(activation_patching, [menu, clean, corrupted, answer, wrong, grid_boxes],
                 [*plots.values(), numbers, explained, result, cell_plot, cell_line, *estimate_plots.values(),
                  estimate_numbers, status_line],
                 api_name="activation_patching",
                 **EXACT, **UNCHECKED)
    bridge.click(show_cell, result, [cell_plot, cell_line], api_name="patching_cell", api_visibility="private")
    menu.change(grids_offered, [menu, grid_boxes, offered], [grid_boxes, offered, rows["feed_forward"]], api_name="patching_grids",
                api_visibility="private", **INTERACTIVE, **UNCHECKED)
    menu.change(example_texts, [menu, clean, corrupted, shown], [clean, corrupted, shown], api_name="patching_example",
                api_visibility="private", show_progress="hidden", **UNCHECKED)
    gr.on([menu.change, clean.change, corrupted.change], example_note, [menu, clean, corrupted], note,
          api_name="patching_example_note", api_visibility="private", show_progress="hidden", **UNCHECKED)
    change_word.click(lambda m, t: corrupted_copy(m, t, "word"), [menu, clean], [corrupted, status_line],
                      api_name="patching_change_word", api_visibility="private", **UNCHECKED)
    swap_half.click(lambda m, t: corrupted_copy(m, t, "swap"), [menu, clean], [corrupted, status_line],
                    api_name="patching_swap_half", api_visibility="private", **UNCHECKED)
    return TabParts(decoder_only=(menu,))
