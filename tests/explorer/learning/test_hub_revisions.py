"""hub_timeline: a Hub repo's training checkpoints (revisions step0 … on tests/support/fake_hub.py) seen as a training run
(a typed HubTimeline, a Timeline as a training run is): every head's induction and previous-token score, equal to the
scores of transformers' own model of that revision (1e-4), the best induction head's attention on the text, a sample;
at most 12 revisions, evenly spaced by default. The API's JSON is the timeline's to_json(), its keys pinned here."""

import json

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from support import hub_repos
from checkpointing.in_context import head_scores
from modeling.convert import CONVERTERS
from checkpointing.paths import REPO_ROOT

FAMILY = "gpt_neox" if "gpt_neox" in CONVERTERS else "gpt2"  # Pythia's family once modeling.convert holds it
STEPS = [0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000, 2000, 3000, 4000]  # 15 revisions, as Pythia's are spaced
REPO = "tiny/pythia-like"
TEXT = "If music be the food of love, play on. If music be the food"


@pytest.fixture(scope="module")
def hub(app_server, start_fake_hub, tmp_path_factory):
    """The fake Hub (tests/conftest.py) serving REPO at every step of STEPS. After the session's app is built: a page
    built while revisions are open would list them in its menus, and test_app checks the menus a fresh app builds."""
    tmp = tmp_path_factory.mktemp("timeline-hub")
    server = start_fake_hub()
    folders = {}
    for seed, step in enumerate(STEPS):
        folders[step] = hub_repos.save_transformers_repo(tmp / f"step{step}", FAMILY, seed=seed)
        server.add_folder(REPO, folders[step], revision=f"step{step}")
    server.add_folder("tiny/no-steps", folders[0])
    server.folders = folders
    return server


def test_named_revisions_are_measured_as_transformers_own_models_score(hub):
    from explorer.learning.hub_revisions import hub_timeline

    out = hub_timeline(REPO, "step1000, step0", TEXT)
    assert [v.revision for v in out.revisions] == ["step0", "step1000"] and out.steps == [0, 1000]  # in step order
    for index, view in enumerate(out.revisions):
        assert view.commit == hub.repos[REPO]["revisions"][view.revision]["sha"]
        theirs = AutoModelForCausalLM.from_pretrained(hub.folders[view.step], attn_implementation="eager").eval()
        expected = head_scores(theirs)
        assert abs(torch.tensor(view.induction) - torch.tensor(expected["induction"])).max() <= 1e-4
        assert abs(torch.tensor(view.previous_token) - torch.tensor(expected["previous token"])).max() <= 1e-4
        top = view.best_induction
        assert top.score == pytest.approx(max(max(row) for row in view.induction))
        assert (top.layer, top.head, top.score) == pytest.approx(out.best_head(index))  # the Timeline's own
        attention = torch.tensor(view.attention_of_best_induction_head)
        assert attention.shape == (len(out.tokens), len(out.tokens))
        assert torch.allclose(attention.sum(-1), torch.ones(len(out.tokens)), atol=1e-4)
        assert isinstance(view.sample, str) and len(view.guessed) == len(out.tokens) - 1
    assert 0 < out.induction_baseline < 0.1


def test_no_revisions_named_takes_12_evenly_spaced_training_steps(hub):
    from explorer.learning.hub_revisions import MAX_REVISIONS, hub_timeline

    progress = []
    out = hub_timeline(REPO, "", TEXT, on_progress=progress.append)
    steps = out.steps
    assert len(steps) == MAX_REVISIONS and steps[0] == 0 and steps[-1] == 4000 and steps == sorted(steps)
    fetched = len(set(steps) | {0, 1000})  # each revision once: the first test's two are cached
    assert hub.downloads(REPO, "model.safetensors") == fetched
    assert any("revision step4000 (12 of 12)" in line for line in progress)
    measuring = [line for line in progress if "converting, measuring every head" in line]  # one revision at a time
    assert [line.split(" (")[1].split(")")[0] for line in measuring] == [f"{k} of 12" for k in range(1, 13)]
    again = hub_timeline(REPO, "", TEXT)
    assert [v.commit for v in again.revisions] == [v.commit for v in out.revisions]
    assert hub.downloads(REPO, "model.safetensors") == fetched


@pytest.mark.parametrize("repo, revisions, message", [
    (REPO, ",".join(f"step{s}" for s in STEPS), "at most 12"),
    (REPO, "step0, bad..name", "not a revision name.*leave the box empty for the repo's `step<N>` revisions"),
    (REPO, "step0, step999", r"Revision `step999` \(2 of 2\) of `tiny/pythia-like` is not on the Hub.*leave the box "
                             "empty to take 12 of the repo's `step<N>` revisions"),
    (REPO, {"step": 0}, "list of texts"),
    ("tiny/no-steps", "", "no revisions named `step<N>`"),
    ("not a repo", "", "not a Hub repo id"),
])
def test_bad_requests_say_what_is_allowed(hub, repo, revisions, message):
    from explorer.learning.hub_revisions import hub_timeline
    from explorer.core.inputs import InputProblem

    with pytest.raises(InputProblem, match=message):
        hub_timeline(repo, revisions, TEXT)


