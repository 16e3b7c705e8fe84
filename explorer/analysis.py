"""What the app shows, computed here so that it can be tested: checkpoints, decoding, encodings, attention, shapes.

Sections, in the order of the app's tabs:

- Checkpoints: discovery under ``SCRATCH_CHECKPOINTS`` (default ``<repo>/checkpoints``), ``results.json``, a
  cached loader.
- Generate: prompt cleaning and truncation, decoding settings checked against each other, a streamer that
  yields every token, sampling with a per-request random generator (Gumbel-max), a stop flag.
- Encodings: the sinusoidal and learned tables, RoPE's angles, ALiBi's biases, similarity against distance,
  ``bits_per_character`` on any text.
- Attention: every layer x head from one forward pass (encoder, decoder and cross-attention for seq2seq).
- Forward pass: the shape of every intermediate tensor, recorded by hooks during one real forward pass.
- Figures: plotly figures of all of the above.

Nothing here imports gradio; app.py only wires these functions to widgets.
"""

import json
import math
import os
import threading
import time
import unicodedata
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import torch
from torch.overrides import TorchFunctionMode
from transformers import (
    LogitsProcessor,
    LogitsProcessorList,
    StoppingCriteria,
    StoppingCriteriaList,
    TextIteratorStreamer,
)
from transformers.generation.logits_process import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

from training import checkpoints, evaluate
from training.paths import CHECKPOINTS_ENV, checkpoints_dir
from modeling.configuration_scratch_transformer import POSITION_ENCODINGS
from modeling.modeling_scratch_transformer import alibi_slopes, rope_angles, sinusoidal_encoding

SEQ2SEQ_NAME = "folio-to-modern"

# ----------------------------------------------------------------------------------------------
# Checkpoints
# ----------------------------------------------------------------------------------------------


def checkpoint_root() -> Path:
    """Where checkpoints live: $SCRATCH_CHECKPOINTS, else <repo>/checkpoints."""
    return checkpoints_dir()


@dataclass(frozen=True)
class CheckpointInfo:
    """One ``<root>/<name>/`` folder, described from its config.json alone (nothing loaded)."""

    name: str
    path: Path
    is_encoder_decoder: bool
    position_encoding: str
    context_length: int  # tokens the model was trained on (the learned table cannot go past max_position_embeddings)
    max_positions: int | None  # hard limit on positions: only the learned table has one


def discover_checkpoints(root: Path | None = None) -> dict[str, CheckpointInfo]:
    """Every ``root/*/config.json`` that loads as our model type, by name (decoder-only first, then seq2seq)."""
    root = checkpoint_root() if root is None else Path(root)
    found = []
    for config_path in sorted(root.glob("*/config.json")):
        try:
            config = json.loads(config_path.read_text())
        except (OSError, ValueError):
            continue
        if config.get("model_type") != "scratch_transformer":
            continue
        if not (config_path.parent / "model.safetensors").exists() and not any(config_path.parent.glob("*.safetensors")):
            continue  # a run still being written
        encoding = config.get("position_encoding", "none")
        max_positions = int(config.get("max_position_embeddings") or config.get("n_positions") or 256)
        found.append(CheckpointInfo(
            name=config_path.parent.name, path=config_path.parent,
            is_encoder_decoder=bool(config.get("is_encoder_decoder", False)), position_encoding=encoding,
            context_length=int(config.get("training_context_length") or max_positions),
            max_positions=max_positions if encoding == "learned" else None,
        ))
    found.sort(key=lambda info: (info.is_encoder_decoder, info.name))
    return {info.name: info for info in found}


def encoding_models(catalog: dict[str, CheckpointInfo]) -> dict[str, str]:
    """position encoding -> checkpoint name for the comparison: ``shakespeare-<encoding>`` if present,
    else any decoder-only checkpoint with that encoding. Encodings with no checkpoint are left out."""
    chosen = {}
    for encoding in POSITION_ENCODINGS:
        preferred = f"shakespeare-{encoding}"
        if preferred in catalog and catalog[preferred].position_encoding == encoding and not catalog[preferred].is_encoder_decoder:
            chosen[encoding] = preferred
            continue
        for info in catalog.values():
            if not info.is_encoder_decoder and info.position_encoding == encoding:
                chosen[encoding] = info.name
                break
    return chosen


@dataclass
class Results:
    """``results.json`` as the app uses it. ``extrapolation[name]`` maps context length -> bits/char (None
    where the model cannot run that long); ``seq2seq[name]`` holds cer and identity_cer."""

    main_model: str | None = None
    metrics: dict[str, dict[str, float]] = field(default_factory=dict)
    training_context: dict[str, int] = field(default_factory=dict)
    extrapolation: dict[str, dict[int, float | None]] = field(default_factory=dict)
    seq2seq: dict[str, dict[str, float]] = field(default_factory=dict)
    notice: str = ""


def read_results(root: Path | None = None) -> Results:
    """The one reader of ``<root>/results.json`` (written by the evaluation). Absent or malformed: an empty
    ``Results`` whose ``notice`` says why, never an exception."""
    path = (checkpoint_root() if root is None else Path(root)) / "results.json"
    if not path.exists():
        return Results(notice=f"No evaluation results yet ({path} is missing): run the evaluation to fill this plot.")
    try:
        raw = json.loads(path.read_text())
        results = Results(main_model=raw.get("main_model"))
        for name, entry in (raw.get("models") or {}).items():
            if "extrapolation" not in entry and "cer" in entry:
                results.seq2seq[name] = {k: float(v) for k, v in entry.items() if isinstance(v, (int, float))}
                continue
            results.metrics[name] = {
                k: float(entry[k]) for k in ("test_loss", "perplexity", "bits_per_char") if entry.get(k) is not None
            }
            if entry.get("training_context") is not None:
                results.training_context[name] = int(entry["training_context"])
            curve = {int(length): (None if bpc is None else float(bpc)) for length, bpc in (entry.get("extrapolation") or {}).items()}
            results.extrapolation[name] = dict(sorted(curve.items()))
        return results
    except (OSError, ValueError, TypeError, AttributeError) as error:
        return Results(notice=f"Could not read {path}: {error}")


