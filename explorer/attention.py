"""Attention maps: every layer x head's weights from one forward pass, kept for a few recent inputs so the
layer and head pickers answer at once, and the choice of what to show kept to what the model has.
"""

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np
import torch

from .generation import DecodingSettings
from .inputs import echo, index
from .tokens import FORWARD_MAX_TOKENS, forward_inputs, numbered, token_labels

# the one list of attention kinds: a decoder-only model has "self"; an encoder-decoder the other three
ATTENTION_KINDS = {
    "self": "masked self-attention",
    "encoder": "encoder self-attention",
    "decoder": "decoder masked self-attention",
    "cross": "cross-attention",
}
# what the rows (queries) and columns (keys) of each kind's maps are
QUERIES_KEYS = {"self": ("token", "token"), "encoder": ("source token", "source token"),
                "decoder": ("output token", "output token"), "cross": ("output token (decoder)", "source token (encoder)")}
SEQ2SEQ_KINDS = ("encoder", "decoder", "cross")


def kinds_of(is_encoder_decoder: bool) -> tuple[str, ...]:
    return SEQ2SEQ_KINDS if is_encoder_decoder else ("self",)


@dataclass
class AttentionMaps:
    """``weights[kind]``: (layers, heads, queries, keys) numpy array; labels index-prefixed so they are unique.
    For an encoder-decoder, ``rewrite`` is what the decoder read and ``decoded_with`` how it was decoded."""

    weights: dict[str, np.ndarray]
    query_labels: dict[str, list[str]]
    key_labels: dict[str, list[str]]
    notices: list[str] = field(default_factory=list)
    rewrite: str = ""
    decoded_with: str = ""


def attention_maps(model, tokenizer, text: str, decoding: DecodingSettings, max_tokens: int = FORWARD_MAX_TOKENS) -> AttentionMaps:
    """Every layer x head's attention weights for ``text`` from one forward pass (``output_attentions``)."""
    read = forward_inputs(model, tokenizer, text, decoding, max_tokens)
    with torch.inference_mode():
        out = model(**read.inputs, output_attentions=True, use_cache=False)
    source = numbered(token_labels(tokenizer, read.source_ids))
    if not model.config.is_encoder_decoder:
        stacked = {"self": out.attentions}
        queries = keys = {"self": source}
    else:
        target = numbered(token_labels(tokenizer, read.target_ids))
        stacked = {"encoder": out.encoder_attentions, "decoder": out.decoder_attentions, "cross": out.cross_attentions}
        queries = {"encoder": source, "decoder": target, "cross": target}
        keys = {"encoder": source, "decoder": target, "cross": source}
    weights = {kind: torch.stack([w[0] for w in layers]).float().numpy() for kind, layers in stacked.items()}
    return AttentionMaps(weights, dict(queries), dict(keys), read.notices, read.rewrite, read.decoded_with)


class AttentionCache:
    """The maps of the last ``size`` (checkpoint, text, decoding) inputs, shared by all sessions."""

    def __init__(self, size: int = 8):
        self.size = size
        self._maps: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key, compute) -> AttentionMaps:
        with self._lock:
            if key in self._maps:
                self._maps.move_to_end(key)
                return self._maps[key]
        maps = compute()
        with self._lock:
            self._maps[key] = maps
            while len(self._maps) > self.size:
                self._maps.popitem(last=False)
        return maps


@dataclass(frozen=True)
class View:
    """What to draw: an attention kind, a layer, and a head (None: the mean over heads)."""

    kind: str
    layer: int
    head: int | None


def pick_view(maps: AttentionMaps, kind, layer, head) -> tuple[View, list[str]]:
    """The kind, layer and head asked for, kept to what the model has, with a notice for each change: a
    kind the model lacks becomes its first (self, or cross for an encoder-decoder); a layer or head out of
    range (or not a number: Infinity, NaN, text) becomes the nearest that exists; 'average' is the mean."""
    notices = []
    available = list(maps.weights)
    if kind not in available:
        chosen = "cross" if "cross" in available else available[0]
        if kind not in (None, "") and not (kind == "self" and chosen == "cross"):
            notices.append(f"This model has no attention kind {echo(kind, 20)}; it has {', '.join(available)}: showing {chosen}.")
        kind = chosen
    n_layers, n_heads = maps.weights[kind].shape[:2]
    layer, more = index(layer, n_layers, "layer")
    notices += more
    if head is None or (isinstance(head, str) and head.strip().lower() in ("average", "mean", "")):
        return View(kind, layer, None), notices
    head, more = index(head, n_heads, "head")
    return View(kind, layer, head), notices + more
