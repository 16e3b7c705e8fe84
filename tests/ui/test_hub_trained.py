"""A model trained in Train one yourself, in and out: pushed to the visitor's own account on a Hub at 127.0.0.1
(tests/support/fake_hub.py, real huggingface_hub upload code), each visitor as themselves; the pushed repo opens again with
open_model and gives the trained model's logits; "Open in every tab" opens it for its browser session only."""

import json
import re
import threading
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
import requests
import torch
from huggingface_hub import metadata_load
from joserfc import jwt
from joserfc.jwk import KeySet

from checkpointing.paths import REPO_ROOT
from support.fixtures_checkpoints import train_tokenizer

USERS = {"hf_token_alice": "alice", "hf_token_bob": "bob"}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """(zip, job JSON, the model) of a real Train one yourself job: 6 steps on the learner's own text."""
    from explorer.learning import live_result, live_settings, train_live

    tmp = tmp_path_factory.mktemp("trained")
    settings = live_settings.check_settings(n_layers=1, n_heads=2, d_model=16, steps=6, log_every=2, data="own-text",
                                            text="Shall I compare thee to a summer's day? " * 40, batch_size=4,
                                            context_length=16)
    *_, result = train_live.train_live(settings, tokenizer=train_tokenizer())
    return live_result.save_zip(result, tmp), result.to_json(), result.model.eval()


@pytest.fixture(scope="module")
def hub(start_fake_hub):
    """The fake Hub (tests/conftest.py), empty, where USERS sign in; no machine token: the push uses the visitor's only."""
    return start_fake_hub(users=USERS, token=None)


def test_push_makes_a_repo_under_the_visitors_account_with_everything(hub, trained):
    from explorer.models.push import push_trained

    archive, job, _ = trained
    pushed = push_trained(archive, job, "hf_token_alice", "my-first-transformer")
    assert pushed["repo_id"] == "alice/my-first-transformer" and pushed["url"].endswith("/alice/my-first-transformer")
    repo = hub.repos["alice/my-first-transformer"]
    assert pushed["commit"] == repo["sha"] and hub.authors["alice/my-first-transformer"] == ["alice"]
    files = repo["files"]
    assert {"model.safetensors", "config.json", "modeling_scratch_transformer.py", "configuration_scratch_transformer.py",
            "tokenizer.json", "README.md", "loss_curve.png", "training_log.json"} <= set(files)
    assert json.loads(files["config.json"])["auto_map"]["AutoModelForCausalLM"].startswith("modeling_scratch_transformer.")
    card = files["README.md"].decode()
    assert "trust_remote_code=True" in card and "![Training loss](loss_curve.png)" in card
    for key, value in job["settings"].items():
        assert f"| {key} |" in card
    assert files["loss_curve.png"].startswith(b"\x89PNG")
    assert json.loads(files["training_log.json"])["losses"] == job["losses"]


def test_the_pushed_repo_opens_again_with_open_model(hub, trained):
    from explorer.models import opening, registry
    from explorer.models.push import push_trained

    archive, job, model = trained
    pushed = push_trained(archive, job, "hf_token_alice", "reopened")
    opened = opening.open_repo(pushed["repo_id"])
    assert opened.model_type == "scratch_transformer" and opened.commit == pushed["commit"]
    _, again, _ = registry.resolve(pushed["repo_id"])
    ids = torch.arange(3, 15)[None]
    with torch.no_grad():
        assert torch.equal(again(ids).logits, model(ids).logits)
    assert not [r for r in hub.requests if r.startswith("GET") and r.endswith(".py")]  # its code is not fetched


def test_two_visitors_pushing_at_once_each_push_as_themselves(hub, trained):
    from explorer.models.push import push_trained

    archive, job, _ = trained
    results = {}
    threads = [threading.Thread(target=lambda t=t: results.update({t: push_trained(archive, job, t, "same-name")}))
               for t in USERS]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert {results[t]["repo_id"] for t in USERS} == {"alice/same-name", "bob/same-name"}
    assert hub.authors["alice/same-name"] == ["alice"] and hub.authors["bob/same-name"] == ["bob"]