_models: dict[tuple[str, float], tuple[torch.nn.Module, object]] = {}
_models_lock = threading.Lock()


def load_checkpoint(path: Path) -> tuple[torch.nn.Module, object]:
    """(model in eval mode, tokenizer), loaded once per folder and weights file version, shared by all requests."""
    path = Path(path)
    weights = path / "model.safetensors"
    key = (str(path.resolve()), weights.stat().st_mtime if weights.exists() else 0.0)
    with _models_lock:
        if key not in _models:
            model, tokenizer = checkpoints.load_checkpoint(path)
            _models[key] = (model.requires_grad_(False), tokenizer)
        return _models[key]


def max_positions(model) -> int | None:
    """The hard limit on positions (the learned table's rows), None where positions are unbounded."""
    return model.config.position_limit


# ----------------------------------------------------------------------------------------------
# Generate: inputs, settings, streaming
# ----------------------------------------------------------------------------------------------

MAX_PROMPT_CHARS = 20_000
MAX_NEW_TOKENS = 512
ALLOWED_CONTROL = {"\n", "\t"}


def clean_text(text: str | None, max_chars: int = MAX_PROMPT_CHARS) -> tuple[str, list[str]]:
    """Drop control characters (keeping newlines and tabs) and cut very long text; say what was done."""
    notices = []
    text = (text or "").replace("\r\n", "\n").replace("\r", "\n")
    kept = "".join(c for c in text if c in ALLOWED_CONTROL or unicodedata.category(c) != "Cc")
    if len(kept) != len(text):
        notices.append(f"Removed {len(text) - len(kept)} control character(s) from the input.")
    if len(kept) > max_chars:
        notices.append(f"The input was cut to its first {max_chars:,} characters.")
        kept = kept[:max_chars]
    return kept, notices


@dataclass(frozen=True)
class DecodingSettings:
    do_sample: bool
    temperature: float
    top_k: int
    top_p: float
    repetition_penalty: float
    max_new_tokens: int
    seed: int


def _number(value, default: float) -> float:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return default
    return value if math.isfinite(value) else default


def sanitize_decoding(mode: str, temperature, top_k, top_p, repetition_penalty, max_new_tokens, seed,
                      limit: int = MAX_NEW_TOKENS) -> tuple[DecodingSettings, list[str]]:
    """Turn whatever the UI or an API client sent into settings that make sense together, with a notice
    for each change: sampling at temperature 0 is greedy; top-k / top-p / temperature mean nothing to
    greedy decoding; max new tokens is kept in [1, limit]; out-of-range values are clamped."""
    notices = []
    do_sample = str(mode).strip().lower().startswith("sampl")
    temperature = _number(temperature, 1.0)
    top_k, top_p = int(_number(top_k, 0)), _number(top_p, 1.0)
    repetition_penalty, max_new = _number(repetition_penalty, 1.0), int(_number(max_new_tokens, 64))
    seed = int(_number(seed, 0))
    if do_sample and temperature <= 0:
        notices.append("Temperature 0 means always taking the most likely token: decoding greedily instead of sampling.")
        do_sample = False
    elif not do_sample:
        ignored = [name for name, active in (("temperature", temperature not in (0.0, 1.0)), ("top-k", top_k > 0),
                                             ("top-p", top_p < 1.0)) if active]
        if ignored:
            notices.append(f"Greedy decoding ignores {', '.join(ignored)} (they only shape sampling).")
    if do_sample:
        if temperature > 5:
            notices.append(f"Temperature {temperature:g} is above the maximum 5; using 5.")
            temperature = 5.0
        if top_k < 0:
            notices.append("top-k must be 0 (off) or positive; turning it off.")
            top_k = 0
        if not 0 < top_p <= 1:
            notices.append(f"top-p must be in (0, 1]; got {top_p:g}, using 1 (off).")
            top_p = 1.0
    if repetition_penalty <= 0 or repetition_penalty > 10:
        notices.append(f"Repetition penalty must be in (0, 10]; got {repetition_penalty:g}, using 1 (off).")
        repetition_penalty = 1.0
    if max_new < 1:
        notices.append(f"Max new tokens was {max_new}; generating 1 token (the least there is).")
        max_new = 1
    elif max_new > limit:
        notices.append(f"Max new tokens {max_new:,} is above the limit {limit}; generating {limit}.")
        max_new = limit
    return DecodingSettings(do_sample, temperature if do_sample else 1.0, top_k if do_sample else 0,
                            top_p if do_sample else 1.0, repetition_penalty, max_new, seed), notices


