# GENERATED from modeling/recording.py by `python -m training.checkpoints`: edit modeling/, then run that command; never edit this copy.
"""Recording: every step of a forward pass is a named ``Site``; ``with record() as recording:`` keeps what the model
computes inside it, and ``edits`` change it on the way (an intervention, such as removing a head).

The recording lives in a context variable, as transformers' output capturing keeps its collector: requests that
record on one shared model at the same time (threads, async tasks) each get their own, and with none open a
module pays one lookup. torch.compile cannot trace a context variable: a recording opened while compiling (the
``output_attentions`` / ``output_hidden_states`` of a compiled forward) lives in a plain attribute instead, as
transformers' ``CompileableContextVar`` does, so a compiled generate returns those outputs too. The typed records
(``AttentionRecord`` ...) read a recording by stack, layer and part.
"""

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, fields
from typing import NamedTuple

import torch


class Site(NamedTuple):
    """Where a tensor is computed. ``stack``: "encoder" or "decoder" (a decoder-only model has only the decoder);
    ``layer``: its index, None for the embeddings and the stack's output; ``part``: "self" or "cross" (attention),
    "ffn", "embed", "rope", or None for the residual stream; ``name``: a field of the typed records below."""

    stack: str
    layer: int | None
    part: str | None
    name: str


@dataclass
class EmbeddingRecord:
    """The input of layer 0, in parts: (B, T, D) each."""

    token: torch.Tensor  # E[x] * sqrt(d_model) (or E[x] unscaled)
    position: torch.Tensor | None  # PE(pos) added to it (sinusoidal, learned); None where positions act in attention
    sum: torch.Tensor  # Dropout(token + position): what layer 0 reads


@dataclass
class AttentionRecord:
    """One attention sublayer, step by step; B batch, H heads, T queries, S keys, d_head = D / H (the paper's d_k)."""

    input: torch.Tensor  # (B, T, D) the sublayer input: LayerNorm(x) in a pre-norm model, x in post-norm
    query: torch.Tensor  # (B, H, T, d_head) x W_Q, split into heads (before RoPE)
    key: torch.Tensor  # (B, H_kv, S, d_head) source W_K (the encoder memory for cross-attention); H_kv = n_kv_heads
    value: torch.Tensor  # (B, H_kv, S, d_head) source W_V; query head h reads key/value head h // (H / H_kv)
    query_rotated: torch.Tensor | None  # RoPE: R(m) q, what the scores use; None without RoPE
    key_rotated: torch.Tensor | None  # RoPE: R(n) k (only the first d_rotary dims of a head turn)
    bias: torch.Tensor | None  # added to the scores, broadcastable to (B, H, T, S): masks, ALiBi's penalty
    scores: torch.Tensor  # (B, H, T, S) q . k / sqrt(d_head) + bias
    weights: torch.Tensor  # (B, H, T, S) softmax over keys
    heads: torch.Tensor  # (B, H, T, d_head) weights @ v (after any edit: an ablated head is zero here)
    concatenated: torch.Tensor  # (B, T, D) Concat(head_1, ..., head_H)
    output: torch.Tensor  # (B, T, D) concatenated W_O + b_O


@dataclass
class LayerRecord:
    """One TransformerLayer: each sublayer and the residual stream after its Add & Norm, (B, T, D) unless noted."""

    input: torch.Tensor  # the residual stream coming in
    self_attention: AttentionRecord
    after_self_attention: torch.Tensor
    cross_attention: AttentionRecord | None
    after_cross_attention: torch.Tensor | None
    # the feed-forward's: None in an attention-only layer (feed_forward="none"), which has no feed-forward
    feed_forward_hidden: torch.Tensor | None  # (B, T, d_ff) act(x W_1 + b_1); gated: act(x W_gate) * x W_up
    feed_forward_output: torch.Tensor | None  # hidden W_2 + b_2
    output: torch.Tensor  # the residual stream going out (before any final LayerNorm)
    feed_forward_gate: torch.Tensor | None = None  # gated feed-forward: (B, T, d_ff) act(x W_gate); else None
    feed_forward_up: torch.Tensor | None = None  # gated feed-forward: (B, T, d_ff) x W_up; else None


