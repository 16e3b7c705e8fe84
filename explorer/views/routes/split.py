"""The parts of every update of the decoder's residual stream, from one recorded pass (``modeling.record``).

    attention     y_i = x_i + Σ_h Σ_j A^h[i,j] (v^h_j W_O^h) + b_O     v^h_j = LN(x_j) W_V^g + b_V^g, g = h // (H / H_kv)
    feed-forward  y_i = x_i + FFN(LN(x_i))
    parallel      y_i = x_i + (attention's parts) + FFN(LN_2(x_i))      (GPT-NeoX: one step, both read x)
    post-norm     the stream is LN(s_i), s_i = x_i + f(x_i): s_i is what is split (a norm after the add is no sum)

W_O^h is head h's d_head columns of W_O. A part c's share of y is its proximity, normalised over y's parts:
max(0, ||y||_1 − ||y − c||_1) / Σ_parts (Ferrando & Voita 2024). Splitting a position's update costs parts × D
floats; ``Splitter.split`` does the positions asked in chunks of at most ``CHUNK_FLOATS``.
"""

from dataclasses import dataclass

import torch

from explorer.views.forward_pass import ATTENTION_KINDS

CHUNK_FLOATS = 1 << 23  # at most this many floats (32 MB) of parts at once
AFTER = {"self": "after_self_attention", "cross": "after_cross_attention"}
STAGE_NAMES = {("self",): "attention", ("cross",): "cross-attention", ("ffn",): "feed-forward",
               ("self", "ffn"): "attention + feed-forward"}


@dataclass(frozen=True)
class Step:
    """One update of the decoder's residual stream: ``layer``, the sublayers whose parts it adds ("self", "cross",
    "ffn"), and the recorded streams before and after it (``LayerRecord``'s names). Row ``row`` of the graph is the
    stream after it; row 0 is the embeddings."""

    row: int
    layer: int
    sublayers: tuple[str, ...]
    before: str
    after: str

    @property
    def label(self) -> str:
        return f"L{self.layer} {STAGE_NAMES[self.sublayers]}"


def steps_of(config) -> list[Step]:
    """The decoder's updates in order: per layer attention (cross-attention) and feed-forward, or one parallel step."""
    steps = []
    for layer in range(config.n_layers):
        if config.parallel_residual:
            groups = [("self", "ffn")]
        else:
            groups = [("self",)] + ([("cross",)] if config.is_encoder_decoder else []) + (
                [("ffn",)] if config.feed_forward != "none" else [])
        before = "input"
        for k, group in enumerate(groups):
            after = "output" if k == len(groups) - 1 else AFTER[group[0]]
            steps.append(Step(len(steps) + 1, layer, group, before, after))
            before = after
    return steps


@dataclass(frozen=True)
class Part:
    """One part of an update: ``kind`` "residual", "attention", "bias" or "feed_forward"; for attention its head, its
    source position and which attention ("self" or "cross", whose sources are the encoder's)."""

    kind: str
    head: int | None = None
    source: int | None = None
    attention: str | None = None


@dataclass
class Split:
    """The parts of one update at positions ``positions``: ``vectors`` (n, parts, D) and ``shares`` (n, parts)."""

    parts: list[Part]
    vectors: torch.Tensor
    shares: torch.Tensor


def _attention_kind(config, sublayer: str):
    if sublayer == "cross":
        return ATTENTION_KINDS["cross"]
    return ATTENTION_KINDS["decoder" if config.is_encoder_decoder else "self"]


