"""Shared fixtures.

App fixtures (tests/test_analysis.py, tests/test_app.py, tests/test_browser.py): tiny random checkpoints in
the shipped layout, built once per session, and one app server on 127.0.0.1 that serves them.
"""

import pytest

from fixtures_checkpoints import build_checkpoints
from local_server import free_port


@pytest.fixture(scope="session")
def tiny_checkpoints(tmp_path_factory):
    """A checkpoint root with the five shakespeare-<encoding> models, folio-to-modern and results.json."""
    return build_checkpoints(tmp_path_factory.mktemp("checkpoints"))


@pytest.fixture(scope="session")
def app_server(tiny_checkpoints):
    """URL of app.demo served on 127.0.0.1 from the tiny checkpoints; closed at the end of the session."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SCRATCH_CHECKPOINTS", str(tiny_checkpoints))
        import app

        _, url, _ = app.demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=free_port(), quiet=True)
        try:
            yield url
        finally:
            app.demo.close()


@pytest.fixture(scope="session")
def corpus():
    """The prepared corpus in data/ (downloaded, verified and aligned once; reused afterwards)."""
    from training.corpus import prepare

    return prepare(verbose=False)