def encode_prompt(model, tokenizer, text: str, max_new_tokens: int) -> tuple[torch.Tensor, int, list[str]]:
    """Token ids (1, T) for the prompt, kept inside what the model can attend to, and the max new
    tokens that still fit. A decoder-only model keeps the END of a long prompt (the text it continues);
    a seq2seq model keeps the beginning of its source. Notices say what was cut."""
    notices = []
    ids = tokenizer(text, return_tensors="pt").input_ids
    context, hard_limit = model.config.context_length, max_positions(model)
    if model.config.is_encoder_decoder:
        budget = hard_limit or context
        if ids.shape[1] > budget:
            notices.append(f"The text is {ids.shape[1]} tokens; the encoder reads at most {budget}: rewriting the first {budget}.")
            ids = ids[:, :budget]
        if hard_limit and max_new_tokens > hard_limit - 1:
            notices.append(f"The decoder has {hard_limit} positions: generating at most {hard_limit - 1} tokens.")
            max_new_tokens = hard_limit - 1
        return ids, max_new_tokens, notices
    if hard_limit and max_new_tokens > hard_limit - 1:
        notices.append(f"This model has {hard_limit} positions: generating at most {hard_limit - 1} new tokens.")
        max_new_tokens = hard_limit - 1
    budget = hard_limit - max_new_tokens if hard_limit else context
    if ids.shape[1] > budget:
        notices.append(f"The prompt is {ids.shape[1]} tokens, longer than the {budget} this model reads here: "
                       f"keeping its last {budget} tokens.")
        ids = ids[:, -budget:]
    return ids, max_new_tokens, notices


class TokenStreamer(TextIteratorStreamer):
    """A ``TextIteratorStreamer`` that releases text after EVERY token (the stock one waits for a space),
    holding back only an incomplete UTF-8 sequence (an emoji split over byte tokens). Counts tokens and
    records when the first one arrived."""

    def __init__(self, tokenizer, skip_prompt: bool = True, timeout: float | None = None):
        super().__init__(tokenizer, skip_prompt=skip_prompt, timeout=timeout, skip_special_tokens=True)
        self.n_tokens = 0
        self.held = 0  # tokens held back because their text ends inside a character
        self.started = time.perf_counter()
        self.first_token_at: float | None = None

    def put(self, value: torch.Tensor) -> None:
        if value.dim() > 1:
            value = value[0]
        if self.skip_prompt and self.next_tokens_are_prompt:
            self.next_tokens_are_prompt = False
            return
        self.n_tokens += value.numel()
        if self.first_token_at is None:
            self.first_token_at = time.perf_counter()
        self.token_cache.extend(value.tolist())
        text = self.tokenizer.decode(self.token_cache, **self.decode_kwargs)
        if text.endswith("\ufffd") and self.held < 3:  # a UTF-8 character spans at most 4 byte tokens
            self.held += 1
            return
        self.held = 0
        self.on_finalized_text(text[self.print_len:])
        self.print_len = len(text)


class GumbelSampler(LogitsProcessor):
    """Sampling by the Gumbel-max trick: argmax(log p + G), G ~ Gumbel(0, 1), is a draw from p.

    Used with greedy ``generate`` so that each request draws from its OWN ``torch.Generator``: the seed
    reproduces the text even while other requests sample at the same time (torch's global RNG is shared)."""

    def __init__(self, seed: int):
        self.generator = torch.Generator().manual_seed(seed)

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        uniform = torch.rand(scores.shape, generator=self.generator).clamp_(1e-20, 1.0)
        return scores.float().log_softmax(-1) - torch.log(-torch.log(uniform))


class StopFlag(StoppingCriteria):
    """Ends generation as soon as ``event`` is set (the Stop button, or a client that went away)."""

    def __init__(self, event: threading.Event):
        self.event = event

    def __call__(self, input_ids: torch.Tensor, scores, **kwargs) -> torch.Tensor:
        return torch.full((input_ids.shape[0],), self.event.is_set(), dtype=torch.bool)


def generation_kwargs(model, settings: DecodingSettings, stop: threading.Event | None = None) -> dict:
    """Keyword arguments for ``model.generate``: always the greedy loop, sampling done by GumbelSampler
    after temperature, top-k and top-p."""
    processors = LogitsProcessorList()
    if settings.do_sample:
        if settings.temperature != 1.0:
            processors.append(TemperatureLogitsWarper(settings.temperature))
        if settings.top_k > 0:
            processors.append(TopKLogitsWarper(settings.top_k))
        if settings.top_p < 1.0:
            processors.append(TopPLogitsWarper(settings.top_p))
        processors.append(GumbelSampler(settings.seed))
    config = model.generation_config
    return dict(
        max_new_tokens=settings.max_new_tokens, do_sample=False, num_beams=1, temperature=None, top_k=None, top_p=None,
        use_cache=True,  # whatever the checkpoint's config says (training may have saved use_cache=false)
        repetition_penalty=settings.repetition_penalty if settings.repetition_penalty != 1.0 else None,
        logits_processor=processors, stopping_criteria=StoppingCriteriaList([StopFlag(stop or threading.Event())]),
        pad_token_id=config.pad_token_id if config.pad_token_id is not None else config.eos_token_id,
    )


@dataclass
class GenerationRun:
    """A ``generate`` call running in its own thread; iterate ``streamer`` for text, set ``stop`` to end it."""

    streamer: TokenStreamer
    thread: threading.Thread
    stop: threading.Event
    error: list = field(default_factory=list)

    def tokens_per_second(self) -> float:
        if not self.streamer.n_tokens or self.streamer.first_token_at is None:
            return 0.0
        return self.streamer.n_tokens / max(time.perf_counter() - self.streamer.started, 1e-9)


def start_generation(model, tokenizer, input_ids: torch.Tensor, settings: DecodingSettings) -> GenerationRun:
    """Start generating in a background thread; the returned run streams the new text token by token."""
    streamer = TokenStreamer(tokenizer, skip_prompt=True, timeout=120)  # seq2seq: skips the decoder start token
    run = GenerationRun(streamer, None, threading.Event())  # type: ignore[arg-type]
    kwargs = generation_kwargs(model, settings, run.stop)

    def work():
        try:
            with torch.inference_mode():
                model.generate(input_ids, attention_mask=torch.ones_like(input_ids), streamer=streamer, **kwargs)
        except Exception as error:  # noqa: BLE001 - reported to the consumer, who shows it
            run.error.append(error)
            streamer.on_finalized_text("", stream_end=True)

    run.thread = threading.Thread(target=work, daemon=True, name="generate")
    run.thread.start()
    return run


