"""Opening a model as OUR Transformer: a Hub repo at a revision (``start_open`` starts, or joins, the one job that
fetches, checks, converts and measures parity; ``open_repo`` waits for it), or an uploaded zip of a save_pretrained
folder for one browser session (``open_upload``; the zip Train one yourself made is one). What opens is registered
(``held.register``) and joins the menus.
"""

import secrets
import shutil
import time
from pathlib import Path

from explorer.models import held, hub_files, uploads
from explorer.models.converting import load_folder
from explorer.models.held import Opened
from explorer.models.jobs import Job, run_shared
from explorer.models.plans import family_name, plan
from explorer.core.inputs import InputProblem


# ----------------------------------------------------------------------------------------------
# A Hub repo, for every visitor
# ----------------------------------------------------------------------------------------------


def _menu_name(repo_id: str, revision: str | None) -> str:
    return f"{repo_id}@{revision}" if revision else repo_id


def start_open(repo_id, revision=None) -> Job:
    """Check what was typed and start (or join) the job that opens it; follow the job, then ``job.outcome()``."""
    repo_id, revision = hub_files.check_repo_id(repo_id), hub_files.check_revision(revision)
    name = _menu_name(repo_id, revision)

    def work(job: Job) -> Opened:
        start = time.perf_counter()
        folder, commit, plan_ = hub_files.fetch(job, repo_id, revision)
        job.report("converting to our Transformer and measuring parity", hub=False)
        model, parity, tokenizer = load_folder(folder, plan_, name)
        opened_ = Opened(name, "hub", family_name(plan_.model_type), plan_.model_type, plan_.n_parameters, commit,
                         parity, folder, plan_, None, repo_id, revision, time.perf_counter() - start)
        return held.register(opened_, model, tokenizer)

    return run_shared(("hub", name), work)


def open_repo(repo_id, revision=None) -> Opened:
    """Open a Hub repo (waiting for it): its menu name, family, parameters, commit and parity."""
    return start_open(repo_id, revision).outcome()


# ----------------------------------------------------------------------------------------------
# A session's own model: an upload, or a model trained in the app
# ----------------------------------------------------------------------------------------------


def _session_name(title: str) -> str:
    """A menu name of a session's own model: the title and a random part nobody else can guess."""
    return f"yours/{title}-{secrets.token_hex(4)}"


def open_folder(folder: Path, title: str, source: str, session: str | None) -> Opened:
    """Open a save_pretrained folder on disk for ``session`` only, with the Hub's checks and limits."""
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
    model, parity, tokenizer = load_folder(folder, plan_, where)
    opened_ = Opened(name, source, family_name(plan_.model_type), plan_.model_type, plan_.n_parameters, None, parity,
                     folder, plan_, session, seconds=time.perf_counter() - start)
    held.register(opened_, model, tokenizer)
    held.keep_for_session(session, name)
    return opened_


def open_upload(path, session: str | None = None, source: str = "upload") -> Opened:
    """Open an uploaded zip of a save_pretrained folder for this browser session (``source`` "trained": the zip
    Train one yourself made)."""
    folder, title = uploads.unpack_upload(path, source)
    try:
        return open_folder(folder, title, source, session)
    except Exception:
        shutil.rmtree(folder, ignore_errors=True)
        raise

