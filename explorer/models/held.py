"""The models opened in this process: ``Opened`` (what each is; ``label``, its menu line), the registry of every
name opened (how to load it again), ``HELD``, the models in memory, and each browser session's own models.

``HELD`` is an LRU bounded by memory (``SCRATCH_HUB_MEMORY``): an evicted model is only dropped from the LRU, so a
request holding it finishes, and its menu name loads it again from the files on disk. A session keeps its newest
``MAX_SESSION_MODELS``; one that goes leaves the menus, and its unpacked upload is removed.
"""

import shutil
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import torch

from explorer.models import catalog, uploads
from explorer.models.converting import load_folder
from explorer.models.jobs import run_shared
from explorer.models.plans import Plan, limits
from explorer.core.inputs import InputProblem, echo
from explorer.core.parity import parity_words

MAX_SESSION_MODELS = 2  # uploads and trained models a browser session keeps (its oldest goes)
MAX_SESSIONS = 64  # browser sessions whose own models are kept (the one whose last model came longest ago goes)


@dataclass
class Opened:
    """A model opened in the app. ``name`` is its menu value; ``source`` "hub", "upload" or "trained"."""

    name: str
    source: str
    family: str
    model_type: str
    n_parameters: int
    commit: str | None
    parity: float | None
    folder: Path = field(repr=False)
    plan: Plan = field(repr=False)
    session: str | None = None
    repo_id: str | None = None
    revision: str | None = None
    seconds: float = 0.0

    @property
    def label(self) -> str:
        where = {"hub": "the Hub", "upload": "your upload", "trained": "trained by you"}[self.source]
        commit = f" · commit {self.commit[:7]}" if self.commit else ""
        parity = "" if self.parity is None else f" · {parity_words(self.parity)}"
        source = f"from {where}" if self.source == "hub" else where
        return f"{self.name} · {self.family} · {_size(self.n_parameters)} · {source}{commit}{parity}"

    def to_json(self) -> dict:
        return {"name": self.name, "family": self.family, "model_type": self.model_type,
                "parameters": self.n_parameters, "commit": self.commit, "parity": self.parity, "source": self.source,
                "repo_id": self.repo_id, "revision": self.revision, "seconds": round(self.seconds, 2)}


def _size(n: int) -> str:
    return f"{n / 1e6:.1f}M parameters" if n >= 1e6 else f"{n / 1e3:.1f}K parameters"


# ----------------------------------------------------------------------------------------------
# The models in memory
# ----------------------------------------------------------------------------------------------


def model_bytes(model: torch.nn.Module) -> int:
    """Memory a model's parameters and buffers take, shared storage counted once."""
    seen, total = set(), 0
    for t in [*model.parameters(), *model.buffers()]:
        key = t.untyped_storage().data_ptr()
        if key not in seen:
            seen.add(key)
            total += t.untyped_storage().nbytes()
    return total


class Held:
    """Loaded models by name, least recently used first, bounded by memory (``SCRATCH_HUB_MEMORY``). Evicting drops
    the LRU's reference only: a request still holding the model keeps it alive until it is done."""

    def __init__(self):
        self._models: OrderedDict[str, tuple[torch.nn.Module, object, int]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, name: str):
        with self._lock:
            if name in self._models:
                self._models.move_to_end(name)
                return self._models[name][:2]
            return None

    def put(self, name: str, model, tokenizer) -> list[str]:
        """Hold it; returns the names evicted (oldest first) to stay within the budget (the newest always stays)."""
        budget = limits()["memory"]
        with self._lock:
            self._models[name] = (model, tokenizer, model_bytes(model))
            self._models.move_to_end(name)
            evicted = []
            while len(self._models) > 1 and sum(v[2] for v in self._models.values()) > budget:
                evicted.append(self._models.popitem(last=False)[0])
            return evicted

    def drop(self, name: str) -> None:
        with self._lock:
            self._models.pop(name, None)

    def names(self) -> list[str]:
        with self._lock:
            return list(self._models)


HELD = Held()


# ----------------------------------------------------------------------------------------------
# Every model opened in this process, by menu name: how to load it again
# ----------------------------------------------------------------------------------------------

_opened: dict[str, Opened] = {}  # every name ever opened in this process -> how to load it again
_opened_lock = threading.Lock()


def register(opened: Opened, model, tokenizer) -> Opened:
    """Hold the model and list it in the menus (``catalog.open_model``), loaded through ``resolve``."""
    HELD.put(opened.name, model, tokenizer)
    with _opened_lock:
        _opened[opened.name] = opened
    catalog.open_model(opened.name, catalog.OpenedEntry(opened.label, lambda: resolve(opened.name), opened.session))
    return opened


def resolve(name: str):
    """(info, model, tokenizer) of an opened model: from the LRU, else loaded again from its folder."""
    with _opened_lock:
        opened = _opened.get(name)
    if opened is None:
        raise InputProblem(f"The model {echo(name)} is no longer open: open it again.")
    held = HELD.get(name)
    if held is None:
        held = run_shared(("reload", name), lambda job: _reload(opened)).outcome()
    model, tokenizer = held
    info = catalog.CheckpointInfo(name, opened.folder, model.config, opened.n_parameters)
    return info, model, tokenizer


def _reload(opened: Opened):
    if not opened.folder.exists():
        raise InputProblem(f"The files of {echo(opened.name)} are gone: open it again.")
    model, _, tokenizer = load_folder(opened.folder, opened.plan, opened.name)
    HELD.put(opened.name, model, tokenizer)
    return model, tokenizer


def opened(name: str) -> Opened | None:
    with _opened_lock:
        return _opened.get(name)


# ----------------------------------------------------------------------------------------------
# A session's own models: uploads, models trained in the app
# ----------------------------------------------------------------------------------------------

_sessions: OrderedDict[str, list[str]] = OrderedDict()  # session -> its models' names, oldest first
_sessions_lock = threading.Lock()


def _forget(name: str) -> None:
    """Drop it from memory, the menus and the registry; remove its files if they are an unpacked upload."""
    HELD.drop(name)
    catalog.close_model(name)
    with _opened_lock:
        gone = _opened.pop(name, None)
    if gone is not None and uploads.ROOT in gone.folder.parents:
        shutil.rmtree(gone.folder, ignore_errors=True)


def keep_for_session(session: str | None, name: str) -> None:
    """List ``name`` among the session's own models; its oldest beyond ``MAX_SESSION_MODELS``, and every model of
    the sessions beyond ``MAX_SESSIONS``, are forgotten."""
    with _sessions_lock:
        names = _sessions.setdefault(session or "", [])
        _sessions.move_to_end(session or "")
        names.append(name)
        dropped = names[:-MAX_SESSION_MODELS]
        del names[:-MAX_SESSION_MODELS]
        while len(_sessions) > MAX_SESSIONS:
            dropped += _sessions.popitem(last=False)[1]
    for old in dropped:
        _forget(old)


def session_models(session: str | None) -> list[str]:
    with _sessions_lock:
        return list(_sessions.get(session or "", []))


def forget_all() -> None:
    """Close every opened model (tests)."""
    with _opened_lock:
        names = list(_opened)
    for name in names:
        _forget(name)
    with _sessions_lock:
        _sessions.clear()

