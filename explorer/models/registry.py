"""THE registry: the one owner of every model the app can show, and of the memory they take.

- Names. A shipped checkpoint (a folder under ``checkpoints/``) is everyone's, and its name always means it. A model
  opened in the app (from the Hub, an upload, one trained in the app: ``held.Opened``) belongs to the browser
  session that opened it (``explorer.core.visitor.current().session``): it resolves, and is listed, for that session
  alone, whatever asks. A session keeps its ``OWN_MODELS`` newest uploads and trained models and lists its
  ``HUB_MODELS`` newest Hub models; a model that goes is remembered with why, and told when its session names it. A
  page's models go when it closes; its uploads also when it has been idle and another visitor's need the disk.
- Memory. The weights are held once per source (a shipped folder's version, a Hub repo's commit, an upload's folder),
  however many sessions list them, in one LRU bounded by ``SCRATCH_HUB_MEMORY``. What a source costs is its weights
  (``held.model_bytes``), its tokenizer (``held.tokenizer_bytes``) and what the view caches hold for it
  (``explorer.core.caches.owner_bytes``). Over the bound, the least recently used go, their cached views with them
  (``caches.release``): nothing else holds a model, so its memory is freed once the requests using it are done.
  Before a model loads, room is made for what the load takes at its peak (``load_peak_bytes``). Every
  source can be loaded again from its files, and is, when a name that lists it is used again.
"""

import gc
import shutil
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

from checkpointing.loading import CheckpointError, load_checkpoint

from explorer.core import caches, machine
from explorer.core.inputs import InputProblem, echo, model_name
from explorer.core.visitor import current
from explorer.models import catalog, uploads
from explorer.models.catalog import CheckpointInfo
from explorer.models.converting import load_folder
from explorer.models.held import Opened, model_bytes, tokenizer_bytes
from explorer.core.settings import UPLOAD_IDLE_SECONDS, megabytes
from explorer.models.plans import limits

OWN_MODELS = 2  # uploads and trained models a browser session keeps (its oldest goes)
HUB_MODELS = 12  # Hub models a session lists (its oldest goes): Watch it learn opens up to 12 revisions of a repo
GONE_REMEMBERED = 16  # per session: the models that went, and why (told when the session names one again)
LOAD_PEAK_WEIGHTS = 3  # a load's peak, in its weights' bytes: 2.9x measured on a 178 MB GPT-2 read, converted and
#                        checked for parity (2.0x once the allocator reuses an earlier load's pages)
GONE_SESSIONS = 1024  # sessions whose gone models are remembered (the longest gone is forgotten first)


@dataclass
class _Held:
    """A source's model in memory: its weights' and its tokenizer's bytes; ``bytes()`` adds its cached views."""

    model: object
    tokenizer: object
    weight_bytes: int
    tokenizer_bytes: int

    def bytes(self) -> int:
        return self.weight_bytes + self.tokenizer_bytes + caches.owner_bytes(self.model)


_lock = threading.RLock()
_held: OrderedDict[tuple, _Held] = OrderedDict()  # source key -> its model in memory, least recently used first
_listed: dict[str | None, OrderedDict[str, Opened]] = {}  # session -> its opened models by name, oldest first
_gone: OrderedDict[str | None, OrderedDict[str, str]] = OrderedDict()  # session -> name -> why that model went
_last_seen: dict[str | None, float] = {}  # session with opened models -> when it last named a model or opened one


# ----------------------------------------------------------------------------------------------
# Memory: one model per source, bounded
# ----------------------------------------------------------------------------------------------


def shipped_key(info: CheckpointInfo) -> tuple:
    """A shipped checkpoint's source: its folder at the version of its files now."""
    return "shipped", str(info.path.resolve()), catalog.files_signature(info.path)


def hold(key: tuple, model, tokenizer, folder) -> None:
    """Hold ``model`` as ``key``'s, the newest, its weights laid out for decoding (``lay_out_for_decoding``); older
    sources go while all of it is over the bound."""
    with _lock:
        if key[0] == "shipped":  # an older version of the same folder
            for stale in [k for k in _held if k[:2] == key[:2] and k != key]:
                caches.release(_held.pop(stale).model)
        model.requires_grad_(False).lay_out_for_decoding()  # before any reader: one layout, for every request
        _held[key] = _Held(model, tokenizer, model_bytes(model), tokenizer_bytes(folder))
        _held.move_to_end(key)
    if not shrink():  # (a shrink that let models go collected and trimmed already)
        gc.collect()  # the load's copies (transformers' model, the file's tensors) are gone: their pages go back
        machine.trim_heap()


def shrink(incoming: int = 0) -> list[tuple]:
    """Let the least recently used sources go while the whole is over ``SCRATCH_HUB_MEMORY``: their cached views go
    with them. ``incoming``: the bytes of a model about to load, room made for it first (every source may go);
    otherwise the newest stays. Returns the keys let go."""
    budget = limits()["memory"] - incoming
    with _lock:
        sizes = {key: held.bytes() for key, held in _held.items()}
        total, gone = sum(sizes.values()), []
        for key in list(_held)[:len(_held) - (0 if incoming else 1)]:
            if total <= budget:
                break
            total -= sizes[key]
            caches.release(_held.pop(key).model)
            gone.append(key)
    if gone:
        gc.collect()  # a model's modules refer to each other: their memory returns at a collection, not at once
        machine.trim_heap()
    return gone


