"""The Transformer of "Attention Is All You Need", written by hand, living in Hugging Face transformers, with the
block options that lead from the 2017 paper to today's models, each one config field beside its formula.

Reading order follows the data through the model:

    token ids -> TokenEmbedding (x sqrt(d_model)) -> + positional encoding -> TransformerStack of
    TransformerLayer (MultiHeadAttention, FeedForward, each inside AddAndNorm) -> LM head -> logits

The options (``ScratchTransformerConfig``): LayerNorm or RMSNorm (``make_norm``); pre- or post-norm, a parallel
residual, and attention-only layers with no feed-forward (``TransformerLayer``); the paper's feed-forward or a gated
one, SwiGLU (``FeedForward``); grouped-query attention and the biases (``MultiHeadAttention``); RoPE's base and rotary
fraction (``rope_angles``, ``rotate``); a tied or untied LM head. GPT-2, Llama, Qwen2, Mistral and Pythia are
settings of this one file (``convert.py``).

``ScratchTransformerModel`` / ``...ForCausalLM`` / ``...ForSeq2SeqLM`` are the Hugging Face models; ``Transformer``
(torch.nn.Transformer's API) lives in ``torch_transformer.py``. Attention runs through transformers' attention
interface: ``config._attn_implementation`` picks "eager" (the explicit softmax below), "sdpa" (the default) or any
registered backend. Every step of a forward pass is a named ``Site``; ``with record() as recording:`` keeps what runs
inside it. Shapes: B batch, T query length, S key length, H heads, D d_model, d_head = D / H the width of one head
(the paper's d_k).
"""
import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention.flex_attention import BlockMask, create_mask
from transformers import GenerationMixin, PreTrainedModel
from transformers.cache_utils import Cache, DynamicCache, EncoderDecoderCache
from transformers.masking_utils import create_bidirectional_mask, create_causal_mask
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import (BaseModelOutput, BaseModelOutputWithPastAndCrossAttentions,
                                           CausalLMOutputWithPast, Seq2SeqLMOutput, Seq2SeqModelOutput)
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS, slice_logits_to_keep
from transformers.utils.import_utils import is_tracing

from .configuration_scratch_transformer import ScratchTransformerConfig
# alibi_slopes, apply_rope, rotate_pairs and sinusoidal_encoding are imported for the views, which read them here
from .position_encodings import (  # noqa: F401
    LearnedPositionalEncoding, SinusoidalPositionalEncoding, alibi_bias, alibi_slopes, apply_rope, rope_angles,
    rope_tables, rotate, rotate_pairs, sinusoidal_encoding)
from .recording import Site, capturing, current_recording, name_sites, note_for

# ----------------------------------------------------------------------------------------------
# Embeddings (the position encodings themselves: position_encodings.py)
# ----------------------------------------------------------------------------------------------


class TokenEmbedding(nn.Embedding):
    """Token id -> vector: E[x] * sqrt(d_model) (paper §3.4), or E[x] unscaled (GPT-2).

    The paper scales because E is shared with the output layer, whose init keeps E small;
    sqrt(d_model) brings the embedding to the magnitude of the positional encoding it is added to."""

    def __init__(self, vocab_size: int, d_model: int, scale: bool = True):
        super().__init__(vocab_size, d_model)
        self.scale = math.sqrt(d_model) if scale else 1.0

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        try:  # the lookup checks every id (on the CPU an IndexError; CUDA asserts on the device): no sync here
            vectors = super().forward(input_ids)
            return vectors if self.scale == 1.0 else vectors * self.scale  # unscaled (GPT-2): no operator issued
        except IndexError:
            raise ValueError(
                f"token ids must be in [0, {self.num_embeddings - 1}] (vocab_size={self.num_embeddings}); "
                f"got ids from {int(input_ids.min())} to {int(input_ids.max())}"
            ) from None


def dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """F.dropout, issuing no operator where it changes nothing (inference, or p = 0)."""
    return F.dropout(x, p, training) if training and p > 0 else x


class InputEmbedding(nn.Module):
    """x = Dropout(TokenEmbedding(ids) + PE(positions)). RoPE, ALiBi and none add nothing here:
    they act inside attention."""

    def __init__(self, config: ScratchTransformerConfig):
        super().__init__()
        self.token = TokenEmbedding(config.vocab_size, config.d_model, config.scale_embeddings)
        if config.position_encoding == "sinusoidal":
            self.position = SinusoidalPositionalEncoding(config.d_model)
        elif config.position_encoding == "learned":
            self.position = LearnedPositionalEncoding(config.max_position_embeddings, config.d_model)
        else:
            self.position = None
        self.dropout = config.dropout
        self.site = None  # (stack, None, "embed"): named from the module tree (name_sites)

    def forward(
        self, input_ids: torch.Tensor | None, position_ids: torch.Tensor, inputs_embeds: torch.Tensor | None = None
    ) -> torch.Tensor:
        """``inputs_embeds`` (B, T, D) replaces TokenEmbedding(input_ids): what ``get_input_embeddings()`` returns."""
        note = note_for(current_recording())
        token = note(self.site, "token", self.token(input_ids) if inputs_embeds is None else inputs_embeds)
        position = None
        if self.position is not None:
            position = note(self.site, "position", self.position(position_ids).to(token.dtype))
        x = dropout(token if position is None else token + position, self.dropout, self.training)
        return note(self.site, "sum", x)


# ----------------------------------------------------------------------------------------------
# Attention and masks
# ----------------------------------------------------------------------------------------------


