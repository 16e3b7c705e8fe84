"""Who owns a model: strangers against the app server (tests/conftest.py) and the local Hub
(tests/support/fake_hub.py), each visitor a gradio_client of its own (its own browser session). What one visitor opens
is theirs alone (menus, names, private endpoints); the weights of a Hub commit are loaded once for all; memory, the
tokenizers' and the view caches' included, stays within SCRATCH_HUB_MEMORY; a visitor's models survive other visitors
and go with their own page."""

import gc
import json
import time
import weakref
import zipfile

import pytest
import requests
from gradio_client import Client, handle_file

from support import hub_repos

TEXT = "Shall I compare thee to a summer's day? Shall I compare thee"
ATTENTION = ("self", "0", "average")


@pytest.fixture(scope="module")
def hub(app_server, start_fake_hub, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hostile-registry")
    server = start_fake_hub(token=None)
    for number in range(3):
        server.add_folder(f"tiny/gpt2-{number}", hub_repos.save_transformers_repo(tmp / f"gpt2-{number}", "gpt2", number))
    server.add_folder("tiny/ours", hub_repos.save_ours(tmp / "ours"))
    return server


@pytest.fixture(scope="module")
def upload(tmp_path_factory):
    """A zip of one of ours (a few hundred kB)."""
    tmp = tmp_path_factory.mktemp("hostile-upload")
    return zipped(hub_repos.save_ours(tmp / "mine"), tmp / "mine.zip")


def zipped(folder, archive):
    with zipfile.ZipFile(archive, "w") as z:
        for p in folder.iterdir():
            z.write(p, p.name)
    return archive


def visitor(url) -> Client:
    return Client(url, verbose=False)


def attention_note(client: Client, name: str) -> str:
    return client.predict(TEXT, name, *ATTENTION, api_name="/attention")[-1]


def catalog_answer(url: str, session_hash: str) -> tuple[list[str], int]:
    """The page-load ``/catalog`` event of ``session_hash``, joined through the queue as the page joins it: (the
    names its first menu lists, the bytes of the answer)."""
    config = requests.get(url + "config", timeout=30).json()
    fn_index = next(dep["id"] for dep in config["dependencies"] if dep["api_name"] == "catalog")
    requests.post(url + "gradio_api/queue/join", json={"data": [], "fn_index": fn_index, "session_hash": session_hash},
                  timeout=30).raise_for_status()
    with requests.get(url + "gradio_api/queue/data", params={"session_hash": session_hash}, stream=True,
                      timeout=60) as stream:
        for line in stream.iter_lines(decode_unicode=True):
            if line and line.startswith("data:") and '"process_completed"' in line:
                menu = json.loads(line[len("data:"):])["output"]["data"][0]
                return [value for _, value in menu["choices"]], len(line.encode())
    raise AssertionError("no answer from /catalog")


def own_model(session_hash: str, name: str, part: int = 1):
    """The model (``part`` 2: the tokenizer) ``name`` resolves to for ``session_hash``: what that visitor's views read."""
    from explorer.core.visitor import Visitor, visiting
    from explorer.models import registry

    with visiting(Visitor(session_hash)):
        return registry.resolve(name)[part]


def test_a_hub_open_is_listed_for_its_visitor_only_and_its_weights_load_once(app_server, hub):
    """Row 2's second half: an opened repo "then appeared in every visitor's menus"."""
    alice, bob = visitor(app_server), visitor(app_server)
    opened, line = alice.predict("tiny/gpt2-0", "", api_name="/open_model")
    assert opened["name"] == "tiny/gpt2-0" and "no one else sees it" in line
    assert "tiny/gpt2-0" in catalog_answer(app_server, alice.session_hash)[0]
    assert "tiny/gpt2-0" not in catalog_answer(app_server, bob.session_hash)[0]
    assert "⚠" not in attention_note(alice, "tiny/gpt2-0")
    assert "Unknown model" in attention_note(bob, "tiny/gpt2-0")
    bob.predict("tiny/gpt2-0", "", api_name="/open_model")  # Bob opens it himself: the same weights, loaded once
    assert own_model(alice.session_hash, "tiny/gpt2-0") is own_model(bob.session_hash, "tiny/gpt2-0")
    assert hub.downloads("tiny/gpt2-0", "model.safetensors") == 1


def test_a_visitors_upload_resolves_for_no_one_else_whatever_the_endpoint(app_server, hub, upload):
    """Row 16: visitor B called /attention etc. with visitor A's upload name, and it worked."""
    alice, bob = visitor(app_server), visitor(app_server)
    opened, _ = alice.predict(handle_file(str(upload)), api_name="/open_upload")
    name = opened["name"]
    assert "⚠" not in attention_note(alice, name)
    assert "Unknown model" in attention_note(bob, name)
    *_, note = bob.predict(TEXT, name, 3, api_name="/logit_lens")
    assert "Unknown model" in note
    *_, note = bob.predict(TEXT, name, "Greedy", 1.0, 0, 1.0, 1.0, 8, 0, api_name="/generate")
    assert "Unknown model" in note
    assert name not in catalog_answer(app_server, bob.session_hash)[0]


def test_a_hub_repo_named_like_a_shipped_model_never_replaces_it(app_server, hub, tmp_path):
    """Row 15: a Hub repo at the endpoint's root named like a shipped model replaced it for every visitor."""
    hub.add_folder("shakespeare-rope", hub_repos.save_transformers_repo(tmp_path / "impostor", "gpt2", seed=9))
    alice = visitor(app_server)
    before = alice.predict(TEXT, "shakespeare-rope", 3, api_name="/logit_lens")
    opened, _ = alice.predict("shakespeare-rope", "", api_name="/open_model")
    assert opened["name"] == "hub:shakespeare-rope"
    assert alice.predict(TEXT, "shakespeare-rope", 3, api_name="/logit_lens") == before  # still the shipped model
    shipped, impostor = own_model(alice.session_hash, "shakespeare-rope"), own_model(alice.session_hash, opened["name"])
    assert shipped.config.model_type == "scratch_transformer" and impostor is not shipped
    assert "shakespeare-rope" in catalog_answer(app_server, visitor(app_server).session_hash)[0]


def test_many_revisions_opened_by_one_visitor_stay_in_their_menus_within_the_quota(app_server, hub, tmp_path):
    """Row 12: one visitor opened one repo at 150 revisions; every visitor's menus held them all, never removed."""
    folder = hub_repos.save_transformers_repo(tmp_path / "revisions", "gpt2", seed=4)
    revisions = [f"step{n}" for n in range(15)]
    for revision in revisions:
        hub.add_folder("tiny/revisions", folder, revision=revision)
    alice, bob = visitor(app_server), visitor(app_server)
    quiet_names, quiet_bytes = catalog_answer(app_server, bob.session_hash)
    for revision in revisions:
        opened, line = alice.predict("tiny/revisions", revision, api_name="/open_model")
        assert opened is not None, line
    names, size = catalog_answer(app_server, bob.session_hash)
    assert names == quiet_names and abs(size - quiet_bytes) < 100  # the same answer (its timing fields aside)
    from explorer.models import registry

    mine = [n for n in catalog_answer(app_server, alice.session_hash)[0] if n.startswith("tiny/revisions@")]
    assert mine == [f"tiny/revisions@{r}" for r in revisions[-registry.HUB_MODELS:]]  # the newest, in order
    assert "was closed: each visitor keeps their 12 newest Hub models" in attention_note(alice, "tiny/revisions@step0")


def test_other_visitors_uploads_never_push_a_visitors_upload_out(app_server, hub, upload):
    """Row 8: 64 fresh sessions, one tiny upload each: the first visitor's upload was gone ("Unknown model")."""
    first = visitor(app_server)
    name = first.predict(handle_file(str(upload)), api_name="/open_upload")[0]["name"]
    others = [visitor(app_server) for _ in range(65)]
    for other in others:
        assert other.predict(handle_file(str(upload)), api_name="/open_upload")[0] is not None
    assert "⚠" not in attention_note(first, name)
    for other in others:
        other.close()


def test_a_closed_page_lets_its_models_and_files_go(app_server, hub, upload):
    """The page's unload (gradio's heartbeat ends): its models leave the registry, its unpacked upload the disk."""
    from explorer.models import registry

    alice = visitor(app_server)
    name = alice.predict(handle_file(str(upload)), api_name="/open_upload")[0]["name"]
    folder = registry.owned(alice.session_hash)[name].folder
    with requests.get(f"{app_server}gradio_api/heartbeat/{alice.session_hash}", stream=True, timeout=30) as beat:
        next(beat.iter_lines())  # the page is there; leaving the block closes it, as a closed tab does
    deadline = time.monotonic() + 20
    while folder.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not folder.exists()
    assert "session with the app ended" in attention_note(alice, name)


def test_a_page_that_never_closes_gives_its_uploads_up_when_another_visitors_upload_needs_the_disk(app_server, hub, upload,
                                                                                                 monkeypatch):
    """A script's sessions never close (no heartbeat, no unload): their uploads held all visitors' upload disk for ever,
    and every later upload was refused. Those of a page idle for SCRATCH_UPLOAD_IDLE_SECONDS now make room; a page
    that keeps naming its model keeps it."""
    from explorer.core.settings import UPLOAD_DISK, UPLOAD_IDLE_SECONDS
    from explorer.models import registry, uploads

    registry.forget_all()  # the earlier tests' pages (closed ones go as their unload comes): the disk holds these alone
    idle, busy, newcomer = visitor(app_server), visitor(app_server), visitor(app_server)
    idle_name, busy_name = (v.predict(handle_file(str(upload)), api_name="/open_upload")[0]["name"] for v in (idle, busy))
    monkeypatch.setenv(UPLOAD_DISK.env, str(uploads.disk_used(uploads.ROOT)))  # full: one more does not fit
    refused, said = newcomer.predict(handle_file(str(upload)), api_name="/open_upload")
    assert refused is None and "would take all visitors' uploads past" in said  # nobody idle long enough yet
    monkeypatch.setenv(UPLOAD_IDLE_SECONDS.env, "5")
    time.sleep(5.5)
    assert "⚠" not in attention_note(busy, busy_name)  # busy names its model: not idle
    opened, said = newcomer.predict(handle_file(str(upload)), api_name="/open_upload")
    assert opened is not None, said
    assert "had named no model for 5 s when another visitor's upload" in attention_note(idle, idle_name)
    assert "⚠" not in attention_note(busy, busy_name)


def test_an_evicted_model_is_freed_though_a_view_cached_its_pass(app_server, hub, monkeypatch):
    """Row 6: RSS grew to 3.4 GB with a 2 GB bound: the view cache (the recorded passes) kept evicted models alive.
    (The RSS figures themselves: benchmarks/hub_memory.py.)"""
    from explorer.core import caches
    from explorer.models import registry

    alice = visitor(app_server)
    alice.predict("tiny/gpt2-1", "", api_name="/open_model")
    assert "⚠" not in attention_note(alice, "tiny/gpt2-1")  # its recorded pass is cached now
    first = weakref.ref(own_model(alice.session_hash, "tiny/gpt2-1"))
    key = registry.owned(alice.session_hash)["tiny/gpt2-1"].key
    assert registry.held_bytes()[key] > registry.held_bytes()[key] - caches.owner_bytes(first()) > 0  # its pass counts
    monkeypatch.setenv("SCRATCH_HUB_MEMORY", str(registry.held_bytes()[key]))  # room for one such model, about 1 MB
    alice.predict("tiny/gpt2-2", "", api_name="/open_model")
    assert "⚠" not in attention_note(alice, "tiny/gpt2-2")
    gc.collect()
    assert first() is None  # nothing holds the evicted model: its memory is free
    assert "tiny/gpt2-1" not in [key[1] for key in registry.held_bytes()]
    assert "⚠" not in attention_note(alice, "tiny/gpt2-1")  # used again: loaded again from the files on disk


def test_a_tokenizers_memory_counts_and_goes_with_its_model(app_server, hub, tmp_path, monkeypatch):
    """Row 7: uploads whose tokenizer.json held 3M entries took +450-650 MB each, never counted, never evicted."""
    from explorer.models import registry
    from explorer.models.held import TOKENIZER_BYTES_PER_FILE_BYTE, model_bytes

    from support.fixtures_checkpoints import causal_lm

    extra, tok, folder = 20_000, hub_repos.tokenizer(), tmp_path / "big-vocabulary"  # 20,000 tokens of 300 characters
    causal_lm(tok, vocab_size=len(tok) + extra).save_pretrained(folder)  # an embedding row each: the tokenizer fits
    tok.save_pretrained(folder)
    tokenizer = json.loads((folder / "tokenizer.json").read_text())
    vocabulary = tokenizer["model"]["vocab"]
    vocabulary.update({f"extra-{n}-" + "x" * 300: len(tok) + n for n in range(extra)})
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
    size = (folder / "tokenizer.json").stat().st_size
    alice = visitor(app_server)
    opened, line = alice.predict(handle_file(str(zipped(folder, tmp_path / "big.zip"))), api_name="/open_upload")
    assert opened is not None, line
    key = registry.owned(alice.session_hash)[opened["name"]].key
    counted = registry.held_bytes()[key]
    assert counted >= TOKENIZER_BYTES_PER_FILE_BYTE * size > 10 * model_bytes(own_model(alice.session_hash, opened["name"]))
    tokenizer_object = weakref.ref(own_model(alice.session_hash, opened["name"], part=2))
    monkeypatch.setenv("SCRATCH_HUB_MEMORY", str(counted))  # room for it alone
    alice.predict("tiny/ours", "", api_name="/open_model")
    gc.collect()
    assert key not in registry.held_bytes() and tokenizer_object() is None


def test_keep_trained_called_by_name_never_pushes_another_visitors_model_out(tmp_path, monkeypatch):
    """Row 13: on a Space, 256 uploads and 256 calls of the private ``keep_trained`` endpoint, and another visitor's
    kept trained model was gone. (The endpoint is wired on a Space only: its function, as gradio calls it.)"""
    from types import SimpleNamespace

    from ui import trained_model

    monkeypatch.setattr(trained_model, "_kept", {})  # this test's own table: the flood does not outlive it
    archive = tmp_path / "model.zip"
    archive.write_bytes(b"zip")
    key = trained_model.keep_trained(str(archive), {"steps_done": 3}, SimpleNamespace(session_hash="victim"))
    for number in range(2 * trained_model.KEPT_MOST):  # one hostile session, then as many as it likes
        for session in ("hostile", f"hostile-{number}"):
            flood = tmp_path / f"flood-{session}-{number}.zip"
            flood.write_bytes(b"zip")
            trained_model.keep_trained(str(flood), {}, SimpleNamespace(session_hash=session))
    assert trained_model.kept_model(key) == (str(archive), {"steps_done": 3})
    kept_by = [kept[3] for kept in trained_model._kept.values()]
    assert kept_by.count("hostile") <= trained_model.KEPT_PER_SESSION and len(kept_by) <= trained_model.KEPT_MOST


@pytest.mark.parametrize("api_name, rest", [("open_upload", []), ("open_trained", []), ("push_to_hub", [{}, "x"])])
def test_a_file_endpoint_reads_no_file_of_the_server_the_visitor_did_not_upload(app_server, upload, api_name, rest):
    """A client names a file by its path: one on the server's disk that no visitor uploaded (here a model's zip beside
    the tests, and /etc/hostname) is refused by gradio before any code of ours reads it; the same zip sent as an upload
    opens."""
    from support.app_client import call_raw

    for path in (str(upload), "/etc/hostname"):
        event, payload = call_raw(app_server, api_name, [{"path": path, "meta": {"_type": "gradio.FileData"}}, *rest])
        assert event == "error" and "because it was not uploaded by a user" in payload["error"]
    if api_name == "open_upload":
        opened = visitor(app_server).predict(handle_file(str(upload)), api_name="/open_upload")
        assert "Opened" in str(opened)
