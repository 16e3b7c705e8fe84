"""Open a model: a Hub repo (``open_model``) or a zip of a save_pretrained folder (``open_upload``), converted into our
Transformer (``explorer.models.opening``) and added to every tab's model menu: a Hub model to every visitor's menus, an upload
to this browser session's only. Above the tabs, so it is at hand from whichever tab a visitor is on."""

import secrets
import threading
import time
from pathlib import Path

import gradio as gr

from explorer.models import held, opening, plans, push
from explorer.learning import hub_revisions
from explorer.core.inputs import InputProblem, echo
from explorer.learning.watch_it_learn import DEFAULT_TEXT

from .common import OPENING, guarded, menu_updates, session_of, status

NO_JSON = None


def opened_line(opened: held.Opened) -> str:
    parity = ("loaded with our own classes, no conversion" if opened.parity is None else
              f"parity with transformers' own {opened.family} class: max |logit difference| {opened.parity:.1e} on a fixed input")
    where = "every visitor's menus" if opened.session is None else "this browser tab's menus only: no one else sees it"
    return status(f"Opened **{echo(opened.name, 90)}**: {opened.family}, {opened.n_parameters:,} parameters"
                  + (f", commit `{opened.commit[:12]}`" if opened.commit else "") + f", in {opened.seconds:.1f} s.",
                  parity.capitalize() + ".", f"It is now in the model menu of every tab ({where}), and picked there.")


@guarded(NO_JSON)
def open_model(repo_id, revision=None):
    """Open a Hub repo (``revision`` empty: its default branch) in every tab; streams the download's progress, then
    the JSON: menu name, family, parameter count, resolved commit, parity."""
    job = opening.start_open(repo_id, revision)
    shown = echo(str(repo_id).strip(), 90)
    for line in job.follow():
        yield NO_JSON, status(f"⏳ Opening {shown}: {line}…")
    opened = job.outcome()
    yield opened.to_json(), opened_line(opened)


@guarded(NO_JSON)
def open_upload(file, request: gr.Request = None):
    """Open an uploaded zip of a save_pretrained folder (Train one yourself's download is one) for this browser
    session, with the Hub's checks and limits."""
    path = file.get("path") if isinstance(file, dict) else file
    opened = opening.open_upload(path, session_of(request))
    return opened.to_json(), opened_line(opened)


@guarded(NO_JSON)
def open_trained(archive, request: gr.Request = None):
    """Train one yourself's "Open in every tab": the zip the tab just made, opened for this browser session."""
    opened = opening.open_upload(archive, session_of(request), source="trained")
    return opened.to_json(), opened_line(opened)


@guarded(NO_JSON)
def push_to_hub(archive, job, repo_name, oauth_token: gr.OAuthToken | None = None):
    """Train one yourself's "Push to the Hub": a new repo under the signed-in visitor's account (their token, this
    request only) with the weights, tokenizer, model code, loss curve and a model card."""
    token = push.visitor_token(getattr(oauth_token, "token", None))
    pushed = push.push_trained(archive, job, token, repo_name)
    return pushed, status(f"Pushed to [{echo(pushed['repo_id'], 90)}]({pushed['url']}), commit `{pushed['commit'][:12]}`.",
                          f"Open it again any time: Open a model, repo id {echo(pushed['repo_id'], 90)}.")


_trained_panels = []  # (open button, archive, result): wired to the menus by ``wire``
_sign_in_panels = []  # (archive, job, status line, kept key): brought back after signing in by ``wire_sign_in``

# Signing in (or out) with Hugging Face leaves the page: the LoginButton sends the browser to the Hub's consent page,
# which sends it back to the page's address, a fresh page. So that a visitor who trains, then signs in to push, finds
# the tab and the model again: the model is kept on the server under a random key that only this browser holds
# (gr.BrowserState), and the button marks the address before it goes (the LoginButton carries the address's query,
# its first parameter only, through the round trip): the page load that finds the mark opens Train one yourself, and
# the key, once read from the browser's storage, brings the model back.
BACK_PARAM, BACK_TO = "back_to", "train-live"
MARK_BACK_JS = f"() => {{ history.replaceState(null, '', '?{BACK_PARAM}={BACK_TO}'); }}"
KEPT_SECONDS, KEPT_MOST = 7200, 256  # as long as gradio's cache keeps the zip (app.py: delete_cache=(3600, 7200))
_kept: dict[str, tuple[float, str, dict]] = {}  # key -> (when, the zip in gradio's cache, the job's JSON)
_kept_lock = threading.Lock()