def score_bias(attention_mask: torch.Tensor | BlockMask | None, position_bias: torch.Tensor | None, is_causal: bool,
               query_length: int, key_length: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor | None:
    """Any mask an attention backend takes, as the one additive bias the explicit softmax adds to its scores.

    attention_mask as ``transformers.masking_utils`` builds it for the configured backend: None (no mask;
    with ``is_causal`` query t sees keys 0..t, as SDPA's ``is_causal``), bool (True = attend), float
    (added), or flex attention's BlockMask. ``position_bias`` (ALiBi) is added on top.
    """
    if isinstance(attention_mask, BlockMask):
        attention_mask = create_mask(attention_mask.mask_mod, *attention_mask.shape, device=device)
    if attention_mask is None and is_causal and query_length > 1:
        attention_mask = torch.ones(query_length, key_length, dtype=torch.bool, device=device).tril()
    if attention_mask is not None and attention_mask.dtype == torch.bool:
        attention_mask = torch.where(attention_mask, torch.zeros((), dtype=dtype, device=device), torch.finfo(dtype).min)
    if attention_mask is None or position_bias is None:
        return attention_mask if position_bias is None else position_bias
    return attention_mask + position_bias


def eager_attention_forward(module: nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                            attention_mask: torch.Tensor | BlockMask | None, scaling: float, dropout: float = 0.0,
                            position_bias: torch.Tensor | None = None, is_causal: bool = False,
                            **kwargs) -> tuple[torch.Tensor, torch.Tensor]:
    """The "eager" backend, every step materialised: softmax(Q K^T / sqrt(d_head) + bias) V.
    (B, H, T, d_head) q, (B, H, S, d_head) k, v -> (output (B, T, H, d_head), weights (B, H, T, S)).
    The bias, scores and weights are sites of ``module`` (a recording keeps them here)."""
    note = note_for(current_recording())
    if module.num_key_value_groups > 1:  # grouped-query attention: query head h reads key/value head h // groups
        key = key.repeat_interleave(module.num_key_value_groups, dim=1)
        value = value.repeat_interleave(module.num_key_value_groups, dim=1)
    bias = score_bias(attention_mask, position_bias, is_causal, query.shape[-2], key.shape[-2], query.dtype, query.device)
    if bias is not None:
        bias = note(module.site, "bias", bias)
    scores = query @ key.transpose(-2, -1) * scaling
    scores = note(module.site, "scores", scores if bias is None else scores + bias)
    weights = note(module.site, "weights", scores.softmax(dim=-1, dtype=torch.float32).to(query.dtype))
    return (F.dropout(weights, dropout, module.training) @ value).transpose(1, 2), weights


# torch 2.13's compiled flex attention on the CPU returned wrong values (NaN, once) for one row of a batch once a
# second pair of query/key lengths was compiled in the process: a seq2seq pass's decoder and cross-attention, a
# prefill then decode steps. A wrong number is worse than none, so the CPU is refused; CUDA runs it.
FLEX_ON_CPU = ("attn_implementation 'flex_attention' runs on CUDA only: on the CPU, torch's compiled flex kernel gave "
               "wrong values once a second query/key length was compiled; use 'sdpa' (the default) or 'eager'")


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O,
    head_i = softmax(Q W_i^Q (K W_i^K)^T / sqrt(d_head) + bias) V W_i^V,  d_head = d_model / h.

    Self-attention reads Q, K, V from the same sequence; cross-attention reads K, V from the encoder
    memory. Grouped-query attention (``n_kv_heads`` < h) projects fewer key/value heads, each shared by
    h / n_kv_heads query heads: a smaller KV cache, the same scores formula. The softmax itself is the configured
    backend (``config._attn_implementation``); when the weights are asked for (``output_attentions``, or a
    recording that keeps them), it is the eager one.
    """

    def __init__(self, config: ScratchTransformerConfig, layer_idx: int, is_cross_attention: bool = False,
                 is_causal: bool = False):
        super().__init__()
        self.config = config
        self.n_heads, self.n_kv_heads, self.d_head = config.n_heads, config.n_kv_heads, config.d_head
        self.num_key_value_groups = config.n_heads // config.n_kv_heads  # the name transformers' backends read
        self.scaling = config.d_head**-0.5
        self.layer_idx, self.is_cross_attention, self.is_causal = layer_idx, is_cross_attention, is_causal
        self.site = None  # (stack, layer, "self" or "cross"): named from the module tree (name_sites)
        self.dropout = config.attention_dropout
        d, q_rows, kv_rows = config.d_model, config.n_heads * config.d_head, config.n_kv_heads * config.d_head
        # W^Q, W^K, W^V stacked as the rows of one matrix (as GPT-2's c_attn and torch's in_proj_weight): rows
        # [0, D) are W^Q, then n_kv_heads * d_head rows of W^K, as many of W^V. One product projects all three.
        self.rows = {"q": q_rows, "k": kv_rows, "v": kv_rows}
        self.qkv_proj = nn.Linear(d, q_rows + 2 * kv_rows, bias=config.qkv_bias)
        self.out_proj = nn.Linear(q_rows, d, bias=config.attention_bias)

    def projection(self, parts: str) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The weight and bias of ``parts``, "q", "k", "v" or adjacent ones ("kv", "qkv"): their rows of
        ``qkv_proj`` (views, not copies)."""
        start = "qkv".find(parts)
        if not parts or start < 0:
            raise ValueError(f"parts must be q, k, v or adjacent ones (qk, kv, qkv), got {parts!r}")
        first = sum(self.rows[p] for p in "qkv"[:start])
        rows = slice(first, first + sum(self.rows[p] for p in parts))
        bias = self.qkv_proj.bias
        return self.qkv_proj.weight[rows], None if bias is None else bias[rows]

    def project(self, x: torch.Tensor, parts: str) -> tuple[torch.Tensor, ...]:
        """x (B, T, D) -> x W^P + b^P for each P in ``parts``, split into heads (B, heads, T, d_head); one product."""
        y = self.qkv_proj(x) if parts == "qkv" else F.linear(x, *self.projection(parts))
        if self.n_kv_heads == self.n_heads:  # every part has H heads: one view splits them all, and the backward
            # stacks the parts' gradients straight into y's layout (transposed first, they would need a second copy)
            return tuple(part.transpose(1, 2) for part in
                         y.view(*x.shape[:2], len(parts), self.n_heads, self.d_head).unbind(2))
        return tuple(part.unflatten(-1, (-1, self.d_head)).transpose(1, 2)
                     for part in y.split([self.rows[p] for p in parts], dim=-1))

    def forward(self, hidden_states: torch.Tensor, key_value_states: torch.Tensor | None = None,
                attention_mask: torch.Tensor | BlockMask | None = None, position_bias: torch.Tensor | None = None,
                rotary: tuple[torch.Tensor, torch.Tensor] | None = None, past_key_values: Cache | None = None,
                **kwargs) -> torch.Tensor:
        """-> output (B, T, D). The weights (B, H, T, S) are a site: a recording that keeps them (``record()``, or
        ``output_attentions``) makes attention run the explicit softmax, which notes them.

        ``attention_mask``: the mask ``transformers.masking_utils`` builds for the backend;
        ``position_bias`` (B, H, T, S): added to the scores (ALiBi). ``kwargs`` go to the attention backend."""
        recording = current_recording()
        note = note_for(recording)
        hidden_states = note(self.site, "input", hidden_states)
        if self.is_cross_attention:
            (q,) = self.project(hidden_states, "q")
        else:
            q, k, v = self.project(hidden_states, "qkv")
        q = note(self.site, "query", q)
        cache = past_key_values
        if isinstance(cache, EncoderDecoderCache):
            cache = cache.cross_attention_cache if self.is_cross_attention else cache.self_attention_cache
        if self.is_cross_attention and cache is not None and past_key_values.is_updated.get(self.layer_idx):
            # the memory does not change while decoding: reuse its projected keys and values
            k, v = cache.layers[self.layer_idx].keys, cache.layers[self.layer_idx].values
        else:
            if self.is_cross_attention:  # keys and values from the encoder's memory
                k, v = self.project(key_value_states, "kv")
            k, v = note(self.site, "key", k), note(self.site, "value", v)
            if rotary is not None:  # RoPE's tables (rope_tables); q and k turn by the same angles: one rotation
                if q.shape == k.shape:
                    q, k = rotate(torch.stack((q, k)), *rotary).unbind(0)
                else:  # grouped-query attention: fewer key heads
                    q, k = rotate(q, *rotary), rotate(k, *rotary)
                q, k = note(self.site, "query_rotated", q), note(self.site, "key_rotated", k)
            if cache is not None:
                k, v = cache.update(k, v, self.layer_idx)
                if self.is_cross_attention:
                    past_key_values.is_updated[self.layer_idx] = True

        eager = recording is not None and recording.wants(Site(*self.site, "weights"))
        if not eager and self.config._attn_implementation == "flex_attention" and q.device.type == "cpu":
            raise ValueError(FLEX_ON_CPU)
        attention = eager_attention_forward if eager else ALL_ATTENTION_FUNCTIONS.get_interface(
            self.config._attn_implementation, eager_attention_forward)
        heads, _ = attention(self, q, k, v, attention_mask, scaling=self.scaling,
                             dropout=self.dropout if self.training else 0.0, position_bias=position_bias,
                             is_causal=self.is_causal, **kwargs)  # heads: (B, T, H, d_head)
        if recording is not None:
            heads = recording.at(self.site, "heads", heads.transpose(1, 2)).transpose(1, 2)
        concatenated = note(self.site, "concatenated", heads.reshape(*hidden_states.shape[:2], -1))
        return note(self.site, "output", self.out_proj(concatenated))


# ----------------------------------------------------------------------------------------------
# Feed-forward, Add & Norm, layers, stacks
# ----------------------------------------------------------------------------------------------

ACTIVATION_FUNCTIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "relu": F.relu,
    "gelu": F.gelu,
    "gelu_new": lambda x: F.gelu(x, approximate="tanh"),
    "silu": F.silu,
}


