"""Models from outside the shipped folders, opened as OUR Transformer: a Hub repo (``start_open`` / ``open_repo``),
a zip of a ``save_pretrained`` folder (``open_upload``; Train one yourself's download is one).

Nothing a repository holds ever runs. Only data files are fetched (config.json, tokenizer files, weights): a repo's
``.py`` files are never downloaded and its ``auto_map`` is dropped from the config before any class is chosen; the
class is transformers' own for the config's ``model_type`` (or ours for ``scratch_transformer``). Safetensors are
preferred; pickled weights are read only with ``weights_only=True``. Size is checked before the weights come:
parameters counted from the config on the meta device (no memory), bytes from the Hub's file metadata.

The model is then converted (``modeling.convert.from_transformers``) and its parity measured:
``parity = max |logits_ours - logits_transformers|`` on ``PARITY_IDS``.

Concurrency: one job per (repo, revision) however many ask (``_jobs``); downloads run side by side; every
``from_pretrained`` runs behind ``catalog.LOAD_LOCK``, the lock the shipped checkpoints load behind (transformers'
loading is not thread-safe). A requester follows its job's progress and gives up with a clear message when the Hub
sends nothing for ``STALL_SECONDS`` (a load queued behind the lock is not a stall); nobody else waits on it. Loaded
models sit in ``HELD``, an LRU bounded by memory: an evicted model is only dropped from the LRU, so a request holding
it finishes, and its menu name loads it again from the files on disk.
"""

import atexit
import json
import os
import re
import secrets
import shutil
import tempfile
import threading
import time
import zipfile
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import torch
from huggingface_hub import HfApi, constants, hf_hub_download, snapshot_download
from huggingface_hub import errors as hub_errors
from huggingface_hub.utils import tqdm as hub_tqdm
from huggingface_hub.file_download import repo_folder_name
from huggingface_hub.utils import validate_repo_id

from modeling import ScratchTransformerConfig, ScratchTransformerForCausalLM
from modeling import convert

from explorer.models import catalog
from explorer.core.inputs import InputProblem, echo, error_text

MAX_PARAMETERS_ENV, MAX_PARAMETERS = "SCRATCH_HUB_MAX_PARAMETERS", 200_000_000
MAX_BYTES_ENV, MAX_BYTES = "SCRATCH_HUB_MAX_BYTES", 1_000_000_000
MEMORY_ENV, MEMORY = "SCRATCH_HUB_MEMORY", 2_000_000_000
HTTP_TIMEOUT = 10  # seconds one Hub call may take to answer (model_info, each file's HEAD)
STALL_SECONDS = 20  # a job that moves nothing for this long is given up by its requesters (well within 30 s)
OURS = ScratchTransformerConfig.model_type
FAMILIES = {"gpt2": "GPT-2", "llama": "Llama", "qwen2": "Qwen2", "mistral": "Mistral", "gpt_neox": "GPT-NeoX (Pythia)",
            OURS: "ours (scratch_transformer)"}
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
OPTIONAL_FILES = ("generation_config.json",)
WEIGHTS = {"safetensors": ("model.safetensors", "model.safetensors.index.json"),
           "pickle": ("pytorch_model.bin", "pytorch_model.bin.index.json")}
MAX_CONFIG_BYTES = 1_000_000
MAX_SESSION_MODELS = 2  # uploads and trained models a browser session keeps (its oldest goes)
PARITY_IDS = (torch.arange(1, 33) * 7919)  # a fixed input (taken modulo the vocabulary) for the parity figure


def _limit(env: str, default: int) -> int:
    try:
        return int(float(os.environ.get(env, default)))
    except ValueError:
        return default


def megabytes(n: int) -> str:
    return f"{n / 1e6:,.3g} MB" if n < 1e9 else f"{n / 1e9:,.3g} GB"


def limits() -> dict[str, int]:
    """The limits in force now: parameters, weight bytes, memory of the models held."""
    return {"parameters": _limit(MAX_PARAMETERS_ENV, MAX_PARAMETERS), "bytes": _limit(MAX_BYTES_ENV, MAX_BYTES),
            "memory": _limit(MEMORY_ENV, MEMORY)}


