"""A Hugging Face cache laid out on disk, and a fresh Python process to load from it: the Hub's own code paths,
offline (HF_HUB_OFFLINE=1), as a user who types a repo id meets them."""

import hashlib
import json
import os
import shutil
import site
import subprocess
import sys
import textwrap
from pathlib import Path

REVISION = "0123456789abcdef0123456789abcdef01234567"


def python_without_our_package(folder) -> str:
    """A Python (a virtual environment without pip, made once in ``folder``) that imports the test environment's
    packages but not ours, even where the test environment has this clone installed (``pip install -e .``, as the
    README's commands do). The test environment's site-packages join its path through a .pth line, and Python runs
    only the .pth files of its own site-packages, so an editable install's finder there never runs."""
    venv = Path(folder) / "python-without-our-package"
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
        own = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             check=True, capture_output=True, text=True).stdout.strip()
        (Path(own) / "test_environment.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return str(python)


def run_isolated(code: str, cwd, env_extra: dict, python: str | None = None) -> dict:
    """Run python code in a fresh process whose sys.path does NOT contain the repository nor our installed package
    (``python``, default: ``python_without_our_package``), with standard input closed (an interactive prompt fails
    instead of waiting). The code prints one JSON object on its last line; it comes back with the process's stderr
    under "stderr"."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # remote code is cached by repository and revision, and every test hub serves the same REVISION: a modules cache
    # shared between runs would hand today's weights yesterday's model code
    env["HF_MODULES_CACHE"] = str(Path(cwd) / "hf_modules")
    env.update(env_extra)
    python = python or python_without_our_package(cwd)
    result = subprocess.run([python, "-c", textwrap.dedent(code)], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                            capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    return {**json.loads(result.stdout.strip().splitlines()[-1]), "stderr": result.stderr}


def lay_out_cache(saved, cache, repo_id: str) -> None:
    """models--org--name/{blobs, refs/main, snapshots/REV}: blobs named by sha256, snapshot links to them (files in
    subfolders, such as a recorded run's snapshots/, keep their folder, as the Hub keeps them)."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    (repo / "blobs").mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(REVISION)
    snapshot = repo / "snapshots" / REVISION
    snapshot.mkdir(parents=True)
    for file in sorted(path for path in saved.rglob("*") if path.is_file()):
        digest = hashlib.sha256(file.read_bytes()).hexdigest()
        shutil.copy(file, repo / "blobs" / digest)
        link = snapshot / file.relative_to(saved)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(repo / "blobs" / digest, link.parent))
