"""The teaching tabs in headless Chromium, at 1366 and 800 px wide: each view opens, a token and a grid head can
be clicked, nothing shows an error. Screenshots: artifacts/screenshots/teach-*-<width>.png (look at them)."""

import json

import numpy as np
import pytest

from explorer.present import ablation as present_ablation
from explorer.views.ablation import HeadRanking
from explorer.views.first_order import Agreement
from support.browser import assert_no_error_shown, open_tab, pick, plot_drawn, shot
from support.fixtures_checkpoints import SLOW_MODEL

pytestmark = pytest.mark.browser


def test_every_tab_is_in_sight_even_on_a_narrow_page(page):
    """Twelve tabs: they wrap onto a second row rather than hide behind gradio's "More tabs" menu."""
    from playwright.sync_api import expect  # imported here, as test_browser does: without playwright the tests skip

    tabs = page.get_by_role("tab")
    expect(tabs).to_have_count(13)  # gradio lays the tab row out after the page has loaded: wait for it
    assert page.get_by_role("button", name="More tabs").count() == 0
    for i in range(tabs.count()):
        assert tabs.nth(i).is_visible()


def test_steps_tab_shows_the_worked_example_then_the_models_steps(page):
    open_tab(page, "Attention, step by step")
    page.wait_for_selector("#example-steps >> text=Both heads concatenated")
    assert "pair index" in page.inner_text("#example-wrong")
    above = page.locator("#example-wrong").bounding_box()["y"]  # the steps point 'above' to this paragraph
    assert above < page.locator("#example-steps").bounding_box()["y"] and "above" in page.inner_text("#example-steps")
    assert "below" not in page.inner_text("#example-steps")
    shot(page, "worked-example", "#example-steps")
    page.click("#steps-button")
    page.wait_for_selector("#steps-status >> text=matches it within")
    assert page.locator("#steps-body .match.ok").count() >= 7 and page.locator("#steps-body .match.bad").count() == 0
    page.locator('#steps-tokens [data-index="2"]').click()
    page.wait_for_selector("#steps-status >> text=query token 2:")
    assert page.locator('#steps-tokens [data-index="2"].selected').count() == 1
    scores = page.locator("#steps-body .teach-step", has_text="Scores, mask and softmax")
    rows = scores.locator("tbody tr")
    assert rows.count() == page.locator("#steps-tokens [data-index]").count()  # one row per key token
    assert rows.nth(2).locator("th").inner_text() == page.locator('#steps-tokens [data-index="2"]').inner_text()
    masked = rows.nth(3).locator("td")  # a key after the query: its bias, and a weight of exactly 0
    assert masked.nth(1).inner_text() == "masked" and masked.nth(3).inner_text() == "0.000"
    shot(page, "steps")
    assert_no_error_shown(page)


def test_lens_tab_reads_every_layer_after_the_clicked_token(page):
    open_tab(page, "Logit lens")
    page.click("#lens-button")
    page.wait_for_selector("#lens-status >> text=read-outs")
    plot_drawn(page, "plot-lens")
    page.locator('#lens-tokens [data-index="1"]').click()
    page.wait_for_selector("#lens-table >> text=(position 1)")
    assert page.locator("#lens-table tbody tr").count() == 3  # embeddings + 2 layers
    shot(page, "lens")
    assert_no_error_shown(page)


def shown(page, *elem_ids: str) -> list[bool]:
    return [page.locator(f"#{elem_id}").is_visible() for elem_id in elem_ids]


def title_reading(page, plot: str) -> tuple[str, float, float]:
    """(the title's first line, the title's right edge, the figure's right edge) as drawn."""
    return tuple(page.evaluate("""(id) => { const plot = document.querySelector('#' + id + ' .js-plotly-plot');
        const title = plot.querySelector('.gtitle');
        return [(title.querySelector('tspan.line') || title).textContent, title.getBoundingClientRect().right,
                plot.getBoundingClientRect().right]; }""", plot))