def max_upload_bytes() -> int:
    """The largest upload the app takes: the weights' limit and room for the rest of a model folder."""
    return limits()["bytes"] + 50_000_000


def families() -> list[str]:
    """The model types we can open: those ``modeling.convert`` converts, and our own."""
    return sorted(convert.CONVERTERS) + [OURS]


def family_name(model_type: str) -> str:
    return FAMILIES.get(model_type, model_type)


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
# What a folder (or a repo's file list) must hold, checked before the weights are read or fetched
# ----------------------------------------------------------------------------------------------


@dataclass
class Plan:
    """What to read: the files, the weights' format and bytes, the config (``auto_map`` dropped), its parameters."""

    config: dict
    files: list[str]
    weights_format: str
    weight_bytes: int
    n_parameters: int

    @property
    def model_type(self) -> str:
        return self.config["model_type"]


def read_config(data: bytes, where: str) -> dict:
    """config.json as a dict without ``auto_map`` (a repo's pointer to its own code, which we never run)."""
    try:
        raw = json.loads(data)
    except ValueError as error:
        raise InputProblem(f"{where}'s config.json is not readable JSON ({error_text(error)}).") from None
    if not isinstance(raw, dict):
        raise InputProblem(f"{where}'s config.json is not a JSON object.")
    raw.pop("auto_map", None)
    model_type = raw.get("model_type")
    if model_type not in families():
        raise InputProblem(f"{where} holds a {echo(model_type or 'model without model_type', 40)} model; the families "
                           f"we can open are {', '.join(family_name(t) + f' (`{t}`)' for t in families())}.")
    if raw.get("is_encoder_decoder"):
        raise InputProblem(f"{where} holds an encoder-decoder; models opened here are language models (decoder-only).")
    return raw


def config_object(raw: dict):
    """The typed config: ours for scratch_transformer, else transformers' own class for the model_type."""
    if raw["model_type"] == OURS:
        return ScratchTransformerConfig.from_dict(raw)
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    return CONFIG_MAPPING[raw["model_type"]].from_dict(raw)


def model_class(config):
    if isinstance(config, ScratchTransformerConfig):
        return ScratchTransformerForCausalLM
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

    return MODEL_FOR_CAUSAL_LM_MAPPING[type(config)]


def count_parameters(raw: dict) -> int:
    """Parameters of the model the config describes, built on the meta device (no memory, no initialisation);
    tied weights counted once."""
    try:
        config = config_object(raw)
        with torch.device("meta"):
            model = model_class(config)(config)
    except Exception as error:  # noqa: BLE001 - a config transformers cannot build
        raise InputProblem(f"Its config.json does not describe a model transformers can build ({error_text(error)}).") from None
    return sum(p.numel() for p in model.parameters())  # parameters() yields a tied tensor once


def plan(where: str, sizes: dict[str, int | None], config_bytes: bytes) -> Plan:
    """The files to read from a listing (name -> bytes), refused with the reason when something is missing or too
    large: config, tokenizer.json, safetensors weights (else pickled ones)."""
    raw = read_config(config_bytes, where)
    missing = [name for name in ("tokenizer.json",) if name not in sizes]
    formats = [kind for kind, names in WEIGHTS.items() if any(name in sizes for name in names)]
    if not formats:
        missing.append("weights (model.safetensors, or pytorch_model.bin)")
    if missing:
        raise InputProblem(f"{where} lacks {' and '.join(missing)}: it cannot be opened.")
    weights_format = formats[0]  # safetensors first
    single, index = WEIGHTS[weights_format]
    stem = single.rsplit(".", 1)[0]
    weight_files = [single] if single in sizes else [index] + sorted(
        n for n in sizes if n.startswith(stem + "-") and n.endswith(single.rsplit(".", 1)[1]))
    weight_bytes = sum(sizes[n] or 0 for n in weight_files)
    n_parameters = count_parameters(raw)
    max_parameters, max_bytes = _limit(MAX_PARAMETERS_ENV, MAX_PARAMETERS), _limit(MAX_BYTES_ENV, MAX_BYTES)
    if n_parameters > max_parameters:
        raise InputProblem(f"{where} has {n_parameters / 1e6:,.1f}M parameters; this app opens models of at most "
                           f"{max_parameters / 1e6:,.0f}M (set {MAX_PARAMETERS_ENV} to change it).")
    if weight_bytes > max_bytes:
        raise InputProblem(f"{where}'s weights are {megabytes(weight_bytes)}; this app opens at most "
                           f"{megabytes(max_bytes)} (set {MAX_BYTES_ENV} to change it).")
    files = ["config.json"] + [n for n in TOKENIZER_FILES + OPTIONAL_FILES if n in sizes] + weight_files
    return Plan(raw, files, weights_format, weight_bytes, n_parameters)


