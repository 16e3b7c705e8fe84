"""The Hub a model comes from and what is fetched from it: repo ids and revisions checked by the Hub's own rules; the
endpoint, token and cache as the environment sets them now; a visitor's message for each way the Hub fails; and
``fetch``: the repo's file sizes from the Hub's metadata, checked (``plans.plan``: families, parameters, bytes)
before the weights come, then only the planned data files downloaded (a repo's ``.py`` files never are).
"""

import json
import os
import re
from pathlib import Path

from huggingface_hub import HfApi, constants, hf_hub_download, snapshot_download
from huggingface_hub import errors as hub_errors
from huggingface_hub.utils import tqdm as hub_tqdm
from huggingface_hub.file_download import repo_folder_name
from huggingface_hub.utils import validate_repo_id

from explorer.core.inputs import InputProblem, echo, error_text
from explorer.models.plans import Plan, plan

HTTP_TIMEOUT = 10  # seconds one Hub call may take to answer (model_info, each file's HEAD)
MAX_CONFIG_BYTES = 1_000_000


# ----------------------------------------------------------------------------------------------
# What a visitor types
# ----------------------------------------------------------------------------------------------


def check_repo_id(repo_id) -> str:
    """A repo id by the Hub's own rules (``huggingface_hub.utils.validate_repo_id``): ``name`` or ``owner/name``,
    letters, digits, ``-``, ``_``, ``.``, at most 96 characters."""
    if not isinstance(repo_id, str) or not repo_id.strip():
        raise InputProblem("Type a Hub repo id, such as `openai-community/gpt2` or `EleutherAI/pythia-14m`.")
    repo_id = repo_id.strip()
    try:
        validate_repo_id(repo_id)
    except hub_errors.HFValidationError as error:
        raise InputProblem(f"{echo(repo_id)} is not a Hub repo id ({error_text(error)}). A repo id is `name` or "
                           "`owner/name`: letters, digits, `-`, `_` and `.`, at most 96 characters.") from None
    return repo_id


_BAD_REF = re.compile(r"(^[/.]|[/.]$|\.\.|//|@\{|\.lock$|/\.|[\x00-\x20\x7f~^:?*\[\\])")


def check_revision(revision) -> str | None:
    """A branch, tag or commit (the Hub is git: ``git check-ref-format``'s rules, and ``refs/pr/N``); empty: None,
    the default branch."""
    if revision is None or (isinstance(revision, str) and not revision.strip()):
        return None
    if not isinstance(revision, str) or len(revision.strip()) > 200 or _BAD_REF.search(revision.strip()):
        raise InputProblem(f"{echo(revision)} is not a revision: give a branch (`main`), a tag, a commit hash or "
                           "`refs/pr/N`, without spaces, `..`, `~`, `^`, `:`, `?`, `*`, `[` or `\\`; or leave it empty for "
                           "the default branch.")
    return revision.strip()


# ----------------------------------------------------------------------------------------------
# The Hub as the environment sets it now, and what a visitor reads when it fails
# ----------------------------------------------------------------------------------------------


def endpoint() -> str:
    """``HF_ENDPOINT`` as it is now (huggingface_hub reads it once, at import)."""
    return os.environ.get("HF_ENDPOINT") or constants.ENDPOINT


def token() -> str | None:
    return os.environ.get("HF_TOKEN") or None


def cache_dir() -> str:
    """``HF_HUB_CACHE``, else ``HF_HOME``/hub, as they are now."""
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    return os.path.join(os.environ["HF_HOME"], "hub") if os.environ.get("HF_HOME") else constants.HF_HUB_CACHE


def offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def hub_error_message(error: Exception) -> str:
    """What went wrong talking to the Hub, for a visitor."""
    if isinstance(error, hub_errors.GatedRepoError):  # a kind of RepositoryNotFoundError: asked first
        return "This repo is gated: it needs an access request on the Hub, and the app opens public models."
    if isinstance(error, hub_errors.RepositoryNotFoundError):
        return "No such model repo on the Hub (or it is private): check the repo id."
    if isinstance(error, hub_errors.RevisionNotFoundError):
        return "The repo has no such revision: give a branch, tag or commit it has, or leave it empty for the default branch."
    if isinstance(error, hub_errors.LocalEntryNotFoundError):
        return "This model is not in the local cache, and the app is offline (HF_HUB_OFFLINE): open it once online."
    if isinstance(error, hub_errors.EntryNotFoundError):
        return f"A file the repo lists is missing on the Hub ({error_text(error)})."
    name = type(error).__name__
    if "Timeout" in name or "Connect" in name or isinstance(error, (TimeoutError, ConnectionError)):
        return (f"The Hub at {echo(endpoint())} did not answer in time ({name}): it is unreachable or slow. "
                "Try again later.")
    if isinstance(error, hub_errors.HfHubHTTPError):  # an OSError: error_text would give its class name only
        response = getattr(error, "response", None)
        code = f"HTTP {response.status_code}" if response is not None else type(error).__name__
        said = f": {echo(error.server_message, limit=300)}" if getattr(error, "server_message", None) else ""
        return f"The Hub answered with an error ({code}{said})."
    return f"Opening failed ({error_text(error)})."


# ----------------------------------------------------------------------------------------------
# Fetching a repo's planned files
# ----------------------------------------------------------------------------------------------


def _progress_class(job):
    """A tqdm class that adds each downloaded chunk's bytes to ``job``."""

    class Progress(hub_tqdm):
        def update(self, n=1):
            job.report(add_bytes=n or 0)
            return super().update(n)

    return Progress


def fetch(job, repo_id: str, revision: str | None) -> tuple[Path, str, Plan]:
    """Ask the Hub what the repo holds, check it, download what is needed: (snapshot folder, commit, plan). ``job``
    (a ``jobs.Job``) hears each phase (``report``) and the bytes to come (``total_bytes``)."""
    where = f"{repo_id}" + (f"@{revision}" if revision else "")
    if offline():
        job.report("reading the local cache (offline)")
        folder = Path(snapshot_download(repo_id, revision=revision, cache_dir=cache_dir(), local_files_only=True))
        sizes = {p.name: p.stat().st_size for p in folder.iterdir() if p.is_file()}
        if "config.json" not in sizes:
            raise InputProblem(f"{where} lacks config.json: it cannot be opened.")
        plan_ = plan(where, sizes, (folder / "config.json").read_bytes())
        return folder, folder.name, plan_
    job.report("asking the Hub what the repo holds", hub=True)
    info = HfApi(endpoint=endpoint(), token=token()).model_info(repo_id, revision=revision, files_metadata=True,
                                                                timeout=HTTP_TIMEOUT)
    sizes = {s.rfilename: s.size for s in info.siblings or []}
    if "config.json" not in sizes:
        raise InputProblem(f"{where} lacks config.json: it cannot be opened.")
    if (sizes["config.json"] or 0) > MAX_CONFIG_BYTES:
        raise InputProblem(f"{where}'s config.json is {sizes['config.json']:,} bytes: not a model config.")
    common = dict(repo_id=repo_id, revision=info.sha, cache_dir=cache_dir(), endpoint=endpoint(), token=token(),
                  etag_timeout=HTTP_TIMEOUT)
    job.report("reading config.json")
    config_path = Path(hf_hub_download(filename="config.json", **common))
    plan_ = plan(where, sizes, config_path.read_bytes())
    job.total_bytes = sum(sizes.get(n) or 0 for n in plan_.files)
    for number, name in enumerate(plan_.files, 1):
        job.report(f"downloading {name} ({number} of {len(plan_.files)})")
        path = Path(hf_hub_download(filename=name, tqdm_class=_progress_class(job), **common))
        if name.endswith(".index.json"):  # a sharded checkpoint: its shards must be the ones listed
            shards = set(json.loads(path.read_text()).get("weight_map", {}).values())
            if not shards <= set(plan_.files):
                raise InputProblem(f"{where}'s {name} names shards the repo lacks: {echo(sorted(shards - set(plan_.files)))}.")
    _remember_ref(repo_id, revision or "main", info.sha)
    return config_path.parent, info.sha, plan_


def _remember_ref(repo_id: str, revision: str, commit: str) -> None:
    """Write the cache's refs/<revision> -> commit (files were fetched by commit, which writes no ref), so the repo
    opens by name offline too (the cache layout: models--owner--name/refs/<revision>)."""
    if revision == commit:
        return
    ref = Path(cache_dir()) / repo_folder_name(repo_id=repo_id, repo_type="model") / "refs" / revision
    ref.parent.mkdir(parents=True, exist_ok=True)
    ref.write_text(commit)

