"""A Hugging Face cache laid out on disk, and a fresh Python process to load from it: the Hub's own code paths,
offline (HF_HUB_OFFLINE=1), as a user who types a repo id meets them."""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap

REVISION = "0123456789abcdef0123456789abcdef01234567"


def run_isolated(code: str, cwd, env_extra: dict) -> dict:
    """Run python code in a fresh process whose sys.path does NOT contain the repository, with standard
    input closed (an interactive prompt fails instead of waiting). The code prints one JSON object on its
    last line; it comes back with the process's stderr under "stderr"."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(env_extra)
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                            capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    return {**json.loads(result.stdout.strip().splitlines()[-1]), "stderr": result.stderr}


def lay_out_cache(saved, cache, repo_id: str) -> None:
    """models--org--name/{blobs, refs/main, snapshots/REV}: blobs named by sha256, snapshot links to them."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    (repo / "blobs").mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(REVISION)
    snapshot = repo / "snapshots" / REVISION
    snapshot.mkdir(parents=True)
    for file in saved.iterdir():
        digest = hashlib.sha256(file.read_bytes()).hexdigest()
        shutil.copy(file, repo / "blobs" / digest)
        (snapshot / file.name).symlink_to(os.path.relpath(repo / "blobs" / digest, snapshot))
