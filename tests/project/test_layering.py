"""Dependencies point one way: the app (app.py -> ui) -> explorer -> modeling, training -> modeling, and both may use the
checkpoint code they share (checkpointing), which builds on modeling and the Hugging Face libraries only.
Read from the source with ``ast``, so a lazy import inside a function counts as much as one at the top."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from checkpointing.paths import REPO_ROOT

# what checkpointing may import besides the standard library and itself
CHECKPOINTING_MAY_IMPORT = {"modeling", "torch", "numpy", "transformers", "safetensors", "tokenizers", "huggingface_hub"}


def imported_packages(path: Path) -> set[str]:
    """The top-level names of every absolute import in a module (relative imports stay inside its package)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def modules(*names: str) -> list[Path]:
    """The Python files of the named packages (folders) and modules (``app.py``) that exist in the repository."""
    found = []
    for name in names:
        path = REPO_ROOT / name
        found += sorted(path.rglob("*.py")) if path.is_dir() else [path] if path.exists() else []
    return found


def test_imported_packages_sees_top_level_and_nested_imports(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("import os.path\nfrom training.evaluate import x\n\ndef f():\n    import training\n"
                      "    from . import sibling\n")
    assert imported_packages(module) == {"os", "training"}


APP_MODULES = modules("app.py", "ui", "explorer")


@pytest.mark.parametrize("path", APP_MODULES, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_the_app_never_imports_the_training_pipeline(path):
    assert "training" not in imported_packages(path), (
        f"{path.relative_to(REPO_ROOT)} imports training: what the app shares with training belongs in checkpointing")


def test_the_app_modules_were_found():
    assert {REPO_ROOT / "app.py", REPO_ROOT / "ui" / "tabs" / "generate.py", REPO_ROOT / "explorer" / "models" / "catalog.py"} \
        <= set(APP_MODULES)


@pytest.mark.parametrize("path", modules("ui", "explorer"), ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_the_tabs_never_import_the_app_and_the_explorer_never_imports_the_tabs_or_gradio(path):
    forbidden = {"app"} if path.is_relative_to(REPO_ROOT / "ui") else {"app", "ui", "gradio"}
    assert not imported_packages(path) & forbidden, f"{path.relative_to(REPO_ROOT)} imports {imported_packages(path) & forbidden}"


@pytest.mark.parametrize("path", modules("checkpointing"), ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_checkpointing_builds_on_the_model_and_the_hugging_face_libraries_only(path):
    others = imported_packages(path) - CHECKPOINTING_MAY_IMPORT - set(sys.stdlib_module_names) - {"checkpointing"}
    assert not others, (f"{path.relative_to(REPO_ROOT)} imports {sorted(others)}; "
                        f"allowed: {sorted(CHECKPOINTING_MAY_IMPORT)}")


@pytest.mark.parametrize("path", modules("modeling"), ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_the_model_imports_nothing_of_the_app_or_the_pipeline(path):
    assert not imported_packages(path) & {"training", "explorer", "ui", "app", "checkpointing"}, path


def test_generation_does_not_import_batching_which_builds_on_it():
    """The import cycle decoding <-> batching is gone (it hid in a function-level import): streaming, above both,
    joins them."""
    tree = ast.parse((REPO_ROOT / "explorer" / "generation" / "decoding.py").read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                for alias in node.names} | {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not {"batching", "explorer.generation.batching"} & imported


# The explorer's floors, bottom up: a subpackage imports only those below it. Presentation is above the views and
# learning it draws, and never below models: nothing in it loads a model (it is handed what it draws).
EXPLORER_FLOORS = {
    "core": set(),
    "models": {"core"},
    "generation": {"core"},
    "views": {"core", "models", "generation"},
    "learning": {"core", "models", "generation", "views"},
    "present": {"core", "generation", "views", "learning"},
}


def explorer_imports(path: Path) -> set[str]:
    """The explorer subpackages a module imports (``explorer.views.lens`` -> ``views``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        names = ([alias.name for alias in node.names] if isinstance(node, ast.Import) else
                 [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else [])
        found |= {name.split(".")[1] for name in names if name.startswith("explorer.")}
    return found


def test_the_explorer_floors_name_every_subpackage():
    folders = {p.name for p in (REPO_ROOT / "explorer").iterdir() if (p / "__init__.py").exists()}
    assert folders == set(EXPLORER_FLOORS)
    assert [p.name for p in (REPO_ROOT / "explorer").glob("*.py")] == ["__init__.py"]  # every module in a subpackage


@pytest.mark.parametrize("path", modules("explorer"), ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_an_explorer_subpackage_imports_only_those_below_it(path):
    if path.parent.name == "explorer":
        return
    package = path.relative_to(REPO_ROOT / "explorer").parts[0]
    above = explorer_imports(path) - EXPLORER_FLOORS[package] - {package}
    assert not above, f"{path.relative_to(REPO_ROOT)} ({package}) imports explorer.{sorted(above)}: above its floor"


@pytest.mark.parametrize("path", modules("explorer/present"), ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_presentation_loads_no_model(path):
    """Figures, HTML and teaching text are drawn from what a view computed: no loader, no Hub, no checkpoint."""
    assert not imported_packages(path) & {"checkpointing", "transformers", "huggingface_hub", "safetensors"}
    assert "models" not in explorer_imports(path)


@pytest.mark.parametrize("path", modules("ui/tabs"), ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_no_tab_imports_another_tab(path):
    """What two tabs share lives in ui/ beside them."""
    tree = ast.parse(path.read_text())
    imported = {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    assert not [name for name in imported if name.startswith("ui.tabs")] and not any(
        isinstance(node, ast.ImportFrom) and node.level > 0 for node in ast.walk(tree))


TAB_NAMES = sorted(p.stem for p in (REPO_ROOT / "ui" / "tabs").glob("*.py") if p.stem != "__init__")
VIEW_HOMES = ("views", "learning")


@pytest.mark.parametrize("tab", TAB_NAMES)
def test_a_tab_is_one_name_in_three_places(tab):
    """ui/tabs/NAME.py, explorer/{views,learning}/NAME.py (or a package NAME/) and explorer/present/NAME.py. The
    Generate tab's computation is a subpackage of its own, explorer/generation/ (decoding, batching, streaming)."""
    homes = [REPO_ROOT / "explorer" / home / f"{tab}{suffix}" for home in VIEW_HOMES for suffix in (".py", "")]
    homes += [REPO_ROOT / "explorer" / "generation"] if tab == "generate" else []
    assert any(home.is_file() or (home / "__init__.py").is_file() for home in homes), f"no explorer view named {tab}"
    assert (REPO_ROOT / "explorer" / "present" / f"{tab}.py").is_file(), f"no presentation named {tab}"


# Sizes: a module is read in one sitting, a function's body in one screen (its signature aside: a config lists its
# fields there). The model file is the exception: it is the whole Transformer in reading order. The checkpoints'
# copies of the model code are generated (python -m training.checkpoints).
MODULE_LINES, FUNCTION_LINES = 400, 80
TRACKED = subprocess.run(["git", "ls-files", "*.py"], cwd=REPO_ROOT, capture_output=True, text=True).stdout.split()
SIZED = [REPO_ROOT / p for p in TRACKED if not p.startswith("checkpoints/") and p != "modeling/modeling_scratch_transformer.py"]


def test_the_sized_modules_were_found():
    assert len(SIZED) > 150 and REPO_ROOT / "tests" / "support" / "fake_hub.py" in SIZED


@pytest.mark.parametrize("path", SIZED, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_no_module_is_over_400_lines_and_no_function_over_80(path):
    lines = path.read_text().splitlines()
    assert len(lines) <= MODULE_LINES, f"{len(lines)} lines"
    functions = [node for node in ast.walk(ast.parse("\n".join(lines))) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    long = [(node.name, size) for node in functions if (size := node.end_lineno - node.body[0].lineno + 1) > FUNCTION_LINES]
    assert not long, f"functions over {FUNCTION_LINES} lines: {long}"


PACKAGES = [p.parent for p in sorted(REPO_ROOT.rglob("__init__.py"))
            if p.relative_to(REPO_ROOT).parts[0] in {"explorer", "ui", "checkpointing", "training", "benchmarks", "modeling"}]


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_every_package_docstring_names_each_of_its_modules(package):
    """A package's docstring is its table of contents: each module (and subpackage) in ``double backticks``."""
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
    parts = sorted([p.stem for p in package.glob("*.py") if p.stem != "__init__"] +
                   [p.name for p in package.iterdir() if (p / "__init__.py").is_file()])
    assert [m for m in parts if f"``{m}``" not in doc] == []


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(REPO_ROOT / p): REPO_ROOT / p for p in TRACKED
           if p.split("/")[0] in {"app.py", "ui", "explorer", "checkpointing", "training", "benchmarks", "modeling"}}


def module_imports(name: str) -> set[str]:
    """The repository's modules that module ``name`` imports, at the top or inside a function: ``from a.b import c``
    names module a.b.c if there is one, else a.b; relative imports are resolved against the module's package."""
    path, found = MODULES[name], set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            found |= {f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names}
    return found & set(MODULES) - {name}


def circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of ``graph`` (module -> the modules it imports), as the path that closes it, or None."""
    state = {}

    def visit(node, path):
        state[node] = "open"
        for following in sorted(graph[node]):
            if state.get(following) == "open":
                return path + [node, following]
            if following not in state and (found := visit(following, path + [node])):
                return found
        state[node] = "done"
        return None

    return next((found for node in sorted(graph) if node not in state and (found := visit(node, []))), None)


def test_circle_finds_a_circle_and_only_one_that_is_there():
    assert circle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert circle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_no_module_imports_itself_through_a_circle():
    """The layout draws with no circles, module by module (a package's __init__ imports nothing of it)."""
    graph = {name: {m for m in module_imports(name) if MODULES[m].name != "__init__.py"} for name in MODULES}
    assert graph["explorer.models.opening"] >= {"explorer.models.held", "explorer.models.hub_files"}  # the reader sees
    assert "modeling.recording" in graph["modeling.modeling_scratch_transformer"]  # relative imports too
    assert circle(graph) is None, f"import circle: {' -> '.join(circle(graph))}"
