"""One meaning per word, in the code of the explorer and the tabs: "site" is a ``modeling.Site`` only (a kind of
attention is an ``AttentionKind``, patching's tables are grids), the head width is ``d_head``, and the views reach
the model's attention modules (``self_attn``, ``cross_attn``) only through ``AttentionKind``."""

import ast
from pathlib import Path

import pytest

from checkpointing.paths import REPO_ROOT

RETIRED = {"AttentionSite": "AttentionKind", "SITES": "ATTENTION_KINDS", "site_of": "attention_kind",
           "parse_sites": "parse_grids", "SITE_CHOICES": "GRID_CHOICES",
           "d_k": "d_head", "dh": "d_head", "Dh": "d_head", "head_dim": "d_head"}
MODEL_MODULES = {"self_attn", "cross_attn"}
ATTENTION_KIND_MODULE = REPO_ROOT / "explorer" / "views" / "forward_pass.py"


def identifiers(path: Path) -> list[tuple[str, int, bool]]:
    """(name, line, whether it is an attribute read such as ``config.head_dim``) of every name the module spells."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Name):
            found.append((node.id, node.lineno, False))
        elif isinstance(node, ast.Attribute):
            found.append((node.attr, node.lineno, True))
        elif isinstance(node, ast.arg):
            found.append((node.arg, node.lineno, False))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.append((node.name, node.lineno, False))
        elif isinstance(node, ast.keyword) and node.arg:
            found.append((node.arg, node.lineno, False))
    return found


def sources(*folders: str) -> list[Path]:
    return sorted(path for folder in folders for path in (REPO_ROOT / folder).rglob("*.py"))


@pytest.mark.parametrize("path", sources("explorer", "ui"), ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_no_retired_word_names_anything(path):
    """A transformers config's ``head_dim`` may be read (an attribute); nothing of ours is called by it."""
    wrong = [f"{name} (line {line}): call it {RETIRED[name]}" for name, line, attribute in identifiers(path)
             if name in RETIRED and not (name == "head_dim" and attribute)]
    assert not wrong, wrong


@pytest.mark.parametrize("path", sources("explorer/views", "ui"), ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_only_the_attention_kind_names_the_models_attention_modules(path):
    used = [f"{name} (line {line})" for name, line, _ in identifiers(path) if name in MODEL_MODULES]
    assert path == ATTENTION_KIND_MODULE or not used, used


def test_the_scan_sees_a_retired_word(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f(config, Dh):\n    return config.head_dim, Dh\n")
    assert [(name, attribute) for name, _, attribute in identifiers(module) if name in RETIRED] == [
        ("Dh", False), ("head_dim", True), ("Dh", False)]