def generate_text(model, tokenizer, text: str, settings: DecodingSettings) -> tuple[str, list[str]]:
    """The whole continuation (or rewrite) at once; for the side-by-side comparison."""
    ids, max_new, notices = encode_prompt(model, tokenizer, text, settings.max_new_tokens)
    settings = replace(settings, max_new_tokens=max_new)
    with torch.inference_mode():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), **generation_kwargs(model, settings))
    new = out[0] if model.config.is_encoder_decoder else out[0, ids.shape[1]:]
    return tokenizer.decode(new, skip_special_tokens=True), notices


# ----------------------------------------------------------------------------------------------
# Encodings
# ----------------------------------------------------------------------------------------------


def sinusoidal_table(n_positions: int, d_model: int) -> np.ndarray:
    """(positions, d_model): the paper's PE, computed by the model's own ``sinusoidal_encoding``."""
    return sinusoidal_encoding(torch.arange(n_positions), d_model).numpy()


def learned_table(model) -> np.ndarray:
    """(max_position_embeddings, d_model): the trained position table of a ``learned`` checkpoint."""
    position = model.model.decoder.embed.position
    if model.config.position_encoding != "learned" or position is None:
        raise ValueError(f"the model uses {model.config.position_encoding!r} positions, not a learned table")
    return position.weight.detach().float().numpy()


def rope_angle_table(n_positions: int, d_head: int, theta: float = 10000.0) -> np.ndarray:
    """(positions, d_head/2): the angle (radians, wrapped to [-pi, pi)) by which RoPE turns pair i at position m."""
    cos, sin = rope_angles(torch.arange(n_positions)[None], d_head, theta)
    return torch.atan2(sin, cos)[0, 0].numpy()


def alibi_bias_table(n_positions: int, n_heads: int) -> np.ndarray:
    """(heads, distance): the bias -slope_h * d that ALiBi adds to a score d tokens back."""
    return (-alibi_slopes(n_heads)[:, None] * torch.arange(n_positions, dtype=torch.float32)[None]).numpy()


def table_similarity_by_distance(table: np.ndarray, max_distance: int) -> np.ndarray:
    """Mean cosine similarity between rows p and p + d of a (positions, dims) table, for d = 0..max_distance."""
    unit = table / np.maximum(np.linalg.norm(table, axis=1, keepdims=True), 1e-12)
    max_distance = min(max_distance, len(table) - 1)
    return np.array([float((unit[: len(unit) - d] * unit[d:]).sum(1).mean()) for d in range(max_distance + 1)])


def rope_similarity_by_distance(max_distance: int, d_head: int, theta: float = 10000.0) -> np.ndarray:
    """cos of the angle between R(m) x and R(m + d) x, averaged over directions x: mean_i cos(d theta_i)."""
    angles = rope_angles(torch.arange(max_distance + 1)[None], d_head, theta)[0]
    return angles[0, 0].mean(-1).numpy()


def alibi_weight_by_distance(max_distance: int, n_heads: int) -> np.ndarray:
    """exp(-slope_h d) averaged over heads: the factor ALiBi puts on the attention weight of a key d back."""
    return np.exp(alibi_bias_table(max_distance + 1, n_heads)).mean(0)


def bits_per_character(model, tokenizer, text: str, context_length: int, batch_size: int = 8) -> float | None:
    """Bits per character of ``text`` read in windows of ``context_length`` tokens, exactly as the evaluation
    measures it (``training.evaluate.bits_per_character``: windows overlapping by one token, every token but
    the first scored once, total NLL in bits / characters of the scored tokens).

    None where it cannot be measured: a learned position table shorter than the window, or a text shorter
    than one window (a longer window would only repeat the figure of a shorter one).
    """
    if model.config.is_encoder_decoder:
        raise ValueError("bits_per_character scores a decoder-only language model; this one is encoder-decoder")
    limit = max_positions(model)
    if limit is not None and context_length > limit:
        return None
    if len(tokenizer(text, add_special_tokens=False).input_ids) < max(context_length, 2):
        return None
    return evaluate.bits_per_character(model, tokenizer, text, context_length, batch_size)["bits_per_char"]


# ----------------------------------------------------------------------------------------------
# Attention
# ----------------------------------------------------------------------------------------------

ATTENTION_MAX_TOKENS = 256
ATTENTION_KINDS = {
    "self": "self-attention",
    "encoder": "encoder self-attention",
    "decoder": "decoder masked self-attention",
    "cross": "cross-attention (decoder queries, encoder keys)",
}


def token_labels(tokenizer, ids) -> list[str]:
    """A readable label per token id: leading spaces as '␣', newlines as '↵', a lone byte of a
    multi-byte character as its byte-level symbol."""
    labels = []
    for i in [int(x) for x in ids]:
        text = tokenizer.decode([i])
        if "\ufffd" in text or not text:
            text = tokenizer.convert_ids_to_tokens(i) or f"<{i}>"
        labels.append(text.replace(" ", "␣").replace("\n", "↵").replace("\t", "⇥"))
    return labels


@dataclass
class AttentionMaps:
    """``weights[kind]``: (layers, heads, queries, keys) numpy array; labels index-prefixed so they are unique."""

    weights: dict[str, np.ndarray]
    query_labels: dict[str, list[str]]
    key_labels: dict[str, list[str]]
    notices: list[str] = field(default_factory=list)


def _numbered(labels: list[str]) -> list[str]:
    return [f"{i}:{label}" for i, label in enumerate(labels)]