def test_ablation_tab_removes_heads_and_ranks_them(page):
    open_tab(page, "Head ablation")
    page.wait_for_selector("#ablation-button", state="visible")
    # before a result no empty plot boxes: the teaching text's "How to read it" points at nothing yet
    assert shown(page, "plot-ablation", "plot-token-loss", "plot-rank-estimate", "plot-rank") == [False] * 4
    page.click("#ablation-button")
    page.wait_for_selector("#ablation-status >> text=Loss on the text")
    plot_drawn(page, "plot-ablation")
    plot_drawn(page, "plot-token-loss")
    assert shown(page, "plot-ablation", "plot-token-loss", "plot-rank-estimate", "plot-rank") == [True, True, False, False]
    first, right, plot_right = title_reading(page, "plot-token-loss")  # wrapped for its 480 px (at 34 characters,
    assert first == "Change in −log p of each token, heads" and right <= plot_right  # for half a page, after "token,")
    assert "other passages" in page.inner_text("#ablation-status")
    page.click("#rank-button")
    page.wait_for_selector("#ablation-status >> text=each removed alone")
    plot_drawn(page, "plot-rank")
    assert page.locator("#plot-rank .heatmaplayer .hm").count() == 1
    first, right, plot_right = title_reading(page, "plot-rank")
    assert first == "Rise in loss, each head removed alone (full" and right <= plot_right
    # the status line now speaks of the ranking: the removal's plots are gone, not left beside it
    page.wait_for_function("() => !document.querySelector('#plot-ablation .main-svg') && !document.querySelector('#plot-token-loss .main-svg')")
    assert shown(page, "plot-ablation", "plot-token-loss", "plot-rank-estimate", "plot-rank") == [False, False, True, True]
    shot(page, "ablation")
    assert_no_error_shown(page)


# shakespeare-main's estimate on the default text (6 layers, 8 heads: the narrowest cells at 1366 px), marked as the
# exact map marks it, and L4.H7 both ways
MARKED_ESTIMATE = np.array([
    [-0.091, 0.237, -0.182, 0.332, 0.130, 0.151, 0.118, 0.253], [0.004, -0.051, 0.210, 0.219, 0.048, -0.065, -0.010, 0.004],
    [0.123, -0.025, -0.008, 0.016, 0.007, -0.040, 0.114, 0.101], [-0.149, 0.082, 0.206, 0.053, 0.052, -0.040, -0.061, 0.154],
    [0.031, 0.083, 0.019, 0.005, 0.073, 0.010, -0.017, -1.726], [0.042, 0.005, 0.011, 0.046, 0.035, 0.167, -0.027, -0.047]])
MARKED = Agreement(-0.05, wrong_sign=[(2, 1), (4, 6), (4, 7)], off_rank=[(2, 5), (3, 0), (4, 7)], k=10)

# The estimate's map drawn through the page's Plotly as wide as its plot: each cell's number (heat map text), each
# mark drawn over the cells (annotations, scatter points) and each outline (shapes), as boxes on the page
DRAW_MARKED = """async (figure) => {
    const box = document.createElement('div');
    box.style.width = document.querySelector('#plot-rank-estimate').getBoundingClientRect().width + 'px';
    document.body.appendChild(box);
    await window.Plotly.newPlot(box, figure.data, figure.layout);
    const boxes = (selector) => [...box.querySelectorAll(selector)].map(e => {
        const r = e.getBoundingClientRect(); return {text: e.textContent, l: r.left, r: r.right, t: r.top, b: r.bottom}; });
    const drawn = {numbers: boxes('.heatmaplayer text'), marks: [...boxes('.annotation-text-g'), ...boxes('.scatterlayer .point')],
                   outlines: boxes('.shapelayer path')};
    box.remove();
    return drawn;
}"""


def overlap(a, b) -> bool:
    return a["l"] < b["r"] and b["l"] < a["r"] and a["t"] < b["b"] and b["t"] < a["b"]


def test_the_estimates_marks_leave_every_number_readable(page):
    """Each number in the estimate's map stays clear of any mark drawn over the cells, and inside any outline drawn
    round its cell (the line never crosses it), at the width the app draws the map."""
    open_tab(page, "Head ablation")
    drawn = "() => !!window.Plotly && !!document.querySelector('#plot-rank-estimate .main-svg')"
    if not page.evaluate(drawn):  # drawn once (gr.Plot loads plotly with its first plot): as wide as it is here
        page.click("#rank-button")
        plot_drawn(page, "plot-rank")
    figure = present_ablation.estimate_ranking_figure(HeadRanking("self", 5.52, MARKED_ESTIMATE), MARKED)
    drawn = page.evaluate(DRAW_MARKED, json.loads(figure.to_json()))
    numbers = [n["text"] for n in drawn["numbers"]]
    assert len(numbers) == MARKED_ESTIMATE.size
    for number in drawn["numbers"]:
        assert not [mark for mark in drawn["marks"] if overlap(number, mark)], number
        for outline in (o for o in drawn["outlines"] if overlap(number, o)):
            assert (outline["l"] + 4 < number["l"] and number["r"] < outline["r"] - 4
                    and outline["t"] + 4 < number["t"] and number["b"] < outline["b"] - 4), (number, outline)
    # the marks are lines of the cells' own text: × under 3 numbers, ○ under 3; an outline (a halo and a line) each
    assert [sum(glyph in n for n in numbers) for glyph in "×○"] == [3, 3] and len(drawn["outlines"]) == 12
    assert "-1.726 × ○" in [n.replace("×", " ×") for n in numbers]  # L4.H7, marked both ways
    assert page.errors == []