# ----------------------------------------------------------------------------------------------
# Loading a folder and converting it
# ----------------------------------------------------------------------------------------------


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
        parity = "" if self.parity is None else f" · parity {self.parity:.1e}"
        source = f"from {where}" if self.source == "hub" else where
        return f"{self.name} · {self.family} · {_size(self.n_parameters)} · {source}{commit}{parity}"

    def to_json(self) -> dict:
        return {"name": self.name, "family": self.family, "model_type": self.model_type,
                "parameters": self.n_parameters, "commit": self.commit, "parity": self.parity, "source": self.source,
                "repo_id": self.repo_id, "revision": self.revision, "seconds": round(self.seconds, 2)}


def _size(n: int) -> str:
    return f"{n / 1e6:.1f}M parameters" if n >= 1e6 else f"{n / 1e3:.1f}K parameters"


def load_tokenizer(folder: Path):
    """The folder's tokenizer (tokenizer.json and its config: data, no code)."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    try:
        return AutoTokenizer.from_pretrained(folder, trust_remote_code=False)
    except Exception:  # noqa: BLE001 - a tokenizer_config naming a class we do not have: the tokenizer file alone
        return PreTrainedTokenizerFast(tokenizer_file=str(folder / "tokenizer.json"))


def load_folder(folder: Path, plan_: Plan, where: str):
    """(our model in eval mode, the parity or None, tokenizer) from a folder holding ``plan_``'s files.

    ``from_pretrained`` runs behind ``catalog.LOAD_LOCK``; the class is named, never looked up from the repo."""
    config = config_object(plan_.config)
    cls = model_class(config)
    try:
        with catalog.LOAD_LOCK:
            loaded, info = cls.from_pretrained(folder, config=config, dtype=torch.float32, weights_only=True,
                                               use_safetensors=plan_.weights_format == "safetensors",
                                               trust_remote_code=False, output_loading_info=True)
    except Exception as error:  # noqa: BLE001 - a damaged file, or a pickle holding more than tensors
        if "weights_only" in str(error) or "Unpickl" in type(error).__name__:
            raise InputProblem(f"{where} cannot be opened: its pickled weights hold more than tensors (code, or objects "
                               "of other kinds), and this app reads pickles only with weights_only=True.") from None
        raise InputProblem(f"{where} cannot be opened: the weights do not load ({error_text(error)}).") from None
    wrong = {k: v for k, v in info.items() if v and k in ("missing_keys", "mismatched_keys")}
    if wrong:
        raise InputProblem(f"{where}'s weights do not fit its config: {echo(str(wrong), 300)}.")
    loaded.eval()
    if isinstance(loaded, ScratchTransformerForCausalLM):
        ours, parity = loaded, None
    else:
        try:
            ours = convert.from_transformers(loaded).eval()
        except ValueError as error:
            raise InputProblem(f"{where} cannot be converted to our Transformer: {error}.") from None
        ids = (PARITY_IDS % config.vocab_size)[None, : min(len(PARITY_IDS), ours.config.max_position_embeddings or 32)]
        with torch.inference_mode():
            parity = (ours(ids).logits - loaded(ids).logits).abs().max().item()
        del loaded
    return ours.requires_grad_(False), parity, load_tokenizer(folder)


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
        budget = _limit(MEMORY_ENV, MEMORY)
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
_opened: dict[str, Opened] = {}  # every name ever opened in this process -> how to load it again
_opened_lock = threading.Lock()


def _register(opened: Opened, model, tokenizer) -> Opened:
    HELD.put(opened.name, model, tokenizer)
    with _opened_lock:
        _opened[opened.name] = opened
    catalog.open_model(opened.name, catalog.OpenedEntry(opened.label, lambda: _resolve(opened.name), opened.session))
    return opened


def _resolve(name: str):
    """(info, model, tokenizer) of an opened model: from the LRU, else loaded again from its folder."""
    with _opened_lock:
        opened = _opened.get(name)
    if opened is None:
        raise InputProblem(f"The model {echo(name)} is no longer open: open it again.")
    held = HELD.get(name)
    if held is None:
        held = _job(("reload", name), lambda job: _reload(opened)).outcome()
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
# Jobs: one per key however many ask; a requester follows its progress and may give up, the job goes on
# ----------------------------------------------------------------------------------------------


class Job:
    """A load running in a daemon thread; ``phase``, ``done_bytes``/``total_bytes`` say how far it is."""

    def __init__(self, key):
        self.key, self.phase, self.done_bytes, self.total_bytes = key, "starting", 0, 0
        self.waiting_on_hub = False  # only a wait on the network can stall; a load behind the lock just queues
        self.finished = threading.Event()
        self.touched = time.monotonic()
        self.result = self.error = None

    def report(self, phase: str | None = None, add_bytes: int = 0, hub: bool | None = None) -> None:
        if phase is not None:
            self.phase = phase
        if hub is not None:
            self.waiting_on_hub = hub
        self.done_bytes += add_bytes
        self.touched = time.monotonic()

    def progress(self) -> str:
        if self.total_bytes:
            return f"{self.phase}: {megabytes(self.done_bytes)} of {megabytes(self.total_bytes)}"
        return self.phase

    def follow(self, every: float = 0.5) -> Iterator[str]:
        """The progress line every ``every`` seconds until the job ends; InputProblem when it stalls."""
        while not self.finished.wait(every):
            if self.waiting_on_hub and time.monotonic() - self.touched > STALL_SECONDS:
                raise InputProblem(f"Gave up after {STALL_SECONDS} s without progress ({self.phase}): the Hub at "
                                   f"{echo(endpoint())} is not answering. Try again later.")
            yield self.progress()

    def outcome(self):
        for _ in self.follow():
            pass
        if self.error is not None:
            raise self.error
        return self.result


_jobs: dict = {}
_jobs_lock = threading.Lock()


def _job(key, work: Callable[[Job], object]) -> Job:
    """The running job for ``key``, or a new one running ``work(job)`` in a daemon thread."""
    with _jobs_lock:
        if key in _jobs:
            return _jobs[key]
        job = _jobs[key] = Job(key)

    def run():
        try:
            job.result = work(job)
        except InputProblem as error:
            job.error = error
        except Exception as error:  # noqa: BLE001 - every failure reaches the requesters as a message
            job.error = InputProblem(hub_error_message(error))
        finally:
            with _jobs_lock:
                _jobs.pop(key, None)
            job.finished.set()

    threading.Thread(target=run, name=f"open {key}", daemon=True).start()
    return job


# ----------------------------------------------------------------------------------------------
# The Hub
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


def _menu_name(repo_id: str, revision: str | None) -> str:
    return f"{repo_id}@{revision}" if revision else repo_id


def _progress_class(job: Job):
    class Progress(hub_tqdm):
        def update(self, n=1):
            job.report(add_bytes=n or 0)
            return super().update(n)

    return Progress


def _fetch(job: Job, repo_id: str, revision: str | None) -> tuple[Path, str, Plan]:
    """Ask the Hub what the repo holds, check it, download what is needed: (snapshot folder, commit, plan)."""
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


def start_open(repo_id, revision=None) -> Job:
    """Check what was typed and start (or join) the job that opens it; follow the job, then ``job.outcome()``."""
    repo_id, revision = check_repo_id(repo_id), check_revision(revision)
    name = _menu_name(repo_id, revision)

    def work(job: Job) -> Opened:
        start = time.perf_counter()
        folder, commit, plan_ = _fetch(job, repo_id, revision)
        job.report("converting to our Transformer and measuring parity", hub=False)
        model, parity, tokenizer = load_folder(folder, plan_, name)
        opened_ = Opened(name, "hub", family_name(plan_.model_type), plan_.model_type, plan_.n_parameters, commit,
                         parity, folder, plan_, None, repo_id, revision, time.perf_counter() - start)
        return _register(opened_, model, tokenizer)

    return _job(("hub", name), work)


def open_repo(repo_id, revision=None) -> Opened:
    """Open a Hub repo (waiting for it): its menu name, family, parameters, commit and parity."""
    return start_open(repo_id, revision).outcome()


# ----------------------------------------------------------------------------------------------
# A session's own models: an upload (a zip of a save_pretrained folder), a model trained in the app
# ----------------------------------------------------------------------------------------------

_sessions: OrderedDict[str, list[str]] = OrderedDict()  # session -> its models' names, oldest first
_sessions_lock = threading.Lock()
MAX_SESSIONS = 64
_root = Path(tempfile.mkdtemp(prefix="opened-models-"))  # the unpacked uploads of this process, removed at its exit
atexit.register(shutil.rmtree, _root, ignore_errors=True)


def _session_name(title: str) -> str:
    """A menu name of a session's own model: the title and a random part nobody else can guess."""
    return f"yours/{title}-{secrets.token_hex(4)}"