@dataclass
class StackRecord:
    """An encoder or decoder: its embeddings (None for ``Transformer``, which takes embeddings), layers, output."""

    embeddings: EmbeddingRecord | None
    rotary: tuple[torch.Tensor, torch.Tensor] | None  # RoPE (cos, sin), each (B, 1, T, d_head / 2)
    layers: tuple[LayerRecord, ...]
    output: torch.Tensor  # after the final LayerNorm, when the stack has one: what the LM head reads


class Recording:
    """The tensors of the forward passes run inside ``record()``, by ``Site``.

    ``keep(site)`` says which sites to keep (None: all). ``edits`` maps a site to a function of its tensor whose
    result the model uses in its place: an intervention (``ablate_heads`` builds one). A recording opened inside
    another passes every site on to the outer one too."""

    def __init__(self, keep: Callable[[Site], bool] | None = None, edits: dict[Site, Callable] | None = None,
                 outer: "Recording | None" = None):
        self.values: dict[Site, torch.Tensor] = {}
        self.keep, self.edits, self.outer = keep, dict(edits or {}), outer

    def wants(self, site: Site) -> bool:
        """Whether this recording (or an outer one) keeps or edits ``site``."""
        mine = site in self.edits or self.keep is None or self.keep(site)
        return mine or (self.outer is not None and self.outer.wants(site))

    def at(self, where: tuple, name: str, value: torch.Tensor) -> torch.Tensor:
        """The model passes each tensor through here: edited if asked, kept if wanted; the result goes on."""
        site = Site(*where, name)
        edit = self.edits.get(site)
        if edit is not None:
            value = edit(value)
        if self.keep is None or self.keep(site):
            self.values[site] = value
        return value if self.outer is None else self.outer.at(where, name, value)

    def __getitem__(self, site: tuple) -> torch.Tensor:
        return self.values[Site(*site)]

    def get(self, *site) -> torch.Tensor | None:
        return self.values.get(Site(*site))

    def attention(self, stack: str, layer: int, part: str = "self") -> AttentionRecord | None:
        if Site(stack, layer, part, "output") not in self.values:
            return None
        return AttentionRecord(**{f.name: self.get(stack, layer, part, f.name) for f in fields(AttentionRecord)})

    def layer(self, stack: str, layer: int) -> LayerRecord:
        stream = {name: self.get(stack, layer, None, name)
                  for name in ("input", "after_self_attention", "after_cross_attention", "output")}
        return LayerRecord(self_attention=self.attention(stack, layer, "self"),
                           cross_attention=self.attention(stack, layer, "cross"),
                           feed_forward_hidden=self.get(stack, layer, "ffn", "hidden"),
                           feed_forward_output=self.get(stack, layer, "ffn", "output"),
                           feed_forward_gate=self.get(stack, layer, "ffn", "gate"),
                           feed_forward_up=self.get(stack, layer, "ffn", "up"), **stream)

    def stack(self, stack: str) -> StackRecord | None:
        if Site(stack, None, None, "output") not in self.values:
            return None
        embeddings = None
        if Site(stack, None, "embed", "sum") in self.values:
            embeddings = EmbeddingRecord(*(self.get(stack, None, "embed", name) for name in ("token", "position", "sum")))
        cos = self.get(stack, None, "rope", "cos")
        rotary = None if cos is None else (cos, self.get(stack, None, "rope", "sin"))
        layers = tuple(self.layer(stack, i) for i in range(self.n_layers(stack)))
        return StackRecord(embeddings, rotary, layers, self[stack, None, None, "output"])

    @property
    def encoder(self) -> StackRecord | None:
        return self.stack("encoder")

    @property
    def decoder(self) -> StackRecord | None:
        return self.stack("decoder")

    def n_layers(self, stack: str) -> int:
        return len({site.layer for site in self.values if site.stack == stack and site.layer is not None})

    def hidden_states(self, stack: str) -> tuple[torch.Tensor, ...]:
        """transformers' hidden_states: every layer's input, then the stack's output (after the final LayerNorm)."""
        n = self.n_layers(stack)
        return tuple(self[stack, i, None, "input"] for i in range(n)) + (self[stack, None, None, "output"],)

    def attentions(self, stack: str, part: str = "self") -> tuple[torch.Tensor, ...]:
        return tuple(self[stack, i, part, "weights"] for i in range(self.n_layers(stack)))


