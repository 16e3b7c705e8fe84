"""The checkpoints on disk and the evaluation's results: what each model is, whether it can be served, one
line per model for the menus, and the lock every load in the app takes (``LOAD_LOCK``). The models themselves are
held by ``explorer.models.registry``.

Discovery reads each folder's config.json and the header of its weights file (the parameter count), and
asks ``checkpointing.loading.checkpoint_problems`` what would keep it from loading (no weight is loaded:
about 10 ms per folder, remembered until a file changes). A damaged checkpoint stays in the menus, marked
with the reason, and is refused with that reason when picked.
"""

import json
import math
import threading
from dataclasses import dataclass, field
from pathlib import Path
from safetensors import safe_open

from checkpointing.loading import WEIGHTS_FILE, checkpoint_problems
from checkpointing.paths import CHECKPOINTS_ENV, checkpoints_dir
from checkpointing.training_run import is_timeline
from modeling import POSITION_ENCODINGS, ScratchTransformerConfig

from explorer.core.inputs import error_text

RESULTS_FILE = "results.json"


@dataclass(frozen=True)
class CheckpointInfo:
    """One ``<root>/<name>/`` folder. ``config`` is None where config.json is not a valid configuration;
    ``problems`` lists what keeps the folder from loading (empty: it can be served)."""

    name: str
    path: Path
    config: ScratchTransformerConfig | None = field(compare=False, repr=False)
    n_parameters: int | None
    problems: tuple[str, ...] = ()

    @property
    def usable(self) -> bool:
        return not self.problems

    @property
    def is_encoder_decoder(self) -> bool:
        return bool(self.config is not None and self.config.is_encoder_decoder)

    @property
    def position_encoding(self) -> str | None:
        return None if self.config is None else self.config.position_encoding


def files_signature(folder: Path) -> tuple:
    """What changes when any file discovery reads changes: (mtime, size) of each."""
    stats = []
    for name in ("config.json", WEIGHTS_FILE, "tokenizer.json"):
        try:
            stat = (folder / name).stat()
            stats.append((stat.st_mtime_ns, stat.st_size))
        except OSError:
            stats.append(None)
    return tuple(stats)


def _parameter_count(weights: Path) -> int | None:
    """Parameters stored in a safetensors file, from its header (tied weights are stored once)."""
    try:
        with safe_open(weights, framework="numpy") as f:
            return sum(math.prod(f.get_slice(name).get_shape()) for name in f.keys())
    except Exception:  # noqa: BLE001 - a damaged file; checkpoint_problems says how
        return None


_described: dict[Path, tuple[tuple, CheckpointInfo]] = {}
_described_lock = threading.Lock()


def describe_folder(folder: Path) -> CheckpointInfo | None:
    """The CheckpointInfo of one folder, or None when it holds another kind of model."""
    folder = Path(folder)
    signature = files_signature(folder)
    with _described_lock:
        known = _described.get(folder)
    if known is not None and known[0] == signature:
        return known[1]
    try:
        raw = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError):
        raw = None  # ours or not, it is broken: listed, with the reason
    if raw is not None and (not isinstance(raw, dict) or raw.get("model_type") != ScratchTransformerConfig.model_type):
        return None
    problems = tuple(checkpoint_problems(folder))
    try:
        config = None if raw is None else ScratchTransformerConfig.from_dict(raw)
    except (ValueError, TypeError):
        config = None
    info = CheckpointInfo(folder.name, folder, config, _parameter_count(folder / WEIGHTS_FILE), problems)
    with _described_lock:
        _described[folder] = (signature, info)
    return info


def discover_checkpoints(root: Path | None = None) -> dict[str, CheckpointInfo]:
    """Every ``root/*/config.json`` of our model type, by name: decoder-only models first, then seq2seq."""
    root = checkpoints_dir() if root is None else Path(root)
    found = [info for config in sorted(root.glob("*/config.json")) if (info := describe_folder(config.parent))]
    found.sort(key=lambda info: (info.is_encoder_decoder, info.name))
    return {info.name: info for info in found}


def encoding_models(catalog: dict[str, CheckpointInfo]) -> dict[str, str]:
    """position encoding -> checkpoint for the comparison, in ``POSITION_ENCODINGS`` order: ``shakespeare-<encoding>``
    if it is there and usable, else any usable decoder-only checkpoint with that encoding."""
    chosen = {}
    candidates = [info for info in catalog.values() if info.usable and not info.is_encoder_decoder]
    for encoding in POSITION_ENCODINGS:
        matching = [info.name for info in candidates if info.position_encoding == encoding]
        preferred = f"shakespeare-{encoding}"
        if matching:
            chosen[encoding] = preferred if preferred in matching else matching[0]
    return chosen


