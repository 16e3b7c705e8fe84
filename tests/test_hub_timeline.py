"""hub_timeline: a Hub repo's training checkpoints (revisions step0 … on tests/fake_hub.py) seen as a recorded run:
every head's induction and previous-token score, equal to the scores of transformers' own model of that revision
(1e-4), the best induction head's attention on the text, a sample; at most 12 revisions, evenly spaced by default."""

import pytest
import torch
from transformers import AutoModelForCausalLM

import hub_repos
from checkpointing.in_context import head_scores
from fake_hub import FakeHub
from modeling.convert import CONVERTERS

FAMILY = "gpt_neox" if "gpt_neox" in CONVERTERS else "gpt2"  # Pythia's family once modeling.convert holds it
STEPS = [0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000, 2000, 3000, 4000]  # 15 revisions, as Pythia's are spaced
REPO = "tiny/pythia-like"
TEXT = "If music be the food of love, play on. If music be the food"


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("timeline-hub")
    with FakeHub() as server, pytest.MonkeyPatch.context() as patch:
        folders = {}
        for seed, step in enumerate(STEPS):
            folders[step] = hub_repos.save_transformers_repo(tmp / f"step{step}", FAMILY, seed=seed)
            server.add_folder(REPO, folders[step], revision=f"step{step}")
        server.add_folder("tiny/no-steps", folders[0])
        for key, value in dict(HF_ENDPOINT=server.url, HF_HOME=str(tmp / "home")).items():
            patch.setenv(key, value)
        patch.delenv("HF_HUB_OFFLINE", raising=False)
        patch.delenv("HF_HUB_CACHE", raising=False)
        server.folders = folders
        yield server
        from explorer import hub as module

        module.forget_all()


def test_named_revisions_are_measured_as_transformers_own_models_score(hub):
    from explorer.hub_timeline import hub_timeline

    out = hub_timeline(REPO, "step1000, step0", TEXT)
    assert [v["revision"] for v in out["revisions"]] == ["step0", "step1000"]  # in step order
    for view in out["revisions"]:
        assert view["commit"] == hub.repos[REPO]["revisions"][view["revision"]]["sha"]
        theirs = AutoModelForCausalLM.from_pretrained(hub.folders[view["step"]], attn_implementation="eager").eval()
        expected = head_scores(theirs)
        assert abs(torch.tensor(view["induction"]) - torch.tensor(expected["induction"])).max() <= 1e-4
        assert abs(torch.tensor(view["previous_token"]) - torch.tensor(expected["previous token"])).max() <= 1e-4
        top = view["best_induction"]
        assert top["score"] == pytest.approx(max(max(row) for row in view["induction"]))
        attention = torch.tensor(view["attention_of_best_induction_head"])
        assert attention.shape == (len(out["tokens"]), len(out["tokens"]))
        assert torch.allclose(attention.sum(-1), torch.ones(len(out["tokens"])), atol=1e-4)
        assert isinstance(view["sample"], str) and len(view["guessed"]) == len(out["tokens"]) - 1
    assert 0 < out["induction_baseline"] < 0.1


def test_no_revisions_named_takes_12_evenly_spaced_training_steps(hub):
    from explorer.hub_timeline import MAX_REVISIONS, hub_timeline

    progress = []
    out = hub_timeline(REPO, "", TEXT, on_progress=progress.append)
    steps = [v["step"] for v in out["revisions"]]
    assert len(steps) == MAX_REVISIONS and steps[0] == 0 and steps[-1] == 4000 and steps == sorted(steps)
    fetched = len(set(steps) | {0, 1000})  # each revision once: the first test's two are cached
    assert hub.downloads(REPO, "model.safetensors") == fetched
    assert any("revision step4000 (12 of 12)" in line for line in progress)
    again = hub_timeline(REPO, "", TEXT)
    assert [v["commit"] for v in again["revisions"]] == [v["commit"] for v in out["revisions"]]
    assert hub.downloads(REPO, "model.safetensors") == fetched


@pytest.mark.parametrize("repo, revisions, message", [
    (REPO, ",".join(f"step{s}" for s in STEPS), "at most 12"),
    (REPO, "step0, bad..name", "not a revision"),
    (REPO, {"step": 0}, "list of texts"),
    ("tiny/no-steps", "", "no revisions named `step<N>`"),
    ("not a repo", "", "not a Hub repo id"),
])
def test_bad_requests_say_what_is_allowed(hub, repo, revisions, message):
    from explorer.hub_timeline import hub_timeline
    from explorer.inputs import InputProblem

    with pytest.raises(InputProblem, match=message):
        hub_timeline(repo, revisions, TEXT)


def test_the_app_serves_hub_timeline(client, hub):
    out = client.predict(REPO, "step0, step4000", TEXT, api_name="/hub_timeline")
    assert [v["step"] for v in out["revisions"]] == [0, 4000]
    from gradio_client.exceptions import AppError

    with pytest.raises(AppError, match="at most 12"):
        client.predict(REPO, ",".join(f"step{s}" for s in STEPS), TEXT, api_name="/hub_timeline")
