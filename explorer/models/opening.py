"""Opening a model as OUR Transformer, for the visitor asking (``explorer.core.visitor.current()``): a Hub repo at a
revision (``start_open`` starts, or joins, the one job that fetches, checks, converts and measures parity, shared by
every visitor; ``open_repo`` waits for it; a refused one leaves none of its files in the Hub cache), or an uploaded
zip of a save_pretrained folder (``open_upload``; the zip Train one yourself made is one). What opens joins that
visitor's menus (``registry.add``); its weights are held once (``registry.hold``), whoever opened them.
"""

import secrets
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from explorer.models import catalog, hub_cache, hub_files, registry, uploads
from explorer.models.converting import load_folder
from explorer.models.held import Opened
from explorer.models.jobs import Job, run_shared
from explorer.models.plans import family_name, plan
from explorer.core.inputs import InputProblem
from explorer.core.visitor import current


# ----------------------------------------------------------------------------------------------
# A Hub repo: fetched and loaded once, whoever asks; listed for each visitor who opens it
# ----------------------------------------------------------------------------------------------

HUB_PREFIX = "hub:"  # before a Hub model's name that a shipped checkpoint has: the shipped name keeps its meaning


def _menu_name(repo_id: str, revision: str | None) -> str:
    """The menu name of a Hub model: ``repo@revision``, never a shipped checkpoint's name (a repo at the endpoint's
    root may be called ``shakespeare-main``: it is listed as ``hub:shakespeare-main``)."""
    name = f"{repo_id}@{revision}" if revision else repo_id
    return HUB_PREFIX + name if name in catalog.discover_checkpoints() else name


@dataclass
class Opening:
    """A Hub open under way for one browser session: ``follow`` the shared job's progress; its ``outcome()`` lists
    the model in that session's menus."""

    job: Job
    session: str | None

    def follow(self, every: float = 0.5):
        return self.job.follow(every)

    def outcome(self) -> Opened:
        return registry.add(self.job.outcome(), self.session)


def start_open(repo_id, revision=None) -> Opening:
    """Check what was typed and start (or join) the job that opens it, for the visitor asking; follow it, then
    ``outcome()``."""
    repo_id, revision = hub_files.check_repo_and_revision(repo_id, revision)
    name = _menu_name(repo_id, revision)

    def work(job: Job) -> Opened:
        start = time.perf_counter()
        with hub_cache.claim(repo_id) as claim:  # refused: its files leave the cache
            folder, commit, plan_ = hub_files.fetch(job, repo_id, revision, claim)
            key = ("hub", repo_id, commit)
            known = registry.described(key)
            if known is None:  # not opened by anyone yet: loaded and measured (else loaded again when used, if it went)
                job.report("converting to our Transformer and measuring parity", hub=False)
                with catalog.LOAD_LOCK:  # one model loading and converting at a time: room made for it, then held
                    registry.shrink(registry.load_peak_bytes(plan_.n_parameters, folder))
                    model, parity, tokenizer = load_folder(folder, plan_, name)
                    registry.hold(key, model, tokenizer, folder)
        n_parameters = model.num_parameters() if known is None else known.n_parameters  # as loaded, not as the config says
        return Opened(name, "hub", family_name(plan_.model_type), plan_.model_type, n_parameters, commit,
                      parity if known is None else known.parity, folder, plan_, key, repo_id, revision,
                      time.perf_counter() - start)

    return Opening(run_shared(("hub", name), work), current().session)


def open_repo(repo_id, revision=None) -> Opened:
    """Open a Hub repo (waiting for it): its menu name, family, parameters, commit and parity."""
    return start_open(repo_id, revision).outcome()


# ----------------------------------------------------------------------------------------------
# A visitor's own model: an upload, or a model trained in the app
# ----------------------------------------------------------------------------------------------


def _session_name(title: str) -> str:
    """A menu name of a session's own model: the title and a random part nobody else can guess."""
    return f"yours/{title}-{secrets.token_hex(4)}"


def open_folder(folder: Path, title: str, source: str) -> Opened:
    """Open a save_pretrained folder on disk for the visitor asking only, with the Hub's checks and limits."""
    start = time.perf_counter()
    where = {"upload": "Your upload", "trained": "Your trained model"}[source]
    sizes = {p.name: p.stat().st_size for p in folder.iterdir() if p.is_file()}
    if "config.json" not in sizes:
        raise InputProblem(f"{where} lacks config.json: give the zip of a save_pretrained folder.")
    if source == "trained" and "tokenizer.json" not in sizes:
        raise InputProblem("This model was trained on random tokens: it has no tokenizer, and every view reads text. "
                           "Train one on text to open it in every tab.")
    plan_ = plan(where, sizes, (folder / "config.json").read_bytes())
    name = _session_name(title)
    key = ("folder", str(folder))
    with catalog.LOAD_LOCK:  # one model loading and converting at a time: room made for it, then held
        registry.shrink(registry.load_peak_bytes(plan_.n_parameters, folder))
        model, parity, tokenizer = load_folder(folder, plan_, where)
        registry.hold(key, model, tokenizer, folder)
    opened_ = Opened(name, source, family_name(plan_.model_type), plan_.model_type, model.num_parameters(), None, parity,
                     folder, plan_, key, seconds=time.perf_counter() - start)
    return registry.add(opened_, current().session)


def open_upload(path, source: str = "upload") -> Opened:
    """Open an uploaded zip of a save_pretrained folder for the visitor asking (``source`` "trained": the zip Train
    one yourself made). When all visitors' uploads have no room left for it, the uploads of pages idle for
    ``SCRATCH_UPLOAD_IDLE_SECONDS`` go first (``registry.free_idle_uploads``)."""
    try:
        folder, title = uploads.unpack_upload(path, source)
    except uploads.UploadsFull:
        if not registry.free_idle_uploads():
            raise
        folder, title = uploads.unpack_upload(path, source)  # the idle pages' uploads made room
    try:
        return open_folder(folder, title, source)
    except Exception:
        shutil.rmtree(folder, ignore_errors=True)
        raise

