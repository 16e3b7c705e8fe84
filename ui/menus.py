"""The model menus: what they list (``menus_now``; ``decoder_only`` for the views that need a decoder-only model), a
menu with its model's line beneath it (``model_menu``, ``text_and_model``), every tab's menus refreshed together
(``PageMenus``: at a page load, ``catalog_event``; after a model is opened, ``after_open``), and the attention-kind
menus that follow the model picked (``kind_menu``, ``kind_choices``)."""

from contextlib import contextmanager
from dataclasses import dataclass

import gradio as gr

from explorer.core import inputs
from explorer.models import catalog, registry
from explorer.views import attention
from modeling import POSITION_ENCODINGS

from ui.events import KEPT, UNCHECKED, guarded, status


def session_of(request) -> str | None:
    """The browser session of a request (None outside one): whose own opened models a menu lists."""
    return getattr(request, "session_hash", None)


def menus_now(session: str | None = None):
    """(choices, default value, status line) of the model menus: the checkpoints on disk now, then the models opened
    in the app by this browser session (its own: no one else's are listed, and no one else's resolve)."""
    found, results = catalog.discover_checkpoints(), catalog.read_results()
    notes = [] if found else [catalog.no_checkpoints_message()]
    damaged = [f"⚠ {info.name} cannot be used: {'; '.join(info.problems)}"
               for info in found.values() if not info.usable]
    missing = [e for e in POSITION_ENCODINGS if e not in catalog.encoding_models(found)]
    if found and missing:
        notes.append(f"No usable checkpoint yet for: {', '.join(missing)}.")
    if results.notice:
        notes.append(results.notice)
    usable = [name for name, info in found.items() if info.usable]
    summary = f"{len(usable)} model(s) ready: {', '.join(usable)}." if usable else ""
    opened = registry.choices(session) if session is not None else []  # the page as built: shipped models only
    if opened:
        summary += f" Opened in the app: {', '.join(inputs.echo(name, 60) for _, name in opened)}."
    return (catalog.menu_choices(found, results) + opened, catalog.default_model(found, results),
            status(summary, *damaged, *notes))


def decoder_only(choices, value) -> tuple[list[tuple[str, str]], str | None]:
    """A menu's choices and value kept to the decoder-only models (what reads one text and predicts its next
    token: every model opened in the app is one, and a menu lists only the shipped ones and the session's own); the
    value None when it names an encoder-decoder."""
    found = catalog.discover_checkpoints()
    kept = [(label, name) for label, name in choices if name not in found or not found[name].is_encoder_decoder]
    return kept, value if value in [name for _, name in kept] else None


@dataclass(frozen=True)
class PageMenus:
    """Every tab's model menu, those listing every model and those listing the decoder-only ones (``decoder_only``),
    and the catalog's status line: what a page load and every opened model refresh, in this order."""

    menus: tuple[gr.Dropdown, ...]
    decoder_only: tuple[gr.Dropdown, ...]
    status: gr.Markdown

    def outputs(self) -> list:
        """The refreshing events' outputs: every menu, then the status line."""
        return [*self.menus, *self.decoder_only, self.status]

    def kept(self) -> dict:
        """Every menu, by its elem_id, keeping its value: what the menus show when a refresh fails or does nothing."""
        return {menu.elem_id: KEPT for menu in (*self.menus, *self.decoder_only)}

    def updates(self, session: str | None, value=None) -> tuple:
        """Every menu listing what ``session`` sees, set to ``value`` (None: the default model), and the status line."""
        choices, default, note = menus_now(session)
        value = value if value in [name for _, name in choices] else default
        decoders, decoder_value = decoder_only(choices, value)
        return (*(gr.update(choices=choices, value=value) for _ in self.menus),
                *(gr.update(choices=decoders, value=decoder_value) for _ in self.decoder_only), note)


def catalog_event(page: PageMenus):
    """The page-load event: refresh the ``page``'s menus from the checkpoints on disk and the models opened in the
    app, and say what is missing or damaged (the page was built with them filled; this picks up checkpoints added
    since)."""

    @guarded(**page.kept())
    def load_catalog(request: gr.Request = None):
        return page.updates(session_of(request))

    return load_catalog


def after_open(page: PageMenus):
    """The event after an open (its input: the opened model's JSON): every menu of the ``page`` lists what this
    session sees, set to the model just opened (nothing changes when none was)."""

    def refresh_menus(result, request: gr.Request = None):
        name = result.get("name") if isinstance(result, dict) else None
        if name is None:
            return (*page.kept().values(), gr.skip())
        return page.updates(session_of(request), name)

    return refresh_menus


def model_note(name, request: gr.Request = None) -> str:
    """The chosen model's line in full, under its menu (a menu shows only the start of a long line)."""
    choices = catalog.menu_choices(catalog.discover_checkpoints(), catalog.read_results())
    lines = {value: label for label, value in choices + registry.choices(session_of(request))}
    return lines.get(name, "") if isinstance(name, str) else ""


def model_menu(elem_id: str, choices, value) -> gr.Dropdown:
    """A model menu with its chosen model's line written out beneath it."""
    menu = gr.Dropdown(choices=choices, value=value, label="Model", elem_id=elem_id, elem_classes="model-menu")
    note = gr.Markdown(dict((v, label) for label, v in choices).get(value, ""), elem_id=f"{elem_id}-note",
                       elem_classes="model-note")
    menu.change(model_note, menu, note, api_name=f"{elem_id.replace('-', '_')}_note", api_visibility="private", **UNCHECKED)
    return menu


@contextmanager
def text_and_model(prefix: str, example: str, choices, value):
    """The row a view of one text opens with: the text box ``<prefix>-text``, and beside it the model menu
    ``<prefix>-model`` with whatever the tab puts under it (its options, its button). Yields (text, menu)."""
    with gr.Row():
        text = gr.Textbox(label="Text", value=example, lines=2, scale=4, elem_id=f"{prefix}-text")
        with gr.Column(scale=2):
            yield text, model_menu(f"{prefix}-model", choices, value)


def rewrites(name) -> bool:
    """Whether the model called ``name`` is an encoder-decoder (folio-to-modern), which rewrites its input."""
    info = catalog.discover_checkpoints().get(name) if isinstance(name, str) else None
    return bool(info and info.is_encoder_decoder)


def kind_choices(model_name, current=None):
    """The attention kinds of the picked model for a kind menu (keeping the current one where it exists)."""
    info = catalog.discover_checkpoints().get(model_name) if isinstance(model_name, str) else None
    kinds = attention.kinds_of(bool(info and info.is_encoder_decoder))
    return gr.update(choices=[(attention.ATTENTION_KINDS[k].label, k) for k in kinds],
                     value=current if current in kinds else kinds[-1])


def kind_menu(elem_id: str, label: str = "Attention") -> gr.Dropdown:
    """An attention-kind menu that accepts any value: its choices follow the model (``kind_choices``)."""
    return gr.Dropdown([(attention.ATTENTION_KINDS["self"].label, "self")], value="self", allow_custom_value=True,
                       label=label, elem_id=elem_id)
