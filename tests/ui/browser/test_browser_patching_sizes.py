"""Activation patching in headless Chromium on models of 1, 2 and 12 layers and on the shipped timeline-repeats (2
layers), at 1366 and 800 px: every grid draws its cells (plotly's heat map image inside a plot area of sane height),
the tabs still switch afterwards; each grid's figure for 1 to 24 layers and 2 to 128 tokens draws through the page's
Plotly as gr.Plot draws it; and a figure plotly cannot draw leaves the page working. Screenshots:
artifacts/screenshots/patching-<model>-<width>.png."""

import json

import plotly.graph_objects as go
import pytest

from explorer.views.patching.texts import DEFAULT_CLEAN
from explorer.present import patching as present
from explorer.views.patching.grids import GRIDS
from support.patching_results import sized_result
from support.browser import SHOTS, app_page, assert_no_error_shown, open_tab, pick, settled
from support.fixtures_checkpoints import causal_lm, save_checkpoint, train_tokenizer
from support.shipped import SHIPPED_ROOT

pytestmark = pytest.mark.browser

LAYERS = {"one-layer": 1, "two-layers": 2, "twelve-layers": 12}
GRID_PLOTS = ("patching-plot-residual", "patching-plot-heads", "patching-plot-attention", "patching-plot-feed-forward")

# Each drawn grid: its heat map image(s), the plot area's height (y axis length) and the figure's (the svg's)
GRID_GEOMETRY = """(id) => {
    const plot = document.querySelector(`#${id} .js-plotly-plot`);
    if (!plot || !plot._fullLayout) return null;
    const layout = plot._fullLayout;
    return {images: plot.querySelectorAll('.heatmaplayer image').length, plotHeight: layout.yaxis._length,
            height: plot.querySelector('.main-svg').getBoundingClientRect().height, layoutHeight: layout.height,
            failed: plot.parentElement.querySelectorAll('.figure-failed').length};
}"""


@pytest.fixture(scope="module")
def sized_root(tmp_path_factory):
    """Random models of 1, 2 and 12 layers (4 heads, d_model 32) and the shipped timeline-repeats, in one folder."""
    root = tmp_path_factory.mktemp("patching-sizes")
    tokenizer = train_tokenizer()
    for name, layers in LAYERS.items():
        save_checkpoint(causal_lm(tokenizer, n_layers=layers, seed=layers, initializer_range=0.3), tokenizer, root / name)
    (root / "timeline-repeats").symlink_to(SHIPPED_ROOT / "timeline-repeats", target_is_directory=True)
    return root


@pytest.fixture(scope="module")
def sized_app(app_server, sized_root):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SCRATCH_CHECKPOINTS", str(sized_root))
        yield app_server


@pytest.fixture(params=[1366, 800], ids=lambda w: f"{w}px")
def page(request, browser, sized_app):
    """The sized models' app at each width, on the Activation patching tab: a fresh page a test."""
    page = app_page(browser, sized_app, request.param)
    open_tab(page, "Activation patching")
    yield page
    page.close()


def patch_and_wait(page, model: str):
    """The default clean text and a corrupted copy of it that keeps its length in this model's tokens, patched."""
    pick(page, "patching-model", model)
    page.fill("#patching-clean textarea", DEFAULT_CLEAN)
    page.click("#patching-change-word")
    page.wait_for_function("""() => document.querySelector('#patching-status').innerText.includes('Corrupted copy')""")
    page.click("#patching-button")
    page.wait_for_function("""(name) => { const text = document.querySelector('#patching-status').innerText;
                                          return text.includes(name) && text.includes('patched runs in'); }""", arg=model)


def plotly_loaded(page):
    """Wait for the page's Plotly: gr.Plot loads it as it draws its first plot, after the status has answered."""
    page.wait_for_function("() => window.Plotly && window.Plotly.react")


def tabs_still_switch(page):
    open_tab(page, "Head ablation")
    page.wait_for_selector("#patching-button", state="hidden")
    open_tab(page, "Activation patching")
    page.wait_for_selector("#patching-button", state="visible")