class FeedForward(nn.Module):
    """Position-wise FFN(x) = act(x W1 + b1) W2 + b2, the same two layers applied at every position.

    Gated (``feed_forward="gated"``; SwiGLU with silu, Llama's): FFN(x) = (act(x W_gate) * x W_up) W2. The gate
    decides, per hidden unit, how much of x W_up passes. W_gate and W_up are stacked in ``linear1`` (rows
    [0, d_ff) W_gate, [d_ff, 2 d_ff) W_up): one product, as ``qkv_proj`` stacks W^Q, W^K, W^V."""

    def __init__(self, config: ScratchTransformerConfig):
        super().__init__()
        self.gated = config.feed_forward == "gated"
        width = 2 * config.d_ff if self.gated else config.d_ff
        self.linear1 = nn.Linear(config.d_model, width, bias=config.feed_forward_bias)
        self.linear2 = nn.Linear(config.d_ff, config.d_model, bias=config.feed_forward_bias)
        self.activation = ACTIVATION_FUNCTIONS[config.activation]
        self.dropout = config.activation_dropout
        self.site = None  # (stack, layer, "ffn"): named from the module tree (name_sites)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        note = note_for(current_recording())
        if self.gated:
            gate, up = self.linear1(x).chunk(2, dim=-1)
            gate, up = note(self.site, "gate", self.activation(gate)), note(self.site, "up", up)
            hidden = note(self.site, "hidden", gate * up)  # width d_ff
        else:
            hidden = note(self.site, "hidden", self.activation(self.linear1(x)))  # width d_ff
        return note(self.site, "output", self.linear2(dropout(hidden, self.dropout, self.training)))


class RMSNorm(nn.Module):
    """RMSNorm(x) = x / sqrt(mean(x^2) + eps) * g (Zhang & Sennrich 2019; Llama): LayerNorm without the centring
    and the bias. Computed in float32, then cast back before the gain, as Llama does."""

    def __init__(self, d_model: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d_model))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        return self.weight * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype)


def make_norm(config: ScratchTransformerConfig) -> nn.Module:
    """The configured normalisation over d_model: ``nn.LayerNorm`` (bias as ``config.bias``) or ``RMSNorm``."""
    if config.norm == "rmsnorm":
        return RMSNorm(config.d_model, eps=config.layer_norm_eps)
    return nn.LayerNorm(config.d_model, eps=config.layer_norm_eps, bias=config.bias)


