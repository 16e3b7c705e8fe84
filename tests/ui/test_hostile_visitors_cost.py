"""Cost bounded before work starts, as a hostile visitor would try it, through
the app's real endpoints (the app server of tests/conftest.py) against the local Hub (tests/support/fake_hub.py).

- Row 3: a config with 10^6 layers (an upload, or a Hub repo) is refused from its numbers, before a weight comes.
- Row 4: an upload's config.json over its cap is refused by name, as on the Hub; nothing is unpacked.
- Row 5: a Hub file that streams past the size its listing gives is cut off, and no partial file stays.
- Row 9: an upload unpacks only what the model needs: a pickle beside safetensors stays in the zip.
- Row 11: repos that drip hold no opening slot another visitor needs; stalled, their jobs end and their threads go.
- Row 14: a malformed tokenizer.json or config.json is refused by name, not "Something went wrong".
- A long text's exact answers (one pass per cell) stop at their deadline, the estimate shown alone, and run in a slot
  of their own, so the views never wait behind them.
"""

import json
import threading
import time
import zipfile
from pathlib import Path

import pytest
from gradio_client import Client, handle_file

from support import hub_repos


@pytest.fixture(scope="module")
def gpt2_files(tmp_path_factory) -> dict[str, bytes]:
    return hub_repos.files_of(hub_repos.save_transformers_repo(tmp_path_factory.mktemp("hostile-gpt2") / "m", "gpt2"))


def absurd(files: dict[str, bytes], **numbers) -> dict[str, bytes]:
    """The files with the config's ``numbers`` replaced."""
    return dict(files, **{"config.json": json.dumps({**json.loads(files["config.json"]), **numbers}).encode()})


@pytest.fixture(scope="module")
def hub(app_server, start_fake_hub, gpt2_files):
    server = start_fake_hub(token=None)
    server.add_repo("tiny/gpt2", gpt2_files)
    server.add_repo("absurd/layers", absurd(gpt2_files, n_layer=10**6))
    server.add_repo("lying/listing", gpt2_files)
    server.listed_sizes[("lying/listing", "model.safetensors")] = 1_000  # served whole: far more
    server.add_repo("bad/tokenizer", dict(gpt2_files, **{"tokenizer.json": b'{"model": {"vocab": [1, 2'}))
    for n in range(4):
        server.add_repo(f"drip/slow-{n}", gpt2_files)
        server.dripping.add(f"drip/slow-{n}")
    return server


def zip_of(path: Path, files: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            z.writestr(name, data)
    return path


def upload(app_server, path: Path):
    """(result, status line) of /open_upload for a new visitor; a guard against a hang, not a speed target."""
    return Client(app_server, verbose=False).submit(handle_file(str(path)), api_name="/open_upload").result(timeout=120)


def unpacked(name: str) -> list[Path]:
    from explorer.models import uploads

    return list(uploads.ROOT.rglob(name))


# ----------------------------------------------------------------------------------------------
# Row 3: absurd sizes refused from the config's numbers
# ----------------------------------------------------------------------------------------------


def test_a_million_layers_are_refused_from_the_numbers_upload_and_hub(app_server, hub, gpt2_files, tmp_path):
    result, line = upload(app_server, zip_of(tmp_path / "absurd.zip", absurd(gpt2_files, n_layer=10**6)))
    assert result is None and "parameters; this app opens models of at most" in line, line
    visitor = Client(app_server, verbose=False)
    result, line = visitor.submit("absurd/layers", "", api_name="/open_model").result(timeout=120)
    assert result is None and "parameters; this app opens models of at most" in line, line
    assert hub.downloads("absurd/layers", "model.safetensors") == 0


# ----------------------------------------------------------------------------------------------
# Row 4: a config over its cap, upload as Hub
# ----------------------------------------------------------------------------------------------


def test_an_uploaded_config_over_its_cap_is_refused_by_name_and_not_unpacked(app_server, hub, gpt2_files, tmp_path):
    padded = gpt2_files["config.json"].rstrip()[:-1] + b" " * 2_000_000 + b"}"  # valid JSON, twice config.json's cap (1 MB)
    configs_before = len(unpacked("config.json"))
    result, line = upload(app_server, zip_of(tmp_path / "big-config.zip", dict(gpt2_files, **{"config.json": padded})))
    assert result is None and f"config.json is {len(padded):,} bytes" in line, line
    assert len(unpacked("config.json")) == configs_before


# ----------------------------------------------------------------------------------------------
# Row 5: a download past its listed size
# ----------------------------------------------------------------------------------------------


def test_a_download_past_its_listed_size_is_cut_off_and_its_partial_file_deleted(app_server, hub, gpt2_files):
    from explorer.models import hub_files

    result, line = Client(app_server, verbose=False).predict("lying/listing", "", api_name="/open_model")
    assert result is None and "model.safetensors ran past the 1,000 bytes" in line, line
    cached = [p for p in Path(hub_files.cache_dir()).rglob("*") if p.is_file() and "lying" in str(p)]
    assert cached and max(p.stat().st_size for p in cached) < len(gpt2_files["model.safetensors"])
    assert not [p for p in cached if p.name.endswith(".incomplete")]


# ----------------------------------------------------------------------------------------------
# Row 9: only what the model needs comes out of a zip
# ----------------------------------------------------------------------------------------------


def test_an_upload_unpacks_only_what_the_model_needs(app_server, gpt2_files, tmp_path):
    unused = bytes(3_000_000)  # zeros: a few KB zipped, 3 MB unpacked (the row's 1 GB, smaller)
    safetensors, pickles = len(unpacked("model.safetensors")), len(unpacked("pytorch_model.bin"))
    result, line = upload(app_server, zip_of(tmp_path / "extra.zip", dict(gpt2_files, **{"pytorch_model.bin": unused})))
    assert result is not None and result["source"] == "upload", line
    assert len(unpacked("model.safetensors")) == safetensors + 1 and len(unpacked("pytorch_model.bin")) == pickles


# ----------------------------------------------------------------------------------------------
# Row 14: malformed files are refused by name
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name, data", [("tokenizer.json", b'{"model": {"vocab": [1, 2'),
                                        ("tokenizer.json", b'{"version": "1.0", "model": 7}'),
                                        ("config.json", b'{"model_type": "gpt2", "n_layer": '),
                                        ("config.json", b'{"model_type": "gpt2", "n_layer": "twelve"}')])
