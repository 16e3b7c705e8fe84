"""The Activation patching tab in headless Chromium, at 1366 and 800 px wide, on the shipped shakespeare-main: the
default example draws its four grids, each wide enough that every position's label stands clear of the next and
the estimate's marks stand apart; a click on a cell shows that patched run's top next tokens, the corrupted copy
buttons and bad input answer in the status line. Screenshots: artifacts/screenshots/patching-*-<width>.png."""

import pytest

from explorer.present.patching import LABEL_PX
from explorer.views.patching.texts import DEFAULT_CLEAN, DEFAULT_CORRUPTED
from explorer.views.patching.grids import GRIDS
from support.shipped import SHIPPED_ROOT
from support.browser import SHOTS, app_page, assert_no_error_shown, open_tab, plot_drawn, scroll_at_rest, settled

pytestmark = pytest.mark.browser

GRID_PLOTS = ("patching-plot-residual", "patching-plot-heads", "patching-plot-attention", "patching-plot-feed-forward")


@pytest.fixture(scope="module")
def shipped_app(app_server):
    """The app server, reading the shipped checkpoints for this module (the app reads the folder per request)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SCRATCH_CHECKPOINTS", str(SHIPPED_ROOT))
        yield app_server


@pytest.fixture(params=[1366, 800], ids=lambda w: f"{w}px")
def page(request, browser, shipped_app):
    """The app on the shipped checkpoints at each width, on the Activation patching tab: a fresh page a test."""
    page = app_page(browser, shipped_app, request.param)
    open_tab(page, "Activation patching")
    page.wait_for_function("() => document.querySelector('#patching-model input').value.startsWith('shakespeare-main')")
    yield page
    page.close()


def click_cell(page, plot_id: str, row: int, column: int, subplot: str = ""):
    """A real mouse click at the centre of cell (row, column) of a heat map (``subplot``: '' or '2' for x2/y2),
    scrolled to the middle of the window first (the panel of the click before may have scrolled the page)."""
    where = """([id, row, column, n]) => {
        const plot = document.querySelector(`#${id} .js-plotly-plot`);
        const x = plot._fullLayout['xaxis' + n], y = plot._fullLayout['yaxis' + n];
        const rect = plot.getBoundingClientRect();
        return {x: rect.left + x._offset + x.l2p(column), y: rect.top + y._offset + y.l2p(row)};
    }"""
    scroll_at_rest(page)  # the panel of the click before may still be scrolling into sight
    box = page.evaluate(where, [plot_id, row, column, subplot])
    page.evaluate("(y) => window.scrollBy(0, y - window.innerHeight / 2)", box["y"])
    scroll_at_rest(page)
    box = page.evaluate(where, [plot_id, row, column, subplot])
    page.mouse.click(box["x"], box["y"])


def test_the_default_example_draws_its_grids_and_a_click_shows_that_runs_top_tokens(page):
    assert page.input_value("#patching-clean textarea") == DEFAULT_CLEAN
    assert page.input_value("#patching-corrupted textarea") == DEFAULT_CORRUPTED
    assert "Only copying that earlier passage" in page.inner_text("#patching-example-note")
    page.click("#patching-button")
    page.wait_for_selector("#patching-status >> text=patched runs in")
    status = page.inner_text("#patching-status")
    assert "shakespeare-main" in status and "␣send" in status
    table = page.locator("#patching-status table")  # the estimate against the exact grids: a row per grid, in sight
    assert table.locator("tbody tr").count() == len(GRID_PLOTS) and "Residual stream" in table.inner_text()
    assert table.bounding_box()["width"] <= page.locator("#patching-status").bounding_box()["width"] + 1
    header = table.locator("th").nth(1)  # "correlation", whole on one line: no break inside a word
    lines = "(el) => { const r = document.createRange(); r.selectNodeContents(el); return r.getClientRects().length; }"
    assert header.inner_text() == "correlation" and header.evaluate(lines) == 1
    for plot in GRID_PLOTS:
        plot_drawn(page, plot)
    ticks = page.locator("#patching-plot-residual .xtick text").all_text_contents()
    assert ticks[0] == "0:My" and ticks[-1] == "29:olk" and "6:␣Nor*" in ticks  # the tokens; a changed one starred
    assert "L4.H7" in page.inner_text("#patching-explanation")
    page.evaluate("window.scrollTo(0, 0)")
    settled(page)
    page.screenshot(path=SHOTS / f"patching-{page.width}.png", full_page=True)

    click_cell(page, "patching-plot-residual", 5, 29)  # the last position entering the last layer: the clean answer
    page.wait_for_selector("#patching-plot-cell >> text=L5 at 29:olk")
    plot_drawn(page, "patching-plot-cell")
    labels = page.locator("#patching-plot-cell .ytick text").all_text_contents()
    assert "1. ␣send" in labels and len(labels) == 5
    click_cell(page, "patching-plot-heads", 4, 7, "2")  # L4.H7 at the last position only
    page.wait_for_selector("#patching-plot-cell >> text=L4.H7 at last position")
    assert "restored 0.9" in page.inner_text("#patching-cell-status")
    click_cell(page, "patching-plot-feed-forward", 5, 29)  # the last grid: the answer is in sight (beside it, or scrolled to)
    page.wait_for_selector("#patching-plot-cell >> text=L5 at 29:olk")
    page.wait_for_function("""() => { const box = document.querySelector('#patching-plot-cell').getBoundingClientRect();
                                      return box.top >= 0 && box.bottom <= window.innerHeight; }""")
    assert "Feed-forward output, patched at L5, 29:olk" in page.inner_text("#patching-cell-status")
    click_cell(page, "patching-plot-heads", 4, 7, "2")
    page.wait_for_selector("#patching-plot-cell >> text=L4.H7 at last position")
    assert "1. ␣send" in page.locator("#patching-plot-cell .ytick text").all_text_contents()
    page.locator("#patching-plot-cell").scroll_into_view_if_needed()
    page.screenshot(path=SHOTS / f"patching-clicked-{page.width}.png", full_page=True)
    assert_no_error_shown(page)


# Each drawn grid (exact and estimate): its width, its plot area's px per position, its x tick labels, the pairs of
# them whose drawn boxes intersect (each label's own box turned as it is drawn, -60 degrees: their screen rectangles
# would always overlap), and the same for the estimate's marks (plotly's text points); its right edge, its title's,
# and the title's first line
GRID_READING = """() => Array.from(document.querySelectorAll('[id^="patching-plot-"], [id^="patching-estimate-"]'))
    .filter((host) => host.querySelector('.js-plotly-plot')).map((host) => {
    const plot = host.querySelector('.js-plotly-plot'), x = plot._fullLayout.xaxis;
    const drawn = (selector) => Array.from(plot.querySelectorAll(selector)).map((t) => {
        const b = t.getBBox(), m = t.getScreenCTM();
        return [t.textContent, [[b.x, b.y], [b.x + b.width, b.y], [b.x + b.width, b.y + b.height], [b.x, b.y + b.height]]
            .map(([u, v]) => [m.a * u + m.c * v + m.e, m.b * u + m.d * v + m.f])];
    });
    const apart = (p, q) => [p, q].some((side) => side.some((a, i) => {  // a separating axis: an edge's normal
        const b = side[(i + 1) % 4], n = [a[1] - b[1], b[0] - a[0]];
        const along = (corners) => corners.map(([u, v]) => u * n[0] + v * n[1]);
        const s = along(p), o = along(q);
        return Math.max(...s) <= Math.min(...o) + 0.5 || Math.max(...o) <= Math.min(...s) + 0.5;
    }));
    const crossing = (boxes) => boxes.flatMap((a, i) => boxes.slice(i + 1).filter((b) => !apart(a[1], b[1]))
                                                              .map((b) => a[0] + ' / ' + b[0]));
    const ticks = drawn('.xtick text'), marks = drawn('.textpoint text'), title = plot.querySelector('.gtitle');
    return {id: host.id, width: host.getBoundingClientRect().width, perPosition: x._length / x._categories.length,
            right: plot.getBoundingClientRect().right, titleRight: title.getBoundingClientRect().right,
            firstLine: (title.querySelector('tspan.line') || title).textContent,
            ticks: ticks.map((t) => t[0]), ticksCrossing: crossing(ticks), marks: marks.map((t) => t[0]),
            marksCrossing: crossing(marks)};
})"""


WHOLE_TITLES = {title for kind in GRIDS.values() for title in (kind.title, f"Estimate (AtP): {kind.title}")}


def test_every_grid_is_wide_enough_for_each_positions_label_and_the_estimates_marks_stand_apart(page):
    """The default example's 30 positions at 1366 and 800 px: every grid at least LABEL_PX px a position, every
    position labelled, the changed neighbours (6, 7, 8) too, no two labels' drawn boxes crossing; each title's
    first line the whole title, no title line past the figure's edge; on the estimate's
    residual grid the cell both wrong-signed and missed shows × and ○ side by side, not one over the other."""
    page.fill("#patching-clean textarea", DEFAULT_CLEAN)
    page.fill("#patching-corrupted textarea", DEFAULT_CORRUPTED)
    page.evaluate("""() => { const gd = document.querySelector('#patching-plot-residual .js-plotly-plot');
                             if (gd) { gd.__before = true; window.__residualBefore = gd.data; } }""")
    page.click("#patching-button")  # the exact grids go while the estimate is shown, and come back: a new plot
    page.wait_for_function("""() => { const gd = document.querySelector('#patching-plot-residual .js-plotly-plot');
                                      return gd && (!gd.__before || gd.data !== window.__residualBefore); }""")
    page.wait_for_selector("#patching-status >> text=patched runs in")
    for plot in (*GRID_PLOTS, "patching-estimate-residual", "patching-estimate-feed-forward"):
        plot_drawn(page, plot)
    settled(page)
    grids = page.evaluate(GRID_READING)
    assert len(grids) == 8, [g["id"] for g in grids]
    for grid in grids:
        assert grid["ticksCrossing"] == [] and grid["marksCrossing"] == [], grid
        # the title on one line (wrapped for the grids' column, never narrower than 600 px), and no line past the edge
        assert grid["titleRight"] <= grid["right"] and grid["firstLine"] in WHOLE_TITLES, grid
        if not grid["id"].endswith("heads"):
            assert grid["perPosition"] >= LABEL_PX and len(grid["ticks"]) == 30, grid
            assert {"6:␣Nor*", "7:f*", "8:olk*"} <= set(grid["ticks"]), grid
    residual = next(g for g in grids if g["id"] == "patching-estimate-residual")
    assert "×" in residual["marks"] and "○" in residual["marks"], residual  # this example: L0 at 6 is both


def test_the_corrupted_copy_buttons_and_bad_input_answer_in_the_status_line(page):
    page.fill("#patching-corrupted textarea", "")
    page.click("#patching-change-word")
    page.wait_for_selector("#patching-status >> text=Corrupted copy: changed")
    assert page.input_value("#patching-corrupted textarea") == DEFAULT_CORRUPTED
    page.click("#patching-swap-half")  # the default text's first half swapped in pairs reads as more tokens
    page.wait_for_selector("#patching-status >> text=changed the number of tokens; edit the corrupted text by hand")
    assert page.input_value("#patching-corrupted textarea") == DEFAULT_CORRUPTED  # left as it was
    repeated = "Thou art more lovely and more temperate. Thou art more lovely and more temperate."
    page.fill("#patching-clean textarea", repeated)
    page.click("#patching-swap-half")
    page.wait_for_selector("#patching-status >> text=swapped the words of the first half")
    assert page.input_value("#patching-corrupted textarea").startswith("art Thou lovely more more and temperate.")
    page.fill("#patching-clean textarea", DEFAULT_CLEAN)
    page.fill("#patching-corrupted textarea", "Tell the duke <b>of</b> Norfolk")
    page.click("#patching-button")
    page.wait_for_selector("#patching-status >> text=must have the same number of tokens")
    assert page.locator("#patching-status b").count() == 0
    for plot in GRID_PLOTS:  # the last request's grids are cleared, not left looking like this one's answer
        assert page.locator(f"#{plot} .js-plotly-plot").count() == 0
    page.fill("#patching-corrupted textarea", DEFAULT_CORRUPTED)
    page.fill("#patching-answer textarea, #patching-answer input", "Norfolk")
    page.click("#patching-button")
    page.wait_for_selector("#patching-status >> text=must be exactly one token")
    page.fill("#patching-answer textarea, #patching-answer input", "")
    page.fill("#patching-clean textarea", "")
    page.click("#patching-button")
    page.wait_for_selector("#patching-status >> text=Type a clean text first")
    page.fill("#patching-clean textarea", DEFAULT_CLEAN)
    assert page.errors == []
