"""The Hub cache on disk, bounded: the revisions this app downloaded take at most ``SCRATCH_HUB_DISK`` bytes
(``explorer.core.settings.HUB_DISK``), so strangers opening repo after repo (Pythia alone has 154 revisions) cannot
fill the machine's disk.

Each open holds a ``Claim`` on its revision: ``pin`` once the Hub names the commit, ``reserve`` once the plan names
the files, before the weights come. To make room, the least recently opened revisions nobody uses (no open under way,
no model in memory) are removed; when that is not enough the open is refused. A refused open removes what it
downloaded, unless another open of that revision is under way or a visitor holds or lists it.

A request that downloads now and reads later (Watch it learn downloads every revision, then measures them one by one)
keeps what it downloaded (``Kept``) until it has read it, or for ``KEEP_SECONDS`` if it never does (one request a
visitor): its first revisions never go to make room for its last, to be downloaded again while it measures.

What this app downloaded is written in a ledger beside the cache (``LEDGER``: revision -> when last opened), so the
bound holds across restarts and revisions the operator had cached before are never counted nor removed.
"""

import json
import os
import threading
import time
import uuid
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

from huggingface_hub import scan_cache_dir
from huggingface_hub.errors import CacheNotFound
from huggingface_hub.file_download import repo_folder_name

from explorer.core import visitor
from explorer.core.inputs import InputProblem
from explorer.models import registry
from explorer.models.hub_files import cache_dir
from explorer.core.settings import HUB_DISK, megabytes
from explorer.models.plans import file_cap, limits

LEDGER = "scratch_app_downloads.json"  # in the cache folder: {"repo_id@commit": last opened, in seconds since 1970}

_lock = threading.Lock()  # the ledger, the pins, the reservations, and every removal
_opening: Counter = Counter()  # (repo_id, commit) -> opens under way
_reserved: dict[int, int] = {}  # id(claim) -> the bytes it may still download
KEEP_SECONDS = 300  # how long a request's downloads stay kept after it last said it would read them
_kept: dict[str, tuple[str | None, set[str], float]] = {}  # a Kept's id -> its visitor's session, the revisions it
# keeps, and until when (monotonic)


def _ledger_path() -> Path:
    return Path(cache_dir()) / LEDGER


def _ledger() -> dict[str, float]:
    try:
        return {k: float(v) for k, v in json.loads(_ledger_path().read_text()).items()}
    except (OSError, ValueError, AttributeError, TypeError):
        return {}


def _write_ledger(ledger: dict[str, float]) -> None:
    path = _ledger_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(f".{os.getpid()}.tmp")
    temporary.write_text(json.dumps(ledger))
    temporary.replace(path)


def _snapshot(repo_id: str, commit: str) -> Path:
    return Path(cache_dir()) / repo_folder_name(repo_id=repo_id, repo_type="model") / "snapshots" / commit


def _cached():
    """huggingface_hub's scan of the cache (None: no cache yet) and our revisions in it: "repo@commit" -> revision."""
    try:
        info = scan_cache_dir(cache_dir())
    except CacheNotFound:
        return None, {}
    return info, {f"{repo.repo_id}@{rev.commit_hash}": rev for repo in info.repos if repo.repo_type == "model"
                  for rev in repo.revisions}


def _ours_bytes(ledger: dict, cached: dict) -> int:
    """What the ledger's revisions take on disk, a file two revisions share counted once."""
    blobs = {f.blob_path: f.size_on_disk for key in ledger if key in cached for f in cached[key].files}
    return sum(blobs.values())


def _in_use(shown: bool) -> set[str]:
    """Revisions that must stay: opens under way, revisions a request keeps to read later, models in memory
    (``shown``: and those any visitor lists). The lock held."""
    now = time.monotonic()
    for lease in [lease for lease, (_, _, until) in _kept.items() if until < now]:
        del _kept[lease]  # never read: the request was dropped, or its visitor left
    kept = set().union(*(keys for _, keys, _ in _kept.values()))
    return ({f"{r}@{c}" for (r, c), n in _opening.items() if n} | kept
            | {f"{r}@{c}" for r, c in registry.hub_commits(shown)})


def _remove(info, cached: dict, keys: list[str], ledger: dict) -> None:
    """Remove revisions from the cache (their files no other revision shares) and from the ledger (the lock held)."""
    commits = [cached[k].commit_hash for k in keys if k in cached]
    if commits:
        info.delete_revisions(*commits).execute()
    for key in keys:
        ledger.pop(key, None)
    _write_ledger(ledger)