class AddAndNorm(nn.Module):
    """The residual connection around one sublayer f, with its norm LN (LayerNorm or RMSNorm, ``make_norm``).

    Post-norm (the paper): LN(x + Dropout(f(x))).  Pre-norm: x + Dropout(f(LN(x))).
    Use: ``y = add_norm(x, f(add_norm.sublayer_input(x)))``.
    """

    def __init__(self, config: ScratchTransformerConfig):
        super().__init__()
        self.norm_first = config.norm_first
        self.norm = make_norm(config)
        self.dropout = config.dropout

    def sublayer_input(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x) if self.norm_first else x

    def forward(self, x: torch.Tensor, sublayer_output: torch.Tensor) -> torch.Tensor:
        x = x + dropout(sublayer_output, self.dropout, self.training)
        return x if self.norm_first else self.norm(x)


class TransformerLayer(GradientCheckpointingLayer):
    """An encoder layer: self-attention, then feed-forward.

    With ``cross_attention`` a decoder layer: masked self-attention, then cross-attention over the
    encoder memory, then feed-forward. Each sublayer sits inside its own Add & Norm.
    Parallel residual (GPT-NeoX, GPT-J): x + Attn(LN_1(x)) + FFN(LN_2(x)); both read the layer input x, and the
    stream between them (``after_self_attention``) is x + Attn(LN_1(x)), to which FFN(LN_2(x)) is then added.
    Attention only (``feed_forward="none"``; Elhage et al. 2021): x + Attn(LN(x)) (and cross-attention), no
    feed-forward and no norm for it: ``feed_forward`` and ``feed_forward_norm`` are None.
    """

    def __init__(self, config: ScratchTransformerConfig, layer_idx: int, cross_attention: bool = False,
                 causal: bool = False):
        super().__init__()
        self.site = None  # (stack, layer, None): named from the module tree (name_sites)
        self.self_attn = MultiHeadAttention(config, layer_idx, is_causal=causal)
        self.self_attn_norm = AddAndNorm(config)
        if cross_attention:
            self.cross_attn = MultiHeadAttention(config, layer_idx, is_cross_attention=True)
            self.cross_attn_norm = AddAndNorm(config)
        else:
            self.cross_attn = self.cross_attn_norm = None
        if config.feed_forward == "none":
            self.feed_forward = self.feed_forward_norm = None
        else:
            self.feed_forward = FeedForward(config)
            self.feed_forward_norm = AddAndNorm(config)
        self.parallel_residual = config.parallel_residual

    def forward(self, x: torch.Tensor, position_bias: torch.Tensor | None = None,
                rotary: tuple[torch.Tensor, torch.Tensor] | None = None, memory: torch.Tensor | None = None,
                attention_mask: torch.Tensor | BlockMask | None = None,
                memory_mask: torch.Tensor | BlockMask | None = None, past_key_values: Cache | None = None,
                **kwargs) -> torch.Tensor:
        """The residual stream (B, T, D) in, the residual stream out."""
        note = note_for(current_recording())
        x = layer_input = note(self.site, "input", x)
        h = self.self_attn(self.self_attn_norm.sublayer_input(x), attention_mask=attention_mask,
                           position_bias=position_bias, rotary=rotary, past_key_values=past_key_values, **kwargs)
        x = note(self.site, "after_self_attention", self.self_attn_norm(x, h))
        if self.cross_attn is not None:
            if memory is None:
                raise ValueError("a decoder layer with cross-attention needs the encoder memory")
            h = self.cross_attn(self.cross_attn_norm.sublayer_input(x), key_value_states=memory,
                                attention_mask=memory_mask, past_key_values=past_key_values, **kwargs)
            x = note(self.site, "after_cross_attention", self.cross_attn_norm(x, h))
        if self.feed_forward is not None:
            ffn_reads = layer_input if self.parallel_residual else x
            x = self.feed_forward_norm(x, self.feed_forward(self.feed_forward_norm.sublayer_input(ffn_reads)))
        return note(self.site, "output", x)


class TransformerStack(nn.Module):
    """N layers (an encoder, or a decoder when ``cross_attention``), then an optional final LayerNorm.

    The stack turns positions into what each self-attention needs: RoPE's tables, or ALiBi's bias.
    Masks come in ready for the backend (``transformers.masking_utils``, or ``Transformer``'s own).
    Its site is (stack, None, None): ``name_sites`` names it and every site inside it.
    """

    def __init__(self, config: ScratchTransformerConfig, n_layers: int, cross_attention: bool = False,
                 causal: bool = False):
        super().__init__()
        self.n_heads, self.d_head = config.n_heads, config.d_head
        self.position_encoding, self.rope_theta = config.position_encoding, config.rope_theta
        self.rope_scaling, self.d_rotary = config.rope_frequency_scaling, config.d_rotary
        self.layers = nn.ModuleList(TransformerLayer(config, i, cross_attention, causal) for i in range(n_layers))
        self.norm = make_norm(config) if config.final_layer_norm else None
        self.site = None

    def forward(self, x: torch.Tensor, *, position_ids: torch.Tensor,
                attention_mask: torch.Tensor | BlockMask | None = None, query_offset: int | torch.Tensor = 0,
                key_length: int | None = None, memory: torch.Tensor | None = None,
                memory_mask: torch.Tensor | BlockMask | None = None, past_key_values: Cache | None = None,
                first_layer: int = 0, **kwargs) -> torch.Tensor:
        """x (B, T, D) -> the stack's output (B, T, D).

        ``position_ids`` (B, T): the queries' positions (RoPE). ALiBi counts distance in cache slots: the
        queries fill slots ``query_offset`` .. + T - 1 of ``key_length`` (default T). ``first_layer``: x is the
        residual stream entering that layer, and the layers before it do not run (a model is causal in depth).
        """
        note = note_for(current_recording())
        batch, length = x.shape[:2]
        rotary = None
        if self.position_encoding == "rope":
            cos, sin = rope_angles(position_ids, self.d_rotary, self.rope_theta, self.rope_scaling)
            rope = (self.site[0], None, "rope")
            rotary = rope_tables(note(rope, "cos", cos), note(rope, "sin", sin))
        position_bias = None
        if self.position_encoding == "alibi":
            key_slots = torch.arange(length if key_length is None else key_length, device=x.device)
            query_slots = torch.arange(length, device=x.device) + query_offset
            # the full (B, H, T, S): flex attention indexes it by batch and head
            position_bias = alibi_bias(query_slots[None], key_slots[None], self.n_heads).to(x.dtype).expand(batch, -1, -1, -1)
        if not 0 <= first_layer < len(self.layers):
            raise ValueError(f"first_layer must be one of the stack's layers, 0 to {len(self.layers) - 1}; got {first_layer}")
        for layer in self.layers[first_layer:]:
            x = layer(x, position_bias, rotary, memory, attention_mask=attention_mask, memory_mask=memory_mask,
                      past_key_values=past_key_values, **kwargs)
        if self.norm is not None:
            x = self.norm(x)
        return note(self.site, "output", x)