def keep_trained(archive, job):
    """After a training job: keep its model (zip and JSON) under a new random key, which goes to the browser."""
    if not archive or not isinstance(job, dict):
        return gr.skip()
    now = time.time()
    with _kept_lock:
        for key, (when, path, _) in list(_kept.items()):
            if now - when > KEPT_SECONDS:
                del _kept[key]
            elif path == str(archive):  # the model already kept (brought back after a sign-in)
                return key
        while len(_kept) >= KEPT_MOST:
            del _kept[next(iter(_kept))]  # the oldest
        key = secrets.token_urlsafe(24)
        _kept[key] = (now, str(archive), job)
    return key


def kept_model(key) -> tuple[str, dict] | None:
    """(zip, JSON) kept under ``key``; None when none is (unknown key, expired, or the zip is gone)."""
    with _kept_lock:
        when, path, job = _kept.get(key, (0, "", {})) if isinstance(key, str) else (0, "", {})
    return (path, job) if time.time() - when <= KEPT_SECONDS and Path(path).is_file() else None


def back_from_sign_in(request: gr.Request = None):
    """Page load: back from signing in (or out) from Train one yourself, that tab again."""
    back = request is not None and request.query_params.get(BACK_PARAM) == BACK_TO
    return gr.Tabs(selected=BACK_TO) if back else gr.skip()


def bring_back_kept(key, archive, request: gr.Request = None):
    """The browser's key, read from its storage after the page loaded (or set after a job): back from signing in,
    the model kept under it, into the tab if the tab has none."""
    kept = kept_model(key)
    if archive or kept is None or request is None or request.query_params.get(BACK_PARAM) != BACK_TO:
        return gr.skip(), gr.skip(), gr.skip()
    return (gr.update(value=kept[0], interactive=True), kept[1],
            status("The model you trained is still here (signing in or out reloads the page): push it to the Hub, "
                   "open it, or download it."))


def sign_in_refused(request, error):
    """The sign-in's callback when the Hub sends the visitor back without a code (they clicked Deny, or the Hub
    answered an error): authlib raises OAuthError there, which Gradio's /login/callback does not catch (an "Internal
    Server Error" page). Back to the page instead, to Train one yourself if the sign-in started there: not signed in,
    the model kept. (A FastAPI exception handler: ``app.LAUNCH_OPTIONS`` registers it for OAuthError.)"""
    from fastapi.responses import RedirectResponse

    back = f"{BACK_PARAM}={BACK_TO}" in request.query_params.get("_target_url", "")
    return RedirectResponse(f"/?{BACK_PARAM}={BACK_TO}" if back else "/", status_code=302)


def trained_actions(archive, job) -> None:
    """Under Train one yourself's results: "Open in every tab" and, after signing in, "Push to the Hub", for the
    model in ``archive`` (the tab's download) trained with ``job`` (the tab's JSON)."""
    with gr.Row(equal_height=True, elem_id="trained-actions"):
        open_button = gr.Button("Open in every tab", elem_id="trained-open")
        login = gr.LoginButton(elem_id="trained-login") if push.on_space() else None  # elsewhere: the account
        name = gr.Textbox(label="Repo name on your account (empty: one is made up)", scale=2,  # logged in there
                          elem_id="trained-repo")
        push_button = gr.Button("Push to the Hub", elem_id="trained-push")
    line = gr.Markdown(elem_id="trained-status", elem_classes="status-line")
    result = gr.JSON(visible=False)
    push_button.click(push_to_hub, [archive, job, name], [result, line], api_name="push_to_hub", **OPENING)
    _trained_panels.append((open_button, archive, result, line))
    if login is not None:
        kept = gr.BrowserState(None, storage_key="scratch-transformer-trained-model")
        login.click(None, js=MARK_BACK_JS)  # runs before the button's own redirect (it waits 500 ms)
        # the zip's button, not the JSON: an invisible component is not on the page, and its change never fires
        archive.change(keep_trained, [archive, job], kept, api_name="keep_trained", api_visibility="private",
                       queue=False)
        _sign_in_panels.append((archive, job, line, kept))


