"""Where things live: the one source for the repository's folders.

In a checkout (``pip install -e .``, or running from the clone) the folders are the repository's own;
``SCRATCH_DATA`` and ``SCRATCH_CHECKPOINTS`` point them elsewhere. An installed copy with no checkout
around it uses ``./data`` and ``./checkpoints`` of the working directory.
"""

import os
from pathlib import Path

_PACKAGE_PARENT = Path(__file__).resolve().parent.parent
REPO_ROOT: Path | None = _PACKAGE_PARENT if (_PACKAGE_PARENT / "pyproject.toml").exists() else None
DATA_ENV, CHECKPOINTS_ENV = "SCRATCH_DATA", "SCRATCH_CHECKPOINTS"


def _base() -> Path:
    return REPO_ROOT if REPO_ROOT is not None else Path.cwd()


def data_dir() -> Path:
    """The corpus, tokenizer, token caches and training runs: $SCRATCH_DATA, else <repo>/data."""
    return Path(os.environ.get(DATA_ENV) or _base() / "data")


def checkpoints_dir() -> Path:
    """The shipped checkpoints and results.json: $SCRATCH_CHECKPOINTS, else <repo>/checkpoints."""
    return Path(os.environ.get(CHECKPOINTS_ENV) or _base() / "checkpoints")