class _Slot:
    """Where the open recording lives: a context variable, or, for one opened while torch.compile traces (which
    cannot trace a context variable), a plain attribute. A recording opened outside a compiled graph is not seen
    inside it (its sites are not traced); one opened inside it (``capturing``) is."""

    def __init__(self):
        self.context = ContextVar("scratch_transformer_recording", default=None)
        self.compiled: Recording | None = None

    def get(self) -> Recording | None:
        if torch.compiler.is_compiling():
            return self.compiled
        return self.context.get()

    def set(self, recording: Recording):
        if torch.compiler.is_compiling():
            self.compiled = recording
            return None
        return self.context.set(recording)

    def reset(self, token) -> None:
        if token is None:
            self.compiled = None
        else:
            self.context.reset(token)


_RECORDING = _Slot()


def current_recording() -> Recording | None:
    """The recording open in this thread's context, or None."""
    return _RECORDING.get()


@contextmanager
def record(keep: Callable[[Site], bool] | None = None, edits: dict[Site, Callable] | None = None) -> Iterator[Recording]:
    """``with record() as recording: model(...)``: every site of the forward pass, in ``recording``.

    The recording lives in a context variable, so requests recording on one shared model at the same time (threads,
    async tasks) each get their own; with none open, each module pays one lookup. ``keep`` and ``edits``: see
    ``Recording``. When attention weights are kept, attention runs the explicit softmax (``eager_attention_forward``)."""
    recording = Recording(keep, edits, outer=_RECORDING.get())
    token = _RECORDING.set(recording)
    try:
        yield recording
    finally:
        _RECORDING.reset(token)


def ablate_heads(stack: str, part: str, removed: list[tuple[int, int]], n_layers: int, n_heads: int
                 ) -> dict[Site, Callable]:
    """Edits that remove heads: head h of (stack, layer, part) times 0 before the heads are concatenated, so its slice
    of the input of W_O is zero; the other heads are multiplied by 1, exactly themselves. ``removed``: (layer, head)."""
    by_layer: dict[int, list[int]] = {}
    for layer, head in removed:
        if not (0 <= layer < n_layers and 0 <= head < n_heads):
            raise ValueError(f"cannot remove head {head} of layer {layer}: {stack} {part}-attention has layers 0 to "
                             f"{n_layers - 1}, heads 0 to {n_heads - 1}")
        by_layer.setdefault(layer, []).append(head)

    def remove(heads: list[int]) -> Callable[[torch.Tensor], torch.Tensor]:
        def edit(value: torch.Tensor) -> torch.Tensor:  # (B, H, T, d_head)
            scale = torch.ones(n_heads, dtype=value.dtype, device=value.device)
            scale[heads] = 0
            return value * scale[:, None, None]
        return edit

    return {Site(stack, layer, part, "heads"): remove(heads) for layer, heads in by_layer.items()}


PARTS = {"embed": "embed", "self_attn": "self", "cross_attn": "cross", "feed_forward": "ffn"}  # module name -> part


def name_sites(stack: torch.nn.Module, name: str) -> None:
    """Give every module under ``stack`` that records (it has a ``site``) its site (stack, layer, part), read from
    its path in the module tree, as TransformerLens names its hook points: ``….layers.3.self_attn`` -> (name, 3,
    "self"), ``….layers.3`` -> (name, 3, None), ``embed`` -> (name, None, "embed"), the stack itself (name, None,
    None). ``name``: "encoder" or "decoder"."""
    for path, module in stack.named_modules():
        if hasattr(module, "site"):
            names = path.split(".") if path else []
            layer = int(names[names.index("layers") + 1]) if "layers" in names else None
            module.site = (name, layer, PARTS.get(names[-1]) if names else None)


def _unchanged(where: tuple, name: str, value: torch.Tensor) -> torch.Tensor:
    return value


def note_for(recording: Recording | None):
    """``note(where, name, tensor)``: the recording's ``at``, or the identity when nothing records."""
    return _unchanged if recording is None else recording.at


@contextmanager
def capturing(output_attentions: bool, output_hidden_states: bool) -> Iterator[Recording | None]:
    """transformers' ``output_attentions`` and ``output_hidden_states``: a recording that keeps only those sites."""
    if not (output_attentions or output_hidden_states):
        yield None
        return

    def keep(site: Site) -> bool:
        return (output_attentions and site.name == "weights") or (
            output_hidden_states and site.part is None and site.name in ("input", "output"))

    with record(keep) as captured:
        yield captured