def test_a_push_without_sign_in_or_a_model_says_what_to_do(hub, trained, tmp_path):
    from explorer.models.push import push_trained
    from explorer.core.inputs import InputProblem

    archive, job, _ = trained
    with pytest.raises(InputProblem, match="hf auth login"):  # not a Space: no Sign-in button to point at
        push_trained(archive, job, None)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SPACE_ID", "someone/a-space")
        with pytest.raises(InputProblem, match="Sign in with Hugging Face"):
            push_trained(archive, job, None)
    with pytest.raises(InputProblem, match="did not accept your sign-in"):
        push_trained(archive, job, "hf_not_a_token")
    with pytest.raises(InputProblem, match="Train a model first"):
        push_trained(None, job, "hf_token_alice")
    with pytest.raises(InputProblem, match="name only"):
        push_trained(archive, job, "hf_token_alice", "someone/else")


def test_open_in_every_tab_is_for_this_session_only(hub, trained):
    from explorer.core.visitor import Visitor, visiting
    from explorer.models import opening, registry

    archive, _, model = trained
    with visiting(Visitor("trainer")):
        opened = opening.open_upload(archive, source="trained")
        _, again, _ = registry.resolve(opened.name)
    assert opened.source == "trained" and "trained by you" in opened.label
    assert opened.name in [n for _, n in registry.choices("trainer")]
    assert opened.name not in [n for _, n in registry.choices("someone-else")]
    ids = torch.arange(3, 15)[None]
    with torch.no_grad():
        assert torch.equal(again(ids).logits, model(ids).logits)


def test_a_random_token_model_opens_with_a_tokenizer_of_its_symbols(tmp_path):
    """Trained on random tokens (the one-click induction setting), it is saved with one symbol per token id
    (explorer.generation.symbols), so Open in every tab opens it: every view reads its symbols."""
    from explorer.generation.symbols import reads_symbols
    from explorer.learning import live_result, live_settings, train_live
    from explorer.models import opening, registry

    settings = live_settings.check_settings(n_layers=1, n_heads=2, d_model=16, steps=2, log_every=1,
                                            data="random-repeats", batch_size=2, context_length=16)
    *_, result = train_live.train_live(settings)
    archive = live_result.save_zip(result, tmp_path)
    opened = opening.open_upload(archive, source="trained")
    _, model, tokenizer = registry.resolve(opened.name)
    assert opened.source == "trained" and reads_symbols(tokenizer) and len(tokenizer) == model.config.vocab_size
    assert Path(archive).exists()


def test_an_opened_upload_is_unpacked_under_the_process_and_removed_when_it_exits(trained):
    """The app unpacks each upload into a temporary folder of its own process; the folder goes when the process
    ends, so a restarted Space or a closed local app leaves no models behind in /tmp."""
    import os
    import subprocess
    import sys


    archive = trained[0]
    code = ("import json; from explorer.models import opening, uploads; opened = opening.open_upload(%r); "
            "print(json.dumps([str(uploads.ROOT), str(opened.folder), opened.folder.is_dir()]))" % str(archive))
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO_ROOT,
                         timeout=120, check=True)
    root, folder, existed = json.loads(out.stdout.strip().splitlines()[-1])
    assert existed and Path(root) in Path(folder).parents
    assert not Path(root).exists()


def oauth_token(hub, user: str, scope: str) -> dict:
    """The authorization-code flow a Space's sign-in runs, by hand (tests/ui/browser/test_browser_oauth.py runs the real one in
    Chromium): ``user``, signed in to the Hub, consents; the code is swapped for the token endpoint's answer."""
    browser = requests.Session()
    cookie = hub.login_cookie(user)
    browser.cookies.set(cookie["name"], cookie["value"])
    redirect_uri = "http://127.0.0.1:9/login/callback"
    page = browser.get(f"{hub.url}/oauth/authorize", params=dict(response_type="code", client_id=hub.client_id, scope=scope,
                                                                 redirect_uri=redirect_uri, state="s1", nonce="n1"))
    consent = re.search(r"id='authorize' href='([^']+)'", page.text).group(1).replace("&amp;", "&")
    back = browser.get(hub.url + consent, allow_redirects=False).headers["Location"]
    assert back.startswith(redirect_uri)
    query = {key: values[0] for key, values in parse_qs(urlparse(back).query).items()}
    assert query["state"] == "s1"
    answer = requests.post(f"{hub.url}/oauth/token", auth=(hub.client_id, hub.client_secret),
                           data=dict(grant_type="authorization_code", code=query["code"], redirect_uri=redirect_uri))
    answer.raise_for_status()
    again = requests.post(f"{hub.url}/oauth/token", auth=(hub.client_id, hub.client_secret),
                          data=dict(grant_type="authorization_code", code=query["code"], redirect_uri=redirect_uri))
    assert again.status_code == 400  # a code is good once
    return answer.json()


