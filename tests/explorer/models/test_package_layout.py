"""The models package's layout: its docstring names every module, its modules import one another without a circle,
and none is over 400 lines or holds a function over 80 (read from the source with ``ast``: a lazy import inside a
function counts)."""

import ast

import pytest

from checkpointing.paths import REPO_ROOT

PACKAGE = REPO_ROOT / "explorer" / "models"
MODULES = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__")


def sibling_imports(name: str) -> set[str]:
    """The modules of the package that ``name`` imports (``from explorer.models import x``,
    ``from explorer.models.x import y``, ``import explorer.models.x``)."""
    found = set()
    for node in ast.walk(ast.parse((PACKAGE / f"{name}.py").read_text())):
        if isinstance(node, ast.ImportFrom) and node.module == "explorer.models":
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("explorer.models."):
            found.add(node.module.split(".")[2])
        elif isinstance(node, ast.Import):
            found |= {alias.name.split(".")[2] for alias in node.names if alias.name.startswith("explorer.models.")}
    return found & set(MODULES)


def circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of ``graph`` (module -> the modules it imports), as the path that closes it, or None."""
    state = {}

    def visit(node, path):
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                return path + [node, nxt]
            if nxt not in state and (found := visit(nxt, path + [node])):
                return found
        state[node] = "done"
        return None

    return next((found for node in sorted(graph) if node not in state and (found := visit(node, []))), None)


def test_circle_finds_a_circle_and_only_one_that_is_there():
    assert circle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert circle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_the_modules_import_one_another_without_a_circle():
    graph = {name: sibling_imports(name) for name in MODULES}
    assert graph["opening"] >= {"held", "hub_files"}, "the import reader sees the package's own imports"
    assert circle(graph) is None, f"import circle: {' -> '.join(circle(graph))}"


def test_the_package_docstring_names_every_module():
    import explorer.models

    assert [m for m in MODULES if f"``{m}``" not in explorer.models.__doc__] == []


@pytest.mark.parametrize("name", MODULES)
def test_each_module_is_short_and_its_functions_shorter(name):
    source = (PACKAGE / f"{name}.py").read_text()
    assert len(source.splitlines()) <= 400, f"{name}.py is {len(source.splitlines())} lines"
    long = [f"{node.name} ({node.end_lineno - node.lineno + 1} lines)" for node in ast.walk(ast.parse(source))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > 80]
    assert long == [], f"{name}.py: {long}"