def test_a_malformed_file_is_refused_by_name(app_server, gpt2_files, tmp_path, name, data):
    result, line = upload(app_server, zip_of(tmp_path / "malformed.zip", dict(gpt2_files, **{name: data})))
    assert result is None and name in line and "Something went wrong" not in line, line


def test_a_malformed_tokenizer_on_the_hub_is_refused_by_name(app_server, hub):
    result, line = Client(app_server, verbose=False).predict("bad/tokenizer", "", api_name="/open_model")
    assert result is None and "tokenizer.json" in line and "Something went wrong" not in line, line


# ----------------------------------------------------------------------------------------------
# Row 11: a Hub that drips
# ----------------------------------------------------------------------------------------------


def job_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("open ") and "drip/" in t.name]


def test_dripping_repos_delay_no_other_open_and_their_jobs_end(app_server, hub, monkeypatch):
    """Four opens of dripping repos (a byte every 0.1 s), then another visitor opens a repo that answers: it opens
    while the four still drip. Then the stall limit is lowered: the four are abandoned, their threads gone."""
    monkeypatch.setenv("SCRATCH_HUB_STALL_SECONDS", "600")
    slow = [Client(app_server, verbose=False).submit(f"drip/slow-{n}", "", api_name="/open_model") for n in range(4)]
    while len(job_threads()) < 4:  # all four jobs running
        time.sleep(0.1)
    result, line = Client(app_server, verbose=False).submit("tiny/gpt2", "", api_name="/open_model").result(timeout=120)
    assert result is not None and result["name"] == "tiny/gpt2", line
    assert not any(job.done() for job in slow) and len(job_threads()) == 4  # it waited on none of them
    monkeypatch.setenv("SCRATCH_HUB_STALL_SECONDS", "1")
    for job in slow:
        result, line = job.result(timeout=120)
        assert result is None and "Gave up after 1 s" in line, line
    for _ in range(100):  # each thread ends at its next byte, within 0.1 s of being abandoned
        if not job_threads():
            break
        time.sleep(0.1)
    assert job_threads() == []


def test_exact_answers_past_their_deadline_stop_and_leave_the_estimate(app_server, app, tiny_checkpoints, monkeypatch):
    """SCRATCH_EXACT_SECONDS=0 (the operator's setting, read per request): every exact run is past its time at its
    first batch; the estimate stays on screen with what to shorten."""
    from transformers import AutoTokenizer

    from explorer.views.patching.texts import DEFAULT_CLEAN, change_one_word
    from support.app_client import figure

    corrupted, _ = change_one_word(AutoTokenizer.from_pretrained(tiny_checkpoints / "shakespeare-rope"), DEFAULT_CLEAN)

    client = Client(app_server, verbose=False)
    monkeypatch.setenv("SCRATCH_EXACT_SECONDS", "0")
    rank, estimate, line = client.predict("To be, or not to be, that is the question", "shakespeare-rope", "self",
                                          api_name="/rank_heads")
    assert rank is None and figure(estimate)["data"][0]["type"] == "heatmap"
    assert "⚠️ Removing each head alone stopped after 0." in line and "shorten the text" in line
    *exact, numbers, explained, cell, cell_line, estimated_residual, _, _, _, estimate_numbers, line = (
        client.predict("shakespeare-rope", DEFAULT_CLEAN, corrupted, "", "", ["residual"],
                       api_name="/activation_patching"))
    assert exact == [None] * 4 and numbers is None and explained == ""
    assert figure(estimated_residual)["data"][0]["type"] == "heatmap" and "residual" in estimate_numbers["estimate"]
    assert "⚠️ The exact patched runs stopped after 0." in line and "fewer grids" in line
    monkeypatch.delenv("SCRATCH_EXACT_SECONDS")
    *_, line = client.predict("To be, or not to be, that is the question", "shakespeare-rope", "self",
                              api_name="/rank_heads")
    assert "each removed alone" in line  # the default: the tiny model's ranking is well within it

    groups = {app.demo.fns[dep["id"]].name: app.demo.fns[dep["id"]].concurrency_id
              for dep in app.demo.config["dependencies"]}
    assert groups["rank_heads"] == groups["activation_patching"] == groups["measure_revisions"] == "exact"
    assert groups["show_attention"] == groups["logit_lens"] == "model"  # never behind an exact answer