# ----------------------------------------------------------------------------------------------
# Hugging Face models
# ----------------------------------------------------------------------------------------------


def shift_tokens_right(labels: torch.Tensor, pad_token_id: int, decoder_start_token_id: int) -> torch.Tensor:
    """Outputs shifted right (teacher forcing): the decoder reads [start, y_1, ..., y_{n-1}] and
    predicts [y_1, ..., y_n]. Ignored labels (-100) become padding."""
    shifted = labels.new_full(labels.shape, decoder_start_token_id)
    shifted[:, 1:] = labels[:, :-1]
    return shifted.masked_fill(shifted == -100, pad_token_id)


def positions_from_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """Position of each token counting only real tokens (left padding shifts nothing): cumsum - 1."""
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)


def check_inputs(input_ids: torch.Tensor | None, inputs_embeds: torch.Tensor | None, d_model: int,
                 names: tuple[str, str] = ("input_ids", "inputs_embeds")) -> tuple[int, int]:
    """Exactly one of token ids (B, T) or embeddings (B, T, D), T >= 1 -> (B, T); else a ValueError naming it."""
    ids_name, embeds_name = names
    if (input_ids is None) == (inputs_embeds is None):
        raise ValueError(f"pass exactly one of {ids_name} (batch, length) or {embeds_name} (batch, length, d_model)")
    if input_ids is not None:
        if input_ids.dim() != 2 or input_ids.shape[1] == 0:
            raise ValueError(f"{ids_name} must be (batch, length) with length >= 1; got shape {tuple(input_ids.shape)}")
        return tuple(input_ids.shape)
    if inputs_embeds.dim() != 3 or inputs_embeds.shape[1] == 0 or inputs_embeds.shape[2] != d_model:
        raise ValueError(f"{embeds_name} must be (batch, length, d_model={d_model}) with length >= 1; "
                         f"got shape {tuple(inputs_embeds.shape)}")
    return tuple(inputs_embeds.shape[:2])


class ScratchTransformerPreTrainedModel(PreTrainedModel):
    config_class = ScratchTransformerConfig
    base_model_prefix = "model"
    main_input_name = "input_ids"
    supports_gradient_checkpointing = True
    _no_split_modules = ["TransformerLayer"]
    _skip_keys_device_placement = ["past_key_values"]
    # attention backends: eager, sdpa, flex attention (CUDA; refused on the CPU, FLEX_ON_CPU), and any function
    # registered with AttentionInterface; flash attention cannot add ALiBi's bias
    _supports_sdpa = True
    _supports_flex_attn = True
    _supports_attention_backend = True
    _can_compile_fullgraph = True

    def __init__(self, config: ScratchTransformerConfig, *inputs, **kwargs):
        config.validate_architecture()  # again: the config may have changed since it was made
        super().__init__(config, *inputs, **kwargs)

    def lay_out_for_decoding(self) -> "ScratchTransformerPreTrainedModel":
        """Keep each widening linear map's weight W (out > in features) in memory as (in, out): the same (out, in)
        tensor to every reader, strided. Decoding multiplies one token by every W, a product bounded by reading W
        from memory, and the BLAS reads a wide W faster laid out (in, out), a narrow one (out, in) as ``nn.Linear``
        keeps it (measured on one core of the project's CPU: GPT-2's 2304 x 768 query/key/value map 0.38 against 0.54
        ms, its 768 x 3072 output map 0.50 against 0.63 ms). The LM head is the widest, and read at every step: GPT-2
        small's 50,257 x 768 head 3.7 against 6.4 ms. Tied, it is the token embedding too, whose lookup then gathers
        each row from strided memory (0.35 ms for 128 tokens, against a forward pass of 340 ms). Values, shapes, names
        and ties are unchanged. Returns the model."""
        for module in self.modules():
            if isinstance(module, nn.Linear) and module.out_features > module.in_features:
                module.weight.data = module.weight.data.t().contiguous().t()
        return self

    def save_pretrained(self, save_directory, *args, **kwargs):
        """``PreTrainedModel.save_pretrained``, the weights handed over contiguous (``lay_out_for_decoding`` keeps some
        strided; safetensors writes contiguous tensors)."""
        if "state_dict" not in kwargs:
            kwargs["state_dict"] = {name: tensor.contiguous() for name, tensor in self.state_dict().items()}
        return super().save_pretrained(save_directory, *args, **kwargs)