def model_inputs(model, tokenizer, text: str, max_tokens: int = ATTENTION_MAX_TOKENS, decoder_tokens: int = 32) -> tuple[dict, list[str]]:
    """Forward-pass inputs for ``text``, cut to ``max_tokens`` (and to a learned table's length). For a
    seq2seq model the decoder input is the model's own greedy rewrite of the text (so cross-attention shows
    what it actually attends to while writing)."""
    notices = []
    ids = tokenizer(text, return_tensors="pt").input_ids
    budget = min(max_tokens, max_positions(model) or max_tokens)
    if ids.shape[1] > budget:
        notices.append(f"The text is {ids.shape[1]} tokens; showing its first {budget}.")
        ids = ids[:, :budget]
    inputs = {"input_ids": ids}
    if model.config.is_encoder_decoder:
        limit = min(decoder_tokens, (max_positions(model) or decoder_tokens + 1) - 1)
        with torch.inference_mode():
            out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=limit, do_sample=False)
        inputs["decoder_input_ids"] = out
    return inputs, notices


def attention_maps(model, tokenizer, text: str, max_tokens: int = ATTENTION_MAX_TOKENS) -> AttentionMaps:
    """Every layer x head's attention weights for ``text`` from one forward pass (``output_attentions``)."""
    inputs, notices = model_inputs(model, tokenizer, text, max_tokens)
    with torch.inference_mode():
        out = model(**inputs, output_attentions=True, use_cache=False)
    source = _numbered(token_labels(tokenizer, inputs["input_ids"][0]))
    if not model.config.is_encoder_decoder:
        stacked = {"self": out.attentions}
        queries = keys = {"self": source}
    else:
        target = _numbered(token_labels(tokenizer, inputs["decoder_input_ids"][0]))
        stacked = {"encoder": out.encoder_attentions, "decoder": out.decoder_attentions, "cross": out.cross_attentions}
        queries = {"encoder": source, "decoder": target, "cross": target}
        keys = {"encoder": source, "decoder": target, "cross": source}
    weights = {kind: torch.stack([w[0] for w in layers]).float().numpy() for kind, layers in stacked.items()}
    return AttentionMaps(weights, dict(queries), dict(keys), notices)


# ----------------------------------------------------------------------------------------------
# Inside the forward pass
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TraceStep:
    stack: str  # "decoder", "encoder", or "" for the model's head
    step: str
    module: str  # where it was read (a module name, or the function inside it)
    shape: tuple[int, ...]
    dims: tuple[str, ...]  # what each dimension is, one name per entry of shape
    meaning: str

    def dims_text(self) -> str:
        if not self.shape:
            return "—"
        return " × ".join(f"{name}={size}" for name, size in zip(self.dims, self.shape))


@dataclass
class ForwardTrace:
    steps: list[TraceStep]
    logits_shape: tuple[int, ...]
    top_next: list[tuple[str, float]]  # (token, probability) after the last position
    notices: list[str] = field(default_factory=list)


class _AttentionInternals(TorchFunctionMode):
    """Records, while one attention module runs, the tensors made by torch functions inside it: the score
    matmul, the softmax, the weighted sum of values, and the reshape that concatenates the heads."""

    def __init__(self):
        super().__init__()
        self.calls: list[tuple[str, tuple[int, ...]]] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        name = getattr(func, "__name__", str(func))
        if isinstance(result, torch.Tensor) and name in ("__matmul__", "matmul", "softmax", "reshape"):
            self.calls.append((name, tuple(result.shape)))
        return result


