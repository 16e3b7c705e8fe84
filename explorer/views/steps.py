"""Attention, step by step, with the real numbers.

A ``Step`` is one line of the computation: its formula, its values (a vector or a matrix whose rows are
tokens) and, where the model computed the same quantity in its own forward pass, the parity of the two (the largest
difference, judged against the size of the numbers: ``explorer.core.parity``). ``attend`` is the formula every
step-by-step view uses:

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
from explorer.core.parity import Parity, worst
from explorer.views.architecture import Architecture, describe
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
    model_parity: Parity | None = None  # recomputed against the model's own number, where the model has it
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
    sublayer_input: torch.Tensor  # (1, T, D): Norm(x), LayerNorm or RMSNorm (pre-norm), or x (post-norm)
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
        tables = rope_tables(*rope_angles(positions, config.d_rotary, config.rope_theta,
                                                 config.rope_frequency_scaling))
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
    parity: Parity  # the step farthest from the model's own numbers (relative to their size)
    notices: list[str]
    architecture: Architecture  # what the model is: the "This model" lines above the steps
    rewrite: str = ""  # encoder-decoder: the model's own rewrite its decoder read, as text
    decoded_with: str = ""  # encoder-decoder: how that rewrite was decoded


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
    parity = worst(s.model_parity for s in steps if s.model_parity is not None)
    return StepsView(steps, queries, keys, attention.name, layer, head, t, parity, list(run.read.notices), describe(model),
                     run.read.rewrite, run.read.decoded_with)


def _steps(model, attention: AttentionKind, layer, h, t, r: Recomputed, own, own_out, embeddings, queries, keys) -> list[Step]:
    config, arch = model.config, describe(model)
    d, d_head = config.d_model, config.d_head
    query_name = queries[t]
    wrap = dict(columns=[f"{c}" for c in range(d_head)])
    chunks = [f"{i * d_head}–{(i + 1) * d_head - 1}" for i in range(d // d_head)]

    def vector(title, formula, x, theirs=None, note="", highlight=None, rows=None):  # a d_model vector, shown d_head per row
        return Step(title, formula, x.reshape(d // d_head, d_head).numpy(), rows or chunks, wrap["columns"], note,
                    None if theirs is None else Parity.between(x, theirs), highlight, tuple(x.shape), f"shown in rows of {d_head}")

    def one(title, formula, x, theirs, note=""):  # a d_head vector of one head, shown as one row
        return Step(title, formula, x.numpy()[None], [query_name], wrap["columns"], note, Parity.between(x, theirs),
                    tensor_shape=tuple(x.shape))

    def per_key(title, formula, x, theirs=None, note=""):  # (keys, d_head)
        return Step(title, formula, x.numpy(), keys, wrap["columns"], note,
                    None if theirs is None else Parity.between(x, theirs), None if attention.is_cross else t)

    steps = _stream_in(arch, config, attention, layer, t, r, own, embeddings, query_name, vector)
    kv = arch.kv_head_of(h)  # the key/value head this query head reads (grouped-query attention)
    steps.append(one(f"Query of head {h}", arch.projection_formula("q", arch.sublayer_input("x_t")), r.q[0, h, t],
                     own.query[0, h, t], _query_note(arch, h)))
    source = "the encoder's output (memory)" if attention.is_cross else f"every token's {arch.sublayer_input('x')}"
    g = f"{kv}" if arch.grouped else "h"
    title = f"head {h}" + (f" (key/value head {kv})" if arch.grouped else "")
    k_rows, v_rows = arch.head_rows("k", kv), arch.head_rows("v", kv)
    steps.append(per_key(f"Keys of {title}", arch.projection_formula("k", "source_j", g, "k_j"), r.k[0, kv], own.key[0, kv],
                         f"One key per token it may attend to, from {source}. W_K^{g} is rows {_span(k_rows)} of "
                         f"qkv_proj.weight." + (f" Query heads {_span(arch.query_heads_of(kv))} all read this key/value "
                                                "head (grouped-query attention)." if arch.grouped else "")))
    steps.append(per_key(f"Values of {title}", arch.projection_formula("v", "source_j", g, "v_j"), r.v[0, kv],
                         own.value[0, kv], f"W_V^{g} is rows {_span(v_rows)} of qkv_proj.weight."))
    if r.q_rotated is not None:
        rotated = "RoPE acts here, inside attention, in every layer; nothing was added to the embeddings."
        if arch.partial_rotary or arch.rope_scaling:
            rotated += f" {arch.rotary_text()[0].upper()}{arch.rotary_text()[1:]}."
        steps.append(one("Query after RoPE", f"R(t) q: pair i turned by t · θ_i, {arch.rope_frequency_formula()}, i < {arch.d_rotary // 2}",
                         r.q_rotated[0, h, t], own.query_rotated[0, h, t], rotated))
        steps.append(per_key("Keys after RoPE", "R(j) k_j", r.k_rotated[0, kv], own.key_rotated[0, kv],
                             "R(t)q · R(j)k = q · R(j − t)k: the score depends on the offset j − t, not on t itself."))
    bias = torch.zeros(r.scores.shape[-1]) if r.bias is None else r.bias.expand_as(r.scores)[0, h, t]
    own_bias = torch.zeros_like(bias) if own.bias is None else own.bias.expand_as(own.scores)[0, h, t]
    table = torch.stack([r.scores[0, h, t], bias, r.scores[0, h, t] + bias, r.weights[0, h, t]], dim=1)
    steps.append(Step("Scores, mask and softmax", "s_j = q · k_j / √d_k;   w = softmax(s + bias)", table.numpy(), keys,
                      ["q·k/√d_k", "bias", "s + bias", "weight w"], _bias_note(config, attention, h),
                      _scores_parity(table, own.scores[0, h, t], own_bias, own.weights[0, h, t]),
                      None if attention.is_cross else t, tuple(r.scores[0, h, t].shape),
                      "one column per quantity, one row per key"))
    steps.append(one(f"Output of head {h}", "o = Σ_j w_j v_j", r.heads[0, h, t], own.heads[0, h, t],
                     "The values, mixed by the weights."))
    shared = (f"its own W_Q, and W_K, W_V shared with its group: {arch.kv_sharing()}" if arch.grouped
              else "its own W_Q, W_K, W_V")
    steps.append(vector("All heads concatenated", "Concat(o_0, …, o_H−1)", r.concatenated[0, t], own.concatenated[0, t],
                        f"Every head did the same with {shared}; head {h} is highlighted.", h,
                        [f"head {i}" for i in range(config.n_heads)]))
    steps.append(vector("Output projection", arch.output_formula(), r.output[0, t], own.output[0, t],
                        "W_O mixes the heads back into one d_model vector."))
    steps.append(_residual_out(arch, r, own_out, t, vector))
    return steps


def _stream_in(arch: Architecture, config, attention: AttentionKind, layer, t, r: Recomputed, own, embeddings, query_name,
               vector) -> list[Step]:
    """The first steps: the embeddings (layer 0 of self-attention), the stream going in, and its norm (pre-norm)."""
    steps, d = [], config.d_model
    where = "the decoder's residual stream after its masked self-attention" if attention.is_cross else (
        "the embeddings" if layer == 0 else f"the output of layer {layer - 1}")
    if layer == 0 and not attention.is_cross and embeddings is not None:
        steps.append(vector("Token embedding", arch.embedding_formula(), embeddings.token[0, t], note=(
            f"Row x_t of the embedding table, times √{d} = {d ** 0.5:.3g}." if arch.scaled_embeddings else
            "Row x_t of the embedding table, as it is: this model does not multiply it by √d_model.")))
        if embeddings.position is not None:
            steps.append(vector(f"Position encoding ({config.position_encoding})", "PE(t)", embeddings.position[0, t],
                                note="Added to the token embedding once, before layer 0."))
    steps.append(vector("Residual stream going in", "x_t", r.residual_in[0, t], note=(
        f"Row {query_name} of {where}: the model's own numbers, where the recomputation starts.")))
    if arch.pre_norm:
        x, y = r.residual_in[0, t], r.sublayer_input[0, t]
        if arch.centres:
            stats = f"x_t has mean {float(x.mean()):.4g}, std {float(x.std(unbiased=False)):.4g}"
        else:
            stats = (f"x_t has mean {float(x.mean()):.4g}, root mean square {float(x.pow(2).mean().sqrt()):.4g}; "
                     f"the output's mean is {float(y.mean()):.4g}")
        which = (f"{arch.norm}_1, then attention (parallel residual)" if arch.parallel_residual
                 else f"{arch.norm}, then the sublayer (pre-norm)")
        parallel = (f" The feed-forward reads {arch.norm}_2(x_t) of the same x_t: a norm with its own weights, "
                    "beside attention." if arch.parallel_residual else "")
        steps.append(vector(which, arch.norm_formula("x_t", arch.sublayer_input("x_t")), y, own.input[0, t],
                            note=f"{stats}: {arch.norm_effect()}, before attention reads it.{parallel}"))
    return steps


def _query_note(arch: Architecture, h: int) -> str:
    rows, q = arch.qkv_rows(), arch.head_rows("q", h)
    grouped = (f" Keys and values have {arch.n_kv_heads} head{'s' if arch.n_kv_heads > 1 else ''} against the queries' "
               f"{arch.n_heads}: {arch.kv_sharing()}.") if arch.grouped else ""
    return (f"W_Q^h is columns {_span(q)} of W_Q (d_model × n_heads·d_k = {arch.d_model} × {len(rows['q'])}; in torch, "
            f"rows {_span(q)} of qkv_proj.weight, whose rows {_span(rows['k'])} hold W_K and {_span(rows['v'])} W_V): "
            f"each head works in d_k = d_model / heads = {arch.d_model} / {arch.n_heads} = {arch.d_head} dimensions."
            + grouped)


def _residual_out(arch: Architecture, r: Recomputed, own_out, t, vector) -> Step:
    """The stream after the sublayer: the residual add (pre-norm) or Add & Norm (post-norm)."""
    if not arch.pre_norm:
        return vector("Add & Norm", f"{arch.norm}(x_t + attention(x_t))", r.residual_out[0, t], own_out[0, t],
                      f"Post-norm, as in the paper: add the sublayer's output to the stream, then {arch.norm}.")
    note = (f"Pre-norm: the sublayer's output is added to the stream and nothing normalises after the add (the "
            f"{arch.norm} came before the sublayer); a post-norm layer (the paper's Add & Norm) would compute {arch.norm}(x + Sublayer(x)).")
    if arch.parallel_residual:
        note += (" Parallel residual: this layer's feed-forward reads x_t as well, not this sum, and its output is "
                 f"added after: {arch.residual_formula()}.")
    return vector("Add (residual)", f"x_t + attention({arch.sublayer_input('x_t')})", r.residual_out[0, t], own_out[0, t], note)


def _span(rows: range) -> str:
    return f"{rows.start}–{rows.stop - 1}"


def _scores_parity(table: torch.Tensor, own_scores, own_bias, own_weights) -> Parity:
    """The worst parity with the model's own scores (with bias), bias and weights. The model adds the bias
    before it keeps anything, so its q.k of a masked key is not known: a masked key must be masked in both."""
    visible = table[:, 1] > MASKED_BELOW
    if not torch.equal(visible, own_bias > MASKED_BELOW):
        return Parity(float("inf"), 0.0)
    return worst([Parity.between(table[visible, 0], (own_scores - own_bias)[visible]),
                  Parity.between(table[visible, 1], own_bias[visible]),
                  Parity.between(table[visible, 2], own_scores[visible]), Parity.between(table[:, 3], own_weights)])


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
