"""app.py in headless Chromium (Debian's /usr/bin/chromium, driven by Playwright): every tab renders.

Screenshots go to artifacts/screenshots/ (gitignored): look at them after a change to the layout.
Without Chromium these tests skip; with the environment variable CI set they fail instead.
"""

import os
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

SHOTS = Path(__file__).resolve().parent.parent / "artifacts" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run"]
TIMEOUT_MS = 30_000


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import sync_playwright

        playwright = sync_playwright().start()
    except Exception as error:  # noqa: BLE001
        playwright, launch_error = None, error
    else:
        try:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            launch_error = None
        except Exception as error:  # noqa: BLE001
            launch_error = error
    if launch_error is not None:
        if playwright is not None:
            playwright.stop()
        message = f"Chromium could not be launched from {CHROMIUM}: {launch_error}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    yield browser
    browser.close()
    playwright.stop()


@pytest.fixture(scope="module")
def page(browser, app_server):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(TIMEOUT_MS)
    page.errors = []
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    page.goto(app_server)
    page.wait_for_selector("#catalog-status >> text=model(s) in")
    yield page
    page.close()


@pytest.fixture(autouse=True)
def screenshot_on_failure(request):
    failed_before = request.session.testsfailed
    yield
    if request.session.testsfailed > failed_before and "page" in request.fixturenames:
        request.getfixturevalue("page").screenshot(path=SHOTS / f"failed-{request.node.name}.png", full_page=True)


def open_tab(page, name: str):
    page.get_by_role("tab", name=name).click()


def plot_drawn(page, elem_id: str):
    page.wait_for_selector(f"#{elem_id} .js-plotly-plot .main-svg", state="attached")


def assert_no_error_shown(page):
    text = page.inner_text("body")
    assert "Traceback" not in text and "⚠️" not in text, text[:2000]
    assert page.errors == []


def test_page_loads_with_the_models(page):
    assert page.input_value("#gen-model input") == "shakespeare-rope"  # the other tabs render when clicked
    page.screenshot(path=SHOTS / "01-generate.png", full_page=True)
    assert_no_error_shown(page)


def test_generation_streams_into_the_output(page):
    open_tab(page, "Generate")
    page.fill("#gen-max-new input", "300")
    page.click("#gen-button")
    seen, deadline = [], time.time() + 30
    while time.time() < deadline:
        value = page.input_value("#gen-output textarea")
        if value and (not seen or value != seen[-1]):
            seen.append(value)
        if "Done" in page.inner_text("#gen-status"):
            break
        time.sleep(0.03)
    assert "Done: **" not in page.inner_text("#gen-status")  # rendered as markdown
    assert "tokens/s" in page.inner_text("#gen-status")
    assert len(seen) >= 3, seen  # the text arrived in pieces, not at the end
    assert all(later.startswith(earlier) for earlier, later in zip(seen, seen[1:]))
    page.screenshot(path=SHOTS / "02-generated.png", full_page=True)
    assert_no_error_shown(page)


def test_stop_button_ends_generation(page):
    page.fill("#gen-max-new input", "512")
    page.click("#gen-button")
    page.wait_for_selector("#gen-status >> text=tokens/s")
    page.click("#gen-stop")
    page.wait_for_selector("#gen-status >> text=Stopped")
    assert_no_error_shown(page)


def test_empty_prompt_shows_a_message_not_a_traceback(page):
    page.fill("#gen-prompt textarea", "")
    page.click("#gen-button")
    page.wait_for_selector("#gen-status >> text=Type a prompt first")
    page.wait_for_selector(".toast-body >> text=Type a prompt first")  # the gr.Warning pop-up
    page.screenshot(path=SHOTS / "03-empty-prompt.png")
    assert "Traceback" not in page.inner_text("body")
    page.click(".toast-close")  # so that it does not cover the next screenshots
    page.wait_for_selector(".toast-body", state="detached")
    page.fill("#gen-prompt textarea", "Shall I compare thee")


def test_encodings_tab_renders_its_plots(page):
    open_tab(page, "Compare encodings")
    for elem_id in ("plot-sinusoidal", "plot-learned", "plot-rope", "plot-alibi", "plot-similarity", "plot-extrapolation"):
        plot_drawn(page, elem_id)
    assert page.locator("#plot-extrapolation .scatterlayer .trace").count() == 5
    page.click("#compare-button")
    page.wait_for_selector("#compare-status >> text=Done: 5 models")
    for encoding in ("sinusoidal", "learned", "rope", "alibi", "none"):
        assert page.input_value(f"#compare-{encoding} textarea") not in ("", "…")
    page.fill("#own-text textarea", "Shall I compare thee to a summer's day? Thou art more lovely. " * 6)
    page.click("#recompute-button")
    page.wait_for_selector("#enc-status >> text=Scored")
    plot_drawn(page, "plot-extrapolation")
    page.screenshot(path=SHOTS / "04-encodings.png", full_page=True)
    assert_no_error_shown(page)


def test_attention_grid_appears(page):
    open_tab(page, "Attention heads")
    assert page.input_value("#att-model input") == "shakespeare-rope"
    page.click("#att-button")
    page.wait_for_selector("#att-status >> text=layers ×")
    plot_drawn(page, "plot-grid")
    plot_drawn(page, "plot-head")
    assert page.locator("#plot-grid .heatmaplayer .hm").count() == 2 * 4  # one heatmap per layer x head
    cells = page.locator("#plot-head .nsewdrag").first
    cells.scroll_into_view_if_needed()
    box = cells.bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.2, box["y"] + box["height"] * 0.8)  # below the diagonal
    page.wait_for_selector("#plot-head .hoverlayer .hovertext", state="attached")
    hover = page.locator("#plot-head .hoverlayer").text_content()
    assert "query" in hover and "key" in hover and "weight" in hover, hover
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=SHOTS / "05-attention.png", full_page=True)
    assert_no_error_shown(page)


def test_attention_of_folio_to_modern_offers_cross_attention(page):
    page.click("#att-model input")
    page.get_by_role("option", name="folio-to-modern").click()
    page.click("#att-button")
    page.wait_for_selector("#att-status >> text=folio-to-modern: 2 layers")
    assert "cross-attention" in page.inner_text("#att-status")
    plot_drawn(page, "plot-head")
    page.screenshot(path=SHOTS / "05b-cross-attention.png", full_page=True)
    assert_no_error_shown(page)


def test_forward_pass_tab_shows_the_shapes(page):
    open_tab(page, "Inside the forward pass")
    assert page.input_value("#trace-model input") == "shakespeare-rope"
    page.click("#trace-button")
    page.wait_for_selector("#trace-status >> text=Forward pass done")
    table = page.inner_text("#trace-table")
    for step in ("token ids", "token embeddings", "Q per head", "scores", "weights", "concatenated heads",
                 "feed-forward hidden", "layer 1 output", "logits", "probabilities"):
        assert step in table, step
    plot_drawn(page, "plot-top")
    page.screenshot(path=SHOTS / "06-forward-pass.png", full_page=True)
    assert_no_error_shown(page)
