"""Open a model: a Hub repo (``open_model``) or a zip of a save_pretrained folder (``open_upload``), converted into our
Transformer (``explorer.hub``) and added to every tab's model menu: a Hub model to every visitor's menus, an upload
to this browser session's only. Above the tabs, so it is at hand from whichever tab a visitor is on."""

import gradio as gr

from explorer import hub
from explorer.inputs import echo

from .common import OPENING, guarded, menu_updates, session_of, status

NO_JSON = None


def opened_line(opened: hub.Opened) -> str:
    parity = ("loaded with our own classes, no conversion" if opened.parity is None else
              f"parity with transformers' own {opened.family} class: max |logit difference| {opened.parity:.1e} on a fixed input")
    where = "every visitor's menus" if opened.session is None else "this browser tab's menus (only you see it)"
    return status(f"✅ Opened **{echo(opened.name, 90)}**: {opened.family}, {opened.n_parameters:,} parameters"
                  + (f", commit `{opened.commit[:12]}`" if opened.commit else "") + f", in {opened.seconds:.1f} s.",
                  parity.capitalize() + ".", f"It is now in the model menu of every tab ({where}), and picked there.")


@guarded(NO_JSON)
def open_model(repo_id, revision=None):
    """Open a Hub repo (``revision`` empty: its default branch) in every tab; streams the download's progress, then
    the JSON: menu name, family, parameter count, resolved commit, parity."""
    job = hub.start_open(repo_id, revision)
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
    opened = hub.open_upload(path, session_of(request))
    return opened.to_json(), opened_line(opened)


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
    families = ", ".join(hub.family_name(t) for t in hub.families())
    limits = hub.limits()
    with gr.Accordion("Open a model: any GPT-2, Llama or Pythia from the Hub, or your own", open=False,
                      elem_id="open-model"):
        gr.Markdown(f"Families: {families}; at most {limits['parameters'] / 1e6:,.0f}M parameters and "
                    f"{limits['bytes'] / 1e9:g} GB of weights. The model is converted into this app's Transformer (no "
                    "code from the repo runs) and joins the model menu of every tab; its parity with transformers' own "
                    "class is measured and shown.", elem_classes="model-note")
        with gr.Row(equal_height=True):
            repo = gr.Textbox(label="Hub repo id", placeholder="openai-community/gpt2", scale=3, elem_id="open-repo")
            revision = gr.Textbox(label="Revision (empty: the default branch)", placeholder="main, a tag, or step1000",
                                  scale=2, elem_id="open-revision")
            button = gr.Button("Open", variant="primary", scale=1, min_width=100, elem_id="open-button")
        upload = gr.File(label="…or upload a zip of a save_pretrained folder (Train one yourself's download)",
                         file_types=[".zip"], type="filepath", height=90, elem_id="open-upload")
        line = gr.Markdown(elem_id="open-status", elem_classes="status-line")
        result = gr.JSON(label="Opened", open=False, elem_id="open-json", visible=True)
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
