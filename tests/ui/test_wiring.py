"""The page's wiring says what it does: every tab has one signature and returns one ``TabParts``; no tab imports
another; every ``@guarded`` event names one failure value per output before its status line; ``ui``'s docstrings
list every module; Stop is enabled before a long job starts."""

import ast
import inspect

import gradio as gr
import pytest

import ui
import ui.tabs
from checkpointing.paths import REPO_ROOT
from ui.tab import TabParts

UI = REPO_ROOT / "ui"
TAB_MODULES = sorted(p.stem for p in (UI / "tabs").glob("*.py") if p.stem != "__init__")


def test_every_tab_module_is_in_the_page_and_built_the_same_way(app):
    assert sorted(view.__name__.rsplit(".", 1)[-1] for view in app.TABS) == TAB_MODULES
    for view in app.TABS:
        assert list(inspect.signature(view.tab).parameters) == ["choices", "value", "decoding"], view.__name__
        assert inspect.signature(view.tab).return_annotation is TabParts, view.__name__


def test_the_tabs_give_the_page_its_menus_and_generates_decoding_controls(app):
    with gr.Blocks(), gr.Tabs():  # a page of its own: the app's is built and served
        built = app.build_tabs([], None)
    assert all(isinstance(parts, TabParts) for parts in built)
    names = dict(zip((view.__name__.rsplit(".", 1)[-1] for view in app.TABS), built))
    assert [m.elem_id for parts in built for m in parts.decoder_only] == ["patching-model", "grad-model"]
    assert len([m for parts in built for m in parts.menus]) == 8
    assert [name for name, parts in names.items() if parts.decoding] == ["generate"]
    assert [name for name, parts in names.items() if parts.trained] == ["train_live"]