class Encoder(nn.Module):
    """Token ids -> InputEmbedding -> non-causal TransformerStack -> memory."""

    def __init__(self, config: ScratchTransformerConfig):
        super().__init__()
        self.config = config
        self.embed = InputEmbedding(config)
        self.stack = TransformerStack(config, config.n_encoder_layers)
        name_sites(self, "encoder")

    def forward(self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                position_ids: torch.Tensor | None = None, inputs_embeds: torch.Tensor | None = None,
                output_attentions: bool = False, output_hidden_states: bool = False, return_dict: bool | None = None,
                **kwargs) -> BaseModelOutput | tuple:
        batch, length = check_inputs(input_ids, inputs_embeds, self.config.d_model)
        if attention_mask is not None and attention_mask.shape != (batch, length):
            raise ValueError(f"attention_mask must be (batch, length) = ({batch}, {length}) with 1 for tokens and 0 "
                             f"for padding; got {tuple(attention_mask.shape)}")
        device = (input_ids if input_ids is not None else inputs_embeds).device
        if position_ids is None:
            position_ids = (positions_from_mask(attention_mask) if attention_mask is not None
                            else torch.arange(length, device=device).expand(batch, -1))
        with capturing(output_attentions, output_hidden_states) as captured:
            x = self.embed(input_ids, position_ids, inputs_embeds)
            mask = create_bidirectional_mask(self.config, x, attention_mask)
            x = self.stack(x, position_ids=position_ids, attention_mask=mask, **kwargs)
        out = BaseModelOutput(last_hidden_state=x,
                              hidden_states=captured.hidden_states("encoder") if output_hidden_states else None,
                              attentions=captured.attentions("encoder") if output_attentions else None)
        return out if return_dict is not False else out.to_tuple()


class Decoder(nn.Module):
    """Token ids -> InputEmbedding -> causal TransformerStack (with cross-attention in an
    encoder-decoder model), reading and extending the KV cache."""

    def __init__(self, config: ScratchTransformerConfig):
        super().__init__()
        self.config = config
        self.embed = InputEmbedding(config)
        self.stack = TransformerStack(config, config.n_layers, cross_attention=config.is_encoder_decoder, causal=True)
        name_sites(self, "decoder")

    def forward(self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                position_ids: torch.Tensor | None = None, encoder_hidden_states: torch.Tensor | None = None,
                encoder_attention_mask: torch.Tensor | None = None, past_key_values: Cache | None = None,
                inputs_embeds: torch.Tensor | None = None, use_cache: bool = False, output_attentions: bool = False,
                output_hidden_states: bool = False, input_names: tuple[str, str] = ("input_ids", "inputs_embeds"),
                first_layer: int | None = None, **kwargs) -> BaseModelOutputWithPastAndCrossAttentions:
        """``attention_mask``: (B, past + T) with 1 for tokens and 0 for padding, or a 4D mask already built
        for the backend (``generate`` builds one for a static cache). Without ``position_ids`` a 2D mask
        gives the positions (left padding shifts nothing), else they continue the cache. ``first_layer``: see
        ``forward_from`` (None: embed the tokens, then every layer)."""
        cross = self.config.is_encoder_decoder
        batch, length = check_inputs(input_ids, inputs_embeds, self.config.d_model, input_names)
        device = (input_ids if input_ids is not None else inputs_embeds).device
        if use_cache and past_key_values is None:
            past_key_values = (
                EncoderDecoderCache(DynamicCache(config=self.config), DynamicCache(config=self.config))
                if cross else DynamicCache(config=self.config)
            )
        past, key_length = 0, length
        if past_key_values is not None:
            past = past_key_values.get_seq_length()
            key_length = past_key_values.get_mask_sizes(length, 0)[0]
        recording = current_recording()
        if recording is not None and recording.keep is None and past:
            raise ValueError("a recording keeps one whole forward pass: inside record(), call the model without "
                             "past_key_values (or pass keep= to keep only some sites)")
        flat_mask = attention_mask is not None and attention_mask.dim() == 2
        if flat_mask and not is_tracing(attention_mask) and attention_mask.shape != (batch, int(past) + length):
            raise ValueError(
                f"attention_mask must be (batch, past + new tokens) = ({batch}, {int(past) + length}) "
                f"with 1 for tokens and 0 for padding; got {tuple(attention_mask.shape)}"
            )
        given_positions = position_ids
        if position_ids is None:
            position_ids = (positions_from_mask(attention_mask)[:, -length:] if flat_mask
                            else (torch.arange(length, device=device) + past).expand(batch, -1))
        with capturing(output_attentions, output_hidden_states) as captured:
            x = inputs_embeds if first_layer is not None else self.embed(input_ids, position_ids, inputs_embeds)
            mask = create_causal_mask(self.config, x, attention_mask, past_key_values, position_ids=given_positions)
            memory_mask = None
            if cross:
                memory_mask = create_bidirectional_mask(self.config, x, encoder_attention_mask,
                                                        encoder_hidden_states=encoder_hidden_states)
            x = self.stack(x, position_ids=position_ids, attention_mask=mask, query_offset=past, key_length=key_length,
                           memory=encoder_hidden_states if cross else None, memory_mask=memory_mask,
                           past_key_values=past_key_values, first_layer=first_layer or 0, **kwargs)
        return BaseModelOutputWithPastAndCrossAttentions(
            last_hidden_state=x, past_key_values=past_key_values if use_cache else None,
            hidden_states=captured.hidden_states("decoder") if output_hidden_states else None,
            attentions=captured.attentions("decoder") if output_attentions else None,
            cross_attentions=captured.attentions("decoder", "cross") if output_attentions and cross else None,
        )

    def forward_from(self, layer: int, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None,
                     position_ids: torch.Tensor | None = None, encoder_hidden_states: torch.Tensor | None = None,
                     encoder_attention_mask: torch.Tensor | None = None, past_key_values: Cache | None = None,
                     use_cache: bool = False, **kwargs) -> BaseModelOutputWithPastAndCrossAttentions:
        """The layers from ``layer`` on, then the final norm: ``hidden_states`` (B, T, D) is the residual stream
        entering layer ``layer`` (a recording's ``(decoder, layer, None, "input")``). A model is causal in depth:
        layers below ``layer`` would compute what ``hidden_states`` already holds, so they do not run. Masks,
        positions (RoPE's angles, ALiBi's distances), the cache and the encoder memory as ``forward`` takes them;
        learned and sinusoidal positions were added at the embeddings, so they are in ``hidden_states`` already.
        ``forward_from(0, embeddings)`` is ``forward``. A recording opened around it sees the layers it runs."""
        return self.forward(attention_mask=attention_mask, position_ids=position_ids,
                            encoder_hidden_states=encoder_hidden_states, encoder_attention_mask=encoder_attention_mask,
                            past_key_values=past_key_values, inputs_embeds=hidden_states, use_cache=use_cache,
                            input_names=("hidden_states", "hidden_states"), first_layer=layer, **kwargs)


