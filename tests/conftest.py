"""The fixtures the test modules share. Plain helpers live in modules of tests/support/ and are imported from there
(``from support.browser import open_tab``), never from this file.

- The corpus, prepared once before any test (``pytest_sessionstart``).
- App fixtures (tests/explorer/, tests/ui/): tiny random checkpoints in the shipped layout, plus one random model at
  the shipped main model's size and two tiny recorded training runs, built once per session
  (support/fixtures_checkpoints.py), and one app server on 127.0.0.1 that serves them; a gradio_client on it
  (``client``), a tiny tokenizer. A raw HTTP call to the app and a plot as the client receives it are in
  support/app_client.py.
- The Hub (tests/explorer/models, tests/explorer/learning, tests/ui): ``start_fake_hub`` starts one FakeHub per module
  on 127.0.0.1 with the environment pointed at it; the module adds the repos it serves.
- The browser: Chromium (``browser``), the app in a page at each width (``page``), a screenshot of a failed test's
  page; the steps a visitor takes in a page are in support/browser.py.

Builders of models, tokenizers and checkpoints are in support/fixtures_checkpoints.py and support/tiny_models.py; the
local Hub in support/fake_hub.py and support/hub_repos.py; the app in a process of its own in support/app_process.py.
"""

import contextlib
import os
import sys

import pytest
import torch

from support.browser import CHROMIUM, SHOTS, WIDTHS, app_page, launch_chromium
from support.fixtures_checkpoints import add_slow_checkpoint, build_checkpoints, build_timeline_runs, train_tokenizer
from support.fake_hub import FakeHub
from support.local_server import free_port

UNCHANGED = object()  # start_fake_hub's token: leave HF_TOKEN as the environment has it


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


@pytest.fixture(scope="module")
def tokenizer():
    """A tiny byte-level BPE (vocabulary 384), one per test module."""
    return train_tokenizer()


@pytest.fixture(scope="session")
def corpus():
    """The prepared corpus in data/ (downloaded, verified and aligned once; reused afterwards)."""
    from training.corpus import prepare

    return prepare(verbose=False)


@pytest.fixture(scope="module")
def start_fake_hub(tmp_path_factory):
    """``start_fake_hub(users=None, token=UNCHANGED)`` -> a FakeHub on 127.0.0.1 (support/fake_hub.py), serving nothing
    yet: the module adds its repos. ``users`` maps a token to its user (FakeHub's default: one tester). The real
    huggingface_hub client talks to it: HF_ENDPOINT is its url, HF_HOME a new folder, HF_HUB_OFFLINE and HF_HUB_CACHE
    unset, and HF_TOKEN (the machine's own token) set to ``token``, removed where it is None, left as it is by
    default. At the module's end the Hub models the app opened are forgotten, the environment is restored and the
    Hub closes. A module that needs its Hub after the app server asks for ``app_server`` first."""
    with contextlib.ExitStack() as stack:
        def start(users: dict[str, str] | None = None, token=UNCHANGED) -> FakeHub:
            hub = stack.enter_context(FakeHub(users=users))
            patch = stack.enter_context(pytest.MonkeyPatch.context())
            patch.setenv("HF_ENDPOINT", hub.url)
            patch.setenv("HF_HOME", str(tmp_path_factory.mktemp("fake-hub") / "home"))
            patch.delenv("HF_HUB_OFFLINE", raising=False)
            patch.delenv("HF_HUB_CACHE", raising=False)
            if token is None:
                patch.delenv("HF_TOKEN", raising=False)
            elif token is not UNCHANGED:
                patch.setenv("HF_TOKEN", token)
            stack.callback(forget_opened_hub_models)  # first at the end: while the Hub and the environment are there
            return hub

        yield start


def forget_opened_hub_models() -> None:
    """Close every model the app opened in this process (none where explorer.models.registry was never imported)."""
    opener = sys.modules.get("explorer.models.registry")
    if opener is not None:
        opener.forget_all()


# ----------------------------------------------------------------------------------------------
# The browser (tests marked ``browser``): headless Chromium driven by Playwright (helpers: support/browser.py)
# ----------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def browser():
    """Chromium, one per module; without it the tests skip, or fail where the environment variable CI is set."""
    try:
        playwright, browser = launch_chromium()
    except Exception as error:  # noqa: BLE001
        message = f"Chromium could not be launched from {CHROMIUM}: {error}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    yield browser
    browser.close()
    playwright.stop()


@pytest.fixture(params=WIDTHS, ids=lambda w: f"{w}px")
def page(request, browser, app_server):
    """The app in a fresh page at each width (1366, then 800 px), one per test: no test reads what another left on
    the page (a tab open, a model picked, a result drawn). A module may narrow it with one of its own."""
    page = app_page(browser, app_server, request.param)
    yield page
    page.close()


@pytest.fixture(autouse=True)
def screenshot_on_failure(request):
    """A failed browser test's page, as it was, in artifacts/screenshots/failed-<test>.png. The page is taken at the
    start, so that it is closed after this fixture ends (a page is a test's own)."""
    page = request.getfixturevalue("page") if "page" in request.fixturenames else None
    failed_before = request.session.testsfailed
    yield
    if page is not None and request.session.testsfailed > failed_before:
        page.screenshot(path=SHOTS / f"failed-{request.node.name}.png", full_page=True)
