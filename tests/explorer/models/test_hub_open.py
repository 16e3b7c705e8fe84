"""Opening models from a Hub (tests/support/fake_hub.py on 127.0.0.1, HF_ENDPOINT pointing at it, the real huggingface_hub
client): conversion and parity, every view's numbers against transformers' own model, the bad repos, revisions,
one download however many ask, loads behind the one lock, the memory-bounded LRU, uploads per session.

Tolerances: the views' numbers equal transformers' to 1e-4 (float32; measured differences are about 1e-7)."""

import json
import threading
import time
import zipfile
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from support import hub_repos
from support.fake_hub import HangingHub
from modeling.convert import CONVERTERS

from explorer.models import held, hub_files, opening, plans
from explorer.models.converting import PARITY_IDS

TOLERANCE = 1e-4
# the repo with two revisions is GPT-NeoX (as Pythia's training checkpoints) once modeling.convert holds it; GPT-2 until
REVISIONS_FAMILY = "gpt_neox" if "gpt_neox" in CONVERTERS else "gpt2"
TEXT = "Shall I compare thee to a summer's day? Shall I compare thee"


@pytest.fixture(scope="module")
def repos(tmp_path_factory):
    """name -> the folder transformers saved it from."""
    tmp = tmp_path_factory.mktemp("hub-repos")
    folders = {f"tiny/{t}": hub_repos.save_transformers_repo(tmp / t, t) for t in sorted(CONVERTERS)}
    folders["tiny/ours"] = hub_repos.save_ours(tmp / "ours")
    return folders


@pytest.fixture(scope="module")
def hub(start_fake_hub, repos, tmp_path_factory):
    """The fake Hub (tests/conftest.py) serving the tiny repos, the bad ones, and GPT-NeoX at two revisions."""
    tmp = tmp_path_factory.mktemp("hub")
    server = start_fake_hub(token="hf_dummy_token_for_tests")
    for name, folder in repos.items():
        server.add_folder(name, folder)
    for name, files in hub_repos.bad_repos(tmp).items():
        server.add_repo(name, files)
    server.add_repo("bad/gated", {"config.json": b"{}"})
    server.gated.add("bad/gated")
    for step, seed in (("step0", 10), ("step1", 11)):
        server.add_folder("tiny/neox-run", hub_repos.save_transformers_repo(tmp / step, REVISIONS_FAMILY, seed), revision=step)
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(tmp)  # where a pickle or a repo's code would write its marker
        yield server


def reference(folder: Path):
    """transformers' own model from the saved folder, eager attention (which returns its weights)."""
    return AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()


def test_every_family_we_convert_has_a_tiny_repo():
    assert set(CONVERTERS) <= set(hub_repos.TINY), "add a tiny config for each family modeling.convert holds"


@pytest.mark.parametrize("model_type", sorted(CONVERTERS))
def test_a_hub_model_opens_as_our_transformer_with_commit_and_parity(hub, repos, model_type):
    repo = f"tiny/{model_type}"
    opened = opening.open_repo(repo, "")
    theirs = reference(repos[repo])
    assert opened.to_json() | {"seconds": 0} == {
        "name": repo, "family": plans.family_name(model_type), "model_type": model_type,
        "parameters": sum(p.numel() for p in theirs.parameters()), "commit": hub.repos[repo]["sha"],
        "parity": opened.parity.gap, "logit_size": opened.parity.size, "source": "hub", "repo_id": repo,
        "revision": None, "seconds": 0}
    assert opened.parity.gap <= TOLERANCE
    with torch.inference_mode():  # the size is of transformers' own logits on the parity input
        size = theirs(PARITY_IDS[None] % theirs.config.vocab_size).logits.abs().max().item()
    assert opened.parity.size == pytest.approx(size, rel=1e-6)
    from explorer.models import registry

    info, model, _ = registry.resolve(repo)
    assert type(model).__name__ == "ScratchTransformerForCausalLM" and info.name == repo


