"""The project installs with pip, and what a user copies from the README or a model card runs from any
directory: with our package imported no flag is needed; without it, trust_remote_code=True on both calls.
Either way no prompt (standard input is closed) and no warning."""

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import tomllib
import zipfile
from pathlib import Path

import pytest

from checkpointing.loading import checkpoint_folders
from checkpointing.paths import CHECKPOINTS_ENV, REPO_ROOT, checkpoints_dir
from support.offline_hub import lay_out_cache, python_without_our_package, run_isolated
from training.model_card import HUB_ORGANIZATION

PACKAGES = ("modeling", "checkpointing", "training", "explorer")


def requirement_pins() -> list[str]:
    lines = (REPO_ROOT / "requirements.txt").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def python_blocks(markdown: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", markdown, flags=re.S)


def no_warning(stderr: str) -> None:
    lines = [line for line in stderr.splitlines() if not line.startswith("Loading weights")]  # a progress bar
    assert not any(re.search(r"warn|do you wish|trust_remote_code", line, re.I) for line in lines), stderr[-2000:]


def hub_cache(tmp_path, names) -> dict:
    """Every named checkpoint laid out as <organization>/<name> in an offline Hub cache."""
    for name in names:
        lay_out_cache(checkpoints_dir() / name, tmp_path / "hub", f"{HUB_ORGANIZATION}/{name}")
    return {"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "hub"), "TRANSFORMERS_VERBOSITY": "warning"}


def test_pyproject_pins_the_same_versions_as_requirements():
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    assert sorted(pyproject["project"]["dependencies"]) == sorted(requirement_pins())
    assert pyproject["tool"]["setuptools"]["packages"]["find"]["include"] == [*PACKAGES, "explorer.*"]


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(site folder, wheel): the project built from a copy of its sources and pip-installed into a folder of its own."""
    tmp = tmp_path_factory.mktemp("install")
    source = tmp / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO_ROOT / name, source / name)
    for package in PACKAGES:
        shutil.copytree(REPO_ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__"))
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp / "dist"), str(source)],
                   check=True, capture_output=True, timeout=300)
    wheel = next((tmp / "dist").glob("*.whl"))
    subprocess.run([*pip, "install", "--no-deps", "--target", str(tmp / "site"), str(wheel)],
                   check=True, capture_output=True, timeout=300)
    return tmp / "site", wheel


def test_the_wheel_holds_the_packages_and_their_runtime_dependencies(installed):
    _, wheel = installed
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    for module in ("modeling/modeling_scratch_transformer.py", "modeling/configuration_scratch_transformer.py",
                   "modeling/recording.py", "checkpointing/loading.py", "checkpointing/scoring.py", "training/train.py",
                   "training/evaluate.py",
                   "explorer/__init__.py", "explorer/views/lens.py", "explorer/present/lens.py",
                   "explorer/learning/shakespeare_excerpt.txt"):
        assert module in names, module
    assert not any(n.startswith(("tests/", "checkpoints/", "benchmarks/")) for n in names)
    assert sorted(re.findall(r"^Requires-Dist: (.+)$", metadata, flags=re.M)) == sorted(requirement_pins())


@pytest.fixture(scope="module")
def editable_python(tmp_path_factory):
    """A Python whose site-packages holds this clone installed as the README's commands install it (``-e .``) and
    sees the test environment's packages (torch, transformers, ...), but not the repository itself."""
    python = python_without_our_package(tmp_path_factory.mktemp("editable"))
    site_packages = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                   check=True, capture_output=True, text=True).stdout.strip()
    subprocess.run([sys.executable, "-m", "pip", "-q", "--disable-pip-version-check", "install", "--no-deps",
                    "--no-build-isolation", "--target", str(site_packages), "-e", str(REPO_ROOT)],
                   check=True, capture_output=True, timeout=300)
    return python


def test_the_readme_snippet_runs_as_written_from_any_directory_offline(editable_python, tmp_path):
    """The README's Python block, unchanged, in a fresh process in an empty folder: offline with an empty Hub cache
    (nothing is downloaded or waited for), standard input closed (no prompt); it prints a continuation."""
    snippet = next(block for block in python_blocks((REPO_ROOT / "README.md").read_text()) if "from_pretrained" in block)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", CHECKPOINTS_ENV)}
    env.update({"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "empty-hub-cache"),
                "TRANSFORMERS_VERBOSITY": "warning"})
    where = tmp_path / "anywhere"
    where.mkdir()
    result = subprocess.run([editable_python, "-c", snippet], cwd=where, env=env, stdin=subprocess.DEVNULL,
                            capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.startswith("ROMEO:\n")
    assert len(result.stdout) > len("ROMEO:\n") + 60  # 60 new tokens, each at least one character
    no_warning(result.stderr)
    # the package it imported is this clone's, reached through the editable install, not through the search path
    probe = ("import json, sys, modeling, checkpointing.paths as p; print(json.dumps({'modeling': modeling.__file__, "
             "'checkpoints': str(p.checkpoints_dir()), 'path': sys.path}))")
    check = subprocess.run([editable_python, "-c", probe],
                           cwd=where, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    found = json.loads(check.stdout)
    assert Path(found["modeling"]).is_relative_to(REPO_ROOT) and Path(found["checkpoints"]) == REPO_ROOT / "checkpoints"
    assert str(REPO_ROOT) not in found["path"]


def test_the_readme_names_the_hub_id_only_next_to_the_command_that_pushes_it():
    readme = (REPO_ROOT / "README.md").read_text()
    body = readme.split("\n---\n", 1)[1]  # after the front matter, whose model list the Space reads
    for repo_id in (f"{HUB_ORGANIZATION}/{folder.name}" for folder in checkpoint_folders()):
        for line in (line for line in body.splitlines() if repo_id in line):
            assert line.startswith(f"hf upload {repo_id} checkpoints/{repo_id.split('/')[1]}"), line
    snippet = next(block for block in python_blocks(readme) if "from_pretrained" in block)
    assert HUB_ORGANIZATION not in snippet


def test_every_model_card_snippet_loads_with_trust_remote_code_where_our_package_is_absent(tmp_path):
    names = [folder.name for folder in checkpoint_folders()]
    programs = []
    for name in names:
        snippet, *examples = python_blocks((checkpoints_dir() / name / "README.md").read_text())
        assert snippet.count("trust_remote_code=True") == 2, name  # on the tokenizer AND the model
        programs.append(f"{snippet}\nloaded[{name!r}] = (type(model).__name__, len(tokenizer))\n")
        for example in examples:  # the card's usage examples, run as written; what they print is kept
            programs.append(f"with contextlib.redirect_stdout(io.StringIO()) as shown:\n{textwrap.indent(example, '    ')}"
                            f"printed[{name!r}] = printed.get({name!r}, '') + shown.getvalue()\n")
    code = ("import contextlib, io\nloaded, printed = {}, {}\n" + "".join(programs) + "import importlib.util, json\n"
            "print(json.dumps({'loaded': loaded, 'printed': printed, "
            "'modeling': importlib.util.find_spec('modeling') is not None}))\n")
    out = run_isolated(code, tmp_path, hub_cache(tmp_path, names))
    assert out["modeling"] is False  # nothing of ours on the path: the code came from the checkpoints
    assert set(out["loaded"]) == set(names)
    # folio-to-modern's card rewrites a passage line by line, one output per line
    assert ast.literal_eval(out["printed"]["folio-to-modern"]) == ["Shall I compare thee to a summer's day?",
                                                       "Thou art more lovely and more temperate:"]
    for name, (model_class, n_tokens) in out["loaded"].items():
        assert model_class.startswith("ScratchTransformerFor") and n_tokens > 200, name
    no_warning(out["stderr"])


def test_shipped_tokenizer_configs_carry_no_machine_local_flags():
    for folder in checkpoint_folders():
        config = json.loads((folder / "tokenizer_config.json").read_text())
        assert not {"is_local", "local_files_only", "name_or_path"} & set(config), folder.name
