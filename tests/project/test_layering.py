"""Dependencies point one way: the app (app.py -> ui) -> explorer -> modeling, training -> modeling, and both may use the
checkpoint code they share (checkpointing), which builds on modeling and the Hugging Face libraries only.
Read from the source with ``ast``, so a lazy import inside a function counts as much as one at the top."""

import ast
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
    assert {REPO_ROOT / "app.py", REPO_ROOT / "ui" / "events.py", REPO_ROOT / "explorer" / "catalog.py"} <= set(APP_MODULES)


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
    """The import cycle explorer.generation.decoding <-> explorer.generation.batching is gone (it hid in a function-level import):
    streaming, above both, joins them."""
    import ast

    tree = ast.parse((REPO_ROOT / "explorer" / "generation.py").read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                for alias in node.names} | {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert "batching" not in imported and ".batching" not in imported


def test_the_explorer_docstring_names_every_module():
    import explorer

    modules = sorted(p.stem for p in (REPO_ROOT / "explorer").glob("*.py") if p.stem != "__init__")
    assert [m for m in modules if f"``{m}``" not in explorer.__doc__] == []
