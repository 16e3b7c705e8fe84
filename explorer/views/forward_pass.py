"""One recorded pass: the forward pass of (checkpoint, text, decoding settings), every ``modeling.Site`` of it kept,
shared by every view of that text (attention, step by step, logit lens, the ablation baseline, the trace).

For an encoder-decoder model the pass also holds the decoder's input: the model's own rewrite of the text,
generated once with the decoding settings. Passes are kept in a bounded cache (least recently used out first),
shared by all sessions; each names its model as its owner, so the registry counts it against the memory bound and
drops it with the model (``explorer.core.caches``). A kind of attention is an ``AttentionKind``: it knows its module, its record and its mask,
so no view works out where a kind of attention lives.
"""

import threading
from dataclasses import dataclass, field

import torch

from modeling import Site, record
from modeling.recording import AttentionRecord, Recording

from explorer.core.caches import LRUCache
from explorer.generation.decoding import DecodingSettings
from explorer.core.inputs import InputProblem, echo
from explorer.generation.labels import token_labels
from explorer.generation.tokens import FORWARD_MAX_TOKENS, ForwardInputs, forward_inputs, numbered

PASSES_KEPT = 4  # a run of a 256-token text keeps every layer's scores and weights: tens of MB


@dataclass(frozen=True)
class AttentionKind:
    """One kind of attention: its ``name`` in the app (a public value: "self", "encoder", "decoder", "cross"), where
    it is in the model (``stack``, and ``part``: the model's "self" or "cross"), whether it is causal, and which
    tokens its queries and keys are ("source": the text the encoder reads, "target": the tokens the decoder reads).

    This is the one place that maps a kind to the model's own names: its sublayer modules ``self_attn`` and
    ``cross_attn`` (the weights are named by them), the ``part`` of its recorded ``modeling.Site``s, and the residual
    stream after it (``after_self_attention``, ``after_cross_attention``). Every view asks the kind."""

    name: str
    label: str
    stack: str
    part: str
    causal: bool
    queries: str
    keys: str
    axis_labels: tuple[str, str]  # what a map's rows and columns are called

    @property
    def is_cross(self) -> bool:
        return self.part == "cross"

    def n_layers(self, config) -> int:
        return config.n_encoder_layers if self.stack == "encoder" else config.n_layers

    def site(self, layer: int, name: str) -> Site:
        """Where ``name`` (a field of ``AttentionRecord``: "heads", "output", ...) of this attention in ``layer`` is
        recorded."""
        return Site(self.stack, layer, self.part, name)

    def modules(self, model, layer: int):
        """(MultiHeadAttention, its AddAndNorm) of this kind in ``layer``."""
        block = getattr(model.model, self.stack).stack.layers[layer]
        return (block.cross_attn, block.cross_attn_norm) if self.is_cross else (block.self_attn, block.self_attn_norm)

    def record(self, recording: Recording, layer: int) -> AttentionRecord:
        return recording.attention(self.stack, layer, self.part)

    def residual_in(self, recording: Recording, layer: int) -> torch.Tensor:
        """The residual stream this sublayer reads from (cross-attention comes after the masked self-attention)."""
        name = "after_self_attention" if self.is_cross else "input"
        return recording[self.stack, layer, None, name]

    def residual_out(self, recording: Recording, layer: int) -> torch.Tensor:
        return recording[self.stack, layer, None, "after_cross_attention" if self.is_cross else "after_self_attention"]

    def memory(self, recording: Recording) -> torch.Tensor | None:
        """What the keys and values are computed from, when it is not the sublayer's own input: the encoder's output."""
        return recording["encoder", None, None, "output"] if self.is_cross else None


