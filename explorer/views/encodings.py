"""The positional encodings as numbers: the sinusoidal and learned tables, RoPE's angles, ALiBi's biases,
how similar positions d apart are under each, and bits per character against context length (the
extrapolation experiment), recomputed on any text within a budget of tokens and time.
"""

import time
from dataclasses import dataclass, field

import numpy as np
import torch

from checkpointing import scoring
from modeling.modeling_scratch_transformer import alibi_slopes, rope_angles, sinusoidal_encoding

from explorer.core.settings import EXACT_SECONDS
from explorer.models.catalog import CheckpointInfo, encoding_models
from explorer.models.registry import shipped_model


def sinusoidal_table(n_positions: int, d_model: int) -> np.ndarray:
    """(positions, d_model): PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...), by the model's
    own ``sinusoidal_encoding``."""
    return sinusoidal_encoding(torch.arange(n_positions), d_model).numpy()


def learned_table(model) -> np.ndarray:
    """(max_position_embeddings, d_model): the trained position table of a ``learned`` checkpoint."""
    position = model.model.decoder.embed.position
    if model.config.position_encoding != "learned" or position is None:
        raise ValueError(f"the model uses {model.config.position_encoding!r} positions, not a learned table")
    return position.weight.detach().float().numpy()


def rope_angle_table(n_positions: int, d_head: int, theta: float = 10000.0) -> np.ndarray:
    """(positions, d_head/2): the angle m * theta_i (radians, wrapped to [-pi, pi)) by which RoPE turns pair i
    at position m; theta_i = theta^(-2i/d_head)."""
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


@dataclass(frozen=True)
class EncodingTables:
    """The encodings as tables at the sizes of the encoding checkpoints: the sinusoidal table (positions, d_model),
    the learned checkpoint's trained table (None without one), and the sizes RoPE and ALiBi are drawn at."""

    n_positions: int
    d_model: int
    n_heads: int
    rope_theta: float
    sinusoidal: np.ndarray
    learned: np.ndarray | None
    learned_model: str | None
    notices: tuple[str, ...]

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads


def encoding_tables(catalog: dict[str, CheckpointInfo], max_positions_shown: int = 256) -> EncodingTables:
    """The tables at the encoding checkpoints' sizes (d_model 256, 4 heads when there are none); the learned table is
    read from the learned checkpoint's weights."""
    notices = []
    family = encoding_models(catalog)
    reference = next((catalog[name].config for name in family.values()), None)
    d_model, n_heads, theta, n_positions = 256, 4, 10000.0, max_positions_shown
    if reference is not None:
        d_model, n_heads, theta = reference.d_model, reference.n_heads, reference.rope_theta
        n_positions = min(max_positions_shown, max(reference.context_length, 16))
    else:
        notices.append("No checkpoints found: showing the formula encodings at d_model=256, 4 heads.")
    learned = None
    if "learned" in family:
        model, _ = shipped_model(catalog[family["learned"]])
        learned = learned_table(model)[:n_positions]
    else:
        notices.append("No learned-position checkpoint found: its table will appear once it is trained.")
    return EncodingTables(n_positions, d_model, n_heads, theta, sinusoidal_table(n_positions, d_model), learned,
                          family.get("learned"), tuple(notices))


class TimeLimit(Exception):
    """The job's time is up (raised between batches of windows)."""


def bits_per_character(model, tokenizer, text: str, context_length: int, batch_size: int = 8,
                       deadline: float | None = None) -> float | None:
    """Bits per character of ``text`` read in windows of ``context_length`` tokens, by the evaluation's own
    ``checkpointing.scoring.bits_per_character`` (windows overlapping by one token, every token but the first
    scored once, total NLL in bits / characters of the scored tokens).

    None where it cannot be measured: a learned position table shorter than the window, or a text shorter
    than one window (a longer window would only repeat the figure of a shorter one). Raises TimeLimit when
    ``time.monotonic()`` passes ``deadline`` between two batches.
    """
    if model.config.is_encoder_decoder:
        raise ValueError("bits_per_character scores a decoder-only language model; this one is encoder-decoder")
    limit = model.config.position_limit
    if limit is not None and context_length > limit:
        return None
    if len(tokenizer(text, add_special_tokens=False).input_ids) < max(context_length, 2):
        return None

    def check_time(fraction):
        if deadline is not None and time.monotonic() > deadline:
            raise TimeLimit

    return scoring.bits_per_character(model, tokenizer, text, context_length, batch_size, progress=check_time)["bits_per_char"]


