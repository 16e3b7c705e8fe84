"""Sign in with Hugging Face, for real: `python app.py` started as a Space with ``hf_oauth: true`` runs it (the
environment the Hub gives such a Space: SYSTEM=spaces, SPACE_ID, OAUTH_CLIENT_ID, OAUTH_CLIENT_SECRET, OAUTH_SCOPES,
OPENID_PROVIDER_URL), with tests/support/fake_hub.py as both the Hub's API and its OpenID provider. In Chromium: the
LoginButton, Gradio's /login/huggingface, the provider's consent page, the callback (authlib checks the state, swaps
the code, verifies the signed id token), the session cookie, and ``gr.OAuthToken`` reaching Push to the Hub. No
part of gradio, authlib or huggingface_hub is mocked. SPACE_HOST stays unset: with it, Gradio sends the Hub
https://<SPACE_HOST>/login/callback as the redirect URI; here the app is plain http on 127.0.0.1, where Chromium
keeps Gradio's Secure, SameSite=None session cookie as it does on https.

The app's machine has a token of its own (HF_TOKEN, the Space owner's): a push never uses it. Screenshots of the
signed-in tab, and after the push, go to artifacts/screenshots/oauth-*.png.

Signing in leaves the page (the Hub's consent page sends the browser back to a fresh one): a visitor who trains,
then signs in, finds Train one yourself and the model again (ui.open_model keeps it), and pushes it."""

import copy

import pytest
from huggingface_hub import metadata_load

from support.app_process import REPO, start_app, stop_app
from support.browser import SHOTS, TIMEOUT_MS, assert_no_error_shown, open_tab, set_tiny_job

pytestmark = pytest.mark.browser
USERS = {"hf_alice_personal": "alice", "hf_bob_personal": "bob", "hf_space_owner": "space-owner"}
MACHINE_TOKEN = "hf_space_owner"  # the Space's own token (its owner's): never the visitor's account


def readme_scopes() -> str:
    """OAUTH_SCOPES as the Hub sets it for this Space: openid and profile, and the README's hf_oauth_scopes."""
    meta = metadata_load(REPO / "README.md")
    assert meta["hf_oauth"] is True
    return " ".join(["openid", "profile", *meta.get("hf_oauth_scopes", [])])


@pytest.fixture(scope="module")
def space(tiny_checkpoints, start_fake_hub, tmp_path_factory):
    """(url, hub): the app in a subprocess as the Hub runs a Space with OAuth, the fake Hub (tests/conftest.py) its
    provider and API."""
    hub = start_fake_hub(users=USERS)
    env = dict(SYSTEM="spaces", SPACE_ID="scratch-transformer/scratch-transformer", OAUTH_CLIENT_ID=hub.client_id,
               OAUTH_CLIENT_SECRET=hub.client_secret, OAUTH_SCOPES=readme_scopes(), OPENID_PROVIDER_URL=hub.url,
               HF_ENDPOINT=hub.url, HF_TOKEN=MACHINE_TOKEN, HF_HOME=str(tmp_path_factory.mktemp("oauth-home")),
               HF_HUB_OFFLINE=None, HF_HUB_CACHE=None, SPACE_HOST=None)
    process, url, _ = start_app(tiny_checkpoints, env=env)
    try:
        yield url, hub
    finally:
        stop_app(process)


def visitor(browser, url, hub, user: str | None, width: int):
    """A page in a browser context of its own (its own cookies), signed in to the Hub as ``user`` (None: nobody)."""
    context = browser.new_context(viewport={"width": width, "height": 900})
    if user is not None:
        context.add_cookies([hub.login_cookie(user)])
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.errors = []
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    page.goto(url)
    page.wait_for_selector("#catalog-status >> text=model(s) ready")
    open_tab(page, "Train one yourself")
    return page


def sign_in(page, user: str):
    """Sign in with Hugging Face: the app's button, the Hub's consent page (as ``user``), back to the app signed in."""
    page.click("#trained-login")
    page.wait_for_selector("#authorize")
    assert page.inner_text("#consent-user") == f"Signed in as {user}"
    page.click("#authorize")
    page.wait_for_selector("#catalog-status >> text=model(s) ready")  # the app again


def train(page, steps: int = 3):
    set_tiny_job(page, steps)
    page.click("#live-button")
    page.wait_for_selector(f"#live-status >> text=Done: {steps} of {steps} steps")


def pushed_line(page) -> str:
    """Push to the Hub's line once the push has answered."""
    page.wait_for_function("() => /^(Pushed|⚠️|Sign in|Train)/.test(document.querySelector('#trained-status').innerText.trim())")
    return page.inner_text("#trained-status").strip()


def shoot(page, name: str):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SHOTS / f"oauth-{name}.png", full_page=True)


