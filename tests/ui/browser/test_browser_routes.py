"""The How the prediction was made tab in headless Chromium, at 1366 and 800 px wide, on the shipped shakespeare-main:
the default example (a repeated line) draws its graph with the induction head L4.H7 named on it and no two labels
touching, a click on a node shows what the stream there would predict and what feeds it, bad input answers in the
status line; folio-to-modern's teaching and default position fit it. Screenshots:
artifacts/screenshots/routes-*-<width>.png."""

import pytest

from support.browser import SHOTS, app_page, assert_no_error_shown, fill, open_tab, pick, plot_drawn, scroll_at_rest, settled
from support.shipped import SHIPPED_ROOT

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def shipped_app(app_server):
    """The app server, reading the shipped checkpoints for this module (the app reads the folder per request)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SCRATCH_CHECKPOINTS", str(SHIPPED_ROOT))
        yield app_server


@pytest.fixture(params=[1366, 800], ids=lambda w: f"{w}px")
def page(request, browser, shipped_app):
    """The app on the shipped checkpoints at each width, on How the prediction was made: a fresh page a test."""
    page = app_page(browser, shipped_app, request.param)
    open_tab(page, "How the prediction was made")
    page.wait_for_function("() => document.querySelector('#routes-model input').value.startsWith('shakespeare-main')")
    yield page
    page.close()


def click_node(page, node_id: str):
    """A real mouse click on the graph's node ``node_id`` (the node trace's customdata), scrolled to the middle of
    the window first: the graph is taller than an 800 px page's window, and the panel of the click before may have
    scrolled it (the plot's box in sight is not enough)."""
    where = """(id) => {
        const plot = document.querySelector('#routes-plot .js-plotly-plot');
        const trace = plot.data.find((t) => Array.isArray(t.customdata));
        const k = trace.customdata.indexOf(id);
        const x = plot._fullLayout.xaxis, y = plot._fullLayout.yaxis;
        const rect = plot.getBoundingClientRect();
        return {x: rect.left + x._offset + x.l2p(trace.x[k]), y: rect.top + y._offset + y.l2p(trace.y[k])};
    }"""
    scroll_at_rest(page)  # the panel of the click before may still be scrolling into sight
    box = page.evaluate(where, node_id)
    page.evaluate("(y) => window.scrollBy(0, y - window.innerHeight / 2)", box["y"])
    scroll_at_rest(page)
    box = page.evaluate(where, node_id)
    page.mouse.click(box["x"], box["y"])


def test_the_default_example_draws_the_routes_and_a_click_on_a_node_shows_its_lens(page):
    page.click("#routes-button")
    page.wait_for_selector("#routes-status >> text=edges over")
    plot_drawn(page, "routes-plot")
    status = page.inner_text("#routes-status")
    assert "shakespeare-main" in status and "␣tem" in status
    ticks = page.locator("#routes-plot .xtick text").all_text_contents()
    assert ticks[0] == "0:Thou" and ticks[-1] == "14:␣more"
    rows = page.locator("#routes-plot .ytick text").all_text_contents()
    assert rows[0] == "embeddings" and rows[-1] == "L5 feed-forward" and "L4 attention" in rows
    assert "L4.H7" in page.locator("#routes-plot .annotation-text").all_text_contents()
    assert "after L5 feed-forward, token 14: ␣more" in page.inner_text("#routes-node")  # the prediction's node
    page.evaluate("window.scrollTo(0, 0)")
    settled(page)
    page.screenshot(path=SHOTS / f"routes-{page.width}.png", full_page=True)

    click_node(page, "r9:14")  # the stream at the last token after layer 4's attention: the induction head wrote it
    page.wait_for_selector("#routes-node >> text=after L4 attention, token 14")
    panel = page.inner_text("#routes-node")
    assert "L4.H7" in panel and "␣tem" in panel and "would predict" in panel
    click_node(page, "r7:6")  # the copied token after layer 3's attention: the previous-token head wrote into it
    page.wait_for_selector("#routes-node >> text=after L3 attention, token 6: ␣tem")
    assert "L3.H0" in page.inner_text("#routes-node")
    page.wait_for_function("""() => { const box = document.querySelector('#routes-node').getBoundingClientRect();
                                      return box.top >= 0 && box.bottom <= window.innerHeight; }""")
    page.screenshot(path=SHOTS / f"routes-clicked-{page.width}.png", full_page=True)
    assert_no_error_shown(page)


LABEL_BOXES_JS = """() => [...document.querySelectorAll('#routes-plot g.annotation')].map((a) => {
    const box = a.getBoundingClientRect();
    return {text: a.textContent, left: box.left, right: box.right, top: box.top, bottom: box.bottom};
})"""
LEAST_GAP_PX = 4  # two labels closer than this read as one ('L0.H2L0.H3' at 800 px)


def assert_labels_apart(page):
    """Every two labels on the drawn graph (heads, the source's tokens) keep LEAST_GAP_PX apart, measured on the
    page: their boxes (text and background) as Chromium laid them out."""
    boxes = page.evaluate(LABEL_BOXES_JS)
    assert boxes and all(b["right"] > b["left"] for b in boxes)
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            across = max(b["left"] - a["right"], a["left"] - b["right"])
            up = max(b["top"] - a["bottom"], a["top"] - b["bottom"])
            assert max(across, up) >= LEAST_GAP_PX, (page.width, a, b)
    return boxes


def test_the_head_labels_never_run_together(page):
    page.click("#routes-button")
    page.wait_for_selector("#routes-status >> text=edges over")
    plot_drawn(page, "routes-plot")
    settled(page)
    boxes = assert_labels_apart(page)
    assert len(boxes) >= 8 and "L4.H7" in [b["text"] for b in boxes]


def test_bad_input_says_what_is_allowed_in_the_status_line(page):
    fill(page, "routes-position", 99)
    page.click("#routes-button")
    page.wait_for_selector("#routes-status >> text=Position")
    assert "⚠️" in page.inner_text("#routes-status") and "to 14" in page.inner_text("#routes-status")
    fill(page, "routes-position", -1)


def test_an_encoder_decoder_draws_cross_attention_from_the_source_row(page):
    """folio-to-modern: the teaching's example head is one it has (3 decoder layers of 8 heads), −1 traces the
    rewrite's last word (after it the model predicts <|endoftext|>: the status says so), the labels keep apart."""
    # shakespeare-main: 6 layers of 8 heads (written by the menu's change event: waited for, as this test may run first)
    page.wait_for_selector("#routes-teaching >> text=L5.H7")
    pick(page, "routes-model", "folio-to-modern")
    page.wait_for_selector("#routes-teaching >> text=L2.H7")
    assert "L4.H7" not in page.inner_text("#routes-teaching")
    page.fill("#routes-text textarea", "Shall I compare thee to a Summers day?")
    page.click("#routes-button")
    page.wait_for_selector("#routes-status >> text=The decoder read the model's own rewrite")
    plot_drawn(page, "routes-plot")
    status = page.inner_text("#routes-status")
    assert "the prediction ? after token 10" in status and "Type 11 to trace that choice" in status, status
    assert page.locator("#routes-plot .ytick text").all_text_contents()[0] == "encoder output"
    assert "12:?" in page.locator("#routes-plot .annotation-text").all_text_contents()  # a source token, on its row
    settled(page)
    assert_labels_apart(page)
    page.evaluate("window.scrollTo(0, 0)")
    settled(page)
    page.screenshot(path=SHOTS / f"routes-encoder-decoder-{page.width}.png", full_page=True)
    assert_no_error_shown(page)