class ScratchTransformerModel(ScratchTransformerPreTrainedModel):
    """The bare model, no LM head: a decoder-only stack, or an encoder and a decoder whose token
    embeddings are tied (one vocabulary) when ``config.is_encoder_decoder``."""

    def __init__(self, config: ScratchTransformerConfig):
        super().__init__(config)
        self.encoder = Encoder(config) if config.is_encoder_decoder else None
        self.decoder = Decoder(config)
        if config.is_encoder_decoder:
            self._tied_weights_keys = {"decoder.embed.token.weight": "encoder.embed.token.weight"}
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.decoder.embed.token

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.decoder.embed.token = value
        if self.encoder is not None:
            self.encoder.embed.token = value

    def get_encoder(self, modality: str | None = None):
        return self.encoder

    def forward_from(self, layer: int, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None,
                     position_ids: torch.Tensor | None = None, past_key_values: Cache | None = None,
                     encoder_hidden_states: torch.Tensor | None = None, encoder_attention_mask: torch.Tensor | None = None,
                     use_cache: bool = False, **kwargs) -> BaseModelOutputWithPastAndCrossAttentions:
        """The decoder from layer ``layer`` on (``Decoder.forward_from``): ``hidden_states`` (B, T, D) is the residual
        stream entering it; an encoder-decoder's decoder reads ``encoder_hidden_states`` (the encoder's output) with
        ``encoder_attention_mask`` (the source's padding mask), ``attention_mask`` being the decoder tokens'."""
        return self.decoder.forward_from(layer, hidden_states, attention_mask, position_ids, encoder_hidden_states,
                                         encoder_attention_mask, past_key_values, use_cache, **kwargs)

    def forward(self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                position_ids: torch.Tensor | None = None, decoder_input_ids: torch.Tensor | None = None,
                decoder_attention_mask: torch.Tensor | None = None, decoder_position_ids: torch.Tensor | None = None,
                encoder_outputs: BaseModelOutput | tuple | None = None, past_key_values: Cache | None = None,
                inputs_embeds: torch.Tensor | None = None, decoder_inputs_embeds: torch.Tensor | None = None,
                use_cache: bool | None = None, output_attentions: bool | None = None,
                output_hidden_states: bool | None = None, return_dict: bool | None = None,
                **kwargs) -> Seq2SeqModelOutput | BaseModelOutputWithPastAndCrossAttentions | tuple:
        """Decoder-only: the decoder's output. Encoder-decoder: the encoder reads ``input_ids`` (unless
        ``encoder_outputs`` are given), the decoder ``decoder_input_ids``. ``return_dict=False`` gives the
        output's fields as a tuple, in transformers' order. Every step's tensors: ``record()``."""
        config = self.config
        output_attentions = output_attentions if output_attentions is not None else config.output_attentions
        output_hidden_states = output_hidden_states if output_hidden_states is not None else config.output_hidden_states
        use_cache = use_cache if use_cache is not None else (config.use_cache and not self.training)
        return_dict = return_dict if return_dict is not None else config.return_dict
        flags = dict(output_attentions=output_attentions, output_hidden_states=output_hidden_states)
        if not config.is_encoder_decoder:
            out = self.decoder(input_ids, attention_mask, position_ids, past_key_values=past_key_values,
                               inputs_embeds=inputs_embeds, use_cache=use_cache, **flags, **kwargs)
            return out if return_dict else out.to_tuple()
        if encoder_outputs is None:
            encoder_outputs = self.encoder(input_ids, attention_mask, position_ids, inputs_embeds=inputs_embeds,
                                           **flags, **kwargs)
        elif not isinstance(encoder_outputs, BaseModelOutput):
            encoder_outputs = BaseModelOutput(*encoder_outputs)
        decoder_outputs = self.decoder(
            decoder_input_ids, decoder_attention_mask, decoder_position_ids,
            encoder_hidden_states=encoder_outputs.last_hidden_state, encoder_attention_mask=attention_mask,
            past_key_values=past_key_values, inputs_embeds=decoder_inputs_embeds, use_cache=use_cache,
            input_names=("decoder_input_ids", "decoder_inputs_embeds"), **flags, **kwargs,
        )
        out = Seq2SeqModelOutput(
            last_hidden_state=decoder_outputs.last_hidden_state,
            past_key_values=decoder_outputs.past_key_values,
            decoder_hidden_states=decoder_outputs.hidden_states,
            decoder_attentions=decoder_outputs.attentions,
            cross_attentions=decoder_outputs.cross_attentions,
            encoder_last_hidden_state=encoder_outputs.last_hidden_state,
            encoder_hidden_states=encoder_outputs.hidden_states,
            encoder_attentions=encoder_outputs.attentions,
        )
        return out if return_dict else out.to_tuple()


