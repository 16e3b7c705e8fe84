"""The operator's token is the operator's. Through the app's real endpoints (the app server of
tests/conftest.py) against the local Hub (tests/support/fake_hub.py), with the machine's token (HF_TOKEN) set to the
operator's. The app listens on 127.0.0.1 in these tests; ``reachable_by_others`` records the host a launch with
``server_name="0.0.0.0"`` records (``hub_files.serving_on``), which is what the app serves strangers on.

- Row 1: a visitor who is not signed in pushes nothing with the machine's token; and no push ever writes into an
  existing repo this app did not create (the operator's own), while one it created takes a second push.
- Row 2: a visitor cannot open the operator's private repo: no request of theirs carries the machine's token (unless
  the operator lends it, ``SCRATCH_HUB_SHARE_TOKEN=1``, and then private repos are refused all the same); on a Space
  too. The operator, at the machine, opens it.
"""

import pytest
from gradio_client import Client, handle_file

from support import hub_repos

OPERATOR_TOKEN = "hf_operator_token"
USERS = {OPERATOR_TOKEN: "operator"}
PRIVATE = "operator/private-model"
PUBLIC = "tiny/public"


@pytest.fixture(scope="module")
def hub(app_server, start_fake_hub, tmp_path_factory):
    """The local Hub: the operator's private repo, a public one, and a repo the operator made themselves."""
    tmp = tmp_path_factory.mktemp("hostile-token")
    server = start_fake_hub(users=USERS, token=OPERATOR_TOKEN)
    files = hub_repos.files_of(hub_repos.save_transformers_repo(tmp / "gpt2", "gpt2"))
    server.add_repo(PRIVATE, files)
    server.private.add(PRIVATE)
    server.add_repo(PUBLIC, files)
    server.add_repo("operator/precious", {"README.md": b"# The operator's own work", "config.json": b"{}"})
    return server


@pytest.fixture
def reachable_by_others():
    """The app as launched on every interface (``server_name="0.0.0.0"``): requests come from anyone."""
    from explorer.models import hub_files

    assert hub_files.loopback_only()  # the test server's launch recorded 127.0.0.1
    hub_files.serving_on("0.0.0.0")
    yield
    hub_files.serving_on("127.0.0.1")


@pytest.fixture(scope="module")
def trained_zip(tmp_path_factory):
    """The zip and JSON of a real (tiny) Train one yourself job."""
    from explorer.learning import live_result, live_settings, train_live
    from support.fixtures_checkpoints import train_tokenizer

    settings = live_settings.check_settings(n_layers=1, n_heads=2, d_model=16, steps=2, log_every=1, data="own-text",
                                            text="Shall I compare thee to a summer's day? " * 30, batch_size=4,
                                            context_length=16)
    *_, result = train_live.train_live(settings, tokenizer=train_tokenizer())
    return live_result.save_zip(result, tmp_path_factory.mktemp("trained-hostile")), result.to_json()


def carried_operator_token(hub, since: int) -> bool:
    return OPERATOR_TOKEN in hub.tokens_seen[since:]


# ----------------------------------------------------------------------------------------------
# Row 2: the operator's private repo
# ----------------------------------------------------------------------------------------------


def test_a_visitor_cannot_open_the_operators_private_repo(app_server, hub, reachable_by_others):
    before = len(hub.tokens_seen)
    result, line = Client(app_server, verbose=False).predict(PRIVATE, "", api_name="/open_model")
    assert result is None and "No such model repo" in line, line
    assert hub.downloads(PRIVATE, "model.safetensors") == 0
    assert len(hub.tokens_seen) > before and not carried_operator_token(hub, before)