# the one list of attention kinds, by the name the app shows: a decoder-only model has "self"; an encoder-decoder
# the other three
ATTENTION_KINDS = {
    "self": AttentionKind("self", "masked self-attention", "decoder", "self", True, "target", "target", ("token", "token")),
    "encoder": AttentionKind("encoder", "encoder self-attention", "encoder", "self", False, "source", "source",
                             ("source token", "source token")),
    "decoder": AttentionKind("decoder", "decoder masked self-attention", "decoder", "self", True, "target", "target",
                             ("output token", "output token")),
    "cross": AttentionKind("cross", "cross-attention", "decoder", "cross", False, "target", "source",
                           ("output token (decoder)", "source token (encoder)")),
}
SEQ2SEQ_KINDS = ("encoder", "decoder", "cross")


def kinds_of(is_encoder_decoder: bool) -> tuple[str, ...]:
    """The attention kinds a model has: "self" for a decoder-only model; the other three for an encoder-decoder."""
    return SEQ2SEQ_KINDS if is_encoder_decoder else ("self",)


def attention_kind(model, kind) -> AttentionKind:
    """The attention kind named ``kind``, if the model has it; else an InputProblem naming the kinds it has."""
    kinds = kinds_of(bool(model.config.is_encoder_decoder))
    if kind not in kinds:
        raise InputProblem(f"Attention must be one of {', '.join(kinds)} for this model; got {echo(kind, 40)}.")
    return ATTENTION_KINDS[kind]


@dataclass
class RecordedPass:
    """The recorded pass: ``read`` (the inputs, and an encoder-decoder's rewrite), the logits (T, vocab) of the
    decoder's tokens, and ``recording`` (every site). ``derived`` keeps what views compute from it."""

    model: object = field(repr=False)
    tokenizer: object = field(repr=False)
    read: ForwardInputs
    logits: torch.Tensor = field(repr=False)
    recording: Recording = field(repr=False)
    derived: dict = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def config(self):
        return self.model.config

    def kinds(self) -> tuple[str, ...]:
        return kinds_of(bool(self.config.is_encoder_decoder))

    def tokens(self, which: str) -> list[str]:
        """Numbered labels of the "source" or "target" tokens."""
        return numbered(token_labels(self.tokenizer, self.read.source_ids if which == "source" else self.read.target_ids))

    def weights(self, kind: str) -> torch.Tensor:
        """(layers, heads, queries, keys) attention weights of ``kind``, batch row 0."""
        attention = ATTENTION_KINDS[kind]
        return torch.stack([attention.record(self.recording, i).weights[0] for i in range(attention.n_layers(self.config))])

    def hidden_states(self) -> tuple[torch.Tensor, ...]:
        """The decoder's residual stream before each layer, then its output (after the final norm, LayerNorm or
        RMSNorm, where the model has one; a post-norm stack ends on its last Add & Norm)."""
        return self.recording.hidden_states("decoder")

    def cached(self, name, compute):
        """``compute()`` once per run (what several views or requests derive from it)."""
        with self._lock:
            if name not in self.derived:
                self.derived[name] = compute()
            return self.derived[name]


def record_pass(model, tokenizer, text: str, decoding: DecodingSettings, max_tokens: int = FORWARD_MAX_TOKENS) -> RecordedPass:
    """One forward pass over ``text`` inside ``record()`` (an encoder-decoder first writes its rewrite)."""
    read = forward_inputs(model, tokenizer, text, decoding, max_tokens)
    with torch.inference_mode(), record() as recording:
        logits = model(**read.inputs, use_cache=False).logits[0].float()
    return RecordedPass(model, tokenizer, read, logits, recording)


PASSES = LRUCache(PASSES_KEPT)


def recorded_pass(model, tokenizer, text: str, decoding: DecodingSettings = DecodingSettings(False),
                 max_tokens: int = FORWARD_MAX_TOKENS) -> RecordedPass:
    """The run of (this model, text, decoding) from the cache, recorded on first use. A decoder-only model does not
    decode, so its key leaves the decoding settings out. The run holds the model, so its id stays its own."""
    key = (id(model), text, decoding if model.config.is_encoder_decoder else None, max_tokens)
    return PASSES.get(key, lambda: record_pass(model, tokenizer, text, decoding, max_tokens), owner=model)