def head_values_through_w_o(model, recording, layer: int, sublayer: str) -> torch.Tensor:
    """(H, S, D): v^h_j W_O^h for every head h and source j, before the attention weights. Query head h reads
    key/value head h // (H / H_kv)."""
    kind = _attention_kind(model.config, sublayer)
    value = kind.record(recording, layer).value[0].float()  # (H_kv, S, d_head)
    w_o = kind.modules(model, layer)[0].out_proj.weight.float()  # (D, H d_head)
    heads = model.config.n_heads
    value = value.repeat_interleave(heads // value.shape[0], dim=0)  # (H, S, d_head)
    return torch.einsum("hsd,Dhd->hsD", value, w_o.reshape(w_o.shape[0], heads, -1))


def proximity_shares(vectors: torch.Tensor) -> torch.Tensor:
    """(..., parts, D) -> (..., parts): max(0, ||y||_1 − ||y − c||_1) normalised over the parts, y = Σ parts."""
    total = vectors.sum(-2, keepdim=True)
    raw = (total.abs().sum(-1) - (total - vectors).abs().sum(-1)).clamp(min=0)
    return raw / raw.sum(-1, keepdim=True).clamp(min=torch.finfo(raw.dtype).tiny)


class Splitter:
    """Splits the updates of one recorded pass; an attention sublayer's v W_O (H, S, D) is computed when its step is
    split and let go when the step is done (``split``), so at most one step's are held."""

    def __init__(self, model, recording):
        self.model, self.recording, self.config = model, recording, model.config
        self._projected: dict[tuple[int, str], torch.Tensor] = {}

    def stream(self, layer: int, name: str) -> torch.Tensor:
        """(T, D) the decoder's recorded residual stream ``name`` of ``layer``."""
        return self.recording["decoder", layer, None, name][0].float()

    def projected(self, layer: int, sublayer: str) -> torch.Tensor:
        key = (layer, sublayer)
        if key not in self._projected:
            self._projected[key] = head_values_through_w_o(self.model, self.recording, layer, sublayer)
        return self._projected[key]

    def parts_of(self, step: Step) -> list[Part]:
        parts = [Part("residual")]
        for sublayer in step.sublayers:
            if sublayer == "ffn":
                parts.append(Part("feed_forward"))
                continue
            heads, sources = self.projected(step.layer, sublayer).shape[:2]
            parts += [Part("attention", h, j, sublayer) for h in range(heads) for j in range(sources)]
            if _attention_kind(self.config, sublayer).modules(self.model, step.layer)[0].out_proj.bias is not None:
                parts.append(Part("bias", attention=sublayer))
        return parts

    def vectors(self, step: Step, positions: list[int]) -> torch.Tensor:
        """(n, parts, D) in ``parts_of``'s order: x_i, then per attention sublayer A^h[i,j] v^h_j W_O^h (head-major)
        and b_O, then FFN(LN(x_i))."""
        index = torch.tensor(positions)
        columns = [self.stream(step.layer, step.before)[index][:, None]]
        for sublayer in step.sublayers:
            if sublayer == "ffn":
                ffn = self.recording["decoder", step.layer, "ffn", "output"][0].float()
                columns.append(ffn[index][:, None])
                continue
            kind = _attention_kind(self.config, sublayer)
            weights = kind.record(self.recording, step.layer).weights[0].float()[:, index]  # (H, n, S)
            terms = weights.permute(1, 0, 2)[..., None] * self.projected(step.layer, sublayer)[None]  # (n, H, S, D)
            columns.append(terms.flatten(1, 2))
            bias = kind.modules(self.model, step.layer)[0].out_proj.bias
            if bias is not None:
                columns.append(bias.float().expand(len(positions), 1, -1))
        return torch.cat(columns, dim=1)

    def split(self, step: Step, positions: list[int]):
        """Yields (positions, Split) in chunks of at most ``CHUNK_FLOATS`` floats."""
        parts = self.parts_of(step)
        size = max(1, CHUNK_FLOATS // (len(parts) * self.config.d_model))
        for start in range(0, len(positions), size):
            chunk = positions[start:start + size]
            vectors = self.vectors(step, chunk)
            yield chunk, Split(parts, vectors, proximity_shares(vectors))
        for sublayer in step.sublayers:
            self._projected.pop((step.layer, sublayer), None)