class ScratchTransformerLanguageModel(ScratchTransformerPreTrainedModel):
    """What both language models share: the bare model, and the LM head logits = h W_E^T, whose
    weight is the token embedding's (``_tied_weights_keys``) when ``config.tie_word_embeddings``, else its own."""

    def __init__(self, config: ScratchTransformerConfig):
        super().__init__(config)
        self.model = ScratchTransformerModel(config)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.model.get_input_embeddings()

    def get_output_embeddings(self) -> nn.Linear:
        return self.lm_head

    def logits_and_loss(
        self, hidden: torch.Tensor, labels: torch.Tensor | None, logits_to_keep: int | torch.Tensor, **kwargs
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Logits of the kept positions (``logits_to_keep``: 0 keeps all, n the last n, or the positions);
        the loss through ``self.loss_function``, with the Trainer's ``num_items_in_batch`` or ``shift_labels``."""
        logits = self.lm_head(slice_logits_to_keep(hidden, logits_to_keep))
        loss = None
        if labels is not None:
            loss = self.loss_function(logits=logits, labels=labels, vocab_size=self.config.vocab_size, **kwargs)
        return logits, loss


class ScratchTransformerForCausalLM(ScratchTransformerLanguageModel, GenerationMixin):
    """Decoder-only language model: logits = h W_E^T (the LM head shares the token embedding)."""

    _tied_weights_keys = {"lm_head.weight": "model.decoder.embed.token.weight"}

    def __init__(self, config: ScratchTransformerConfig):
        if config.is_encoder_decoder:
            raise ValueError("ScratchTransformerForCausalLM needs is_encoder_decoder=False; use ScratchTransformerForSeq2SeqLM")
        super().__init__(config)

    def forward(self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                position_ids: torch.Tensor | None = None, past_key_values: Cache | None = None,
                inputs_embeds: torch.Tensor | None = None, labels: torch.Tensor | None = None,
                use_cache: bool | None = None, output_attentions: bool | None = None,
                output_hidden_states: bool | None = None, return_dict: bool | None = None,
                logits_to_keep: int | torch.Tensor = 0, **kwargs) -> CausalLMOutputWithPast | tuple:
        """labels: the input ids themselves (-100 to ignore); the loss predicts token t+1 from 0..t."""
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        out = self.model(
            input_ids, attention_mask, position_ids, past_key_values=past_key_values, inputs_embeds=inputs_embeds,
            use_cache=use_cache, output_attentions=output_attentions, output_hidden_states=output_hidden_states,
            return_dict=True, **kwargs,
        )
        logits, loss = self.logits_and_loss(out.last_hidden_state, labels, logits_to_keep, **kwargs)
        output = CausalLMOutputWithPast(loss=loss, logits=logits, past_key_values=out.past_key_values,
                                        hidden_states=out.hidden_states, attentions=out.attentions)
        return output if return_dict else output.to_tuple()


    def forward_from(self, layer: int, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None,
                     position_ids: torch.Tensor | None = None, past_key_values: Cache | None = None,
                     labels: torch.Tensor | None = None, use_cache: bool = False,
                     logits_to_keep: int | torch.Tensor = 0, **kwargs) -> CausalLMOutputWithPast:
        """``forward`` from layer ``layer`` on: ``hidden_states`` (B, T, D) is the residual stream entering that layer
        (``ScratchTransformerModel.forward_from``), then the final norm and the LM head, as ``forward``."""
        out = self.model.forward_from(layer, hidden_states, attention_mask, position_ids, past_key_values,
                                      use_cache=use_cache, **kwargs)
        logits, loss = self.logits_and_loss(out.last_hidden_state, labels, logits_to_keep, **kwargs)
        return CausalLMOutputWithPast(loss=loss, logits=logits, past_key_values=out.past_key_values)


class ScratchTransformerForSeq2SeqLM(ScratchTransformerLanguageModel, GenerationMixin):
    """Encoder-decoder model: the encoder reads the source, the decoder writes the target one token
    at a time attending to the encoder memory (cross-attention)."""

    # one matrix for encoder input, decoder input and output; ties point at the root (no chains)
    _tied_weights_keys = {"lm_head.weight": "model.encoder.embed.token.weight"}

    def __init__(self, config: ScratchTransformerConfig):
        if not config.is_encoder_decoder:
            raise ValueError("ScratchTransformerForSeq2SeqLM needs is_encoder_decoder=True; use ScratchTransformerForCausalLM")
        super().__init__(config)
        # logits at t already predict labels at t (the decoder reads them shifted right): no shift in the loss
        self.loss_type = "ForMaskedLM"

    def get_encoder(self, modality: str | None = None):
        return self.model.encoder

    def prepare_decoder_input_ids_from_labels(self, labels: torch.Tensor) -> torch.Tensor:
        return shift_tokens_right(labels, self.config.pad_token_id, self.config.decoder_start_token_id)

    def forward(self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                decoder_input_ids: torch.Tensor | None = None, decoder_attention_mask: torch.Tensor | None = None,
                decoder_position_ids: torch.Tensor | None = None,
                encoder_outputs: BaseModelOutput | tuple | None = None, past_key_values: Cache | None = None,
                inputs_embeds: torch.Tensor | None = None, decoder_inputs_embeds: torch.Tensor | None = None,
                labels: torch.Tensor | None = None, use_cache: bool | None = None,
                output_attentions: bool | None = None, output_hidden_states: bool | None = None,
                return_dict: bool | None = None, logits_to_keep: int | torch.Tensor = 0,
                **kwargs) -> Seq2SeqLMOutput | tuple:
        """labels: the target ids (-100 to ignore); the decoder reads them shifted right."""
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        if labels is not None and decoder_input_ids is None and decoder_inputs_embeds is None:
            if self.config.pad_token_id is None or self.config.decoder_start_token_id is None:
                raise ValueError("training from labels needs config.pad_token_id and config.decoder_start_token_id")
            decoder_input_ids = self.prepare_decoder_input_ids_from_labels(labels)
        out = self.model(
            input_ids, attention_mask, decoder_input_ids=decoder_input_ids,
            decoder_attention_mask=decoder_attention_mask, decoder_position_ids=decoder_position_ids,
            encoder_outputs=encoder_outputs, past_key_values=past_key_values, inputs_embeds=inputs_embeds,
            decoder_inputs_embeds=decoder_inputs_embeds, use_cache=use_cache, output_attentions=output_attentions,
            output_hidden_states=output_hidden_states, return_dict=True, **kwargs,
        )
        logits, loss = self.logits_and_loss(out.last_hidden_state, labels, logits_to_keep, **kwargs)
        output = Seq2SeqLMOutput(
            loss=loss, logits=logits, past_key_values=out.past_key_values,
            decoder_hidden_states=out.decoder_hidden_states, decoder_attentions=out.decoder_attentions,
            cross_attentions=out.cross_attentions, encoder_last_hidden_state=out.encoder_last_hidden_state,
            encoder_hidden_states=out.encoder_hidden_states, encoder_attentions=out.encoder_attentions,
        )
        return output if return_dict else output.to_tuple()
