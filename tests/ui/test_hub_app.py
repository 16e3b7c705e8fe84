"""The app's Open a model, through gradio_client against the app server (tests/conftest.py) and a Hub on 127.0.0.1
(tests/support/fake_hub.py, HF_ENDPOINT pointing at it): ``open_model`` and ``open_upload`` return their JSON, the model joins
the menus, every view works on it, bad repos and a hanging Hub end as messages while the app keeps serving."""

import time
import zipfile

import pytest
from gradio_client import Client, handle_file

from support import hub_repos

TEXT = "Shall I compare thee to a summer's day? Shall I compare thee"
GPT2 = "tiny/gpt2"


@pytest.fixture(scope="module")
def hub(app_server, start_fake_hub, tmp_path_factory):
    """The fake Hub (tests/conftest.py) serving a tiny repo of every family, one of ours, a bad one and one that hangs."""
    tmp = tmp_path_factory.mktemp("app-hub")
    server = start_fake_hub(token="hf_dummy_token_for_tests")
    for model_type in hub_repos.TINY:  # one repo per family modeling.convert holds
        server.add_folder(f"tiny/{model_type}", hub_repos.save_transformers_repo(tmp / model_type, model_type))
    server.add_folder("tiny/ours", hub_repos.save_ours(tmp / "ours"))
    server.add_repo("bad/unknown-architecture", hub_repos.bad_repos(tmp)["bad/unknown-architecture"])
    server.add_repo("slow/hangs", {"config.json": b"{}"})
    server.hanging.add("slow/hangs")
    return server


def test_open_model_returns_its_json_and_joins_every_menu(client, hub):
    from ui import menus

    result, line = client.predict(GPT2, "", api_name="/open_model")
    assert set(result) >= {"name", "family", "parameters", "commit", "parity"}
    assert (result["name"], result["family"], result["commit"]) == (GPT2, "GPT-2", hub.repos[GPT2]["sha"])
    assert result["parity"] <= 1e-4 and result["parameters"] > 0 and result["logit_size"] > 0
    assert "Opened" in line  # the family as it is spelled ('gpt-2' once), the judgment as the menu says it
    assert (f"Parity with transformers' own GPT-2 class on a fixed input: logits as transformers' (largest gap "
            f"{result['parity']:.1e} on logits up to {result['logit_size']:.2g}: float rounding).") in line
    choices, _, note = menus.menus_now(client.session_hash)  # the menus of the visitor who opened it
    assert GPT2 in [name for _, name in choices] and GPT2 in note
    decoders, _ = menus.decoder_only(choices, None)
    assert GPT2 in [name for _, name in decoders]  # One gradient step's menu too


VIEWS = {  # endpoint -> its arguments after (text, model)
    "/generate": ("Greedy", 1.0, 0, 1.0, 1.0, 8, 0),
    "/attention": ("self", "0", "average"),
    "/forward_trace": (),
    "/attention_steps": ("self", 1, 2, -1, False),
    "/logit_lens": (3,),
    "/ablate_heads": ("self", "0.1, 1"),
    "/rank_heads": ("self",),
    "/next_token_distribution": (0.7, 5, 1.0, 1.0),
    "/gradient_step": (5, " the", 0.5),
}


@pytest.mark.parametrize("repo", [f"tiny/{model_type}" for model_type in hub_repos.TINY] + ["tiny/ours"])
@pytest.mark.parametrize("endpoint", list(VIEWS))
def test_every_view_works_on_an_opened_model(client, hub, endpoint, repo):
    """Every family the converters hold (GPT-2; Llama, Qwen2, Mistral with RMSNorm, SwiGLU, grouped-query attention and
    an untied head; GPT-NeoX with parallel residual and a quarter of each head rotated) and one of ours."""
    client.predict(repo, "", api_name="/open_model")
    *_, note = client.predict(TEXT, repo, *VIEWS[endpoint], api_name=endpoint)
    assert "⚠" not in note and "Something went wrong" not in note, note
    if endpoint not in ("/generate", "/forward_trace"):  # their status lines do not name the model
        assert repo in note


def test_a_bad_repo_ends_as_a_message_naming_the_families(client, hub):
    result, line = client.predict("bad/unknown-architecture", "", api_name="/open_model")
    assert result is None and line.startswith("⚠️") and "`bert`" in line and "GPT-2 (`gpt2`)" in line
    result, line = client.predict("not a repo id!", "", api_name="/open_model")
    assert result is None and "is not a Hub repo id" in line
    result, line = client.predict(GPT2, "no such..revision", api_name="/open_model")
    assert result is None and "is not a revision" in line