@pytest.mark.parametrize("name", TAB_MODULES)
def test_no_tab_imports_another_tab(name):
    tree = ast.parse((UI / "tabs" / f"{name}.py").read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    imported |= {f"{node.module}.{alias.name}" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                 and node.module for alias in node.names}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    assert not {m for m in imported if m.startswith("ui.tabs.") or m.startswith("ui.open_model")}, name


def test_every_guarded_event_names_a_failure_value_for_each_output_but_its_status_line(app):
    checked = 0
    for dependency in app.demo.config["dependencies"]:
        function = app.demo.fns[dependency["id"]].fn
        failure_values = getattr(function, "failure_values", None)
        if failure_values is None:
            continue
        checked += 1
        assert len(dependency["outputs"]) == len(failure_values) + 1, (dependency["api_name"], list(failure_values))
    assert checked >= 30  # every event of every tab that computes something


def test_the_tabs_hold_tabs_alone(app):
    """Every child of the page's tabs is a tab: a component a tab module makes outside its ``gr.Tab`` (a State)
    lands among them, and the page's tab bar then shows one tab twice and loses another."""
    types = {c["id"]: c["type"] for c in app.demo.config["components"]}

    def find_tabs(node):
        if types.get(node["id"]) == "tabs":
            return node
        return next(filter(None, (find_tabs(child) for child in node.get("children", []))), None)

    tabs = find_tabs(app.demo.config["layout"])
    assert [types[child["id"]] for child in tabs["children"]] == ["tabitem"] * len(app.TABS)


def test_every_event_of_the_page_runs_as_its_visitor(app):
    """A session's models resolve for that session alone, whichever endpoint is called by name, private ones
    included: every handler of the page is served as its visitor (ui.events.as_visitor)."""
    handlers = [block.fn for block in app.demo.fns.values() if block.fn is not None]
    assert len(handlers) >= 60
    assert all(getattr(fn, "runs_as_visitor", False) for fn in handlers), [
        getattr(fn, "__qualname__", fn) for fn in handlers if not getattr(fn, "runs_as_visitor", False)]


def test_as_visitor_serves_plain_and_streaming_handlers_as_the_request_s_visitor():
    from gradio.context import LocalContext
    from explorer.core import visitor
    from ui.events import as_visitor

    class Request:  # what gradio's LocalContext holds during an event: a request with its session
        session_hash, request = "abc", None

    seen = []
    plain = as_visitor(lambda: visitor.current().session)

    def stream():
        yield visitor.current().session
        yield visitor.current().session

    outside = [plain(), *as_visitor(stream)()]  # no gradio event: whoever is served already (here LOCAL)
    with visitor.visiting(visitor.Visitor("set-by-python")):
        outside.append(plain())
    blocks, token = LocalContext.blocks.set(object()), LocalContext.request.set(Request())  # as gradio serves an event
    try:
        seen.append(plain())
        seen.extend(as_visitor(stream)())
    finally:
        LocalContext.request.reset(token)
        LocalContext.blocks.reset(blocks)
    assert seen == ["abc", "abc", "abc"] and visitor.current() == visitor.LOCAL
    assert outside == [None, None, None, "set-by-python"]


def test_a_failure_clears_the_named_outputs_and_says_what_went_wrong_in_the_status_line():
    from explorer.core.inputs import InputProblem
    from ui.events import NO_FIGURE, NO_TEXT, guarded

    @guarded(plot=NO_FIGURE, table=NO_TEXT)
    def view(text):
        raise InputProblem(f"Type some text, not {text!r}.")

    assert view.failure_values == {"plot": NO_FIGURE, "table": NO_TEXT}
    assert view("") == (NO_FIGURE, NO_TEXT, "⚠️ Type some text, not ''.")


def test_a_panic_in_a_rust_library_ends_as_a_message_and_stopping_still_stops():
    """tokenizers' regex engine stops a search after 10 million backtracking steps with a panic, which Python sees as
    pyo3's PanicException: a BaseException, which ``except Exception`` lets through. (A tokenizer with such a pattern
    is refused when opened, explorer.models.tokenizer_file; this is the guard behind that.)"""
    from tokenizers import Tokenizer
    from support.hub_repos import backtracking_tokenizer
    from ui.events import NO_TEXT, guarded

    backtracking = Tokenizer.from_str(backtracking_tokenizer())

    @guarded(tokens=NO_TEXT)
    def view(text):
        return backtracking.encode(text).tokens, "read"

    @guarded(tokens=NO_TEXT)
    def streamed(text):
        yield view.__wrapped__(text)

    tokens, said = view("a" * 40 + "b")
    assert tokens == NO_TEXT and said.startswith("⚠️ Something went wrong (`PanicException: Onig: Regex search error: retry-limit")
    assert list(streamed("a" * 40 + "b"))[-1][1] == said
    assert view("ab")[1] == "read"

    @guarded(tokens=NO_TEXT)
    def stopping():
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        stopping()


def test_the_docstrings_of_ui_and_its_tabs_name_every_module():
    modules = sorted(p.stem for p in UI.glob("*.py") if p.stem != "__init__") + ["tabs"]
    assert [m for m in modules if f"``{m}``" not in ui.__doc__] == []
    assert [m for m in TAB_MODULES if f"``{m}``" not in ui.tabs.__doc__] == []


@pytest.mark.parametrize("job, before, after", [("generate", "generate_stop_on", "generate_stop_off"),
                                                  ("generate_submit", "generate_submit_stop_on", "generate_submit_stop_off"),
                                                  ("train_live", "train_live_stop_on", "train_live_stop_off")])
def test_stop_is_enabled_before_a_long_job_starts_and_disabled_after_it(app, job, before, after):
    """Chained, not side by side: a second listener on the click could land after the job's first status (seen in CI:
    Stop still disabled while tokens streamed, or the waiting note written over training's first status)."""
    deps = {dep["api_name"]: dep for dep in app.demo.config["dependencies"]}
    assert deps[job]["trigger_after"] == deps[before]["id"] and deps[after]["trigger_after"] == deps[job]["id"]
    assert deps[before]["queue"] is False  # the button answers at once, without waiting for a queue slot