def within_tokens(tokenizer, text: str, max_tokens: int) -> tuple[str, int]:
    """The longest beginning of ``text`` of at most ``max_tokens`` tokens (cut after a whole token), and
    how many tokens the whole text has."""
    encoding = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    n_tokens = len(encoding["input_ids"])
    if n_tokens <= max_tokens:
        return text, n_tokens
    return text[: encoding["offset_mapping"][max_tokens - 1][1]], n_tokens


EXTRAPOLATION_MAX_TOKENS = 4096  # of the user's text, per model: bounds every (model, length) job


SHORTER_DIVISORS = (4, 2)  # a text is also scored at 1/4 and 1/2 of the training context: a sonnet is shorter than 1x


def extrapolation_lengths(catalog: dict[str, CheckpointInfo]) -> list[int]:
    """The context lengths a text is scored at: those the evaluation measures the encoding models at
    (``checkpointing.scoring.extrapolation_lengths``: 1x, 2x, 4x and 8x the training context), and 1/4 and 1/2 of
    the training context, so that a text shorter than the training context still gives a curve."""
    lengths = set()
    for name in encoding_models(catalog).values():
        lengths.update(scoring.extrapolation_lengths(catalog[name]))
        lengths.update(catalog[name].config.context_length // d for d in SHORTER_DIVISORS)
    return sorted(lengths)


def length_needs(catalog: dict[str, CheckpointInfo]) -> str:
    """What the recomputation needs, said before it runs: the lengths it scores at, each needing a text of at
    least that many tokens, and the budget of tokens it reads."""
    lengths = extrapolation_lengths(catalog)
    if not lengths:
        return ""
    return (f"Scored at context lengths of {', '.join(f'{n:,}' for n in lengths)} tokens; a length is scored only when "
            f"your text has at least that many tokens (a sonnet reaches the first few), and at most the first "
            f"{EXTRAPOLATION_MAX_TOKENS:,} tokens are read.")


@dataclass
class Extrapolation:
    """The state of a recomputation: ``curves[name][length]`` is bits/char, None where it cannot be measured;
    lengths not reached yet are absent. ``encodings[name]`` is the model's position encoding."""

    curves: dict[str, dict[int, float | None]]
    encodings: dict[str, str]
    lengths: list[int]
    done: int = 0
    total: int = 0
    finished: bool = False
    notices: list[str] = field(default_factory=list)


def recompute_extrapolation(catalog: dict[str, CheckpointInfo], text: str, lengths: list[int] | None = None,
                            max_tokens: int = EXTRAPOLATION_MAX_TOKENS,
                            time_limit: float | None = None):
    """Bits/char of every encoding model at every length on ``text``, as a generator: it yields the state
    after each (length, model) job, shorter lengths first, so the caller can show progress and stop at any
    yield (closing the generator stops the work). The work is bounded: at most ``max_tokens`` tokens of the
    text per model, and ``time_limit`` seconds in all (checked between batches of windows; by default the operator's
    ``settings.EXACT_SECONDS``, as every request's exact runs)."""
    family = encoding_models(catalog)
    lengths = sorted(lengths or extrapolation_lengths(catalog))
    state = Extrapolation({name: {} for name in family.values()}, {name: e for e, name in family.items()}, lengths,
                          total=len(lengths) * len(family))
    time_limit = EXACT_SECONDS.value() if time_limit is None else time_limit
    deadline = time.monotonic() + time_limit
    texts, longest = {}, 0
    for name in family.values():
        model, tokenizer = shipped_model(catalog[name])
        texts[name], n_tokens = within_tokens(tokenizer, text, max_tokens)
        longest = max(longest, n_tokens)
    if longest > max_tokens:
        state.notices.append(f"Your text is {longest:,} tokens: scoring its first {max_tokens:,} to keep the job short.")
    short = [n for n in lengths if n > min(longest, max_tokens)]
    if short:
        state.notices.append(f"Lengths {', '.join(map(str, short))} need a text longer than {min(longest, max_tokens):,} tokens (left blank).")
    yield state
    for length in lengths:
        for name in family.values():
            model, tokenizer = shipped_model(catalog[name])
            try:
                if time.monotonic() > deadline:
                    raise TimeLimit
                state.curves[name][length] = bits_per_character(model, tokenizer, texts[name], length, deadline=deadline)
            except TimeLimit:
                state.notices.append(f"Stopped after the time limit of {time_limit:g} s: {state.done} of {state.total} "
                                     "scores computed, the rest left blank. A shorter text finishes sooner.")
                state.finished = True
                yield state
                return
            state.done += 1
            yield state
    state.finished = True
    yield state