def test_a_hanging_hub_answers_within_30_s_and_the_app_keeps_serving(app_server, hub):
    waiting = Client(app_server, verbose=False)
    start = time.perf_counter()
    job = waiting.submit("slow/hangs", "", api_name="/open_model")
    time.sleep(1)
    other = Client(app_server, verbose=False)
    served = time.perf_counter()
    *_, note = other.predict(TEXT, "shakespeare-rope", "self", "0", "average", api_name="/attention")
    result, line = other.predict("tiny/ours", "", api_name="/open_model")
    # served well before the hanging open gives up (its Hub call times out at 10 s): nothing waited behind it
    assert time.perf_counter() - served < 8 and "⚠" not in note and result["name"] == "tiny/ours"
    result, line = job.result(timeout=40)
    assert time.perf_counter() - start < 30
    assert result is None and "did not answer in time" in line


def test_an_upload_opens_in_its_own_session_only(app_server, hub, tmp_path):
    from explorer.models import registry

    folder = hub_repos.save_ours(tmp_path / "mine")
    archive = tmp_path / "mine.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for p in folder.iterdir():
            z.write(p, p.name)
    mine = Client(app_server, verbose=False)
    result, line = mine.predict(handle_file(str(archive)), api_name="/open_upload")
    assert result["family"] == "ours (scratch_transformer)" and result["source"] == "upload"
    assert "no one else sees it" in line
    assert result["name"] in [name for _, name in registry.choices(mine.session_hash)]
    assert result["name"] not in [name for _, name in registry.choices(None)]
    *_, note = mine.predict(TEXT, result["name"], "self", "0", "average", api_name="/attention")
    assert "⚠" not in note and result["name"] in note
    (tmp_path / "fake.zip").write_text("not a zip at all")
    result, line = mine.predict(handle_file(str(tmp_path / "fake.zip")), api_name="/open_upload")
    assert result is None and "not a zip" in line


def test_opening_the_same_repo_from_many_clients_downloads_it_once(app_server, hub, tmp_path):
    hub.add_folder("tiny/crowd", hub_repos.save_transformers_repo(tmp_path / "crowd", "gpt2", seed=5))
    jobs = [Client(app_server, verbose=False).submit("tiny/crowd", "", api_name="/open_model") for _ in range(3)]
    results = [job.result(timeout=60)[0] for job in jobs]
    assert {r["commit"] for r in results} == {hub.repos["tiny/crowd"]["sha"]}
    assert hub.downloads("tiny/crowd", "model.safetensors") == 1


@pytest.fixture(scope="module")
def trained_zip(tmp_path_factory):
    """The zip and JSON of a real (tiny) Train one yourself job."""
    from explorer.learning import live_result, live_settings, train_live
    from support.fixtures_checkpoints import train_tokenizer

    settings = live_settings.check_settings(n_layers=1, n_heads=2, d_model=16, steps=4, log_every=2, data="own-text",
                                            text="Shall I compare thee to a summer's day? " * 30, batch_size=4,
                                            context_length=16)
    *_, result = train_live.train_live(settings, tokenizer=train_tokenizer())
    return live_result.save_zip(result, tmp_path_factory.mktemp("trained-app")), result.to_json()


def test_train_one_yourself_opens_in_every_tab_and_pushes_as_the_local_account(app_server, hub, trained_zip):
    """Not on a Space (no SPACE_ID): the push goes to the account logged in on the machine (HF_TOKEN here: "tester")."""
    archive, job = trained_zip
    mine = Client(app_server, verbose=False)
    result, line = mine.predict(handle_file(str(archive)), api_name="/open_trained")
    assert result["source"] == "trained" and "no one else sees it" in line
    *_, note = mine.predict(TEXT, result["name"], 3, api_name="/logit_lens")
    assert "⚠" not in note and result["name"] in note
    pushed, line = mine.predict(handle_file(str(archive)), job, "from-the-app", api_name="/push_to_hub")
    assert pushed["repo_id"] == "tester/from-the-app" and hub.authors["tester/from-the-app"] == ["tester"]
    assert "Pushed to" in line
    result, _ = mine.predict("tester/from-the-app", "", api_name="/open_model")
    assert result["family"] == "ours (scratch_transformer)" and result["commit"] == pushed["commit"]
