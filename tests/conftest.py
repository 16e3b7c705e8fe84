"""What the test modules share: fixtures, and the helpers more than one module uses.

- The corpus, prepared once before any test (``pytest_sessionstart``).
- App fixtures (tests/explorer/, tests/ui/): tiny random checkpoints in
  the shipped layout, plus one random model at the shipped main model's size and two tiny recorded training runs,
  built once per session, and one app server on 127.0.0.1 that serves them; a gradio_client on it (``client``),
  a raw HTTP call to it (``call_raw``), a plot as the client receives it (``figure``) and its arrays
  (``plotly_array``), a tiny tokenizer.
- The browser: Chromium (``browser``), the app in a page at each width (``page``), a screenshot of a failed test's
  page, and the helpers that open tabs, pick menu entries, wait for plots and check that no error shows.

Builders of models, tokenizers and checkpoints are in fixtures_checkpoints.py and tiny_models.py; the local Hub in
fake_hub.py and hub_repos.py; the app in a process of its own in app_process.py.
"""

import base64
import json
import os
from pathlib import Path

import numpy as np
import pytest
import requests
import torch

from support.fixtures_checkpoints import build_checkpoints, build_timeline_runs, checkpoint_config, save_checkpoint, train_tokenizer
from support.local_server import free_port
from modeling import ScratchTransformerForCausalLM

# A random model of shakespeare-main's size (d_model 256, 8 heads, 6 layers, d_ff 1024): a real configuration
# slow enough (tens of tokens per second here) that a test can watch its stream and stop it mid-way.
SLOW_MODEL = "shipped-size"
SLOW_SIZE = dict(d_model=256, n_heads=8, n_layers=6, d_ff=1024)


def add_slow_checkpoint(root):
    tokenizer = train_tokenizer()
    torch.manual_seed(99)
    model = ScratchTransformerForCausalLM(checkpoint_config(tokenizer, "rope", **SLOW_SIZE)).eval()
    save_checkpoint(model, tokenizer, root / SLOW_MODEL)
    return root


def pytest_sessionstart(session):
    """Set-up before any test: the Shakespeare corpus (``training.corpus.prepare``; nothing to do once prepared). On a
    fresh clone it downloads and aligns the plays, about 100 s on 2 cores, which would otherwise land in the time of
    whichever test reads the corpus first."""
    from training.corpus import prepare

    prepare(verbose=False)


@pytest.fixture
def fresh_compiler():
    """The test compiles from nothing. Dynamo's caches live for the process, and its recompile limit (8) counts
    every compile of one code object, e.g. ScratchTransformerForCausalLM.forward, whichever model and test made
    it: a fullgraph compile (generate's CompileConfig(fullgraph=True), the benchmarks' --compile) after enough
    compiles in other tests would fail on the limit, not on the model."""
    torch._dynamo.reset()
    yield


@pytest.fixture(scope="session")
def tiny_checkpoints(tmp_path_factory):
    """A checkpoint root with the five shakespeare-<encoding> models, folio-to-modern, the shipped-size
    model, the recorded runs timeline-repeats and timeline-plain, and results.json."""
    return build_timeline_runs(add_slow_checkpoint(build_checkpoints(tmp_path_factory.mktemp("checkpoints"))))


@pytest.fixture(scope="session")
def _app_url(tiny_checkpoints):
    """app.demo launched once per session on 127.0.0.1, built from the tiny checkpoints; closed at the end."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SCRATCH_CHECKPOINTS", str(tiny_checkpoints))
        import app

        _, url, _ = app.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=free_port(), quiet=True)
    try:
        yield url
    finally:
        app.demo.close()


@pytest.fixture(scope="module")
def app_server(_app_url, tiny_checkpoints):
    """URL of the app serving the tiny checkpoints. The app reads SCRATCH_CHECKPOINTS per request: it is set
    for the modules that use the server only, so the rest of the suite sees the real checkpoints."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SCRATCH_CHECKPOINTS", str(tiny_checkpoints))
        yield _app_url


