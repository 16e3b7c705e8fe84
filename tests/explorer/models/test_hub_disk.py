"""What opening Hub models costs on disk and in job slots (tests/support/fake_hub.py, the real huggingface_hub client):
a config the conversion refuses is refused before the weights come, a refused open leaves nothing in the Hub cache,
the cache's downloads stay within SCRATCH_HUB_DISK (the least recently opened go, the models held stay, and so do the
revisions Watch it learn downloaded until it has measured them), and one visitor cannot take every job slot."""

import json
from pathlib import Path

import pytest

from explorer.core.inputs import InputProblem
from explorer.core.visitor import Visitor, visiting
from explorer.learning import hub_revisions
from explorer.models import hub_cache, hub_files, opening, registry
from support import hub_repos

STEPPED, STEPS = "tiny/stepped", (0, 1)  # a repo of training steps, as Watch it learn opens


@pytest.fixture(scope="module")
def hub(start_fake_hub, tmp_path_factory):
    """GPT-2 repos of their own weights (tiny/a ... tiny/e), and repos refused for their config or their weights."""
    tmp = tmp_path_factory.mktemp("disk-repos")
    server = start_fake_hub(token=None)
    for seed, name in enumerate("abcdefg"):
        server.add_repo(f"tiny/{name}", hub_repos.files_of(hub_repos.save_transformers_repo(tmp / name, "gpt2", seed)))
    for seed, step in enumerate(STEPS, 10):
        server.add_folder(STEPPED, hub_repos.save_transformers_repo(tmp / f"step{step}", "gpt2", seed), f"step{step}")
    gpt2 = hub_repos.files_of(tmp / "a")
    neox = hub_repos.files_of(hub_repos.save_transformers_repo(tmp / "neox", "gpt_neox"))

    def with_config(files: dict, **changes) -> dict:
        return dict(files, **{"config.json": json.dumps(dict(json.loads(files["config.json"]), **changes)).encode()})

    server.add_repo("bad/yarn", with_config(neox, rope_parameters={"rope_type": "yarn", "factor": 2.0,
                                                                  "rope_theta": 10000.0, "partial_rotary_factor": 0.25}))
    server.add_repo("bad/llama3-band", with_config(neox, rope_parameters={
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 4.0, "high_freq_factor": 1.0,
        "original_max_position_embeddings": 32, "rope_theta": 10000.0, "partial_rotary_factor": 0.25}))
    server.add_repo("bad/nan-epsilon", with_config(gpt2, layer_norm_epsilon=float("nan")))
    server.add_repo("bad/text-theta", with_config(neox, rope_parameters={"rope_type": "default", "rope_theta": "ten",
                                                                        "partial_rotary_factor": 0.25}))
    llama = hub_repos.files_of(hub_repos.save_transformers_repo(tmp / "llama", "llama"))
    rope = json.loads(llama["config.json"])["rope_parameters"]
    server.add_repo("bad/text-band", with_config(llama, rope_parameters=dict(rope, low_freq_factor="one")))
    server.add_repo("bad/misfit", with_config(gpt2, n_embd=2 * json.loads(gpt2["config.json"])["n_embd"]))
    return server


def cached(repo_id: str) -> list[Path]:
    """The files of ``repo_id`` in the Hub cache (its snapshots and blobs)."""
    folder = Path(hub_files.cache_dir()) / ("models--" + repo_id.replace("/", "--"))
    return [p for p in folder.rglob("*") if p.is_file() and "refs" not in p.parts] if folder.exists() else []


def snapshot_bytes(repo_id: str) -> int:
    return sum(p.stat().st_size for p in cached(repo_id) if "blobs" in p.parts)


@pytest.mark.parametrize("repo, words", [
    ("bad/yarn", ["rope_type 'yarn'", "ours computes the default RoPE and the linear, llama3 scalings"]),
    ("bad/llama3-band", ["needs low_freq_factor < high_freq_factor", "got 4.0 and 1.0"]),
    ("bad/nan-epsilon", ["layer_norm_eps must be a finite positive number, got nan"]),
    ("bad/text-theta", ["rope_theta must be a finite positive number, got 'ten'"]),
])
def test_what_the_config_shows_cannot_convert_is_refused_before_the_weights(hub, repo, words):
    with pytest.raises(InputProblem, match="cannot be converted to our Transformer") as refused:
        opening.open_repo(repo)
    assert all(word in str(refused.value) for word in words)
    assert hub.downloads(repo, "config.json") == 1 and hub.downloads(repo, "model.safetensors") == 0
    assert cached(repo) == []  # its config.json went too


def test_a_config_transformers_refuses_is_refused_in_its_words_before_the_weights(hub):
    """transformers' LlamaConfig checks rope_parameters as it is built: its refusal, on one line, not as a conversion."""
    with pytest.raises(InputProblem) as refused:
        opening.open_repo("bad/text-band")
    assert str(refused.value) == ("bad/text-band's config.json is not one transformers' LlamaConfig accepts: `Class "
                                  "validation error for validator 'validate_rope': TypeError: '<=' not supported "
                                  "between instances of 'float' and 'str'`.")
    assert hub.downloads("bad/text-band", "model.safetensors") == 0 and cached("bad/text-band") == []


def test_a_refused_open_leaves_nothing_in_the_cache(hub):
    with pytest.raises(InputProblem, match="weights do not fit its config.json: `transformer.h.0.attn.c_attn.bias` is "
                                           "stored as 96 where the config makes it 192"):
        opening.open_repo("bad/misfit")
    assert hub.downloads("bad/misfit", "model.safetensors") == 1
    assert cached("bad/misfit") == []