def _forget(name: str) -> None:
    HELD.drop(name)
    catalog.close_model(name)
    with _opened_lock:
        gone = _opened.pop(name, None)
    if gone is not None and _root in gone.folder.parents:
        shutil.rmtree(gone.folder, ignore_errors=True)


def _keep_for_session(session: str | None, name: str) -> None:
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
    _register(opened_, model, tokenizer)
    _keep_for_session(session, name)
    return opened_


MAX_ZIP_MEMBERS = 64


def unpack_zip(archive: Path, target: Path) -> Path:
    """The data files of a zip of a save_pretrained folder (at its top level or in one folder), extracted into
    ``target``: no path leaves it, nothing but config, tokenizer and weight files, the Hub's byte limit."""
    wanted = {"config.json", *TOKENIZER_FILES, *OPTIONAL_FILES, *(n for pair in WEIGHTS.values() for n in pair)}
    try:
        with zipfile.ZipFile(archive) as z:
            members = [m for m in z.infolist() if not m.is_dir()]
            if len(members) > MAX_ZIP_MEMBERS * 16:
                raise InputProblem(f"The zip holds {len(members)} files; a model folder holds a few.")
            total = sum(m.file_size for m in members)
            if total > max_upload_bytes():
                raise InputProblem(f"The zip unpacks to {megabytes(total)}; this app opens at most "
                                   f"{megabytes(limits()['bytes'])} of weights.")
            target.mkdir(parents=True)
            for m in members:
                base = m.filename.replace("\\", "/").rsplit("/", 1)[-1]
                shard = re.fullmatch(r"(model|pytorch_model)-\d{5}-of-\d{5}\.(safetensors|bin)", base)
                if (base in wanted or shard) and m.filename.count("/") <= 1 and not (target / base).exists():
                    with z.open(m) as source, open(target / base, "wb") as out:
                        shutil.copyfileobj(source, out)
    except zipfile.BadZipFile:
        raise InputProblem("That file is not a zip: give the zip of a save_pretrained folder "
                           "(Train one yourself's download is one).") from None
    return target


def open_upload(path, session: str | None = None, source: str = "upload") -> Opened:
    """Open an uploaded zip of a save_pretrained folder for this browser session (``source`` "trained": the zip
    Train one yourself made)."""
    if not path or not Path(str(path)).is_file():
        if source == "trained":
            raise InputProblem("Train a model first: this opens the model the tab just trained.")
        raise InputProblem("Upload a zip of a save_pretrained folder (config.json, model.safetensors, tokenizer.json).")
    folder = unpack_zip(Path(str(path)), _root / secrets.token_hex(8))
    title = "trained" if source == "trained" else re.sub(r"[^A-Za-z0-9_.-]+", "-", Path(str(path)).stem)[:40] or "upload"
    try:
        return open_folder(folder, title, source, session)
    except Exception:
        shutil.rmtree(folder, ignore_errors=True)
        raise


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


__all__ = ["Opened", "open_repo", "start_open", "open_upload", "check_repo_id", "check_revision",
           "families", "HELD"]