@dataclass(frozen=True)
class EncodingFamily:
    """The controlled comparison of position encodings: ``models`` maps each encoding to the checkpoint that holds
    it (``encoding_models``); ``context`` is the training context they share (None when they differ or there
    are none), where the extrapolation and per-position plots mark it."""

    models: dict[str, str]
    context: int | None

    @property
    def encodings(self) -> dict[str, str]:
        """checkpoint -> its encoding, in ``POSITION_ENCODINGS`` order."""
        return {name: encoding for encoding, name in self.models.items()}


def encoding_family(catalog: dict[str, CheckpointInfo]) -> EncodingFamily:
    """Which checkpoint holds which encoding, and their shared training context (each config's ``context_length``,
    the context it was trained at, which the evaluation also writes to results.json as ``training_context``)."""
    models = encoding_models(catalog)
    contexts = {catalog[name].config.context_length for name in models.values()}
    return EncodingFamily(models, contexts.pop() if len(contexts) == 1 else None)


@dataclass
class Results:
    """``results.json`` as the app uses it. ``extrapolation[name]`` maps context length -> bits/char (None
    where the model cannot run that long); ``position_loss[name]`` is the mean loss (nats) at positions
    1..window-1 of the longest windows; ``seq2seq[name]`` holds cer and identity_cer; ``induction[name]`` is a
    language model's best induction head (score, layer, head) and the score a head needs to be labelled one
    (threshold), from its ``in_context``; ``experiment`` and ``published`` are the encoding experiment over every
    seed and the published figures, as written."""

    main_model: str | None = None
    metrics: dict[str, dict[str, float]] = field(default_factory=dict)
    training_context: dict[str, int] = field(default_factory=dict)
    extrapolation: dict[str, dict[int, float | None]] = field(default_factory=dict)
    position_loss: dict[str, list[float]] = field(default_factory=dict)
    seq2seq: dict[str, dict[str, float]] = field(default_factory=dict)
    induction: dict[str, dict[str, float]] = field(default_factory=dict)
    experiment: dict = field(default_factory=dict)
    published: dict = field(default_factory=dict)
    notice: str = ""


def read_results(root: Path | None = None) -> Results:
    """The one reader of ``<root>/results.json`` (written by ``python -m training.evaluate``). Absent or
    malformed: an empty ``Results`` whose ``notice`` says why, never an exception."""
    path = (checkpoints_dir() if root is None else Path(root)) / RESULTS_FILE
    if not path.exists():
        return Results(notice=f"No evaluation results yet ({RESULTS_FILE} is missing): run `python -m training.evaluate` to fill this plot.")
    try:
        raw = json.loads(path.read_text())
        results = Results(main_model=raw.get("main_model"), experiment=raw.get("experiment") or {},
                          published=raw.get("published") or {})
        for name, entry in (raw.get("models") or {}).items():
            if "extrapolation" not in entry and "cer" in entry:
                results.seq2seq[name] = {k: float(v) for k, v in entry.items() if isinstance(v, (int, float))}
                continue
            results.metrics[name] = {
                k: float(entry[k]) for k in ("test_loss", "perplexity", "bits_per_char") if entry.get(k) is not None
            }
            if entry.get("training_context") is not None:
                results.training_context[name] = int(entry["training_context"])
            curve = {int(n): (None if bpc is None else float(bpc)) for n, bpc in (entry.get("extrapolation") or {}).items()}
            results.extrapolation[name] = dict(sorted(curve.items()))
            in_context = entry.get("in_context") or {}
            if in_context.get("induction") and in_context.get("threshold") is not None:
                results.induction[name] = {**{k: float(v) for k, v in in_context["induction"].items()},
                                           "threshold": float(in_context["threshold"])}
            if (entry.get("position_loss") or {}).get("loss"):
                results.position_loss[name] = [float(v) for v in entry["position_loss"]["loss"]]
        return results
    except (OSError, ValueError, TypeError, AttributeError) as error:
        return Results(notice=f"Could not read {RESULTS_FILE}: {error_text(error)}")


def default_model(catalog: dict[str, CheckpointInfo], results: Results) -> str | None:
    """The model every menu starts on: results.json's main model, else the first usable decoder-only one."""
    usable = [info for info in catalog.values() if info.usable]
    if results.main_model in catalog and catalog[results.main_model].usable:
        return results.main_model
    causal = [info.name for info in usable if not info.is_encoder_decoder]
    return (causal or [info.name for info in usable] or list(catalog) or [None])[0]