@pytest.mark.parametrize("model_type", sorted(CONVERTERS))
def test_every_view_reads_the_same_numbers_as_transformers(hub, repos, model_type):
    """Attention weights (every layer and head), the logits, and the logit lens's final layer."""
    from explorer.models import registry
    from explorer.views.attention import attention_maps
    from explorer.generation.decoding import DecodingSettings
    from explorer.views.lens import logit_lens
    from explorer.views.forward_pass import recorded_pass

    repo = f"tiny/{model_type}"
    opening.open_repo(repo)
    _, model, tokenizer = registry.resolve(repo)
    run = recorded_pass(model, tokenizer, TEXT)
    ids = run.read.inputs["input_ids"]
    assert ids.shape[1] > 10
    with torch.no_grad():
        theirs = reference(repos[repo])(ids, output_attentions=True)
    weights = attention_maps(model, tokenizer, TEXT, DecodingSettings(False)).weights["self"]
    expected = torch.stack([a[0] for a in theirs.attentions]).numpy()
    assert weights.shape == expected.shape
    assert abs(weights - expected).max() <= TOLERANCE
    assert (run.logits - theirs.logits[0]).abs().max().item() <= TOLERANCE
    lens = logit_lens(model, tokenizer, TEXT)
    assert (lens.model_logits - theirs.logits[0]).abs().max().item() <= TOLERANCE


def test_greedy_generation_of_a_hub_gpt2_equals_transformers(hub, repos):
    from explorer.models import registry

    opening.open_repo("tiny/gpt2")
    _, model, tokenizer = registry.resolve("tiny/gpt2")
    ids = tokenizer("Shall I compare", return_tensors="pt").input_ids
    ours = model.generate(ids, max_new_tokens=12, do_sample=False)
    theirs = reference(repos["tiny/gpt2"]).generate(ids, max_new_tokens=12, do_sample=False)
    assert torch.equal(ours, theirs)


def test_our_own_repo_loads_with_our_classes_and_ignores_its_code(hub, repos):
    from explorer.models import registry
    from modeling import ScratchTransformerForCausalLM

    opened = opening.open_repo("tiny/ours")
    assert (opened.family, opened.parity, opened.model_type) == ("ours (scratch_transformer)", None, "scratch_transformer")
    _, model, tokenizer = registry.resolve("tiny/ours")
    saved = ScratchTransformerForCausalLM.from_pretrained(repos["tiny/ours"]).eval()
    ids = tokenizer(TEXT, return_tensors="pt").input_ids
    with torch.no_grad():
        assert torch.equal(model(ids).logits, saved(ids).logits)
    assert type(model).__module__ == "modeling.modeling_scratch_transformer"  # our package, not the repo's copy
    assert not [r for r in hub.requests if r.endswith(".py")]


@pytest.mark.parametrize("repo, words", [
    ("bad/unknown-architecture", ["`bert`", "GPT-2 (`gpt2`)", "scratch_transformer"]),
    ("bad/too-large", ["353.8M parameters", "at most 200M", "SCRATCH_HUB_MAX_PARAMETERS"]),
    ("bad/evil-pickle", ["pickled weights hold more than tensors", "weights_only=True"]),
    ("bad/no-tokenizer", ["lacks tokenizer.json"]),
    ("bad/no-weights", ["lacks weights (model.safetensors, or pytorch_model.bin)"]),
    ("nobody/no-such-repo", ["No such model repo on the Hub"]),
    ("bad/gated", ["This repo is gated"]),
    ("bad/tokenizer-beyond-weights", ["tokenizer does not fit its weights", "84 token(s)", "(id 300)",
                                      "reads ids 0 to 299 (vocab_size 300)"]),
    ("bad/backtracking-tokenizer", ["bad/backtracking-tokenizer's tokenizer.json (pre_tokenizer) splits text with",
                                    "`(a|aa)+c`", "exponential"]),
])
def test_a_bad_repo_is_refused_naming_why(hub, repo, words):
    from explorer.core.inputs import InputProblem

    with pytest.raises(InputProblem) as refused:
        opening.open_repo(repo)
    for word in words:
        assert word in str(refused.value)
    assert not Path(hub_repos.MARKER).exists()