@pytest.fixture(scope="module")
def app(app_server):
    """The app module, as built by the app_server fixture (the tiny checkpoints)."""
    import app as module

    return module


@pytest.fixture(scope="module")
def client(app_server):
    """A gradio_client on the app server."""
    from gradio_client import Client

    return Client(app_server, verbose=False)


def figure(plot) -> dict:
    """A gr.Plot's value as the client receives it -> the plotly figure dict."""
    assert plot["type"] == "plotly"
    return json.loads(plot["plot"])


def plotly_array(value) -> np.ndarray:
    """An array of a figure as plotly's JSON holds it: a list, or a typed array {"dtype", "bdata" (base64), "shape"}."""
    if isinstance(value, list):
        return np.asarray(value)
    shape = [int(n) for n in str(value.get("shape", -1)).split(",")]
    return np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"])).reshape(shape)


@pytest.fixture(scope="module")
def tokenizer():
    """A tiny byte-level BPE (vocabulary 384), one per test module."""
    return train_tokenizer()


@pytest.fixture(scope="session")
def corpus():
    """The prepared corpus in data/ (downloaded, verified and aligned once; reused afterwards)."""
    from training.corpus import prepare

    return prepare(verbose=False)


# ----------------------------------------------------------------------------------------------
# The browser (tests marked ``browser``): headless Chromium driven by Playwright, and what the browser tests share
# ----------------------------------------------------------------------------------------------

SHOTS = Path(__file__).resolve().parent.parent / "artifacts" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run"]
TIMEOUT_MS = 60_000
WIDTHS = (1366, 800)


@pytest.fixture(scope="module")
def browser():
    """Chromium, one per module; without it the tests skip, or fail where the environment variable CI is set."""
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


def open_page(browser, url, width: int = WIDTHS[0]):
    """A new page of ``url`` at ``width`` px (900 high) that collects the page's script errors in ``page.errors``."""
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.set_default_timeout(TIMEOUT_MS)
    page.errors = []
    page.width = width
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    page.goto(url)
    return page


def app_page(browser, url, width: int = WIDTHS[0]):
    """``open_page``, once the app's model menus are filled."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = open_page(browser, url, width)
    page.wait_for_selector("#catalog-status >> text=model(s) ready")
    return page


@pytest.fixture(scope="module", params=WIDTHS, ids=lambda w: f"{w}px")
def page(request, browser, app_server):
    """The app in a page at each width in turn (1366, then 800 px); a module may narrow it with one of its own."""
    page = app_page(browser, app_server, request.param)
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


def set_tiny_job(page, steps: int):
    """Train one yourself set to a tiny job on random tokens: 2 heads, d_model 16, ``steps`` steps."""
    choose(page, "live-data", "Repeating random tokens")
    for elem_id, value in (("live-n-heads", 2), ("live-d-model", 16), ("live-steps", steps)):
        fill(page, elem_id, value)


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


def call_raw(url: str, api_name: str, data: list) -> tuple[str, object]:
    """POST /gradio_api/call/<api_name> with ``data`` as JSON (ASCII-escaped, so lone surrogates arrive as
    such); -> (the final SSE event name, its data)."""
    body = json.dumps({"data": data})  # ensure_ascii: "\ud800" travels as the escape \\ud800
    event_id = requests.post(f"{url}gradio_api/call/{api_name}", data=body,
                             headers={"Content-Type": "application/json"}, timeout=30).json()["event_id"]
    event, payload = None, None
    with requests.get(f"{url}gradio_api/call/{api_name}/{event_id}", stream=True, timeout=60) as stream:
        for line in stream.iter_lines(decode_unicode=True):
            if line.startswith("event: "):
                event = line[len("event: "):]
            elif line.startswith("data: ") and event in ("complete", "error"):
                payload = json.loads(line[len("data: "):])
                break
    return event, payload
