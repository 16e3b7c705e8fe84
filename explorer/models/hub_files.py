"""The Hub a model comes from and what is fetched from it: repo ids and revisions checked by the Hub's own rules; the
endpoint and cache as the environment sets them now; whose token a request carries (``access``); a visitor's
message for each way the Hub fails; and ``fetch``: the repo's file sizes from the Hub's metadata, checked
(``plans.plan``: families, parameters, bytes, what the config shows cannot be converted) and room made on disk
(``hub_cache``) before the weights come, then only the planned data files downloaded (a repo's ``.py`` files never
are), each cut off where it runs past its listed size.

Whose token: the machine's (``HF_TOKEN``, the local login) is the operator's. It acts only for the operator: Python
outside any request, or a request to an app that is not a Space and listens on loopback only (``serving_on``, which
the app's launch calls). Anyone else's request carries their own OAuth token or none (``token=False``: never a
fall-back to ``HF_TOKEN``). The operator may lend the machine's token to visitors' downloads (rate limits) with
``SCRATCH_HUB_SHARE_TOKEN=1``; private and gated repos are refused to every visitor all the same.
"""

import ipaddress
import os
import re
from pathlib import Path
from typing import NamedTuple
from urllib.parse import unquote, urlparse

from huggingface_hub import HfApi, constants, get_token, hf_hub_download, snapshot_download
from huggingface_hub import errors as hub_errors
from huggingface_hub.utils import tqdm as hub_tqdm
from huggingface_hub.file_download import repo_folder_name
from huggingface_hub.utils import validate_repo_id

from explorer.core import visitor
from explorer.core.inputs import InputProblem, echo, error_text
from explorer.models.plans import VOCAB_AND_MERGES, Plan, check_shard_index, file_cap, plan
from explorer.models.tokenizer_file import check_tokenizer_file, read_vocab_and_merges

HTTP_TIMEOUT = 10  # seconds one Hub call may take to answer (model_info, each file's HEAD)
SHARE_TOKEN_ENV = "SCRATCH_HUB_SHARE_TOKEN"  # "1": visitors' public downloads may carry the machine's token


# ----------------------------------------------------------------------------------------------
# What a visitor types
# ----------------------------------------------------------------------------------------------


REPO_ID_RULE = ("A repo id is `name` or `owner/name`: letters, digits, `-`, `_` and `.` (not first or last), at most "
                "96 characters, such as `openai-community/gpt2`.")


_AT_REVISION = ("tree", "blob", "resolve")  # a page's address goes on /<this>/<revision>/...


def _typed_url(typed: str) -> bool:
    """Whether what was typed is a page's address rather than a repo id."""
    return "://" in typed or typed.startswith(("huggingface.co/", "hf.co/"))


def _from_url(text: str) -> tuple[str, str | None]:
    """``owner/name`` of a model page's address (``https://huggingface.co/owner/name``) on this endpoint or
    huggingface.co, and the revision the address is at (``.../tree/step1000``, ``.../blob/main/config.json``;
    ``refs%2Fpr%2F1`` is ``refs/pr/1``) or None; anything else that looks like an address is refused."""
    url = urlparse(text if "://" in text else "https://" + text)
    hosts = {urlparse(endpoint()).netloc, "huggingface.co", "www.huggingface.co", "hf.co"}
    parts = [p for p in url.path.split("/") if p]
    if url.netloc not in hosts or not parts or parts[0] in ("datasets", "spaces"):
        raise InputProblem(f"{echo(text)} is not the address of a model on the Hub. Give its repo id, or its page's "
                           f"address (`https://huggingface.co/owner/name`). {REPO_ID_RULE}")
    owner_and_name = 2 if len(parts) >= 2 and parts[1] not in _AT_REVISION else 1
    rest = parts[owner_and_name:]
    revision = unquote(rest[1]) if len(rest) >= 2 and rest[0] in _AT_REVISION else None
    return "/".join(parts[:owner_and_name]), revision