def test_size_is_checked_before_the_weights_are_downloaded(hub, monkeypatch):
    from explorer.core.inputs import InputProblem

    with pytest.raises(InputProblem):
        opening.open_repo("bad/too-large")
    assert hub.downloads("bad/too-large", "model.safetensors") == 0
    monkeypatch.setenv("SCRATCH_HUB_MAX_BYTES", "1000")
    with pytest.raises(InputProblem, match=r"weights are .* MB; this app opens at most 0.001 MB"):
        opening.open_repo("tiny/gpt2", "main")
    assert hub.downloads("tiny/gpt2", "model.safetensors") <= 1  # the earlier test's one, not another


def test_a_refused_tokenizer_costs_no_download_of_the_weights(hub):
    """tokenizer.json comes before the weights and is checked as it lands (explorer.models.tokenizer_file)."""
    from explorer.core.inputs import InputProblem

    with pytest.raises(InputProblem, match="splits text with the regular expression"):
        opening.open_repo("bad/backtracking-tokenizer")
    assert hub.downloads("bad/backtracking-tokenizer", "tokenizer.json") >= 1
    assert hub.downloads("bad/backtracking-tokenizer", "model.safetensors") == 0


def test_no_code_from_a_repo_runs(hub):
    """The repo's config names its own classes (auto_map) and its .py writes a file on import: neither is used."""
    opened = opening.open_repo("bad/remote-code")
    assert opened.family == "GPT-2" and opened.parity.gap <= TOLERANCE
    assert not Path(hub_repos.MARKER).exists()
    assert not [r for r in hub.requests if "evil.py" in r]


def test_pickled_weights_are_read_with_weights_only(hub):
    opened = opening.open_repo("bad/pickle-only")
    assert opened.parity.gap <= TOLERANCE and hub.downloads("bad/pickle-only", "pytorch_model.bin") == 1
    with pytest.raises(Exception, match="weights_only=True"):
        opening.open_repo("bad/evil-pickle")
    assert not Path(hub_repos.MARKER).exists()


def test_revisions_open_as_models_of_their_own(hub):
    from explorer.models import registry
    from explorer.core.inputs import InputProblem

    first, second = opening.open_repo("tiny/neox-run", "step0"), opening.open_repo("tiny/neox-run", "step1")
    assert (first.name, second.name) == ("tiny/neox-run@step0", "tiny/neox-run@step1")
    assert first.commit == hub.repos["tiny/neox-run"]["revisions"]["step0"]["sha"] != second.commit
    ids = torch.arange(3, 13)[None]
    with torch.no_grad():
        a, b = (registry.resolve(n)[1](ids).logits for n in (first.name, second.name))
    assert (a - b).abs().max() > 1e-3
    with pytest.raises(InputProblem, match="no such revision"):
        opening.open_repo("tiny/neox-run", "step2")
    pasted = opening.open_repo(f"{hub_files.endpoint()}/tiny/neox-run/tree/step1")  # a page's address at step1
    assert (pasted.name, pasted.commit) == ("tiny/neox-run@step1", second.commit)


@pytest.mark.parametrize("repo_id", ["", "a//b", "-leading-dash/x", "x" * 97, "name with space", "../etc", None, ["a/b"]])
def test_repo_ids_follow_the_hubs_rules(repo_id):
    from explorer.core.inputs import InputProblem

    with pytest.raises(InputProblem, match="repo id"):
        hub_files.check_repo_id(repo_id)


@pytest.mark.parametrize("revision", ["a..b", "has space", "x~1", "x^", "a:b", "/lead", "trail/", "x.lock", "@{", "a\\b"])
def test_revisions_follow_gits_rules(revision):
    from explorer.core.inputs import InputProblem

    with pytest.raises(InputProblem, match="not a revision"):
        hub_files.check_revision(revision)


def test_good_ids_and_revisions_pass():
    assert hub_files.check_repo_id(" EleutherAI/pythia-14m ") == "EleutherAI/pythia-14m"
    assert hub_files.check_repo_id("gpt2") == "gpt2"
    assert [hub_files.check_revision(r) for r in ("", None, "step1000", "refs/pr/1", "a" * 40)] == [
        None, None, "step1000", "refs/pr/1", "a" * 40]