def live_models() -> set[int]:
    import gc

    from modeling import ScratchTransformerForCausalLM

    gc.collect()
    return {id(o) for o in gc.get_objects() if isinstance(o, ScratchTransformerForCausalLM)}


def test_measuring_lets_every_revisions_weights_go_unless_they_were_held_before(hub):
    """Opening downloads only; measuring opens one revision at a time and lets it go: afterwards no model of the
    revisions is alive, and none is held, save the one held before the request (still held), all still in the menus."""
    from explorer.learning.hub_revisions import hub_timeline, request
    from explorer.models import opening, registry

    opening.open_repo(REPO, "step8")  # held before the request
    before = live_models()
    asked = request(REPO, "step2, step8, step64", TEXT)
    for _ in asked.opening():
        pass
    assert live_models() == before  # the downloads converted nothing
    out = asked.measure()
    assert live_models() == before and [v.step for v in out.revisions] == [2, 8, 64]
    held = {registry.opened(f"{REPO}@step{s}").key: s for s in (2, 8, 64)}
    in_memory = {s for key, s in held.items() if key in registry.held_bytes()}
    assert not in_memory & {2, 64}  # the revisions measured are let go; kept (step8) was not let go by measuring
    assert {f"{REPO}@step{s}" for s in (2, 8, 64)} <= set(registry.owned(None))  # every revision still listed
    again = hub_timeline(REPO, "step2, step8, step64", TEXT)  # measured again from the files: the same numbers
    assert again.revisions == out.revisions and again.tokens == out.tokens
    _, model, _ = registry.resolve(f"{REPO}@step2")  # a view that asks for a let-go revision loads it again
    assert model.config.n_layers > 0


def test_the_json_is_the_typed_timeline_field_by_field():
    """to_json(): the keys and values of hub_timeline's JSON, in their order; a best head as {"layer", "head", "score"}."""
    from explorer.learning.hub_revisions import BestHead, HubTimeline, RevisionView

    view = RevisionView("step1000", "0123abcd", 1000, "tiny/pythia-like@step1000", [[0.1, 0.5]], [[0.25, 0.75]],
                        BestHead(0, 1, 0.5), BestHead(0, 1, 0.75), [[1.0, 0.0], [0.5, 0.5]], "on. If", ["", "b"],
                        ["a", "b", "c"])
    timeline = HubTimeline(REPO, [view], ["0:a", "1:b"], 0.05, ["a notice"])
    expected = {"repo_id": REPO, "revisions": [{
        "revision": "step1000", "commit": "0123abcd", "step": 1000, "menu_name": "tiny/pythia-like@step1000",
        "induction": [[0.1, 0.5]], "previous_token": [[0.25, 0.75]],
        "best_induction": {"layer": 0, "head": 1, "score": 0.5},
        "best_previous_token": {"layer": 0, "head": 1, "score": 0.75},
        "attention_of_best_induction_head": [[1.0, 0.0], [0.5, 0.5]], "sample": "on. If", "guessed": ["", "b"],
        "read_tokens": ["a", "b", "c"]}], "tokens": ["0:a", "1:b"], "induction_baseline": 0.05, "notices": ["a notice"]}
    assert timeline.to_json() == expected
    assert json.dumps(timeline.to_json()) == json.dumps(expected)  # the same keys in the same order
    assert timeline.steps == [1000] and timeline.best_head(0) == (0, 1, 0.5) and timeline.where == "revision"


def test_the_app_serves_hub_timeline(client, hub):
    from explorer.learning.hub_revisions import hub_timeline

    out = client.predict(REPO, "step0, step4000", TEXT, api_name="/hub_timeline")
    assert [v["step"] for v in out["revisions"]] == [0, 4000]
    assert out == json.loads(json.dumps(hub_timeline(REPO, "step0, step4000", TEXT).to_json()))
    from gradio_client.exceptions import AppError

    with pytest.raises(AppError, match="at most 12"):
        client.predict(REPO, ",".join(f"step{s}" for s in STEPS), TEXT, api_name="/hub_timeline")


# ----------------------------------------------------------------------------------------------
# The Watch it learn tab's section (ui.tabs.watch_it_learn): its handlers draw the numbers hub_timeline measured
# ----------------------------------------------------------------------------------------------

ASKED = "step4000, step0, step1000"


def opened_in_the_tab(revisions=ASKED):
    from ui.tabs import watch_it_learn

    streamed = list(watch_it_learn.open_revisions(REPO, revisions, TEXT))
    return streamed, watch_it_learn.measure_revisions(streamed[-1][0])


