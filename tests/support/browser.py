"""The browser tests' helpers (tests marked ``browser``): headless Chromium driven by Playwright, the app in a page,
and the steps a visitor takes in it: open a tab, pick a menu entry, fill a box, wait for a plot or for the page to
settle at its width, take a screenshot, check that no error shows. The fixtures (``browser``, ``page``) are in
conftest.py."""

from pathlib import Path

SHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run"]
TIMEOUT_MS = 60_000
WIDTHS = (1366, 800)


def launch_chromium():
    """(playwright, browser) with Chromium launched headless; raises with why it could not be (the playwright
    started, if it was, is stopped first)."""
    from playwright.sync_api import sync_playwright

    playwright = sync_playwright().start()
    try:
        return playwright, playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    except Exception:
        playwright.stop()
        raise


def open_page(browser, url, width: int = WIDTHS[0]):
    """A new page of ``url`` at ``width`` px (900 high) that collects the page's script errors in ``page.errors``."""
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.set_default_timeout(TIMEOUT_MS)
    page.errors = []
    page.width = width
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    page.goto(url)
    return page


# The page-load events done: the catalog refreshing every menu, then each menu's change writing its note. A first
# pick made while they still answer (seen under load, a few times in a hundred pages) left that menu's change events
# firing again every few seconds, so its note never settled: a visitor's first step waits until no output shows
# progress for half a second, as a person waits for the spinners to go.
LOAD_SETTLED = """() => {
    const busy = document.querySelectorAll('.pending, .generating, .progress-text, .eta-bar').length > 0;
    if (busy) { window.__calmSince = null; return false; }
    window.__calmSince = window.__calmSince || performance.now();
    return performance.now() - window.__calmSince > 500;
}"""


def app_page(browser, url, width: int = WIDTHS[0]):
    """``open_page``, once the app's model menus are filled and the page-load events have answered."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = open_page(browser, url, width)
    page.wait_for_selector("#catalog-status >> text=model(s) ready")
    page.wait_for_function(LOAD_SETTLED, polling=100)
    return page


def open_tab(page, name: str):
    page.get_by_role("tab", name=name).click()


def plot_drawn(page, elem_id: str):
    page.wait_for_selector(f"#{elem_id} .js-plotly-plot .main-svg", state="attached")


def pick(page, menu_id: str, option: str):
    """Choose the menu entry whose line starts with ``option``."""
    page.evaluate("() => document.activeElement && document.activeElement.blur()")  # a focused menu opens on focus only
    page.click(f"#{menu_id} input")
    page.wait_for_function("(id) => document.querySelector(`#${id} input`).getAttribute('aria-expanded') === 'true'", arg=menu_id)
    page.get_by_role("option", name=option).first.click()
    page.wait_for_function("([id, name]) => document.querySelector(`#${id} input`).value.startsWith(name)", arg=[menu_id, option])
    # The menu's note is written by the server from the value it received: once it names the model, the page
    # holds the new value and the next click sends it. (Clicking at once could send the old model under load.)
    page.wait_for_function("([id, name]) => document.querySelector(`#${id}-note`).innerText.trim().startsWith(name)",
                           arg=[menu_id, option])


def click_for_new_status(page, button: str, status: str, text: str):
    """Click ``button``, then wait until ``status`` (a selector) shows ``text`` in a line other than the one it showed
    before the click: a status an earlier request left never answers for this one."""
    before = page.inner_text(status)
    page.click(button)
    page.wait_for_function("([sel, text, before]) => { const t = document.querySelector(sel).innerText; "
                           "return t.includes(text) && t !== before; }", arg=[status, text, before])


def assert_no_error_shown(page):
    text = page.inner_text("body")
    assert "Traceback" not in text and "⚠️" not in text, text[:2000]
    assert page.errors == []


def choose(page, menu_id: str, option: str):
    page.click(f"#{menu_id} input")
    page.get_by_role("option", name=option).first.click()
    page.wait_for_function("([id, name]) => document.querySelector(`#${id} input`).value === name", arg=[menu_id, option])


def fill(page, elem_id: str, value):
    """Type ``value`` into the number box ``elem_id``."""
    page.fill(f"#{elem_id} input[type=number]", str(value))


def type_text(page, elem_id: str, text: str, settle_ms: int = 500):
    """Type ``text`` into the text box ``elem_id`` and see that it stays: a box in a tab just opened can take its
    initial value back from under a fill (One gradient step's target once read ' day' again, not ' the')."""
    box = page.locator(f"#{elem_id} textarea, #{elem_id} input").first
    for _ in range(5):
        box.fill(text)
        page.wait_for_timeout(settle_ms)
        if box.input_value() == text:
            return
    raise AssertionError(f"#{elem_id} does not keep {text!r}: it holds {box.input_value()!r}")


def set_tiny_job(page, steps: int):
    """Train one yourself set to a tiny job on random tokens: 2 heads, d_model 16, ``steps`` steps."""
    choose(page, "live-data", "Repeating random tokens")
    for elem_id, value in (("live-n-heads", 2), ("live-d-model", 16), ("live-steps", steps)):
        fill(page, elem_id, value)


def scroll_at_rest(page, ms: int = 400):
    """Wait until the page has not scrolled for ``ms``: the app scrolls a clicked cell's or node's panel into sight
    150 ms after its answer lands, so a click whose coordinates were read before that would land elsewhere."""
    page.wait_for_function("""(ms) => new Promise((done) => {
        const y = window.scrollY;
        setTimeout(() => done(window.scrollY === y), ms);
    })""", arg=ms)


def settled(page):
    """Wait until the page has been laid out again at its width: every visible plot drawn as wide as its box,
    every table row inside its table."""
    page.wait_for_function("""() => {
        const shown = [...document.querySelectorAll('.js-plotly-plot')].filter(p => p.offsetParent !== null);
        const plots = shown.every(p => {
            const svg = p.querySelector('.main-svg');
            return svg && Math.abs(svg.getBoundingClientRect().width - p.getBoundingClientRect().width) < 2;
        });
        const tables = [...document.querySelectorAll('[role=grid], table')].filter(t => t.offsetParent !== null).every(t => {
            const box = t.parentElement.getBoundingClientRect();
            return [...t.querySelectorAll('[role=gridcell]')].every(c => c.getBoundingClientRect().right <= box.right + 1);
        });
        return plots && tables;
    }""")


def shot(page, name: str, selector: str | None = None):
    path = SHOTS / f"teach-{name}-{page.width}.png"
    if selector:
        page.locator(selector).screenshot(path=path)
    else:
        page.evaluate("window.scrollTo(0, 0)")
        page.screenshot(path=path, full_page=True)
