"""Attention maps: every layer x head's weights of one recorded run, and the choice of what to show kept to what
the model has.
"""

from dataclasses import dataclass, field

import numpy as np

from explorer.generation.decoding import DecodingSettings
from explorer.core.inputs import echo, index
from explorer.views.forward_pass import ATTENTION_KINDS, kinds_of, recorded_pass  # noqa: F401 - kinds_of is part of this module's interface
from explorer.generation.tokens import FORWARD_MAX_TOKENS


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
    """Every layer x head's attention weights for ``text``, read from its recorded run."""
    run = recorded_pass(model, tokenizer, text, decoding, max_tokens)

    def maps() -> AttentionMaps:
        kinds = run.kinds()
        return AttentionMaps({kind: run.weights(kind).float().numpy() for kind in kinds},
                             {kind: run.tokens(ATTENTION_KINDS[kind].queries) for kind in kinds},
                             {kind: run.tokens(ATTENTION_KINDS[kind].keys) for kind in kinds},
                             run.read.notices, run.read.rewrite, run.read.decoded_with)

    return run.cached("attention maps", maps)


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
        if kind not in (None, "", "self"):  # "self" is the menus' default: an encoder-decoder shows cross-attention
            notices.append(f"This model has no attention kind {echo(kind, 20)}; it has {', '.join(available)}: showing {chosen}.")
        kind = chosen
    n_layers, n_heads = maps.weights[kind].shape[:2]
    layer, more = index(layer, n_layers, "layer")
    notices += more
    if head is None or (isinstance(head, str) and head.strip().lower() in ("average", "mean", "")):
        return View(kind, layer, None), notices
    head, more = index(head, n_heads, "head")
    return View(kind, layer, head), notices + more