def wire_sign_in(demo: gr.Blocks, tabs: gr.Tabs) -> None:
    """On a Space: a page load back from signing in opens Train one yourself (in ``tabs``) with the model kept (the
    browser's key is read from its storage after the page load: its change event brings the model back)."""
    for archive, job, line, kept in _sign_in_panels:
        demo.load(back_from_sign_in, None, tabs, api_name="back_from_sign_in", api_visibility="private", queue=False)
        kept.change(bring_back_kept, [kept, archive], [archive, job, line], api_name="bring_back_kept",
                    api_visibility="private", queue=False)
    _sign_in_panels.clear()


def timeline_of_revisions(repo_id: str, revisions: str = "", text: str = DEFAULT_TEXT) -> dict:
    """A Hub repo's training checkpoints (revisions, at most 12; empty: its ``step<N>`` revisions, 12 evenly spaced)
    on ``text``: for each, every head's induction and previous-token score, the best induction head's attention on the
    text, and a greedy sample (``explorer.learning.hub_revisions``)."""
    try:
        return hub_revisions.hub_timeline(repo_id, revisions, text).to_json()
    except InputProblem as problem:
        raise gr.Error(str(problem)) from None


def refresh(n_menus: int, n_decoder_menus: int):
    """After an open: every menu lists what this session sees, set to the model just opened (else unchanged)."""

    def refresh_menus(result, request: gr.Request = None):
        name = result.get("name") if isinstance(result, dict) else None
        if name is None:
            return (*[gr.skip()] * (n_menus + n_decoder_menus), gr.skip())
        return menu_updates(n_menus, n_decoder_menus, session_of(request), name)

    return refresh_menus


def panel():
    """The "Open a model" accordion; returns (button, repo, revision, upload, result, status) for ``wire``."""
    families = ", ".join(plans.family_name(t) for t in plans.families())
    limits = plans.limits()
    with gr.Accordion("Open a model: from the Hugging Face Hub, or your own", open=False, elem_id="open-model"):
        gr.Markdown(f"Families: {families}; at most {limits['parameters'] / 1e6:,.0f}M parameters and "
                    f"{limits['bytes'] / 1e9:g} GB of weights. The model is converted into this app's Transformer (no "
                    "code from the repo runs), its parity with transformers' own class is measured, and it joins the "
                    "model menu of every tab.", elem_classes="model-note")
        with gr.Row(equal_height=True):
            repo = gr.Textbox(label="Hub repo id", placeholder="openai-community/gpt2", scale=3, elem_id="open-repo")
            revision = gr.Textbox(label="Revision (empty: the default branch)", placeholder="main, a tag, or step1000",
                                  scale=2, elem_id="open-revision")
            button = gr.Button("Open", variant="primary", scale=1, min_width=100, elem_id="open-button")
        upload = gr.File(label="…or upload a zip of a save_pretrained folder (Train one yourself's download is one)",
                         file_types=[".zip"], type="filepath", elem_id="open-upload")
        line = gr.Markdown(elem_id="open-status", elem_classes="status-line")
        with gr.Accordion("What was opened (JSON)", open=False):
            result = gr.JSON(show_label=False, elem_id="open-json")
    return button, repo, revision, upload, result, line


def wire(parts, menus: list, decoder_menus: list, catalog_status) -> None:
    """Wire the panel's events; after each, every tab's menu lists the opened model (``menus``, ``decoder_menus``)."""
    button, repo, revision, upload, result, line = parts
    after = dict(fn=refresh(len(menus), len(decoder_menus)), inputs=result,
                 outputs=[*menus, *decoder_menus, catalog_status], api_visibility="private", queue=False)
    gr.on([button.click, repo.submit, revision.submit], open_model, [repo, revision], [result, line],
          api_name="open_model", show_progress="minimal", preprocess=False, **OPENING).then(
        **after, api_name="open_model_menus")
    upload.upload(open_upload, upload, [result, line], api_name="open_upload", show_progress="full",
                  **OPENING).then(**after, api_name="open_upload_menus")
    for number, (open_button, archive, trained, trained_line) in enumerate(_trained_panels):
        open_button.click(open_trained, archive, [trained, trained_line], api_name=f"open_trained{number or ''}",
                          **OPENING).then(**{**after, "inputs": trained}, api_name=f"open_trained_menus{number or ''}")
    _trained_panels.clear()
    gr.api(timeline_of_revisions, api_name="hub_timeline", **OPENING)  # Watch it learn's views of a Hub repo, as JSON