def test_on_the_space_a_push_without_signing_in_is_refused_and_never_uses_the_machines_token(browser, space):
    url, hub = space
    repos, authors, requests = copy.deepcopy(hub.repos), copy.deepcopy(hub.authors), len(hub.requests)  # earlier tests'
    page = visitor(browser, url, hub, None, 1366)
    assert page.inner_text("#trained-login").strip() == "Sign in with Hugging Face"
    train(page)
    page.fill("#trained-repo input, #trained-repo textarea", "not-signed-in")
    page.click("#trained-push")
    page.wait_for_selector("#trained-status >> text=Sign in with Hugging Face first")
    assert hub.repos == repos and hub.authors == authors  # nothing made, nothing written
    made = hub.requests[requests:]
    assert not [r for r in made if "whoami" in r or "/api/repos/create" in r]  # the Space's token unused
    page.context.close()


def test_two_visitors_sign_in_as_themselves_and_each_push_goes_to_their_own_account(browser, space):
    url, hub = space
    grants, repos, scopes = len(hub.grants), set(hub.repos), set(hub.scopes)  # what the module's other tests made
    pages = {"alice": visitor(browser, url, hub, "alice", 1366), "bob": visitor(browser, url, hub, "bob", 800)}
    for user, page in pages.items():
        train(page)  # then sign in, which leaves the page: back, the tab and the model trained are there again
        sign_in(page, user)
        assert "back_to=train-live" in page.url
        page.wait_for_selector(f"#trained-login >> text=Logout ({user})")
        page.wait_for_selector("#trained-status >> text=The model you trained is still here")
        assert page.get_by_role("tab", name="Train one yourself").get_attribute("aria-selected") == "true"
    assert sorted(hub.grants[grants:]) == [("alice", readme_scopes()), ("bob", readme_scopes())]
    for user, page in pages.items():
        shoot(page, f"signed-in-{page.viewport_size['width']}")
    for user, page in pages.items():  # both pushes at once
        page.fill("#trained-repo input, #trained-repo textarea", "my-transformer")
        page.click("#trained-push")
    for user, page in pages.items():
        assert pushed_line(page).startswith(f"Pushed to {user}/my-transformer")
        assert_no_error_shown(page)
        assert page.errors == []
        shoot(page, f"pushed-{page.viewport_size['width']}")
    for user in pages:
        repo_id = f"{user}/my-transformer"
        assert hub.authors[repo_id] == [user], hub.authors
        assert {"config.json", "model.safetensors", "README.md", "loss_curve.png"} <= set(hub.repos[repo_id]["files"])
    assert set(hub.repos) - repos == {"alice/my-transformer", "bob/my-transformer"}  # nothing under the Space owner
    assert len(set(hub.scopes) - scopes) == 2 and MACHINE_TOKEN not in hub.scopes  # one OAuth token a visitor
    for page in pages.values():
        page.context.close()


def test_a_visitor_who_signs_out_can_push_no_more_while_another_stays_signed_in(browser, space):
    """Logout: the session forgets the visitor's token, so the next push is refused; another visitor's sign-in
    is untouched."""
    url, hub = space
    bob, alice = visitor(browser, url, hub, "bob", 800), visitor(browser, url, hub, "alice", 1366)
    sign_in(alice, "alice")
    alice.wait_for_selector("#trained-login >> text=Logout (alice)")
    train(bob)
    sign_in(bob, "bob")
    bob.wait_for_selector("#trained-login >> text=Logout (bob)")
    bob.click("#trained-login")  # Logout (bob)
    bob.wait_for_selector("#trained-login >> text=Sign in with Hugging Face")
    bob.wait_for_selector("#trained-status >> text=The model you trained is still here")
    bob.fill("#trained-repo input, #trained-repo textarea", "after-signing-out")
    bob.click("#trained-push")
    assert pushed_line(bob).startswith("⚠️ Sign in with Hugging Face first")
    assert alice.inner_text("#trained-login").strip() == "Logout (alice)"  # alice still signed in
    assert not [repo for repo in hub.repos if repo.endswith("/after-signing-out")]
    for page in (alice, bob):
        page.context.close()


def test_a_visitor_who_denies_the_sign_in_comes_back_to_the_tab_not_signed_in(browser, space):
    """Deny on the Hub's consent page: the callback gets an error, not a code. Back on Train one yourself, not signed
    in (Gradio alone answers "Internal Server Error": app.py handles authlib's OAuthError)."""
    url, hub = space
    page = visitor(browser, url, hub, "alice", 800)
    page.click("#trained-login")
    page.wait_for_selector("#deny")
    page.click("#deny")
    page.wait_for_selector("#catalog-status >> text=model(s) ready")
    assert "back_to=train-live" in page.url
    page.wait_for_function("() => document.querySelector('[role=tab][aria-selected=true]').innerText.includes('Train one')")
    assert page.inner_text("#trained-login").strip() == "Sign in with Hugging Face"
    assert_no_error_shown(page)
    page.context.close()