def test_the_tab_streams_the_opening_then_draws_every_head_as_hub_timeline_measured_it(hub):
    from explorer.views.heads import THRESHOLD
    from explorer.learning.hub_revisions import hub_timeline
    from ui.tabs import watch_it_learn

    streamed, (timeline, menu, heads, attention, sample, guesses, line) = opened_in_the_tab()
    assert any("`tiny/pythia-like`, revision step0 (2 of 3): opening" in status for _, status in streamed)
    assert streamed[-1][1].startswith("- ⏳ Opened 3 revisions of `tiny/pythia-like`")
    expected = hub_timeline(REPO, ASKED, TEXT)
    assert timeline.revisions == expected.revisions and timeline.tokens == expected.tokens
    assert menu["choices"] == [("step 0", 0), ("step 1,000", 1), ("step 4,000", 2)] and menu["value"] == 2
    drawn = {(trace.name, trace.yaxis): trace for trace in heads.data}
    for view_index, view in enumerate(expected.revisions):
        for layer, row in enumerate(view.induction):
            for head, score in enumerate(row):
                name = f"layer {layer}, head {head}"
                assert list(drawn[(name, "y")].x) == [0, 1000, 4000]
                assert drawn[(name, "y")].y[view_index] == score
                assert drawn[(name, "y2")].y[view_index] == view.previous_token[layer][head]
    last = expected.revisions[-1]
    assert np.asarray(attention.data[0].z) == pytest.approx(np.asarray(last.attention_of_best_induction_head), abs=1e-6)
    assert list(attention.data[0].x) == expected.tokens
    top = last.best_induction
    assert f"layer {top.layer}, head {top.head} (score {top.score:.2f})" in attention.layout.title.text
    assert guesses.splitlines()[0] == "".join(last.read_tokens)
    assert f"best induction head: layer {top.layer}, head {top.head} ({top.score:.2f})" in line
    formed = [(l, h) for l in range(len(last.induction)) for h in range(len(last.induction[0]))
              if any(v.induction[l][h] >= THRESHOLD for v in expected.revisions)]
    assert (f"No head of `{REPO}` reaches" in line) == (not formed)
    assert all(f"L{l}.H{h} from step" in line for l, h in formed)
    assert f"Right on {sum(map(bool, last.guessed))} of the {len(last.guessed)} next tokens" in line

    heads0, attention0, sample0, guesses0, line0 = watch_it_learn.show_revision(timeline, 0)  # the menu picks step 0
    first = expected.revisions[0]
    assert np.asarray(attention0.data[0].z) == pytest.approx(np.asarray(first.attention_of_best_induction_head), abs=1e-6)
    assert sample0 == watch_it_learn.visible_breaks(first.sample) and line0.startswith("- **step 0** (commit")
    assert [shape.x0 for shape in heads0.layout.shapes if shape.line.dash == "dot" and shape.x0 == shape.x1] == [0, 0]


@pytest.mark.parametrize("repo, revisions, message", [
    ("not a repo", "", "is not a Hub repo id"),
    ("tiny/no-steps", "", "no revisions named `step<N>`"),
    (REPO, ",".join(f"step{s}" for s in STEPS), "at most 12"),
    ("tiny/nothing-here", "step0", "No such model repo"),
])
def test_the_tab_says_what_is_wrong_in_its_status_line(hub, repo, revisions, message):
    streamed, measured = opened_in_the_tab_of(repo, revisions)
    asked, line = streamed[-1]
    assert asked is None and line.startswith("⚠️") and message in line, line
    assert all(value is not None and value.get("__type__") == "update" for value in measured)  # nothing redrawn


def opened_in_the_tab_of(repo, revisions):
    from ui.tabs import watch_it_learn

    streamed = list(watch_it_learn.open_revisions(repo, revisions, TEXT))
    return streamed, watch_it_learn.measure_revisions(streamed[-1][0])


def test_an_unreachable_hub_is_a_message_too(hub, monkeypatch):
    from support.local_server import free_port
    from ui.tabs import watch_it_learn

    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{free_port()}")  # nothing listens there
    asked, line = list(watch_it_learn.open_revisions(REPO, "", TEXT))[-1]
    assert asked is None and "did not answer in time" in line and "unreachable" in line, line
    *_, line = watch_it_learn.show_revision(None, 0)
    assert line == "⚠️ Open a Hub repo's revisions first."


def test_a_head_is_named_with_the_first_revision_it_reaches_the_threshold_at():
    from explorer.views.heads import THRESHOLD
    from explorer.learning.timeline import formed_line, heads_formed

    below, above = THRESHOLD / 2, THRESHOLD
    scores = [[[below, below]], [[below, above]], [[above, above]]]  # 3 revisions x 1 layer x 2 heads
    formed = heads_formed([0, 1000, "main"], scores)
    assert formed == [(0, 1, 1000), (0, 0, "main")]
    assert formed_line("repo", formed, "revision") == (f"repo forms 2 induction heads (score at least {THRESHOLD:g} at a "
                                                       "revision): L0.H1 from step 1,000, L0.H0 from main.")


def test_the_readme_says_the_limit_the_code_keeps():
    from explorer.learning.hub_revisions import MAX_REVISIONS

    readme = (REPO_ROOT / "README.md").read_text()
    assert f"{MAX_REVISIONS} evenly spaced or the ones you name" in readme