def forward_trace(model, tokenizer, text: str, max_tokens: int = ATTENTION_MAX_TOKENS) -> ForwardTrace:
    """The shape of every step of one real forward pass over ``text``, recorded by hooks on the modules
    (and, inside the first layer's attention, on the torch functions), in the order they ran.

    The model may be shared with other requests: the hooks record only what runs in this thread."""
    inputs, notices = model_inputs(model, tokenizer, text, max_tokens)
    config = model.config
    names = {module: name for name, module in model.named_modules()}
    steps: list[TraceStep] = []
    handles = []
    owner = threading.get_ident()

    def mine() -> bool:
        return threading.get_ident() == owner

    def record(stack, step, module_name, tensor, dims, meaning):
        if not mine():
            return
        shape = tuple(tensor) if isinstance(tensor, tuple) else tuple(tensor.shape)
        steps.append(TraceStep(stack, step, module_name, shape, dims if len(dims) == len(shape) else ("?",) * len(shape), meaning))

    def on_output(module, stack, step, dims, meaning, pick=lambda out: out):
        def hook(mod, args, output):
            record(stack, step, names[mod], pick(output), dims, meaning)
        handles.append(module.register_forward_hook(hook))

    def on_input(module, stack, step, dims, meaning, pick):
        def hook(mod, args):
            tensor = pick(args)
            if tensor is not None:
                record(stack, step, names[mod], tensor, dims, meaning)
        handles.append(module.register_forward_pre_hook(hook))

    def trace_attention(attention, stack, tokens, keys, label):
        q_dims, k_dims = ("batch", "heads", tokens, "d_head"), ("batch", "heads", keys, "d_head")
        score_dims = ("batch", "heads", tokens, keys)
        split = attention.split_heads
        mode = _AttentionInternals()
        order = iter([("Q", q_dims, "queries per head: x W_i^Q"), ("K", k_dims, "keys per head: x W_i^K"),
                      ("V", k_dims, "values per head: x W_i^V")])

        def recording_split(x):
            out = split(x)
            if not mine():
                return out
            try:
                name, dims, meaning = next(order)
                record(stack, f"{label}: {name} per head", f"{names[attention]}.split_heads", out, dims, meaning)
            except StopIteration:
                pass
            return out

        attention.split_heads = recording_split

        def pre(mod, args):
            if not mine():
                return
            mode.calls.clear()
            mode.__enter__()

        def post(mod, args, output):
            if not mine():
                return
            mode.__exit__(None, None, None)
            matmuls = [i for i, (name, _) in enumerate(mode.calls) if name in ("__matmul__", "matmul")]
            softmaxes = [i for i, (name, _) in enumerate(mode.calls) if name == "softmax"]
            where = f"{names[attention]}.forward"
            if matmuls and softmaxes:
                record(stack, f"{label}: scores", where, mode.calls[matmuls[0]][1], score_dims,
                       "Q K^T / sqrt(d_head) (+ mask / ALiBi bias), one score per query-key pair")
                record(stack, f"{label}: weights", where, mode.calls[softmaxes[0]][1], score_dims,
                       "softmax over keys: each query's weights sum to 1")
                later = [i for i in matmuls if i > softmaxes[0]]
                if later:
                    record(stack, f"{label}: heads", where, mode.calls[later[0]][1], q_dims,
                           "per head: weights @ V")
                    reshapes = [i for i, (name, _) in enumerate(mode.calls) if name == "reshape" and i > later[0]]
                    if reshapes:
                        record(stack, f"{label}: concatenated heads", where, mode.calls[reshapes[0]][1],
                               ("batch", tokens, "d_model"), "Concat(head_1..head_H): heads side by side")
            record(stack, f"{label}: output", names[attention.out_proj], output[0], ("batch", tokens, "d_model"),
                   "Concat(heads) W^O")

        handles.append(attention.register_forward_pre_hook(pre))
        handles.append(attention.register_forward_hook(post))
        return lambda: attention.__dict__.pop("split_heads", None)  # back to the class's method

    restores = []
    stacks = [("encoder", model.model.encoder, "source tokens")] if config.is_encoder_decoder else []
    stacks.append(("decoder", model.model.decoder, "tokens"))
    for stack, part, tokens in stacks:
        dims = ("batch", tokens, "d_model")
        on_input(part.embed.token, stack, "token ids", ("batch", tokens), "one integer per token (the tokenizer's output)",
                 lambda args: args[0])
        scale = "E[x] * sqrt(d_model)" if config.scale_embeddings else "E[x]"
        on_output(part.embed.token, stack, "token embeddings", dims, f"{scale}: one learned vector per token id")
        if part.embed.position is not None:
            on_output(part.embed.position, stack, f"positional encodings ({config.position_encoding})", dims,
                      "one vector per position, added to the token embedding")
        on_output(part.embed, stack, "embeddings + positions", dims,
                  "the sum, the input of layer 0" if part.embed.position is not None else "no position added here: the input of layer 0",
                  pick=lambda out: out[0])
        first = part.stack.layers[0]
        if config.position_encoding == "rope":
            on_input(first, stack, "RoPE rotation (cos, sin)", ("batch", "broadcast over heads", tokens, "d_head/2 pairs"),
                     "angle m·θ_i for each position m and pair i; rotates q and k in every layer", lambda args: args[2][0])
        elif config.position_encoding == "alibi":
            on_input(first, stack, "ALiBi bias (+ mask)", ("batch", "heads", tokens, tokens),
                     "-slope_h · |i - j| added to every score (with the causal mask where there is one)", lambda args: args[1])
        restores.append(trace_attention(first.self_attn, stack, tokens, tokens,
                                        "layer 0 masked self-attention" if stack == "decoder" else "layer 0 self-attention"))
        if first.cross_attn is not None:
            restores.append(trace_attention(first.cross_attn, stack, tokens, "source tokens", "layer 0 cross-attention"))
        on_output(first.self_attn_norm, stack, "layer 0: after Add & Norm", dims, "residual stream after the attention sublayer")
        on_output(first.feed_forward.linear1, stack, "layer 0: feed-forward hidden", ("batch", tokens, "d_ff"),
                  f"x W_1 + b_1, widened to d_ff (then {config.activation})")
        on_output(first.feed_forward, stack, "layer 0: feed-forward output", dims, "act(x W_1 + b_1) W_2 + b_2, back to d_model",
                  pick=lambda out: out[0])
        for i, layer in enumerate(part.stack.layers):
            on_output(layer, stack, f"layer {i} output", dims, "residual stream after the layer", pick=lambda out: out[0])
        if part.stack.norm is not None:
            on_output(part.stack.norm, stack, "final LayerNorm", dims, "normalised last hidden state")
    on_output(model.lm_head, "", "logits", ("batch", "tokens", "vocab"), "h W_E^T: one score per vocabulary entry, per position")
    try:
        with torch.inference_mode():
            out = model(**inputs, use_cache=False, output_attentions=True)
    finally:
        for handle in handles:
            handle.remove()
        for restore in restores:
            restore()
    probabilities = out.logits.float().softmax(-1)
    steps.append(TraceStep("", "probabilities", "softmax(logits) (computed here, the model returns logits)",
                           tuple(probabilities.shape), ("batch", "tokens", "vocab"),
                           "distribution of the next token after each position; each row sums to 1"))
    if config.position_encoding == "none":
        for stack, _, tokens in stacks:
            index = next(i for i, s in enumerate(steps) if s.stack == stack and s.step == "embeddings + positions")
            steps.insert(index, TraceStep(stack, "positional encoding (none)", "—", (), (),
                                          "no position signal: only the causal mask tells tokens apart by order"))
    top = probabilities[0, -1].topk(min(10, probabilities.shape[-1]))
    top_next = list(zip(token_labels(tokenizer, top.indices), [float(p) for p in top.values]))
    return ForwardTrace(steps, tuple(out.logits.shape), top_next, notices)


