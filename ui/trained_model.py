"""The model trained on Train one yourself, offered to the rest of the page: "Open in every tab" (``open_trained``),
"Push to the Hub" after signing in (``push_to_hub``), and the sign-in's round trip, which reloads the page, bringing
the tab and the model back (``keep_trained``, ``kept_model``, ``back_from_sign_in``, ``bring_back_kept``,
``sign_in_refused``). ``panel`` lays the actions out under the tab's results and returns them as a ``TrainedPanel``;
``wire`` connects them to the page's menus and its tabs once the page is built."""

import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import gradio as gr

from explorer.core.inputs import echo
from explorer.models import opening, push

from ui.events import OPENING, guarded, status
from ui.menus import PageMenus, after_open, session_of
from ui.open_model import NO_JSON, opened_line


@guarded(result=NO_JSON)
def open_trained(archive):
    """Train one yourself's "Open in every tab": the zip the tab just made, opened for this browser session."""
    opened = opening.open_upload(archive, source="trained")
    return opened.to_json(), opened_line(opened)


@guarded(result=NO_JSON)
def push_to_hub(archive, job, repo_name, oauth_token: gr.OAuthToken | None = None):
    """Train one yourself's "Push to the Hub": a new repo under the signed-in visitor's account (their token, this
    request only) with the weights, tokenizer, model code, loss curve and a model card."""
    token = push.visitor_token(getattr(oauth_token, "token", None))
    pushed = push.push_trained(archive, job, token, repo_name)
    return pushed, status(f"Pushed to [{echo(pushed['repo_id'], 90)}]({pushed['url']}), commit `{pushed['commit'][:12]}`.",
                          f"Open it again any time: Open a model, repo id {echo(pushed['repo_id'], 90)}.")


# Signing in (or out) with Hugging Face leaves the page: the LoginButton sends the browser to the Hub's consent page,
# which sends it back to the page's address, a fresh page. So that a visitor who trains, then signs in to push, finds
# the tab and the model again: the model is kept on the server under a random key that only this browser holds
# (gr.BrowserState), and the button marks the address before it goes (the LoginButton carries the address's query,
# its first parameter only, through the round trip): the page load that finds the mark opens Train one yourself, and
# the key, once read from the browser's storage, brings the model back.
BACK_PARAM, BACK_TO = "back_to", "train-live"
MARK_BACK_JS = f"() => {{ history.replaceState(null, '', '?{BACK_PARAM}={BACK_TO}'); }}"
KEPT_SECONDS, KEPT_MOST = 7200, 256  # as long as gradio's cache keeps the zip (app.py: delete_cache=(3600, 7200))
KEPT_PER_SESSION = 2  # a browser session's newest kept models: one session never pushes another's out
KEPT_JOB_BYTES = 256_000  # the most of a job's JSON kept (a real one is a few kB)
_kept: dict[str, tuple[float, str, dict, str | None]] = {}  # key -> (when, the zip in gradio's cache, its JSON, session)
_kept_lock = threading.Lock()


def keep_trained(archive, job, request: gr.Request = None):
    """After a training job: keep its model (zip and JSON) under a new random key, which goes to the browser. A session
    keeps its ``KEPT_PER_SESSION`` newest; when ``KEPT_MOST`` are kept, nothing more is until some expire (whoever
    calls this endpoint, by name or not, never removes another session's)."""
    if not archive or not isinstance(job, dict) or not Path(str(archive)).is_file() or len(str(job)) > KEPT_JOB_BYTES:
        return gr.skip()
    now, session = time.time(), session_of(request)
    with _kept_lock:
        for key, (when, path, _, owner) in list(_kept.items()):
            if now - when > KEPT_SECONDS:
                del _kept[key]
            elif path == str(archive) and owner == session:  # the model already kept (brought back after a sign-in)
                return key
        mine = [key for key, kept in _kept.items() if kept[3] == session]
        for key in mine[:len(mine) - KEPT_PER_SESSION + 1]:  # this session's oldest, to keep its newest
            del _kept[key]
        if len(_kept) >= KEPT_MOST:
            return gr.skip()
        key = secrets.token_urlsafe(24)
        _kept[key] = (now, str(archive), job, session)
    return key


def kept_model(key) -> tuple[str, dict] | None:
    """(zip, JSON) kept under ``key``; None when none is (unknown key, expired, or the zip is gone)."""
    with _kept_lock:
        when, path, job, _ = _kept.get(key, (0, "", {}, None)) if isinstance(key, str) else (0, "", {}, None)
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


@dataclass(frozen=True)
class TrainedPanel:
    """The actions under Train one yourself's results, and the tab's components they read and write."""

    archive: gr.DownloadButton  # the tab's download: the trained model's zip
    job: gr.JSON  # the tab's JSON: how the model was trained
    open_button: gr.Button
    result: gr.JSON  # what Open or Push answered
    line: gr.Markdown  # their status line
    kept: gr.BrowserState | None  # on a Space: the browser's key to the model kept through a sign-in


def panel(archive: gr.DownloadButton, job: gr.JSON) -> TrainedPanel:
    """Under Train one yourself's results: "Open in every tab" and, after signing in, "Push to the Hub", for the
    model in ``archive`` (the tab's download) trained with ``job`` (the tab's JSON). Wires what needs nothing outside
    the tab (the push, keeping the model for a sign-in); ``wire`` does the rest."""
    with gr.Row(equal_height=True, elem_id="trained-actions"):
        open_button = gr.Button("Open in every tab", elem_id="trained-open")
        login = gr.LoginButton(elem_id="trained-login") if push.on_space() else None  # elsewhere: the account
        name = gr.Textbox(label="Repo name on your account (empty: one is made up)", scale=2,  # logged in there
                          elem_id="trained-repo")
        push_button = gr.Button("Push to the Hub", elem_id="trained-push")
    line = gr.Markdown(elem_id="trained-status", elem_classes="status-line")
    result = gr.JSON(visible=False)
    push_button.click(push_to_hub, [archive, job, name], [result, line], api_name="push_to_hub", **OPENING)
    kept = None
    if login is not None:
        kept = gr.BrowserState(None, storage_key="scratch-transformer-trained-model")
        login.click(None, js=MARK_BACK_JS)  # runs before the button's own redirect (it waits 500 ms)
        # the zip's button, not the JSON: an invisible component is not on the page, and its change never fires
        archive.change(keep_trained, [archive, job], kept, api_name="keep_trained", api_visibility="private",
                       queue=False)
    return TrainedPanel(archive, job, open_button, result, line, kept)


def wire(trained: TrainedPanel, page: PageMenus, demo: gr.Blocks, tabs: gr.Tabs) -> None:
    """Open in every tab, then every menu of the ``page`` lists the model; on a Space, a page load back from signing
    in opens Train one yourself (in ``tabs``) with the model kept (the browser's key is read from its storage after
    the page load: its change event brings the model back)."""
    trained.open_button.click(open_trained, trained.archive, [trained.result, trained.line], api_name="open_trained",
                              **OPENING).then(after_open(page), trained.result, page.outputs(),
                                              api_name="open_trained_menus", api_visibility="private", queue=False)
    if trained.kept is not None:
        demo.load(back_from_sign_in, None, tabs, api_name="back_from_sign_in", api_visibility="private", queue=False)
        trained.kept.change(bring_back_kept, [trained.kept, trained.archive], [trained.archive, trained.job, trained.line],
                            api_name="bring_back_kept", api_visibility="private", queue=False)
