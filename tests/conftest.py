"""Shared fixtures.

App fixtures (tests/test_explorer_*.py, tests/test_app*.py, tests/test_browser.py): tiny random checkpoints in
the shipped layout, plus one random model at the shipped main model's size and two tiny recorded training runs,
built once per session, and one app server on 127.0.0.1 that serves them.
"""

import json

import pytest
import torch

from fixtures_checkpoints import build_checkpoints, build_timeline_runs, checkpoint_config, save_checkpoint, train_tokenizer
from local_server import free_port
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


@pytest.fixture(scope="module")
def tokenizer():
    """A tiny byte-level BPE (vocabulary 384), one per test module."""
    return train_tokenizer()


@pytest.fixture(scope="session")
def corpus():
    """The prepared corpus in data/ (downloaded, verified and aligned once; reused afterwards)."""
    from training.corpus import prepare

    return prepare(verbose=False)