def test_an_oauth_token_with_the_readmes_scopes_pushes_and_without_them_is_told_why(hub, trained):
    """The Space asks for the README's hf_oauth_scopes (the Hub adds openid and profile): with them, the visitor's
    OAuth token creates and fills a repo of their own; a token with openid and profile only cannot create one."""
    from explorer.models.push import InputProblem, push_trained

    archive, job, _ = trained
    scopes = ["openid", "profile", *metadata_load(REPO_ROOT / "README.md")["hf_oauth_scopes"]]
    granted = oauth_token(hub, "bob", " ".join(scopes))
    keys = KeySet.import_key_set(requests.get(hub.openid_configuration()["jwks_uri"]).json())
    claims = jwt.decode(granted["id_token"], keys).claims
    assert claims["preferred_username"] == "bob" and claims["nonce"] == "n1" and claims["aud"] == hub.client_id
    pushed = push_trained(archive, job, granted["access_token"], "signed-in-with-scopes")
    assert pushed["repo_id"] == "bob/signed-in-with-scopes" and hub.authors[pushed["repo_id"]] == ["bob"]
    narrow = oauth_token(hub, "bob", "openid profile")["access_token"]
    with pytest.raises(InputProblem, match="cannot create repos"):
        push_trained(archive, job, narrow, "signed-in-without-scopes")
    assert "bob/signed-in-without-scopes" not in hub.repos


def test_a_pushed_zip_whose_index_names_weights_elsewhere_is_refused_before_any_repo(hub, trained, tmp_path):
    """The push endpoint takes any zip a client sends: one whose shard index maps every tensor to a model file elsewhere
    on the server (by absolute path) pushed that file's weights to the visitor's own repo."""
    import zipfile

    from safetensors.torch import load_file

    from explorer.models.push import InputProblem, push_trained
    from explorer.models.uploads import unpack_zip

    archive, job, model = trained
    elsewhere = tmp_path / "elsewhere"
    model.save_pretrained(elsewhere)  # a model of the same shapes, standing for one the server holds
    unpacked = unpack_zip(Path(archive), tmp_path / "unpacked")
    (unpacked / "model.safetensors").unlink()
    target = str(elsewhere / "model.safetensors")
    index = {"metadata": {}, "weight_map": {name: target for name in load_file(target)}}
    (unpacked / "model.safetensors.index.json").write_text(json.dumps(index))
    spoof = tmp_path / "spoof.zip"
    with zipfile.ZipFile(spoof, "w") as z:
        for path in unpacked.iterdir():
            z.write(path, path.name)
    with pytest.raises(InputProblem, match=f"The trained model's zip's model.safetensors.index.json names shards it "
                                           f"lacks: `{re.escape(target)}`"):
        push_trained(str(spoof), job, "hf_token_alice", "spoofed")
    assert "alice/spoofed" not in hub.repos


def test_a_pushed_zip_is_checked_as_open_a_model_checks_one_before_anything_is_built(hub, trained, tmp_path,
                                                                                      monkeypatch):
    """A zip over the parameter limit (a config of 10^6 layers filled the memory as it was built; here the limit is
    set below the trained model's count) or of another family is refused by name, and no repo is made."""
    import zipfile

    from explorer.models.push import InputProblem, push_trained
    from explorer.models.uploads import unpack_zip
    from support.hub_repos import save_transformers_repo

    archive, job, model = trained
    monkeypatch.setenv("SCRATCH_HUB_MAX_PARAMETERS", str(model.num_parameters() - 1))
    with pytest.raises(InputProblem, match=r"The trained model's zip has [\d.]+M parameters; this app opens models of "
                                           r"at most"):
        push_trained(archive, job, "hf_token_alice", "over-the-limit")
    monkeypatch.delenv("SCRATCH_HUB_MAX_PARAMETERS")
    gpt2 = tmp_path / "gpt2.zip"
    with zipfile.ZipFile(gpt2, "w") as z:
        for path in unpack_zip(Path(archive), tmp_path / "unpacked").iterdir():
            if path.name != "config.json" and not path.name.endswith(".safetensors"):
                z.write(path, path.name)
        for path in save_transformers_repo(tmp_path / "gpt2", "gpt2").iterdir():
            if path.name in ("config.json", "model.safetensors"):
                z.write(path, path.name)
    with pytest.raises(InputProblem, match="The trained model's zip holds a GPT-2 model; Push sends the models Train "
                                           "one yourself trains"):
        push_trained(str(gpt2), job, "hf_token_alice", "another-family")
    assert "alice/over-the-limit" not in hub.repos and "alice/another-family" not in hub.repos