class Claim:
    """One open's hold on its revision in the cache (``claim``)."""

    def __init__(self, repo_id: str):
        self.repo_id, self.commit = repo_id, None

    @property
    def key(self) -> str:
        return f"{self.repo_id}@{self.commit}"

    def pin(self, commit: str) -> None:
        """The revision stays while this open runs; it counts as opened now (the ledger's order), and as this app's
        download unless it was in the cache before."""
        with _lock:
            self.commit = commit
            _opening[(self.repo_id, commit)] += 1
            ledger = _ledger()
            if self.key in ledger or not _snapshot(self.repo_id, commit).exists():
                ledger[self.key] = time.time()
                _write_ledger(ledger)

    def reserve(self, where: str, sizes: dict[str, int | None]) -> None:
        """Room on disk for the planned files (name -> listed bytes) not in the cache yet, made by removing the least
        recently opened revisions nobody uses; refused when even that is not enough."""
        folder = _snapshot(self.repo_id, self.commit)
        incoming = sum(size or file_cap(name) for name, size in sizes.items() if not (folder / name).exists())
        budget = limits()["disk"]
        if incoming > budget:
            raise InputProblem(f"{where} needs {megabytes(incoming)} on disk; this app keeps at most "
                               f"{megabytes(budget)} for models from the Hub (set {HUB_DISK.env} to change it).")
        with _lock:
            ledger = _ledger()
            if incoming:
                ledger[self.key] = time.time()
            info, cached = _cached()
            others = sum(_reserved.values())
            used = _ours_bytes(ledger, cached)
            busy = _in_use(shown=False)
            evict = []
            for key in sorted((k for k in ledger if k in cached and k not in busy), key=ledger.get):
                if used + others + incoming <= budget:
                    break
                evict.append(key)
                used = _ours_bytes({k: t for k, t in ledger.items() if k not in evict}, cached)
            if used + others + incoming > budget:
                raise InputProblem(f"No room on disk for {where} ({megabytes(incoming)}) now: the models being opened "
                                   f"or held take the {megabytes(budget)} this app keeps for models from the Hub. "
                                   "Try again in a few minutes.")
            _remove(info, cached, evict, ledger)
            _reserved[id(self)] = incoming

    def end(self, failed: bool) -> None:
        """The open is over: its reservation and pin go; a failed one removes its revision if nobody else uses it."""
        with _lock:
            _reserved.pop(id(self), None)
            if self.commit is None:
                return
            _opening[(self.repo_id, self.commit)] -= 1
            if not _opening[(self.repo_id, self.commit)]:
                del _opening[(self.repo_id, self.commit)]
            ledger = _ledger()
            if failed and self.key in ledger and self.key not in _in_use(shown=True):
                info, cached = _cached()
                _remove(info, cached, [self.key], ledger)


class Kept:
    """The revisions one request downloaded to read later, kept in the cache until ``end()``, or ``KEEP_SECONDS``
    after the last ``add`` or ``renew`` (a request whose visitor left keeps nothing for long). A visitor keeps for one
    request at a time: a new one ends the one before, so nobody holds the disk by asking again and again. Only an id
    lives here, the revisions in this module: a copy of the request (the app's state) ends the same lease."""

    def __init__(self):
        self.id, self.session = uuid.uuid4().hex, visitor.current().session

    def add(self, repo_id: str, commit: str) -> None:
        with _lock:
            if self.id not in _kept and self.session is not None:  # this visitor's request before is superseded
                for lease in [lease for lease, (session, _, _) in _kept.items() if session == self.session]:
                    del _kept[lease]
            _, keys, _ = _kept.get(self.id, (None, set(), 0))
            _kept[self.id] = (self.session, keys | {f"{repo_id}@{commit}"}, time.monotonic() + KEEP_SECONDS)

    def renew(self) -> None:
        """Another ``KEEP_SECONDS`` from now: the reading starts."""
        with _lock:
            if self.id in _kept:
                session, keys, _ = _kept[self.id]
                _kept[self.id] = (session, keys, time.monotonic() + KEEP_SECONDS)

    def end(self) -> None:
        """Read, or given up: the revisions may go to make room again (least recently opened first)."""
        with _lock:
            _kept.pop(self.id, None)


@contextmanager
def claim(repo_id: str):
    """A ``Claim`` for the block: a block that fails leaves nothing of its own in the cache."""
    held = Claim(repo_id)
    try:
        yield held
    except BaseException:
        held.end(failed=True)
        raise
    held.end(failed=False)