def load_peak_bytes(n_parameters: int, folder) -> int:
    """What loading a model takes at its peak, room made for it first: its tokenizer, and ``LOAD_PEAK_WEIGHTS`` times
    its float32 weights (the model as read, ours converted from it, the file's pages) until the extra copies go."""
    return LOAD_PEAK_WEIGHTS * 4 * n_parameters + tokenizer_bytes(folder)


def held_bytes() -> dict[tuple, int]:
    """Each source in memory and what it costs now (weights, tokenizer, cached views), least recently used first."""
    with _lock:
        return {key: held.bytes() for key, held in _held.items()}


def _in_memory(key: tuple) -> _Held | None:
    with _lock:
        held = _held.get(key)
        if held is not None:
            _held.move_to_end(key)
        return held


def _loaded(key: tuple, what: CheckpointInfo | Opened) -> tuple:
    """(model, tokenizer) of a source: from memory, else loaded from its files (one load at a time)."""
    held = _in_memory(key)
    if held is None:
        with catalog.LOAD_LOCK:
            held = _in_memory(key)
            if held is None:
                folder = what.path if isinstance(what, CheckpointInfo) else what.folder
                shrink(load_peak_bytes(what.n_parameters or 0, folder))
                model, tokenizer = _load(what)
                hold(key, model, tokenizer, folder)
                return model, tokenizer
    return held.model, held.tokenizer


def _load(what: CheckpointInfo | Opened) -> tuple:
    if isinstance(what, CheckpointInfo):
        try:
            return load_checkpoint(what.path)
        except CheckpointError as error:
            raise InputProblem(str(error)) from None
    if not what.folder.exists():
        raise InputProblem(f"The files of {echo(what.name)} are gone: open it again.")
    model, _, tokenizer = load_folder(what.folder, what.plan, what.name)
    return model, tokenizer


def shipped_model(info: CheckpointInfo) -> tuple:
    """(model in eval mode, tokenizer) of a shipped checkpoint, loaded once per version of its files and shared by
    every request; a damaged one is refused (``InputProblem`` with ``checkpointing.loading``'s reasons)."""
    return _loaded(shipped_key(info), info)


# ----------------------------------------------------------------------------------------------
# Names: the shipped checkpoints, everyone's; each session's opened models, its own
# ----------------------------------------------------------------------------------------------


def resolve(name, root=None) -> tuple[CheckpointInfo, object, object]:
    """(info, model, tokenizer) of a model name from a menu or an API call, for the visitor asking: a shipped
    checkpoint, else one of the visitor's own opened models. InputProblem when the name is not text, names no model
    this visitor has (or one that went: why), or names a damaged checkpoint (with the reasons)."""
    name = model_name(name)
    _seen(current().session)
    found = catalog.discover_checkpoints(root)
    if name in found:
        info = found[name]
        if not info.usable:
            raise InputProblem(f"{name} cannot be used: {'; '.join(info.problems)}")
        model, tokenizer = shipped_model(info)
        shrink()  # what the views cached since counts too
        return info, model, tokenizer
    session = current().session
    with _lock:
        opened = _listed.get(session, {}).get(name)
        why = _gone.get(session, {}).get(name)
        own = list(_listed.get(session, {}))
    if opened is None:
        if why is not None:
            raise InputProblem(why)
        if not found and not own:
            raise InputProblem(catalog.no_checkpoints_message())
        raise InputProblem(f"Unknown model {echo(name)}; pick one of: {', '.join([*found, *own])}.")
    model, tokenizer = _loaded(opened.key, opened)
    shrink()
    return CheckpointInfo(name, opened.folder, model.config, opened.n_parameters), model, tokenizer


def opened(name) -> Opened | None:
    """The visitor's own opened model called ``name`` (None: they have none by that name)."""
    with _lock:
        return _listed.get(current().session, {}).get(name) if isinstance(name, str) else None


def owned(session: str | None) -> dict[str, Opened]:
    """A session's opened models by name, oldest first."""
    with _lock:
        return dict(_listed.get(session, {}))


def choices(session: str | None) -> list[tuple[str, str]]:
    """(menu line, name) of a session's opened models: its Hub models, then its uploads and trained models."""
    with _lock:
        mine = list(_listed.get(session, {}).values())
    return [(o.label, o.name) for o in mine if o.source == "hub"] + [(o.label, o.name) for o in mine if o.source != "hub"]


def described(key: tuple) -> Opened | None:
    """What an earlier open of the source ``key`` found (its parity), whichever session opened it."""
    with _lock:
        return next((o for mine in _listed.values() for o in mine.values() if o.key == key), None)


def holds(repo_id: str, revision: str | None) -> bool:
    """Whether the weights of a Hub repo's revision are in memory now, whoever opened it."""
    with _lock:
        return any((o.repo_id, o.revision) == (repo_id, revision) and o.key in _held
                   for mine in _listed.values() for o in mine.values())