def seq2seq_model(catalog: dict[str, CheckpointInfo]) -> str | None:
    """The first usable encoder-decoder checkpoint (the Folio example's model)."""
    return next((info.name for info in catalog.values() if info.usable and info.is_encoder_decoder), None)


def _size(n: int | None) -> str:
    if n is None:
        return "size unknown"
    return f"{n / 1e6:.1f}M parameters" if n >= 1e6 else f"{n / 1e3:.0f}k parameters"


def menu_line(info: CheckpointInfo, results: Results, family: dict[str, str]) -> str:
    """One line per model: what it is, its size, what it is for (from its config and results.json)."""
    if not info.usable:
        return f"{info.name} · ⚠ cannot be used: {info.problems[0]}"
    c = info.config
    if info.is_encoder_decoder:
        scores = results.seq2seq.get(info.name, {})
        score = (f" (character error rate {scores['cer']:.3f}; copying the input: {scores['identity_cer']:.3f})"
                 if {"cer", "identity_cer"} <= set(scores) else "")
        return f"{info.name} · encoder-decoder, {c.position_encoding} positions · {_size(info.n_parameters)} · rewrites its input{score}"
    bpc = results.metrics.get(info.name, {}).get("bits_per_char")
    role = ("the main model" if info.name == results.main_model
            else "encoding experiment" if info.name in family.values()
            else "a recorded training run (Watch it learn)" if is_timeline(info.path) else "language model")
    score = f", {bpc:.2f} bits/char" if bpc is not None else ""
    head = results.induction.get(info.name)
    if head is not None and head["score"] >= head["threshold"]:
        score += f", copies from its context (induction head L{head['layer']:.0f}.H{head['head']:.0f})"
    return (f"{info.name} · {c.position_encoding} positions · {_size(info.n_parameters)} · context {c.context_length}"
            f" · {role}{score}")


def menu_choices(catalog: dict[str, CheckpointInfo], results: Results) -> list[tuple[str, str]]:
    """(label, name) for a model menu: the label is ``menu_line``, the value the checkpoint name."""
    family = encoding_models(catalog)
    return [(menu_line(info, results, family), info.name) for info in catalog.values()]


def config_summary(name: str, config: ScratchTransformerConfig) -> str:
    """A Markdown line with the architecture of a model, from its config: sizes, the norm and where it sits, the
    feed-forward, key/value heads shared or not, the rotary share and scaling, the residual, the head."""
    layers = (f"{config.n_encoder_layers} encoder + {config.n_layers} decoder layers" if config.is_encoder_decoder
              else f"{config.n_layers} layers")
    feed_forward = {"none": "attention only (no feed-forward)", "gated": f"gated feed-forward ({config.activation}), "
                    f"d_ff={config.d_ff}"}.get(config.feed_forward, f"feed-forward ({config.activation}), d_ff={config.d_ff}")
    heads = f"heads={config.n_heads} (d_head={config.d_head})"
    if config.n_kv_heads < config.n_heads:
        heads += f", {config.n_kv_heads} key/value head{'s' if config.n_kv_heads > 1 else ''} (shared)"
    position = config.position_encoding
    if position == "rope" and config.rotary_fraction < 1:
        position += f" on {config.d_rotary} of {config.d_head} dims"
    scaling = config.rope_frequency_scaling if position.startswith("rope") else None
    if scaling:
        position += f", frequencies slowed {scaling['factor']:g}× ({scaling['rope_type']})"
    norm = {"rmsnorm": "RMSNorm", "layernorm": "LayerNorm"}.get(config.norm, config.norm)
    residual = "parallel residual" if config.parallel_residual else ("pre" if config.norm_first else "post") + "-norm"
    head = "tied head" if config.tie_word_embeddings else "untied head"
    return (f"**{name}**: {'encoder-decoder' if config.is_encoder_decoder else 'decoder-only'}, position encoding "
            f"**{position}**, d_model={config.d_model}, {heads}, {layers}, {feed_forward}, vocab={config.vocab_size}, "
            f"{norm}, {residual}, {head}.")


# THE load lock: every from_pretrained in the app runs behind it (shipped checkpoints and opened models, in
# explorer.models.registry and explorer.models.converting), and so does every model the app builds (live training,
# recorded-run snapshots). transformers 5.23 loading in two threads at once can leave a tied lm_head uninitialised or
# parameters on the meta device, and while it loads it makes torch's init functions no-ops for the whole process.
LOAD_LOCK = threading.RLock()


def no_checkpoints_message() -> str:
    return (f"No checkpoints found: train them (see the README), or set {CHECKPOINTS_ENV} to a folder of checkpoints.")