@pytest.mark.parametrize("model", ["one-layer", "two-layers", "twelve-layers", "timeline-repeats"])
def test_every_grid_draws_its_cells_and_the_tabs_still_switch(page, model):
    patch_and_wait(page, model)
    layers = LAYERS.get(model, 2)
    for plot in GRID_PLOTS:
        page.wait_for_selector(f"#{plot} .js-plotly-plot .heatmaplayer image", state="attached")
        drawn = page.evaluate(GRID_GEOMETRY, plot)
        heat_maps = 2 if plot.endswith("heads") else 1
        assert drawn["images"] == heat_maps and drawn["failed"] == 0, (plot, drawn)
        # a plot area of at least 120 px, or a row of 28 px a layer (figures.MIN_PLOT_HEIGHT, patching.ROW_HEIGHT);
        # plotly may widen the margins for tick labels a little, so 90% of it
        assert drawn["plotHeight"] >= 0.9 * max(120, 28 * layers), (plot, drawn)
        assert abs(drawn["height"] - drawn["layoutHeight"]) < 2 and drawn["height"] < 1200, (plot, drawn)
    tabs_still_switch(page)
    page.evaluate("window.scrollTo(0, 0)")
    settled(page)
    page.screenshot(path=SHOTS / f"patching-{model}-{page.width}.png", full_page=True)
    assert_no_error_shown(page)


@pytest.mark.parametrize("n_layers, n_tokens", [(1, 2), (1, 128), (24, 2), (24, 128), (3, 40)])
def test_every_grid_figure_draws_from_1_to_24_layers_and_2_to_128_tokens(page, n_layers, n_tokens):
    """The corners of the range: each grid's figure as the app makes it, drawn through the page's Plotly as gr.Plot
    draws it, as wide as the grids' column at this width: a plot area of a row per layer, no failure."""
    if not page.evaluate("() => !!window.Plotly"):  # gr.Plot loads plotly with the first plot it draws
        patch_and_wait(page, "one-layer")
        plotly_loaded(page)
    result = sized_result(n_layers, n_tokens)
    for name in GRIDS:
        figure = json.loads(present.grid_figure(result, name, n_layers, 4).to_json())
        drawn = page.evaluate(DRAW_AS_GRADIO, figure)
        assert drawn["failed"] is None and drawn["plotHeight"] >= 0.9 * max(120, 28 * n_layers), (name, drawn)


# a figure drawn through the page's Plotly, as gr.Plot draws it (its margin rules), as wide as the residual grid
DRAW_AS_GRADIO = """async (figure) => {
    const host = document.querySelector('#patching-plot-residual').getBoundingClientRect();
    const box = document.createElement('div'), div = document.createElement('div');
    box.style.width = host.width + 'px'; box.appendChild(div); document.body.appendChild(box);
    const layout = figure.layout;  // what gr.Plot does to every figure before Plotly.react
    layout.autosize = true; layout.margin.t = Math.max(100, layout.margin.t); layout.margin.autoexpand = true;
    try {
        await window.Plotly.react(div, figure.data, layout, {responsive: true});
        const failed = box.querySelector('.figure-failed');
        return {failed: failed ? failed.textContent : null, plotHeight: div._fullLayout && div._fullLayout.yaxis._length};
    } catch (error) { return {failed: 'threw: ' + error.message}; }
    finally { box.remove(); }
}"""


def old_two_layer_figure() -> dict:
    """The residual grid of a 2-layer model as the app drew it before: 238 px high with 70 + 110 px of margins, 60
    angled position labels. gr.Plot raises its top margin to 100 px and lets plotly widen the margins for the labels:
    the plot area falls below nothing, and plotly throws "Something went wrong with axis scaling"."""
    labels = [f"{p}:␣token{p}" for p in range(60)]
    fig = go.Figure(go.Heatmap(z=[[0.5] * 60, [0.25] * 60], x=labels, y=["L0", "L1"], zmid=0,
                               colorbar=dict(title="restored", thickness=12, len=0.9)))
    fig.update_layout(title=dict(text="Residual stream entering each layer<br><sup>patched at one position</sup>"),
                      xaxis_title="position patched (clean token)", yaxis_title="layer", height=238,
                      margin=dict(l=50, r=20, t=70, b=110))
    fig.update_xaxes(type="category", tickangle=-60, tickfont_size=10)
    return json.loads(fig.to_json())


def test_a_figure_plotly_cannot_draw_fails_alone(page):
    """Drawn through the page's Plotly as gr.Plot draws (its margin rules), the old figure throws; the throw is
    caught, a line says so, and the page goes on: the tabs switch, the next grids draw."""
    patch_and_wait(page, "two-layers")
    plotly_loaded(page)
    outcome = page.evaluate(DRAW_AS_GRADIO, old_two_layer_figure())["failed"] or "drawn"
    assert outcome.startswith("This figure could not be drawn (Something went wrong with axis scaling)"), outcome
    tabs_still_switch(page)
    patch_and_wait(page, "twelve-layers")  # the next grids draw
    page.wait_for_selector("#patching-plot-residual .js-plotly-plot .heatmaplayer image", state="attached")
    assert page.errors == []
