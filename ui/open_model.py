"""Open a model: a Hub repo (``open_model``) or a zip of a save_pretrained folder (``open_upload``), converted into our
Transformer (``explorer.models.opening``) and added to every tab's model menu of this browser session only (a Hub model's
weights are shared with every visitor who opens the same commit). Above the tabs, so it is at hand from whichever tab a
visitor is on. ``visitor_left``: a session whose page closed lets its models go (``explorer.models.registry``)."""

from dataclasses import dataclass

import gradio as gr

from explorer.core.inputs import echo
from explorer.models import held, opening, plans, registry

from ui.events import OPENING, guarded, status
from ui.menus import PageMenus, after_open, session_of

NO_JSON = None  # the JSON of what was opened, after a failure: nothing


def opened_line(opened: held.Opened) -> str:
    """The status line after an open: what was opened, its parity with transformers' own class, whose menus list it."""
    parity = ("Loaded with our own classes, no conversion" if opened.parity is None else
              f"Parity with transformers' own {opened.family} class on a fixed input: {opened.parity.words()}")
    where = "this browser tab's menus only: no one else sees it"
    return status(f"Opened **{echo(opened.name, 90)}**: {opened.family}, {opened.n_parameters:,} parameters"
                  + (f", commit `{opened.commit[:12]}`" if opened.commit else "") + f", in {opened.seconds:.1f} s.",
                  parity + ".", f"It is now in the model menu of every tab ({where}), and picked there.")


@guarded(result=NO_JSON)
def open_model(repo_id, revision=None):
    """Open a Hub repo (``revision`` empty: its default branch) in every tab of this browser session; streams the
    download's progress, then the JSON: menu name, family, parameter count, resolved commit, parity."""
    job = opening.start_open(repo_id, revision)
    shown = echo(str(repo_id).strip(), 90)
    for line in job.follow():
        yield NO_JSON, status(f"⏳ Opening {shown}: {line}…")
    opened = job.outcome()
    yield opened.to_json(), opened_line(opened)


@guarded(result=NO_JSON)
def open_upload(file):
    """Open an uploaded zip of a save_pretrained folder (Train one yourself's download is one) for this browser
    session, with the Hub's checks and limits."""
    path = file.get("path") if isinstance(file, dict) else file
    opened = opening.open_upload(path)
    return opened.to_json(), opened_line(opened)


def visitor_left(request: gr.Request = None):
    """The page's unload event (its tab closed or reloaded): that session's models go, an upload's files with them."""
    registry.forget_session(session_of(request))


@dataclass(frozen=True)
class OpenPanel:
    """The "Open a model" accordion's components that its events read and write."""

    button: gr.Button
    repo: gr.Textbox
    revision: gr.Textbox
    upload: gr.File
    result: gr.JSON  # what was opened, as JSON
    line: gr.Markdown  # its status line


def panel() -> OpenPanel:
    """The "Open a model" accordion, for ``wire``."""
    families = ", ".join(plans.family_name(t) for t in plans.families())
    limits = plans.limits()
    with gr.Accordion("Open a model: from the Hugging Face Hub, or your own", open=False, elem_id="open-model"):
        gr.Markdown(f"Families: {families}; at most {limits['parameters'] / 1e6:,.0f}M parameters and "
                    f"{limits['bytes'] / 1e9:g} GB of weights. The model is converted into this app's Transformer (no "
                    "code from the repo runs), its parity with transformers' own class is measured, and it joins the "
                    "model menu of every tab.", elem_classes="model-note")
        with gr.Row(equal_height=True):
            repo = gr.Textbox(label="Hub repo id, or its page's address", placeholder="openai-community/gpt2",
                              scale=3, elem_id="open-repo")
            revision = gr.Textbox(label="Revision (empty: the address's, else the default branch)",
                                  placeholder="main, a tag, or step1000", scale=2, elem_id="open-revision")
            button = gr.Button("Open", variant="primary", scale=1, min_width=100, elem_id="open-button")
        upload = gr.File(label="…or upload a zip of a save_pretrained folder (Train one yourself's download is one)",
                         file_types=[".zip"], type="filepath", elem_id="open-upload")
        line = gr.Markdown(elem_id="open-status", elem_classes="status-line")
        with gr.Accordion("What was opened (JSON)", open=False):
            result = gr.JSON(show_label=False, elem_id="open-json")
    return OpenPanel(button, repo, revision, upload, result, line)


def wire(opening: OpenPanel, page: PageMenus) -> None:
    """Wire the panel's events; after each, every menu of the ``page`` lists the opened model, picked."""
    after = dict(fn=after_open(page), inputs=opening.result, outputs=page.outputs(), api_visibility="private",
                 queue=False)
    gr.on([opening.button.click, opening.repo.submit, opening.revision.submit], open_model,
          [opening.repo, opening.revision], [opening.result, opening.line], api_name="open_model",
          show_progress="minimal", preprocess=False, **OPENING).then(**after, api_name="open_model_menus")
    opening.upload.upload(open_upload, opening.upload, [opening.result, opening.line], api_name="open_upload",
                          show_progress="full", **OPENING).then(**after, api_name="open_upload_menus")