def test_sampling_tab_redraws_as_top_k_changes(page):
    open_tab(page, "Sampling, seen")
    page.click("#sampling-button")
    page.wait_for_selector("#sampling-status >> text=drawn from 384 of 384 tokens")
    plot_drawn(page, "plot-sampling")
    box = page.locator("#sampling-top-k input[type=number]")
    box.fill("5")
    box.press("Enter")
    page.wait_for_selector("#sampling-status >> text=drawn from 5 of 384 tokens")
    shot(page, "sampling")
    assert_no_error_shown(page)


def test_attention_tab_enlarges_a_clicked_head_and_follows_a_clicked_token(page):
    open_tab(page, "Attention heads")
    page.click("#att-button")
    page.wait_for_selector("#att-status >> text=layers ×")
    page.wait_for_selector("#att-token-status >> text=attends to")
    assert "Head types, threshold 0.4" in page.inner_text("#att-grid")
    page.locator('#att-grid button[data-layer="1"][data-head="2"]').click()
    page.wait_for_selector("#att-status >> text=Layer 1, head 2:")
    page.wait_for_selector("#plot-head .gtitle >> text=layer 1, head 2")
    assert page.locator('#att-grid button.selected[data-layer="1"][data-head="2"]').count() == 1
    page.locator('#att-tokens [data-index="3"]').click()
    page.wait_for_selector("#att-token-status >> text=what 3:")
    plot_drawn(page, "plot-token")
    rows = page.locator("#plot-token .ytick").count()
    assert rows == 4  # one row per head of the layer
    shot(page, "attention")
    shot(page, "attention-grid", "#att-grid")
    assert_no_error_shown(page)


def test_the_steps_tables_scroll_to_their_last_column_and_say_that_there_is_more(page):
    """A table wider than the page (32 columns) is cut nowhere: its box scrolls sideways until the last column is
    in sight, and while there is more to the right a shadow on the box's right edge says so (headless Chromium, like
    macOS, shows no scrollbar until one scrolls)."""
    open_tab(page, "Attention, step by step")
    pick(page, "steps-model", SLOW_MODEL)  # shakespeare-main's size: d_model 256, d_k 32
    page.click("#steps-button")
    page.wait_for_selector(f"#steps-status >> text={SLOW_MODEL}")
    page.wait_for_selector("#steps-status >> text=matches it within")
    boxes = page.locator("#steps-body .teach-scroll")
    wide = 0
    for i in range(boxes.count()):
        box = boxes.nth(i)
        width, room = box.evaluate("(el) => [el.scrollWidth, el.clientWidth]")
        assert box.bounding_box()["x"] + box.bounding_box()["width"] <= page.width
        if width <= room:
            continue
        wide += 1
        assert box.evaluate("(el) => getComputedStyle(el).overflowX") in ("auto", "scroll")
        assert "radial-gradient" in box.evaluate("(el) => getComputedStyle(el).backgroundImage")
        box.evaluate("(el) => { el.scrollLeft = el.scrollWidth; }")
        last = box.locator("thead th").last.bounding_box()
        inside = box.bounding_box()
        assert last["x"] + last["width"] <= inside["x"] + inside["width"] + 1
    assert wide >= 5  # the 32-column tables
    pick(page, "steps-model", "shakespeare-rope")


def test_a_headings_letters_are_drawn_in_one_font(page):
    """Every glyph of a heading comes from one font: a font file holding a few glyphs drew the "A" of "A Transformer
    from scratch" smaller than the rest."""
    cdp = page.context.new_cdp_session(page)
    cdp.send("DOM.enable")
    cdp.send("CSS.enable")
    root = cdp.send("DOM.getDocument")["root"]["nodeId"]
    headings = cdp.send("DOM.querySelectorAll", {"nodeId": root, "selector": "h1, h2, h3"})["nodeIds"]
    checked = 0
    for node in headings:
        fonts = cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]
        if fonts:
            checked += 1
            assert len({font["familyName"] for font in fonts}) == 1, fonts
    assert checked >= 1
    cdp.detach()
