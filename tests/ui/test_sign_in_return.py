"""Train one yourself on a Space: the model trained before signing in survives the round trip to the Hub's consent
page (ui.trained_model's keep_trained, kept_model, back_from_sign_in, bring_back_kept). The flow itself, in Chromium
against the fake Hub's OpenID provider, is tests/ui/browser/test_browser_oauth.py."""

from types import SimpleNamespace

from ui import trained_model

BACK = SimpleNamespace(query_params={"back_to": "train-live"})
ELSEWHERE = SimpleNamespace(query_params={})


def test_a_kept_model_comes_back_only_after_signing_in_and_only_into_an_empty_tab(tmp_path):
    archive = tmp_path / "model.zip"
    archive.write_bytes(b"zip")
    job = {"steps_done": 3}
    key = trained_model.keep_trained(str(archive), job)
    assert isinstance(key, str) and len(key) >= 32
    assert trained_model.keep_trained(str(archive), job) == key  # brought back and kept again: the same key
    update, kept_job, line = trained_model.bring_back_kept(key, None, BACK)
    assert update["value"] == str(archive) and update["interactive"] is True and kept_job == job
    assert "still here" in line
    skipped = trained_model.bring_back_kept(key, None, ELSEWHERE)  # a plain page load: the tab stays as it is
    assert all(isinstance(value, type(trained_model.gr.skip())) for value in skipped)
    assert trained_model.bring_back_kept(key, str(archive), BACK)[0] == trained_model.gr.skip()  # the tab has a model
    assert trained_model.bring_back_kept("a-guessed-key", None, BACK)[0] == trained_model.gr.skip()
    assert trained_model.bring_back_kept(None, None, BACK)[0] == trained_model.gr.skip()
    archive.unlink()  # gradio's cache dropped the zip
    assert trained_model.kept_model(key) is None


def test_back_from_signing_in_opens_train_one_yourself():
    assert trained_model.back_from_sign_in(BACK).selected == "train-live"
    assert trained_model.back_from_sign_in(ELSEWHERE) == trained_model.gr.skip()


def test_nothing_is_kept_without_a_model_and_old_models_expire(tmp_path, monkeypatch):
    assert trained_model.keep_trained(None, {"steps_done": 1}) == trained_model.gr.skip()
    archive = tmp_path / "old.zip"
    archive.write_bytes(b"zip")
    key = trained_model.keep_trained(str(archive), {})
    now = trained_model.time.time()
    monkeypatch.setattr(trained_model.time, "time", lambda: now + trained_model.KEPT_SECONDS + 1)
    assert trained_model.kept_model(key) is None


def test_a_denied_sign_in_goes_back_to_this_page_only():
    """sign_in_refused (the OAuthError handler of the sign-in's callback) sends the browser to a path of this app,
    whatever the callback's _target_url says."""
    for target, expected in (("/?back_to=train-live", "/?back_to=train-live"), ("/", "/"),
                             ("https://elsewhere.example/?back_to=train-live", "/?back_to=train-live"),
                             ("//elsewhere.example", "/")):
        response = trained_model.sign_in_refused(SimpleNamespace(query_params={"_target_url": target}), Exception())
        assert response.status_code == 302 and response.headers["location"] == expected
