"""Attention, step by step, with the real numbers.

A ``Step`` is one line of the computation: its formula, its values (a vector or a matrix whose rows are
tokens) and, where the model computed the same quantity in its own forward pass, the largest difference
between the two. ``attend`` is the formula every step-by-step view uses:

    scores  = q k^T / sqrt(d_head)       (queries x keys)
    weights = softmax(scores + bias)     (bias: 0 where a key may be seen, very negative where it is masked,
                                          ALiBi's -slope * distance)
    output  = weights v
"""

import math
from dataclasses import dataclass

import numpy as np
import torch

from explorer.generation.decoding import DecodingSettings
from explorer.core.inputs import pick
from explorer.views.forward_pass import ATTENTION_KINDS, AttentionKind, attention_kind, recorded_pass
from explorer.generation.tokens import FORWARD_MAX_TOKENS
from modeling.modeling_scratch_transformer import (RMSNorm, alibi_bias, alibi_slopes, rope_angles, rope_tables, rotate,
                                                   score_bias)


@dataclass
class Step:
    """One step: ``values`` is 1-D (one vector) or 2-D (rows labelled by ``rows``, e.g. one per token)."""

    title: str
    formula: str
    values: np.ndarray
    rows: list[str] | None = None
    columns: list[str] | None = None
    note: str = ""
    model_difference: float | None = None  # max |recomputed - the model's own|, where the model has it
    highlight: int | None = None  # a row to highlight (the query's own key, the head being followed)
    tensor_shape: tuple[int, ...] | None = None  # the quantity's own shape, where ``values`` arranges it for display
    layout: str = ""  # how ``values`` arranges it: "shown in rows of 32", "one column per quantity"

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape of the quantity itself (a 256-wide vector is (256,), however it is wrapped for display)."""
        return tuple(self.values.shape) if self.tensor_shape is None else tuple(self.tensor_shape)


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor | None = None
           ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(scores q k^T / sqrt(d_head), weights softmax(scores + bias), output weights v); d_head = q.shape[-1]."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    weights = (scores if bias is None else scores + bias).softmax(dim=-1)
    return scores, weights, weights @ v


# ----------------------------------------------------------------------------------------------
# Recomputing one attention sublayer from its input and the layer's weights
# ----------------------------------------------------------------------------------------------


def layer_norm(x: torch.Tensor, norm: torch.nn.LayerNorm) -> torch.Tensor:
    """LayerNorm(x) = (x - mean) / sqrt(var + eps) * gamma + beta, over the last dimension (biased variance);
    for an RMSNorm, x / sqrt(mean(x^2) + eps) * gamma."""
    if isinstance(norm, RMSNorm):
        return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + norm.eps) * norm.weight
    centred = x - x.mean(-1, keepdim=True)
    normed = centred / torch.sqrt(centred.pow(2).mean(-1, keepdim=True) + norm.eps) * norm.weight
    return normed if norm.bias is None else normed + norm.bias


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """x W^T + b (torch stores W as (out, in))."""
    y = x @ weight.T
    return y if bias is None else y + bias


@dataclass
class Recomputed:
    """One attention sublayer recomputed for every head and query; batch of 1 kept, shapes as in the record."""

    residual_in: torch.Tensor  # (1, T, D)
    sublayer_input: torch.Tensor  # (1, T, D): LayerNorm(x) (pre-norm) or x (post-norm)
    q: torch.Tensor  # (1, H, T, d_head) before RoPE
    k: torch.Tensor  # (1, H_kv, S, d_head): n_kv_heads key heads
    v: torch.Tensor  # (1, H_kv, S, d_head)
    q_rotated: torch.Tensor | None
    k_rotated: torch.Tensor | None
    bias: torch.Tensor | None  # broadcastable to (1, H, T, S)
    scores: torch.Tensor  # (1, H, T, S) q.k / sqrt(d_head), before the bias
    weights: torch.Tensor  # (1, H, T, S)
    heads: torch.Tensor  # (1, H, T, d_head)
    concatenated: torch.Tensor  # (1, T, D)
    output: torch.Tensor  # (1, T, D) concatenated W_O^T + b_O
    residual_out: torch.Tensor  # (1, T, D) after the add (pre-norm) or Add & Norm (post-norm)


def recompute_attention(model, kind: str, layer: int, residual_in: torch.Tensor,
                        memory: torch.Tensor | None = None) -> Recomputed:
    """The sublayer of attention ``kind`` from the residual stream going in (1, T, D) (and the encoder memory
    (1, S, D) for cross-attention), with the layer's own weights and the project's RoPE, ALiBi and mask functions."""
    config, attention = model.config, ATTENTION_KINDS[kind]
    module, add_norm = attention.modules(model, layer)
    n_heads, d_head = config.n_heads, config.d_head
    x = residual_in
    sub = layer_norm(x, add_norm.norm) if config.norm_first else x
    source = memory if attention.is_cross else sub
    length, keys = x.shape[1], source.shape[1]

    def split(y: torch.Tensor) -> torch.Tensor:  # (1, T, heads * d_head) -> (1, heads, T, d_head); k, v: n_kv_heads heads
        return y.view(1, y.shape[1], -1, d_head).transpose(1, 2)

    q, k, v = (split(linear(x_in, *module.projection(part))) for x_in, part in ((sub, "q"), (source, "k"), (source, "v")))
    q_rot = k_rot = position_bias = None
    positions = torch.arange(length)[None]
    if config.position_encoding == "rope" and not attention.is_cross:  # positions act in self-attention only
        tables = rope_tables(*rope_angles(positions, config.d_rotary, config.rope_theta))
        q_rot, k_rot = rotate(q, *tables), rotate(k, *tables)  # the first d_rotary dimensions of each head
    if config.position_encoding == "alibi" and not attention.is_cross:
        position_bias = alibi_bias(positions, positions, n_heads)
    bias = score_bias(None, position_bias, attention.causal, length, keys, x.dtype, x.device)
    groups = n_heads // config.n_kv_heads  # grouped-query attention: query head h reads key/value head h // groups
    k_used = (k if k_rot is None else k_rot).repeat_interleave(groups, dim=1)
    scores, weights, heads = attend(q if q_rot is None else q_rot, k_used, v.repeat_interleave(groups, dim=1), bias)
    concatenated = heads.transpose(1, 2).reshape(1, length, -1)
    output = linear(concatenated, module.out_proj.weight, module.out_proj.bias)
    residual_out = x + output if config.norm_first else layer_norm(x + output, add_norm.norm)
    return Recomputed(x, sub, q, k, v, q_rot, k_rot, bias, scores, weights, heads, concatenated, output, residual_out)


# ----------------------------------------------------------------------------------------------
# The step-by-step view of one head and one query token
# ----------------------------------------------------------------------------------------------

PRE_NORM_ADD = ("Pre-norm: the sublayer's output is added to the stream and nothing normalises after the add (the "
                "LayerNorm came before the sublayer); the paper's post-norm Add & Norm is LN(x + Sublayer(x)).")
MASKED_BELOW = -1e30  # a bias below this is a mask (the model uses the dtype's most negative value)


@dataclass
class StepsView:
    steps: list[Step]
    query_tokens: list[str]
    key_tokens: list[str]
    kind: str
    layer: int
    head: int
    query: int
    max_difference: float  # the largest model_difference of any step
    notices: list[str]


def _difference(mine: torch.Tensor, theirs: torch.Tensor) -> float:
    return float((mine.float() - theirs.float()).abs().max())


def attention_steps(model, tokenizer, text: str, kind: str, layer, head, query,
                    decoding: DecodingSettings = DecodingSettings(False), max_tokens: int = FORWARD_MAX_TOKENS) -> StepsView:
    """The chosen sublayer recomputed from its input in the text's recorded run; the steps of head ``head`` for
    query token ``query``, each compared with the model's own number. An encoder-decoder's decoder reads its own
    rewrite of the text, decoded with ``decoding``."""
    attention, config = attention_kind(model, kind), model.config
    layer = pick(layer, attention.n_layers(config), "layer")
    head = pick(head, config.n_heads, "head")
    run = recorded_pass(model, tokenizer, text, decoding, max_tokens)
    recording = run.recording
    with torch.inference_mode():
        r = recompute_attention(model, attention.name, layer, attention.residual_in(recording, layer), attention.memory(recording))
    queries, keys = run.tokens(attention.queries), run.tokens(attention.keys)
    t = pick(query, len(queries), "query token")
    own, own_out = attention.record(recording, layer), attention.residual_out(recording, layer)
    embeddings = recording.stack(attention.stack).embeddings
    steps = _steps(model, attention, layer, head, t, r, own, own_out, embeddings, queries, keys)
    worst = max((s.model_difference for s in steps if s.model_difference is not None), default=0.0)
    return StepsView(steps, queries, keys, attention.name, layer, head, t, worst, list(run.read.notices))


def _steps(model, attention: AttentionKind, layer, h, t, r: Recomputed, own, own_out, embeddings, queries, keys) -> list[Step]:
    config = model.config
    d, d_head = config.d_model, config.d_head
    query_name = queries[t]
    wrap = dict(columns=[f"{c}" for c in range(d_head)])
    chunks = [f"{i * d_head}–{(i + 1) * d_head - 1}" for i in range(d // d_head)]

    def vector(title, formula, x, theirs=None, note="", highlight=None, rows=None):  # a d_model vector, shown d_head per row
        return Step(title, formula, x.reshape(d // d_head, d_head).numpy(), rows or chunks, wrap["columns"], note,
                    None if theirs is None else _difference(x, theirs), highlight, tuple(x.shape), f"shown in rows of {d_head}")

    def one(title, formula, x, theirs, note=""):  # a d_head vector of one head, shown as one row
        return Step(title, formula, x.numpy()[None], [query_name], wrap["columns"], note, _difference(x, theirs),
                    tensor_shape=tuple(x.shape))

    def per_key(title, formula, x, theirs=None, note=""):  # (keys, d_head)
        return Step(title, formula, x.numpy(), keys, wrap["columns"], note,
                    None if theirs is None else _difference(x, theirs), None if attention.is_cross else t)

    steps = []
    where = "the decoder's residual stream after its masked self-attention" if attention.is_cross else (
        "the embeddings" if layer == 0 else f"the output of layer {layer - 1}")
    if layer == 0 and not attention.is_cross and embeddings is not None:
        steps.append(vector("Token embedding", "E[x_t] · √d_model", embeddings.token[0, t], note=(
            f"Row x_t of the embedding table, times √{d} = {d ** 0.5:.3g}." if config.scale_embeddings else "")))
        if embeddings.position is not None:
            steps.append(vector(f"Position encoding ({config.position_encoding})", "PE(t)", embeddings.position[0, t],
                                note="Added to the token embedding once, before layer 0."))
    steps.append(vector("Residual stream going in", "x_t", r.residual_in[0, t], note=(
        f"Row {query_name} of {where}: the model's own numbers, where the recomputation starts.")))
    if config.norm_first:
        x = r.residual_in[0, t]
        norm_formula = ("LN(x_t) = x_t / √(mean(x_t²) + ε) · γ   (RMSNorm)" if config.norm == "rmsnorm"
                        else "LN(x_t) = (x_t − mean) / √(var + ε) · γ + β")
        steps.append(vector("LayerNorm, then the sublayer (pre-norm)", norm_formula, r.sublayer_input[0, t],
                            own.input[0, t], note=f"mean {float(x.mean()):.4g}, std {float(x.std(unbiased=False)):.4g}: "
                            "every row is rescaled to mean 0, variance 1 before attention reads it."))
    sl = slice(h * d_head, (h + 1) * d_head)
    steps.append(one(f"Query of head {h}", ("q = LN(x_t) W_Q^h + b_Q^h" if config.norm_first else "q = x_t W_Q^h + b_Q^h"),
                     r.q[0, h, t], own.query[0, h, t],
                     f"W_Q^h is columns {sl.start}–{sl.stop - 1} of W_Q (d_model × d_model; in torch, rows {sl.start}–"
                     f"{sl.stop - 1} of qkv_proj.weight, whose rows {d}–{3 * d - 1} hold W_K and W_V): each head works "
                     f"in d_k = d_model / heads = {d} / {config.n_heads} = {d_head} dimensions."))
    source = "the encoder's output (memory)" if attention.is_cross else "every token's LN(x)"
    kv = h // (config.n_heads // config.n_kv_heads)  # the key/value head this query head reads (grouped-query)
    shared = "" if config.n_kv_heads == config.n_heads else f" (key/value head {kv}, shared by grouped-query attention)"
    steps.append(per_key(f"Keys of head {h}", "k_j = source_j W_K^h + b_K^h", r.k[0, kv], own.key[0, kv],
                         f"One key per token it may attend to, from {source}{shared}."))
    steps.append(per_key(f"Values of head {h}", "v_j = source_j W_V^h + b_V^h", r.v[0, kv], own.value[0, kv]))
    if r.q_rotated is not None:
        steps.append(one("Query after RoPE", "R(t) q: pair i turned by t · θ_i, θ_i = θ^(−2i/d_k)", r.q_rotated[0, h, t],
                         own.query_rotated[0, h, t], "RoPE acts here, inside attention, in every layer; nothing was added to the embeddings."))
        steps.append(per_key("Keys after RoPE", "R(j) k_j", r.k_rotated[0, kv], own.key_rotated[0, kv],
                             "R(t)q · R(j)k = q · R(j − t)k: the score depends on the offset j − t, not on t itself."))
    bias = torch.zeros(r.scores.shape[-1]) if r.bias is None else r.bias.expand_as(r.scores)[0, h, t]
    own_bias = torch.zeros_like(bias) if own.bias is None else own.bias.expand_as(own.scores)[0, h, t]
    table = torch.stack([r.scores[0, h, t], bias, r.scores[0, h, t] + bias, r.weights[0, h, t]], dim=1)
    steps.append(Step("Scores, mask and softmax", "s_j = q · k_j / √d_k;   w = softmax(s + bias)", table.numpy(), keys,
                      ["q·k/√d_k", "bias", "s + bias", "weight w"], _bias_note(config, attention, h),
                      _scores_difference(table, own.scores[0, h, t], own_bias, own.weights[0, h, t]),
                      None if attention.is_cross else t, tuple(r.scores[0, h, t].shape),
                      "one column per quantity, one row per key"))
    steps.append(one(f"Output of head {h}", "o = Σ_j w_j v_j", r.heads[0, h, t], own.heads[0, h, t],
                     "The values, mixed by the weights."))
    steps.append(vector("All heads concatenated", "Concat(o_0, …, o_H−1)", r.concatenated[0, t], own.concatenated[0, t],
                        f"Every head did the same with its own W_Q, W_K, W_V; head {h} is highlighted.", h,
                        [f"head {i}" for i in range(config.n_heads)]))
    steps.append(vector("Output projection", "Concat(…) W_O^T + b_O", r.output[0, t], own.output[0, t],
                        "W_O mixes the heads back into one d_model vector."))
    if config.norm_first:
        steps.append(vector("Add (residual)", "x_t + attention(LN(x_t))", r.residual_out[0, t], own_out[0, t], PRE_NORM_ADD))
    else:
        steps.append(vector("Add & Norm", "LN(x_t + attention(x_t))", r.residual_out[0, t], own_out[0, t],
                            "Post-norm, as in the paper: add the sublayer's output to the stream, then LayerNorm."))
    return steps


def _scores_difference(table: torch.Tensor, own_scores, own_bias, own_weights) -> float:
    """Largest difference to the model's own scores (with bias), bias and weights. The model adds the bias
    before it keeps anything, so its q.k of a masked key is not known: a masked key must be masked in both."""
    visible = table[:, 1] > MASKED_BELOW
    if not torch.equal(visible, own_bias > MASKED_BELOW):
        return float("inf")
    return max(_difference(table[visible, 0], (own_scores - own_bias)[visible]), _difference(table[visible, 1], own_bias[visible]),
               _difference(table[visible, 2], own_scores[visible]), _difference(table[:, 3], own_weights))


def _bias_note(config, attention: AttentionKind, head: int) -> str:
    parts = []
    if attention.causal:
        parts.append("causal mask: a key after the query is masked (weight exactly 0)")
    else:
        parts.append("no mask: every " + ("source token" if attention.is_cross else "token") + " is visible")
    if config.position_encoding == "alibi" and not attention.is_cross:
        slope = float(alibi_slopes(config.n_heads)[head])
        parts.append(f"ALiBi adds −{slope:.4g} · |t − j| (this head's slope)")
    return "Bias: " + "; ".join(parts) + "."
