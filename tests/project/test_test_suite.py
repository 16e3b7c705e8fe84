"""The test suite's own rules: helpers are imported from tests/support/, never from conftest.py (a second conftest.py
anywhere on the path would shadow it), and no function in tests/ or benchmarks/ is over 80 lines."""

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MODULES = sorted(p for folder in ("tests", "benchmarks") for p in (REPO / folder).rglob("*.py"))
MAX_FUNCTION_LINES = 80


def imported_modules(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def long_functions(tree: ast.AST) -> list[str]:
    return [f"{node.name} ({node.end_lineno - node.lineno + 1} lines)" for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]


def test_the_modules_were_found():
    assert REPO / "tests" / "conftest.py" in MODULES and REPO / "benchmarks" / "app_latency.py" in MODULES


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(REPO)))
def test_nothing_imports_conftest(path):
    assert "conftest" not in imported_modules(ast.parse(path.read_text())), "import helpers from tests/support/"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(REPO)))
def test_no_function_is_over_80_lines(path):
    assert long_functions(ast.parse(path.read_text())) == []


def test_the_rules_see_what_they_forbid():
    tree = ast.parse("from conftest import figure\nimport conftest\ndef f():\n" + "    pass\n" * MAX_FUNCTION_LINES)
    assert "conftest" in imported_modules(tree) and long_functions(tree) == [f"f ({MAX_FUNCTION_LINES + 1} lines)"]