def test_a_lent_token_opens_public_repos_and_still_refuses_private_ones(app_server, hub, reachable_by_others,
                                                                       monkeypatch):
    monkeypatch.setenv("SCRATCH_HUB_SHARE_TOKEN", "1")
    visitor = Client(app_server, verbose=False)
    before = len(hub.tokens_seen)
    result, line = visitor.predict(PRIVATE, "", api_name="/open_model")
    assert result is None and "is a private repo" in line, line
    assert hub.downloads(PRIVATE, "model.safetensors") == 0
    result, line = visitor.predict(PUBLIC, "", api_name="/open_model")
    assert result is not None and result["name"] == PUBLIC, line
    assert carried_operator_token(hub, before)  # lent, for the public download: rate limits


def test_a_lent_token_lists_no_branch_of_a_private_repo(app_server, hub, reachable_by_others, monkeypatch):
    """Watch it learn lists a repo's step<N> branches when no revision is typed: with the machine's token lent, the
    private repo is refused before its branch names are asked for."""
    monkeypatch.setenv("SCRATCH_HUB_SHARE_TOKEN", "1")
    before = len(hub.requests)
    with pytest.raises(Exception, match="is a private repo"):
        Client(app_server, verbose=False).predict(PRIVATE, "", "Some text to read.", api_name="/hub_timeline")
    assert not [r for r in hub.requests[before:] if r.startswith(f"GET /api/models/{PRIVATE}/refs")]


def test_on_a_space_even_loopback_requests_are_visitors(app_server, hub, monkeypatch):
    monkeypatch.setenv("SPACE_ID", "someone/a-space")
    before = len(hub.tokens_seen)
    result, line = Client(app_server, verbose=False).predict(PRIVATE, "", api_name="/open_model")
    assert result is None and "No such model repo" in line, line
    assert not carried_operator_token(hub, before)


def test_the_operator_at_the_machine_opens_their_private_repo(app_server, hub):
    result, line = Client(app_server, verbose=False).predict(PRIVATE, "", api_name="/open_model")
    assert result is not None and result["name"] == PRIVATE, line


# ----------------------------------------------------------------------------------------------
# Row 1: pushing
# ----------------------------------------------------------------------------------------------


def test_a_visitor_who_is_not_signed_in_pushes_nothing_and_is_told_what_to_do(app_server, hub, trained_zip,
                                                                             reachable_by_others):
    archive, job = trained_zip
    before, repos = len(hub.tokens_seen), set(hub.repos)
    pushed, line = Client(app_server, verbose=False).predict(handle_file(str(archive)), job, "from-a-stranger",
                                                             api_name="/push_to_hub")
    assert pushed is None and set(hub.repos) == repos and not carried_operator_token(hub, before)
    assert "hf auth login" in line and "loopback" in line and "button above" not in line, line


def test_on_a_space_the_message_says_sign_in(app_server, hub, trained_zip, monkeypatch):
    monkeypatch.setenv("SPACE_ID", "someone/a-space")
    archive, job = trained_zip
    pushed, line = Client(app_server, verbose=False).predict(handle_file(str(archive)), job, "x",
                                                             api_name="/push_to_hub")
    assert pushed is None and "Sign in with Hugging Face" in line and "hf auth login" not in line, line


def test_a_push_never_writes_into_a_repo_this_app_did_not_create(app_server, hub, trained_zip):
    archive, job = trained_zip
    operator = Client(app_server, verbose=False)  # at the machine: the machine's token pushes
    files = dict(hub.repos["operator/precious"]["files"])
    pushed, line = operator.predict(handle_file(str(archive)), job, "precious", api_name="/push_to_hub")
    assert pushed is None and "was not made by this app" in line, line
    assert hub.repos["operator/precious"]["files"] == files and "operator/precious" not in hub.authors
    pushed, line = operator.predict(handle_file(str(archive)), job, "made-here", api_name="/push_to_hub")
    assert pushed["repo_id"] == "operator/made-here", line
    again, line = operator.predict(handle_file(str(archive)), job, "made-here", api_name="/push_to_hub")
    assert again["repo_id"] == "operator/made-here" and hub.authors["operator/made-here"] == ["operator"] * 2, line