# ----------------------------------------------------------------------------------------------
# Figures (plotly)
# ----------------------------------------------------------------------------------------------

LAYOUT = dict(template="plotly_white", margin=dict(l=60, r=20, t=50, b=50))


def heatmap_figure(z: np.ndarray, title: str, x_title: str, y_title: str, colorscale: str = "RdBu",
                   zmid: float | None = 0.0, hover: str = "%{z:.3f}", height: int = 380) -> go.Figure:
    fig = go.Figure(go.Heatmap(z=np.asarray(z, dtype=np.float32), colorscale=colorscale, zmid=zmid,
                               hovertemplate=f"{y_title} %{{y}}<br>{x_title} %{{x}}<br>{hover}<extra></extra>"))
    fig.update_layout(title=title, xaxis_title=x_title, yaxis_title=y_title, height=height, **LAYOUT)
    fig.update_yaxes(autorange="reversed")
    return fig


def encoding_figures(catalog: dict[str, CheckpointInfo], max_positions_shown: int = 256) -> tuple[dict[str, go.Figure], list[str]]:
    """The four heatmaps (sinusoidal, learned, RoPE angles, ALiBi biases) and the similarity-vs-distance
    curves, at the sizes of the encoding checkpoints (defaults d_model 256, 4 heads when there are none)."""
    notices = []
    family = encoding_models(catalog)
    reference = next((catalog[name] for name in family.values()), None)
    d_model, n_heads, theta, n_positions = 256, 4, 10000.0, max_positions_shown
    if reference is not None:
        config = json.loads((reference.path / "config.json").read_text())
        d_model, n_heads = int(config["d_model"]), int(config["n_heads"])
        theta = float(config.get("rope_theta", theta))
        n_positions = min(max_positions_shown, max(reference.context_length, 16))
    else:
        notices.append("No checkpoints found: showing the formula encodings at d_model=256, 4 heads.")
    d_head = d_model // n_heads
    sinusoidal = sinusoidal_table(n_positions, d_model)
    figures = {
        "sinusoidal": heatmap_figure(sinusoidal, f"Sinusoidal PE ({n_positions} positions × d_model {d_model})", "dimension", "position"),
        "rope": heatmap_figure(rope_angle_table(n_positions, d_head, theta),
                               f"RoPE rotation angle m·θ_i, wrapped to [-π, π) (d_head {d_head})", "pair i", "position m",
                               colorscale="Twilight", zmid=None, hover="angle %{z:.3f} rad"),
        "alibi": heatmap_figure(alibi_bias_table(n_positions, n_heads), f"ALiBi bias −slope_h·distance ({n_heads} heads)",
                                "distance to key", "head", colorscale="Viridis", zmid=None, hover="bias %{z:.3f}", height=260),
    }
    similarity = go.Figure()
    distances = np.arange(n_positions)
    similarity.add_scatter(x=distances, y=table_similarity_by_distance(sinusoidal, n_positions - 1), name="sinusoidal: cos(PE_p, PE_p+d)")
    if "learned" in family:
        model, _ = load_checkpoint(catalog[family["learned"]].path)
        table = learned_table(model)[:n_positions]
        figures["learned"] = heatmap_figure(table, f"Learned position table of {family['learned']} ({len(table)} × {table.shape[1]})",
                                            "dimension", "position")
        similarity.add_scatter(x=distances[: len(table)], y=table_similarity_by_distance(table, len(table) - 1),
                               name="learned: cos(P_p, P_p+d)")
    else:
        figures["learned"] = _message_figure("No checkpoint with a learned position table yet.")
        notices.append("No learned-position checkpoint found: its table will appear once it is trained.")
    similarity.add_scatter(x=distances, y=rope_similarity_by_distance(n_positions - 1, d_head, theta),
                           name="RoPE: cos angle between R(m)x and R(m+d)x")
    similarity.add_scatter(x=distances, y=alibi_weight_by_distance(n_positions - 1, n_heads),
                           name="ALiBi: exp(−slope·d), mean over heads")
    similarity.update_layout(title="Similarity between positions d apart", xaxis_title="distance d (tokens)",
                             yaxis_title="similarity", height=380, legend=dict(orientation="h", y=-0.25), **LAYOUT)
    figures["similarity"] = similarity
    return figures, notices