def check_repo_id(repo_id) -> str:
    """A repo id by the Hub's own rules (``huggingface_hub.utils.validate_repo_id``): ``name`` or ``owner/name``,
    letters, digits, ``-``, ``_``, ``.``, at most 96 characters; a model page's address gives its repo id."""
    if not isinstance(repo_id, str) or not repo_id.strip():
        raise InputProblem("Type a Hub repo id, such as `openai-community/gpt2` or `EleutherAI/pythia-14m`.")
    typed = repo_id.strip()
    repo_id = _from_url(typed)[0] if _typed_url(typed) else typed
    if repo_id.count("/") > 1:
        raise InputProblem(f"{echo(typed)} is not a Hub repo id: it has {repo_id.count('/')} `/`. {REPO_ID_RULE}")
    try:
        validate_repo_id(repo_id)
    except hub_errors.HFValidationError:
        raise InputProblem(f"{echo(typed)} is not a Hub repo id. {REPO_ID_RULE}") from None
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


def check_repo_and_revision(repo_id, revision=None) -> tuple[str, str | None]:
    """``check_repo_id`` and ``check_revision`` together: a model page's address at a revision
    (``https://huggingface.co/EleutherAI/pythia-14m/tree/step1000``) opens that revision when none is typed, and
    must name the one typed when one is."""
    checked, revision = check_repo_id(repo_id), check_revision(revision)
    typed = repo_id.strip()
    at = check_revision(_from_url(typed)[1]) if _typed_url(typed) else None
    if at is not None and revision is not None and at != revision:
        raise InputProblem(f"The address {echo(typed)} is at revision {echo(at)}, but the revision box says "
                           f"{echo(revision)}: empty the box to open {echo(at)}, or give the repo's address without "
                           "`/tree/...`.")
    return checked, revision if revision is not None else at


# ----------------------------------------------------------------------------------------------
# The Hub as the environment sets it now, and what a visitor reads when it fails
# ----------------------------------------------------------------------------------------------


def endpoint() -> str:
    """``HF_ENDPOINT`` as it is now (huggingface_hub reads it once, at import)."""
    return os.environ.get("HF_ENDPOINT") or constants.ENDPOINT


# ----------------------------------------------------------------------------------------------
# Whose token a request carries
# ----------------------------------------------------------------------------------------------

_serving = {"host": None}  # the host the app listens on (``serving_on``); None: no app launched in this process


def serving_on(host: str | None) -> None:
    """Record the host the app listens on (the launch's ``server_name``): loopback only, or reachable by others."""
    _serving["host"] = host


def on_space() -> bool:
    """Whether the app runs as a Hugging Face Space (the Hub sets SPACE_ID there)."""
    return bool(os.environ.get("SPACE_ID"))


def loopback_only() -> bool:
    """Whether the app listens on this machine's loopback alone (127.0.0.0/8, ::1, localhost): no one else reaches it."""
    host = (_serving["host"] or "").strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def for_operator() -> bool:
    """Whether the one asking is the operator: Python outside any request (``visitor.LOCAL`` itself), or a request to
    an app that is not a Space and listens on loopback only."""
    return visitor.current() is visitor.LOCAL or (not on_space() and loopback_only())


def sharing_token() -> bool:
    return os.environ.get(SHARE_TOKEN_ENV, "").strip().lower() in ("1", "true", "yes", "on")


class Access(NamedTuple):
    """The token a request carries (False: none at all, never the machine's by fall-back) and whether private and
    gated repos are open to it (the operator's only)."""

    token: str | bool
    restricted_ok: bool
    whose: str  # "operator", "visitor" (their own OAuth token), "shared" (the machine's, lent), "anonymous"


def access() -> Access:
    """Whose token the Hub sees for the request being served (the module's docstring says the rule)."""
    own = visitor.current().oauth_token
    if for_operator():
        return Access(own or get_token() or False, True, "operator")
    if own:
        return Access(own, False, "visitor")
    if sharing_token() and get_token():
        return Access(get_token(), False, "shared")
    return Access(False, False, "anonymous")