def hub_commits(listed: bool = False) -> set[tuple[str, str]]:
    """(repo_id, commit) of the Hub models in memory now; ``listed``: and of those any session lists (the Hub cache
    keeps their files)."""
    with _lock:
        found = {key[1:] for key in _held if key[0] == "hub"}
        if listed:
            found |= {(o.repo_id, o.commit) for mine in _listed.values() for o in mine.values() if o.source == "hub"}
        return found


def let_go(name) -> None:
    """The visitor's model ``name`` leaves memory (its cached views with it); it stays listed, and loads again from
    its files when it is used (Watch it learn holds one revision at a time this way)."""
    found = opened(name)
    with _lock:
        held = _held.pop(found.key, None) if found is not None else None
    if held is not None:
        caches.release(held.model)
        del held
        gc.collect()
        machine.trim_heap()


def add(opened_: Opened, session: str | None) -> Opened:
    """List ``opened_`` among ``session``'s models; its oldest of the same kind beyond the session's quota go."""
    hub = opened_.source == "hub"
    quota = HUB_MODELS if hub else OWN_MODELS
    with _lock:
        mine = _listed.setdefault(session, OrderedDict())
        _last_seen[session] = time.monotonic()
        mine.pop(opened_.name, None)
        mine[opened_.name] = opened_
        same_kind = [name for name, o in mine.items() if (o.source == "hub") == hub]
        dropped = [mine.pop(name) for name in same_kind[:-quota]]
        _gone.get(session, {}).pop(opened_.name, None)
        kind = "Hub models" if hub else "uploads and trained models"
        _remember_gone(session, [old.name for old in dropped], f"each visitor keeps their {quota} newest {kind}, and "
                       "you opened newer ones since")
    for old in dropped:
        _release(old)
    return opened_


def _remember_gone(session: str | None, names: list[str], why: str) -> None:
    """Remember why ``names`` went from ``session``, to tell it when it names one again (the lock held)."""
    if not names:
        return
    gone = _gone.setdefault(session, OrderedDict())
    _gone.move_to_end(session)
    for name in names:
        gone[name] = f"{echo(name)} was closed: {why}. Open it again to use it."
    while len(gone) > GONE_REMEMBERED:
        gone.popitem(last=False)
    while len(_gone) > GONE_SESSIONS:
        _gone.popitem(last=False)


def _release(old: Opened) -> None:
    """A model no session lists any more: an upload's weights and files go (a Hub commit's stay in the LRU, shared)."""
    if old.source == "hub" or described(old.key) is not None:
        return
    with _lock:
        held = _held.pop(old.key, None)
    if held is not None:
        caches.release(held.model)
    if uploads.ROOT in old.folder.parents:
        shutil.rmtree(old.folder, ignore_errors=True)


def forget_session(session: str | None) -> list[str]:
    """A browser session went (its page closed): its models leave the registry, their files too. Returns their names."""
    with _lock:
        mine = _listed.pop(session, OrderedDict())
        _last_seen.pop(session, None)
        _remember_gone(session, list(mine), "this page's session with the app ended (the page was closed or lost its "
                       "connection)")
    for old in mine.values():
        _release(old)
    return list(mine)


def _seen(session: str | None) -> None:
    """``session`` is using the app now (it named a model): its uploads are not idle."""
    with _lock:
        if session in _listed:
            _last_seen[session] = time.monotonic()


def free_idle_uploads() -> list[str]:
    """The uploads and trained models of every other page that has named no model for ``SCRATCH_UPLOAD_IDLE_SECONDS``
    go, their files too: a page that closed gives them up at once (``forget_session``), but one that never closes (a
    script's sessions) would hold all visitors' upload disk for ever. Their Hub models stay listed. Returns the names."""
    idle, asking, freed = UPLOAD_IDLE_SECONDS.value(), current().session, []
    with _lock:
        now = time.monotonic()
        for session, seen in list(_last_seen.items()):
            mine = _listed.get(session, {})
            own = [name for name, o in mine.items() if o.source != "hub"]
            if session == asking or now - seen < idle or not own:
                continue
            freed += [(name, mine.pop(name)) for name in own]
            _remember_gone(session, own, f"this page had named no model for {_duration(idle)} when "
                           "another visitor's upload needed the disk its uploads took")
    for _, old in freed:
        _release(old)
    return [name for name, _ in freed]


def _duration(seconds: float) -> str:
    return f"{seconds / 60:g} minutes" if seconds >= 120 else f"{seconds:g} s"


def forget_all() -> None:
    """Every opened model and every model in memory go (tests; a benchmark's fresh start)."""
    for session in list(_listed):
        forget_session(session)
    with _lock:
        _gone.clear()
        for key in list(_held):
            caches.release(_held.pop(key).model)


def memory_line() -> str:
    """What the models in memory take, against the bound: a line for a status."""
    total = sum(held_bytes().values())
    return f"models in memory: {megabytes(total)} of {megabytes(limits()['memory'])}"