def _message_figure(message: str, height: int = 300) -> go.Figure:
    fig = go.Figure()
    fig.add_annotation(text=message, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper", font=dict(size=15))
    fig.update_layout(height=height, xaxis_visible=False, yaxis_visible=False, **LAYOUT)
    return fig


def extrapolation_figure(curves: dict[str, dict[int, float | None]], training_context: int | None = None,
                         title: str = "Extrapolation: bits per character against context length") -> go.Figure:
    """One line per model; a gap where the model cannot run (None); a dotted line at the training context."""
    if not curves:
        return _message_figure("No extrapolation results to show yet.")
    fig = go.Figure()
    all_lengths = sorted({n for curve in curves.values() for n in curve})
    for name, curve in curves.items():
        lengths = sorted(curve)
        fig.add_scatter(x=lengths, y=[curve[n] for n in lengths], mode="lines+markers", name=name,
                        hovertemplate=f"{name}<br>context %{{x}}<br>%{{y:.3f}} bits/char<extra></extra>")
    if training_context:  # shapes on a log axis take log10 of the position
        fig.add_vline(x=math.log10(training_context), line_dash="dot", annotation_text="training context")
    fig.update_layout(title=title, xaxis_title="context length (tokens)", yaxis_title="bits per character",
                      xaxis=dict(type="log", tickvals=all_lengths), height=400, **LAYOUT)
    return fig


def recompute_extrapolation(catalog: dict[str, CheckpointInfo], text: str, lengths: list[int],
                            progress=None) -> tuple[dict[str, dict[int, float | None]], list[str]]:
    """bits_per_character of every encoding model at every length on ``text``; ``progress(fraction, desc)``."""
    family = encoding_models(catalog)
    curves, notices = {}, []
    total = max(len(family) * len(lengths), 1)
    done = 0
    for encoding, name in family.items():
        model, tokenizer = load_checkpoint(catalog[name].path)
        curves[name] = {}
        for length in lengths:
            if progress is not None:
                progress(done / total, f"{name}, context {length}")
            curves[name][length] = bits_per_character(model, tokenizer, text, length)
            done += 1
        n_tokens = len(tokenizer(text, add_special_tokens=False).input_ids)
    too_long = [n for n in lengths if family and n > n_tokens]
    if too_long:
        notices.append(f"Your text is {n_tokens} tokens: lengths {', '.join(map(str, too_long))} need more text (left blank).")
    if progress is not None:
        progress(1.0, "done")
    return curves, notices


def attention_grid_figure(maps: AttentionMaps, kind: str) -> go.Figure:
    """Every layer (rows) x head (columns) as a small heatmap, one colour scale (0 to the largest weight).

    The subplot axes are laid out by hand: ``make_subplots`` took most of the tab's time at 4 x 6 heads."""
    weights = maps.weights[kind]
    n_layers, n_heads = weights.shape[:2]
    gap_x, gap_y = 0.015, 0.06
    width, height = (1 - gap_x * (n_heads - 1)) / n_heads, (1 - gap_y * (n_layers - 1)) / n_layers
    traces, axes, titles = [], {}, []
    for layer in range(n_layers):
        for head in range(n_heads):
            n = layer * n_heads + head + 1
            suffix = "" if n == 1 else str(n)
            left, top = head * (width + gap_x), 1 - layer * (height + gap_y)
            traces.append(go.Heatmap(
                z=weights[layer, head].astype(np.float32), xaxis=f"x{suffix}", yaxis=f"y{suffix}", coloraxis="coloraxis",
                hovertemplate=f"layer {layer} head {head}<br>query %{{y}}<br>key %{{x}}<br>weight %{{z:.3f}}<extra></extra>"))
            axes[f"xaxis{suffix}"] = dict(domain=[max(left, 0.0), min(left + width, 1.0)], anchor=f"y{suffix}",
                                          showticklabels=False)
            axes[f"yaxis{suffix}"] = dict(domain=[max(top - height, 0.0), min(top, 1.0)], anchor=f"x{suffix}", showticklabels=False,
                                          autorange="reversed")
            titles.append(dict(text=f"L{layer} H{head}", x=left + width / 2, y=top, xref="paper", yref="paper",
                               xanchor="center", yanchor="bottom", showarrow=False, font=dict(size=11)))
    return go.Figure(data=traces, layout=dict(
        title=f"{ATTENTION_KINDS[kind]}: every layer × head (rows: layers, columns: heads)", annotations=titles,
        coloraxis=dict(colorscale="Blues", cmin=0, cmax=float(weights.max())), height=max(260, 170 * n_layers + 80),
        **{**LAYOUT, "margin": dict(l=20, r=20, t=70, b=20)}, **axes))


def plotly_text(labels: list[str]) -> list[str]:
    """Labels as plotly shows them literally: it reads <...> as markup (a BOS token "<s>" would strike through)."""
    return [label.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") for label in labels]


def attention_head_figure(maps: AttentionMaps, kind: str, layer: int, head: int | None) -> go.Figure:
    """One head (or the mean over heads when ``head`` is None) with token labels; hover shows query, key, weight."""
    weights = maps.weights[kind][layer]
    z = weights.mean(0) if head is None else weights[head]
    queries, keys = plotly_text(maps.query_labels[kind]), plotly_text(maps.key_labels[kind])
    which = "mean over heads" if head is None else f"head {head}"
    fig = go.Figure(go.Heatmap(z=z.astype(np.float32), x=keys, y=queries, colorscale="Blues", zmin=0, zmax=float(z.max()),
                               hovertemplate="query %{y}<br>key %{x}<br>weight %{z:.3f}<extra></extra>"))
    size = max(420, min(900, 14 * max(len(queries), len(keys)) + 160))
    fig.update_layout(title=f"{ATTENTION_KINDS[kind]}, layer {layer}, {which}", xaxis_title="key token",
                      yaxis_title="query token", height=size, **LAYOUT)
    fig.update_xaxes(type="category", tickangle=-60, tickfont_size=10)
    fig.update_yaxes(type="category", autorange="reversed", tickfont_size=10)
    return fig


def top_tokens_figure(top_next: list[tuple[str, float]]) -> go.Figure:
    labels = [f"{i + 1}. {token}" for i, (token, _) in enumerate(top_next)]
    fig = go.Figure(go.Bar(x=[p for _, p in top_next], y=labels, orientation="h",
                           hovertemplate="%{y}<br>p = %{x:.4f}<extra></extra>"))
    fig.update_layout(title="Most likely next tokens (probabilities at the last position)", xaxis_title="probability",
                      height=360, **LAYOUT)
    fig.update_yaxes(autorange="reversed")
    return fig


def trace_table(trace: ForwardTrace) -> list[list[str]]:
    """Rows for a table: stack, step, shape, what each dimension is, meaning, where it was read."""
    return [[s.stack, s.step, "(" + ", ".join(map(str, s.shape)) + ")" if s.shape else "—", s.dims_text(), s.meaning, s.module]
            for s in trace.steps]