def test_many_asking_for_one_repo_download_it_once(hub, repos):
    hub.add_folder("tiny/popular", repos["tiny/gpt2"])
    results = []
    threads = [threading.Thread(target=lambda: results.append(opening.open_repo("tiny/popular"))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(results) == 4 and len({id(r) for r in results}) == 1
    assert hub.downloads("tiny/popular", "model.safetensors") == 1
    assert sum(r.startswith("GET /api/models/tiny/popular") for r in hub.requests) == 1


def test_a_hanging_hub_gives_a_clear_error_within_30_s_and_stalls_nobody_else(hub, monkeypatch):
    """A hanging repo on the same Hub, then a Hub that never answers at all; meanwhile others open and load."""
    from explorer.models import registry
    from explorer.core.inputs import InputProblem

    hub.hanging.add("slow/hangs")
    hub.add_repo("slow/hangs", {"config.json": b"{}"})
    outcome = {}

    def hang():
        start = time.perf_counter()
        try:
            opening.open_repo("slow/hangs")
        except InputProblem as error:
            outcome["message"], outcome["seconds"] = str(error), time.perf_counter() - start

    waiting = threading.Thread(target=hang)
    waiting.start()
    time.sleep(0.5)
    start = time.perf_counter()
    opening.open_repo("tiny/ours", "main")  # another repo opens meanwhile, behind nobody
    registry.resolve("tiny/gpt2")
    assert time.perf_counter() - start < 5
    waiting.join(35)
    assert outcome["seconds"] < 30 and "did not answer in time" in outcome["message"]
    with HangingHub() as dead:
        monkeypatch.setenv("HF_ENDPOINT", dead.url)
        start = time.perf_counter()
        with pytest.raises(InputProblem, match="did not answer in time|not answering"):
            opening.open_repo("tiny/anything")
        assert time.perf_counter() - start < 30


def test_hub_loads_wait_for_the_one_load_lock(hub, repos):
    """While the catalog's lock is held (a checkpoint loading), a Hub model downloads but does not load."""
    from explorer.models import catalog

    hub.add_folder("tiny/locked", repos["tiny/gpt2"])
    with catalog.LOAD_LOCK:
        job = opening.start_open("tiny/locked").job
        deadline = time.monotonic() + 20
        while "converting" not in job.phase and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)
        assert "converting" in job.phase and not job.finished.is_set()
    assert job.outcome().parity.gap <= TOLERANCE


def test_loads_beside_a_checkpoint_load_are_whole(hub, repos, tmp_path):
    """A GPT-2 from the Hub and a shipped-layout checkpoint loading at once, three times: every tied LM head is its
    embedding, nothing on the meta device, parity holds (transformers 5.23 fails this without the lock)."""
    from explorer.models import catalog, registry
    from support.fixtures_checkpoints import checkpoint_config, save_checkpoint, train_tokenizer
    from modeling import ScratchTransformerForCausalLM

    tokenizer = train_tokenizer()
    for attempt in range(3):
        torch.manual_seed(attempt)
        save_checkpoint(ScratchTransformerForCausalLM(checkpoint_config(tokenizer, "learned")).eval(), tokenizer,
                        tmp_path / f"local-{attempt}")
        hub.add_folder(f"tiny/beside-{attempt}", repos["tiny/gpt2"])
        results = {}
        threads = [threading.Thread(target=lambda: results.update(hub=opening.open_repo(f"tiny/beside-{attempt}"))),
                   threading.Thread(target=lambda: results.update(
                       local=registry.shipped_model(catalog.describe_folder(tmp_path / f"local-{attempt}"))))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert results["hub"].parity.gap <= TOLERANCE
        for name in (f"tiny/beside-{attempt}",):
            model = registry.resolve(name)[1]
            assert model.lm_head.weight is model.model.decoder.embed.token.weight
        local = results["local"][0]
        assert local.lm_head.weight.data_ptr() == local.model.decoder.embed.token.weight.data_ptr()
        assert not any(p.is_meta for p in local.parameters())


def test_eviction_keeps_memory_bounded_and_breaks_no_request(hub, repos, monkeypatch):
    from explorer.models import registry

    hub.add_folder("tiny/evict-a", repos["tiny/gpt2"])
    hub.add_folder("tiny/evict-b", repos["tiny/llama"] if "llama" in CONVERTERS else repos["tiny/gpt2"])
    opening.open_repo("tiny/evict-a")
    _, in_flight, tokenizer = registry.resolve("tiny/evict-a")  # a request in flight holds it
    ids = torch.arange(3, 20)[None]
    with torch.no_grad():
        before = in_flight(ids).logits
    monkeypatch.setenv("SCRATCH_HUB_MEMORY", str(held.model_bytes(in_flight)))
    opening.open_repo("tiny/evict-b")
    in_memory = [key[1] for key in registry.held_bytes()]
    assert "tiny/evict-a" not in in_memory and "tiny/evict-b" in in_memory
    with torch.no_grad():
        assert torch.equal(in_flight(ids).logits, before)  # the request still computes, with the same weights
    gets = len(hub.requests)
    _, again, _ = registry.resolve("tiny/evict-a")  # picked again: loaded again from the files on disk
    assert again is not in_flight and len(hub.requests) == gets
    with torch.no_grad():
        assert torch.equal(again(ids).logits, before)


def zipped(folder: Path, archive: Path, prefix: str = "", extra: dict | None = None) -> Path:
    with zipfile.ZipFile(archive, "w") as z:
        for p in folder.iterdir():
            z.write(p, prefix + p.name)
        for name, data in (extra or {}).items():
            z.writestr(name, data)
    return archive


def test_an_upload_opens_for_its_session_only(hub, repos, tmp_path):
    from explorer.core.visitor import Visitor, visiting
    from explorer.models import registry

    archive = zipped(repos["tiny/gpt2"], tmp_path / "my model.zip", extra={"../escape.txt": b"x", "evil.py": b"x"})
    with visiting(Visitor("visitor-1")):
        opened = opening.open_upload(archive)
    assert opened.name.startswith("yours/my-model-") and opened.parity.gap <= TOLERANCE and opened.source == "upload"
    assert opened.name in [n for _, n in registry.choices("visitor-1")]
    assert opened.name not in [n for _, n in registry.choices("visitor-2")]
    assert opened.name not in [n for _, n in registry.choices(None)]
    assert not (tmp_path.parent / "escape.txt").exists() and not (opened.folder / "evil.py").exists()
    with visiting(Visitor("visitor-1")):
        for _ in range(registry.OWN_MODELS):  # a session keeps its newest few
            opening.open_upload(archive)
    assert opened.name not in [n for _, n in registry.choices("visitor-1")]
    assert len(registry.choices("visitor-1")) == registry.OWN_MODELS
    assert not opened.folder.exists()  # the upload that went took its files with it


def test_an_upload_in_a_folder_of_the_zip_opens(hub, repos, tmp_path):
    archive = zipped(repos["tiny/ours"], tmp_path / "model.zip", prefix="model/")
    assert opening.open_upload(archive).family == "ours (scratch_transformer)"


def test_a_bad_upload_is_refused_naming_why(hub, tmp_path):
    from explorer.core.inputs import InputProblem

    (tmp_path / "not.zip").write_text("hello")
    with pytest.raises(InputProblem, match="not a zip"):
        opening.open_upload(tmp_path / "not.zip")
    with zipfile.ZipFile(tmp_path / "empty.zip", "w") as z:
        z.writestr("readme.txt", "nothing")
    with pytest.raises(InputProblem, match="lacks config.json"):
        opening.open_upload(tmp_path / "empty.zip")
    with zipfile.ZipFile(tmp_path / "bert.zip", "w") as z:
        z.writestr("config.json", json.dumps({"model_type": "bert"}))
    with pytest.raises(InputProblem, match="families we can open"):
        opening.open_upload(tmp_path / "bert.zip")