def test_the_disk_budget_lets_the_least_recently_opened_go_and_keeps_the_models_held(hub, monkeypatch):
    first = opening.open_repo("tiny/a")
    size = snapshot_bytes("tiny/a")
    monkeypatch.setenv("SCRATCH_HUB_DISK", str(int(2.5 * size)))  # room for two
    opening.open_repo("tiny/b")
    registry.let_go(first.name)  # still listed, no longer in memory: its files may go
    opening.open_repo("tiny/c")
    assert cached("tiny/a") == [] and snapshot_bytes("tiny/b") == snapshot_bytes("tiny/c") == size
    with pytest.raises(InputProblem, match=r"No room on disk for tiny/d .*: the models being opened or held take the "
                                           r".* MB this app keeps for models from the Hub"):
        opening.open_repo("tiny/d")  # b and c are in memory: neither goes
    assert hub.downloads("tiny/d", "model.safetensors") == 0 and cached("tiny/d") == []
    monkeypatch.setenv("SCRATCH_HUB_DISK", str(size // 2))
    with pytest.raises(InputProblem, match=r"tiny/e needs .* MB on disk; this app keeps at most .* MB for models from "
                                           r"the Hub \(set SCRATCH_HUB_DISK to change it\)"):
        opening.open_repo("tiny/e")
    with pytest.raises(InputProblem, match="files of `tiny/a` are gone: open it again"):
        registry.resolve(first.name)


def test_one_visitor_cannot_take_every_job_slot(hub):
    """A visitor opening two repos of a Hub that hangs is refused a third; another visitor opens at once."""
    hub.hanging.update({"slow/one", "slow/two", "slow/three"})
    greedy, other = Visitor("greedy"), Visitor("other")
    with visiting(greedy):
        slow = [opening.start_open(f"slow/{n}") for n in ("one", "two")]
        with pytest.raises(InputProblem, match="You are already opening 2 models: wait for one to finish"):
            opening.start_open("slow/three")
    with visiting(other):
        assert opening.open_repo("tiny/e").name == "tiny/e"
    for started in slow:
        with pytest.raises(InputProblem):
            started.outcome()


def downloaded_revisions() -> hub_revisions.Request:
    """Watch it learn's first half: every revision of STEPPED downloaded, none measured yet."""
    asked = hub_revisions.request(STEPPED, ", ".join(f"step{s}" for s in STEPS), "If music be the food of love")
    for _ in asked.opening():
        pass
    return asked


def room_for_half_a_model(hub, monkeypatch) -> None:
    """SCRATCH_HUB_DISK set to what the cache holds now (all this module downloaded) and half a tiny model more: the
    next open must make room by removing a revision nobody uses."""
    cached_now = sum(snapshot_bytes(repo) for repo in hub.repos)
    monkeypatch.setenv("SCRATCH_HUB_DISK", str(cached_now + snapshot_bytes(STEPPED) // 4))


def test_revisions_downloaded_to_be_measured_stay_until_they_are(hub, monkeypatch):
    """Between Watch it learn's download and its measuring (two events; the second may queue behind another visitor's
    exact run), another visitor's open cannot make room by removing those revisions: it is refused, as when the models
    held fill the disk. Measuring reads them from the cache, each downloaded once; then they may go."""
    asked = downloaded_revisions()
    kept = snapshot_bytes(STEPPED)
    room_for_half_a_model(hub, monkeypatch)
    with pytest.raises(InputProblem, match="No room on disk for tiny/f"):
        opening.open_repo("tiny/f")
    assert snapshot_bytes(STEPPED) == kept and hub.downloads("tiny/f", "model.safetensors") == 0
    measured = asked.measure()
    assert [v.step for v in measured.revisions] == list(STEPS)
    assert hub.downloads(STEPPED, "model.safetensors") == len(STEPS)  # once each: none went before it was measured
    assert opening.open_repo("tiny/f").name == "tiny/f"  # measured and let go: now one may make room
    assert 0 < snapshot_bytes(STEPPED) < kept


def test_revisions_never_measured_are_kept_only_for_a_while(hub, monkeypatch):
    """A request whose visitor left before measuring keeps its revisions for ``KEEP_SECONDS`` at most."""
    monkeypatch.setattr(hub_cache, "KEEP_SECONDS", 0)
    downloaded_revisions()
    kept = snapshot_bytes(STEPPED)
    room_for_half_a_model(hub, monkeypatch)
    assert opening.open_repo("tiny/g").name == "tiny/g"
    assert snapshot_bytes(STEPPED) < kept


def test_a_visitor_keeps_revisions_for_one_request_at_a_time():
    """Asking again ends what the visitor's request before kept, so nobody holds the disk by asking again and again;
    another visitor's request keeps its own."""
    with visiting(Visitor("asks-again")):
        first, second = hub_cache.Kept(), hub_cache.Kept()
        first.add("some/repo", "1" * 40)
        second.add("some/repo", "2" * 40)
    with visiting(Visitor("other")):
        other = hub_cache.Kept()
        other.add("some/repo", "3" * 40)
    kept = {key for key in hub_cache._in_use(shown=False) if key.startswith("some/repo@")}
    assert kept == {f"some/repo@{'2' * 40}", f"some/repo@{'3' * 40}"}
    second.end()
    other.end()
    assert not {key for key in hub_cache._in_use(shown=False) if key.startswith("some/repo@")}