def token() -> str | bool:
    """The token for a read from the Hub in the request being served (``access``)."""
    return access().token


def refuse_restricted(where: str, info) -> None:
    """Refuse a private or gated repo to anyone but the operator (``info``: the Hub's ``model_info``)."""
    if (getattr(info, "private", False) or getattr(info, "gated", False)) and not access().restricted_ok:
        kind = "private" if getattr(info, "private", False) else "gated"
        raise InputProblem(f"{echo(where)} is a {kind} repo: this app opens private and gated repos only for the person "
                           "running it on their own machine. Open a public model.")


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


class TooLarge(InputProblem):
    """A download ran past the size the Hub's listing gave for it: cut off (huggingface_hub deletes the partial file)."""


def _progress_class(job, name: str, limit: int):
    """A tqdm class that adds each downloaded chunk's bytes to ``job`` and cuts the download off (``TooLarge``, raised
    before the chunk is written) once the file runs past ``limit`` bytes, or when the job was abandoned."""

    class Progress(hub_tqdm):
        received = 0

        def update(self, n=1):
            self.received += n or 0
            if self.received > limit:
                raise TooLarge(f"{name} ran past the {limit:,} bytes the Hub's listing gives for it: the download was "
                               "cut off and its partial file deleted.")
            job.report(add_bytes=n or 0)
            return super().update(n)

    return Progress


def _download(job, name: str, size: int | None, common: dict) -> Path:
    """One planned file, refused when the listing says it is over its cap, cut off when it runs past the listing."""
    limit = min(size if size is not None else file_cap(name), file_cap(name))
    if size is not None and size > file_cap(name):
        raise InputProblem(f"{common['repo_id']}'s {name} is {size:,} bytes; this app reads at most {file_cap(name):,}.")
    return Path(hf_hub_download(filename=name, tqdm_class=_progress_class(job, name, limit), **common))


def fetch(job, repo_id: str, revision: str | None, claim) -> tuple[Path, str, Plan]:
    """Ask the Hub what the repo holds, check it, download what is needed: (snapshot folder, commit, plan). ``job``
    (a ``jobs.Job``) hears each phase (``report``) and the bytes to come (``total_bytes``); ``claim`` (a
    ``hub_cache.Claim``) pins the commit and makes room on disk before the weights come. The request's token
    (``access``) is the one every call carries."""
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
    token_ = token()
    info = HfApi(endpoint=endpoint(), token=token_).model_info(repo_id, revision=revision, files_metadata=True,
                                                               timeout=HTTP_TIMEOUT)
    refuse_restricted(repo_id, info)
    sizes = {s.rfilename: s.size for s in info.siblings or []}
    if "config.json" not in sizes:
        raise InputProblem(f"{where} lacks config.json: it cannot be opened.")
    claim.pin(info.sha)
    common = dict(repo_id=repo_id, revision=info.sha, cache_dir=cache_dir(), endpoint=endpoint(), token=token_,
                  etag_timeout=HTTP_TIMEOUT)
    job.report("reading config.json")
    config_path = _download(job, "config.json", sizes["config.json"], common)
    plan_ = plan(where, sizes, config_path.read_bytes())
    claim.reserve(where, {n: sizes.get(n) for n in plan_.files})
    job.total_bytes = sum(sizes.get(n) or 0 for n in plan_.files)
    for number, name in enumerate(plan_.files, 1):
        job.report(f"downloading {name} ({number} of {len(plan_.files)})")
        path = _download(job, name, sizes.get(name), common)
        if name == "tokenizer.json":  # before the weights: a tokenizer refused when loaded costs no weights' download
            check_tokenizer_file(path, where)
        if name == VOCAB_AND_MERGES[-1]:  # likewise: the last of the tokenizer's files (plans.tokenizer_files)
            read_vocab_and_merges(path.parent, plan_.model_type, where)
        if name.endswith(".index.json"):  # a sharded checkpoint: its shards must be the ones listed
            check_shard_index(path.read_bytes(), name, plan_.files, where)
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

