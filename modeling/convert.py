"""Weight converters from reference implementations, so that parity with them is provable.

- ``transformer_from_torch``: ``torch.nn.Transformer(batch_first=True)`` -> ``modeling.Transformer``.
- ``causal_lm_from_gpt2``: ``transformers.GPT2LMHeadModel`` -> ``ScratchTransformerForCausalLM``.
- ``causal_lm_from_llama``: ``LlamaForCausalLM`` (and ``Qwen2ForCausalLM``, ``MistralForCausalLM``: the same block).
- ``causal_lm_from_gpt_neox``: ``GPTNeoXForCausalLM`` (Pythia).
- ``from_transformers``: any causal LM of a family above, chosen by ``config.model_type``.
- ``our_config``: our config for a transformers config of those families, or ValueError naming what ours cannot hold
  (every check of the conversion that the config alone decides: the app asks it before downloading any weights).

GPT-2 and torch stack the Q, K, V projections into one (3D, D) matrix, as our ``qkv_proj`` does, so it is copied
as it is. GPT-2's ``Conv1D`` stores weights as (in, out), the transpose of ``nn.Linear``. GPT-NeoX stacks them per
head (q_h, k_h, v_h for each head h): its rows are reordered into ours.

RoPE conventions. Our RoPE turns adjacent pairs (x_2i, x_2i+1) of a head (the RoFormer paper's, and the one the
model file teaches). Llama and GPT-NeoX turn the halves (x_i, x_i+d/2) by the same angle theta_i
(``rotate_half``). A score q . k is a sum over a head's dimensions, so it is unchanged when the same permutation
reorders the dimensions of q and of k: the converter reorders the rows of W^Q and W^K (and their biases) so that
their dimension i + d/2 sits next to dimension i (``_half_to_pairs``). The model file keeps one RoPE, the scores
and the attention weights equal the reference's, and only the recorded q and k list a head's dimensions in
pair order. (The alternative, a second RoPE convention in the model, is a switch every reader would meet.)
"""

import torch
import torch.nn.functional as F
from torch import nn
from transformers import GPT2LMHeadModel, GPTNeoXForCausalLM, LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM

from .configuration_scratch_transformer import ACTIVATIONS, ScratchTransformerConfig
from .modeling_scratch_transformer import ScratchTransformerForCausalLM
from .position_encodings import ROPE_SCALINGS
from .torch_transformer import Transformer


def _qkv(prefix: str, weight: torch.Tensor, bias: torch.Tensor | None) -> dict[str, torch.Tensor]:
    """A stacked (3D, D) in-projection (rows W^Q, W^K, W^V) -> our qkv_proj weight (and bias)."""
    return {f"{prefix}.qkv_proj.weight": weight} | ({} if bias is None else {f"{prefix}.qkv_proj.bias": bias})


def _copy_linear(out: dict, target: str, source: dict, name: str) -> None:
    out[f"{target}.weight"] = source[f"{name}.weight"]
    if f"{name}.bias" in source:
        out[f"{target}.bias"] = source[f"{name}.bias"]


def _torch_attention(out: dict, target: str, source: dict, name: str) -> None:
    out.update(_qkv(target, source[f"{name}.in_proj_weight"], source.get(f"{name}.in_proj_bias")))
    _copy_linear(out, f"{target}.out_proj", source, f"{name}.out_proj")


def transformer_from_torch(m: nn.Transformer) -> Transformer:
    """Build a ``modeling.Transformer`` holding the weights of a ``torch.nn.Transformer(batch_first=True)``."""
    if not isinstance(m, nn.Transformer):
        raise ValueError(f"m must be a torch.nn.Transformer, got {type(m).__name__}")
    if not m.batch_first:
        raise ValueError("only batch_first=True transformers are supported")
    enc_layer = m.encoder.layers[0]
    activation = {F.relu: "relu", F.gelu: "gelu"}.get(enc_layer.activation)
    if activation is None:
        raise ValueError(f"unsupported activation {enc_layer.activation!r}; relu and gelu are supported")
    ours = Transformer(
        d_model=m.d_model,
        nhead=m.nhead,
        num_encoder_layers=len(m.encoder.layers),
        num_decoder_layers=len(m.decoder.layers),
        dim_feedforward=enc_layer.linear1.out_features,
        dropout=enc_layer.dropout.p,
        activation=activation,
        layer_norm_eps=enc_layer.norm1.eps,
        norm_first=enc_layer.norm_first,
        bias=enc_layer.linear1.bias is not None,
    )
    src = m.state_dict()
    out = {}
    for i in range(len(m.encoder.layers)):
        s, t = f"encoder.layers.{i}", f"encoder.layers.{i}"
        _torch_attention(out, f"{t}.self_attn", src, f"{s}.self_attn")
        for theirs, mine in (("linear1", "feed_forward.linear1"), ("linear2", "feed_forward.linear2"),
                             ("norm1", "self_attn_norm.norm"), ("norm2", "feed_forward_norm.norm")):
            _copy_linear(out, f"{t}.{mine}", src, f"{s}.{theirs}")
    for i in range(len(m.decoder.layers)):
        s, t = f"decoder.layers.{i}", f"decoder.layers.{i}"
        _torch_attention(out, f"{t}.self_attn", src, f"{s}.self_attn")
        _torch_attention(out, f"{t}.cross_attn", src, f"{s}.multihead_attn")
        for theirs, mine in (("linear1", "feed_forward.linear1"), ("linear2", "feed_forward.linear2"),
                             ("norm1", "self_attn_norm.norm"), ("norm2", "cross_attn_norm.norm"),
                             ("norm3", "feed_forward_norm.norm")):
            _copy_linear(out, f"{t}.{mine}", src, f"{s}.{theirs}")
    for stack in ("encoder", "decoder"):
        _copy_linear(out, f"{stack}.norm", src, f"{stack}.norm")
    ours.load_state_dict(out, strict=True)
    return ours.to(next(m.parameters()).dtype)


def _head_as_loaded(config: ScratchTransformerConfig, m) -> ScratchTransformerConfig:
    """``config`` with the LM head tied as the loaded ``m`` holds it, whatever its config's ``tie_word_embeddings``
    says: where a config says tied but the checkpoint stores a head unlike the embedding, transformers keeps that head
    (it warns and does not tie), so the flag alone would give ours the embedding, or the head, for both."""
    head, embedding = m.get_output_embeddings().weight, m.get_input_embeddings().weight
    config.tie_word_embeddings = head is embedding or (head.data_ptr() == embedding.data_ptr()
                                                       and head.shape == embedding.shape)
    return config


def _refuse(family: str, problems: list[str]) -> None:
    """Raise ValueError naming every setting of the reference that our model cannot hold exactly."""
    if problems:
        raise ValueError(f"cannot convert this {family} model exactly: " + "; ".join(problems))


def gpt2_config(c) -> ScratchTransformerConfig:
    """Our config for a ``GPT2Config``; ValueError naming what our model cannot hold."""
    problems = []
    # reorder_and_upcast_attn only computes q k^T / sqrt(d_k) in float32 in another order: the same scores, held
    if getattr(c, "scale_attn_by_inverse_layer_idx", False):
        problems.append("scale_attn_by_inverse_layer_idx (scores divided by the layer's number; ours: 1/sqrt(d_k) alone)")
    if not getattr(c, "scale_attn_weights", True):
        problems.append("scale_attn_weights False (we always scale by 1/sqrt(d_k))")
    activation = _activation(c.activation_function, problems, "activation_function")
    _refuse("GPT-2", problems)
    return ScratchTransformerConfig(
        vocab_size=c.vocab_size,
        d_model=c.n_embd,
        n_heads=c.n_head,
        n_layers=c.n_layer,
        d_ff=c.n_inner or 4 * c.n_embd,
        max_position_embeddings=c.n_positions,
        position_encoding="learned",
        norm_first=True,
        final_layer_norm=True,
        activation=activation,
        scale_embeddings=False,
        dropout=c.resid_pdrop,
        activation_dropout=0.0,  # GPT-2's MLP has no dropout inside
        attention_dropout=c.attn_pdrop,
        layer_norm_eps=c.layer_norm_epsilon,
        bos_token_id=c.bos_token_id,
        eos_token_id=c.eos_token_id,
        pad_token_id=getattr(c, "pad_token_id", None),
        tie_word_embeddings=c.tie_word_embeddings,
    )


def causal_lm_from_gpt2(m) -> ScratchTransformerForCausalLM:
    """Build a ``ScratchTransformerForCausalLM`` holding the weights of a ``GPT2LMHeadModel``.

    GPT-2 is our decoder-only model with: learned positions, unscaled embeddings, pre-norm with a
    final LayerNorm, gelu_new, biases everywhere, an LM head tied unless ``tie_word_embeddings`` is False, no dropout
    inside the MLP.
    """
    if not isinstance(m, GPT2LMHeadModel):
        raise ValueError(f"m must be a transformers GPT2LMHeadModel, got {type(m).__name__}")
    c, config = m.config, _head_as_loaded(gpt2_config(m.config), m)
    src = m.state_dict()
    out = {
        "model.decoder.embed.token.weight": src["transformer.wte.weight"],
        "model.decoder.embed.position.weight": src["transformer.wpe.weight"],
        "model.decoder.stack.norm.weight": src["transformer.ln_f.weight"],
        "model.decoder.stack.norm.bias": src["transformer.ln_f.bias"],
        "lm_head.weight": m.get_output_embeddings().weight,  # wte itself unless tie_word_embeddings is False
    }
    for i in range(c.n_layer):
        s, t = f"transformer.h.{i}", f"model.decoder.stack.layers.{i}"
        out.update(_qkv(f"{t}.self_attn", src[f"{s}.attn.c_attn.weight"].T, src[f"{s}.attn.c_attn.bias"]))
        for theirs, mine in (("attn.c_proj", "self_attn.out_proj"), ("mlp.c_fc", "feed_forward.linear1"),
                             ("mlp.c_proj", "feed_forward.linear2")):
            out[f"{t}.{mine}.weight"] = src[f"{s}.{theirs}.weight"].T  # Conv1D (in, out) -> Linear (out, in)
            out[f"{t}.{mine}.bias"] = src[f"{s}.{theirs}.bias"]
        for theirs, mine in (("ln_1", "self_attn_norm.norm"), ("ln_2", "feed_forward_norm.norm")):
            out[f"{t}.{mine}.weight"] = src[f"{s}.{theirs}.weight"]
            out[f"{t}.{mine}.bias"] = src[f"{s}.{theirs}.bias"]
    ours = ScratchTransformerForCausalLM(config)
    ours.load_state_dict({k: v.contiguous() for k, v in out.items()}, strict=True)
    return ours.to(m.dtype)


def _rope_settings(c, problems: list[str]) -> dict:
    """Our RoPE fields (rope_theta, rotary_fraction, rope_frequency_scaling) from transformers' ``rope_parameters``:
    the default RoPE, or its frequencies slowed by a rule ours computes (``ROPE_SCALINGS``: Llama 3.1's, linear);
    the rules that change with the text's length or scale the scores besides (dynamic, YaRN, LongRoPE) are refused."""
    rope = dict(getattr(c, "rope_parameters", None) or {})
    kind, scaling = rope.get("rope_type", "default"), None
    if kind in ROPE_SCALINGS:
        scaling = {"rope_type": kind, **{key: rope.get(key) for key in ROPE_SCALINGS[kind]}}
        if kind == "llama3" and scaling["original_max_position_embeddings"] is None:  # transformers' fallback
            scaling["original_max_position_embeddings"] = c.max_position_embeddings
    elif kind != "default":
        problems.append(f"rope_parameters rope_type {kind!r} (ours computes the default RoPE and the "
                        f"{', '.join(ROPE_SCALINGS)} scalings of its frequencies)")
    return {"rope_theta": _as_float(rope.get("rope_theta", 10000.0)),
            "rotary_fraction": _as_float(rope.get("partial_rotary_factor", 1.0)), "rope_frequency_scaling": scaling}


def _as_float(value):
    """A number as a float; anything else as it is, for our config's check to refuse by the field's name."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value


# transformers' names (ACT2FN) for functions ours computes under another name
ACTIVATION_ALIASES = {"gelu_pytorch_tanh": "gelu_new", "swish": "silu"}  # F.gelu(x, approximate="tanh"); x sigmoid(x)


def _activation(name: str, problems: list[str], field: str = "hidden_act") -> str:
    """Our name for the reference's activation ``name`` (the config's ``field``); a function ours lacks is a problem."""
    ours = ACTIVATION_ALIASES.get(name, name)
    if ours not in ACTIVATIONS:
        problems.append(f"{field} {name!r} (ours: {', '.join(ACTIVATIONS)}, {', '.join(ACTIVATION_ALIASES)})")
    return ours


def _half_to_pairs(weight: torch.Tensor, n_heads: int, d_rotary: int) -> torch.Tensor:
    """Rows of W^Q or W^K (or their bias), head by head, from the halves convention to ours (see the module
    docstring): within each head, our dimension 2i is their i and 2i+1 is their i + d_rotary/2, for i < d_rotary/2;
    dimensions past d_rotary (not rotated) keep their place."""
    d_head = weight.shape[0] // n_heads
    half = torch.arange(d_rotary // 2)
    order = torch.cat((torch.stack((half, half + d_rotary // 2), dim=1).flatten(), torch.arange(d_rotary, d_head)))
    return weight.unflatten(0, (n_heads, d_head))[:, order].flatten(0, 1)


LLAMA_FAMILIES = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "mistral": "MistralForCausalLM"}


def llama_biases(model_type: str, attention_bias=False, mlp_bias=False) -> tuple[bool, bool, bool]:
    """(on q, k, v; on o_proj; in the feed-forward), as transformers' classes build them from the config's
    ``model_type``, ``attention_bias`` and ``mlp_bias`` (Qwen2 and Mistral read neither)."""
    if model_type == "qwen2":
        return True, False, False
    if model_type == "mistral":
        return False, False, False
    return bool(attention_bias), bool(attention_bias), bool(mlp_bias)


def llama_config(c) -> ScratchTransformerConfig:
    """Our config for a ``LlamaConfig`` (or Qwen2's, Mistral's); ValueError naming what our model cannot hold."""
    family, problems = LLAMA_FAMILIES[c.model_type], []
    d_head = c.hidden_size // c.num_attention_heads
    if getattr(c, "head_dim", None) not in (None, d_head):
        problems.append(f"head_dim {c.head_dim} != hidden_size / num_attention_heads = {d_head}")
    if getattr(c, "sliding_window", None) is not None:
        problems.append(f"sliding_window {c.sliding_window} (ours attends to every earlier token)")
    if any(kind != "full_attention" for kind in getattr(c, "layer_types", None) or ()):
        problems.append(f"layer_types {sorted(set(c.layer_types))} (ours: full_attention in every layer)")
    rope = _rope_settings(c, problems)
    activation = _activation(c.hidden_act, problems)
    qkv_bias, attention_bias, feed_forward_bias = llama_biases(c.model_type, getattr(c, "attention_bias", False),
                                                               getattr(c, "mlp_bias", False))
    _refuse(family, problems)
    return ScratchTransformerConfig(
        vocab_size=c.vocab_size, d_model=c.hidden_size, n_heads=c.num_attention_heads,
        n_kv_heads=c.num_key_value_heads, n_layers=c.num_hidden_layers, d_ff=c.intermediate_size,
        max_position_embeddings=c.max_position_embeddings, position_encoding="rope", **rope,
        norm="rmsnorm", norm_first=True, final_layer_norm=True,
        activation=activation, feed_forward="gated", scale_embeddings=False, dropout=0.0, activation_dropout=0.0,
        attention_dropout=c.attention_dropout, bias=False, qkv_bias=qkv_bias, attention_bias=attention_bias,
        feed_forward_bias=feed_forward_bias, layer_norm_eps=c.rms_norm_eps,
        tie_word_embeddings=c.tie_word_embeddings, bos_token_id=c.bos_token_id, eos_token_id=c.eos_token_id,
        pad_token_id=c.pad_token_id,
    )


def causal_lm_from_llama(m) -> ScratchTransformerForCausalLM:
    """Build a ``ScratchTransformerForCausalLM`` holding the weights of a ``LlamaForCausalLM`` (or a Qwen2 or
    Mistral one: the same block, with other biases).

    Llama is our decoder-only model with: RoPE in every layer (no position table), unscaled embeddings, pre-norm
    with RMSNorm and a final one, a gated feed-forward with silu (SwiGLU), grouped-query attention, biases as the
    checkpoint has them (Llama: none, or ``attention_bias`` / ``mlp_bias``; Qwen2: q, k, v only), no dropout but on
    the attention weights, and an LM head of its own unless ``tie_word_embeddings``.
    """
    if not isinstance(m, (LlamaForCausalLM, Qwen2ForCausalLM, MistralForCausalLM)):
        raise ValueError(f"m must be a transformers LlamaForCausalLM, Qwen2ForCausalLM or MistralForCausalLM, "
                         f"got {type(m).__name__}")
    c, config = m.config, _head_as_loaded(llama_config(m.config), m)
    ours = ScratchTransformerForCausalLM(config)
    d_rotary = config.d_rotary
    src = m.state_dict()
    out = {"model.decoder.embed.token.weight": src["model.embed_tokens.weight"],
           "model.decoder.stack.norm.weight": src["model.norm.weight"],
           "lm_head.weight": m.get_output_embeddings().weight}
    for i in range(c.num_hidden_layers):
        s, t = f"model.layers.{i}", f"model.decoder.stack.layers.{i}"
        for kind in ("weight", "bias") if config.qkv_bias else ("weight",):
            q = _half_to_pairs(src[f"{s}.self_attn.q_proj.{kind}"], c.num_attention_heads, d_rotary)
            k = _half_to_pairs(src[f"{s}.self_attn.k_proj.{kind}"], c.num_key_value_heads, d_rotary)
            out[f"{t}.self_attn.qkv_proj.{kind}"] = torch.cat((q, k, src[f"{s}.self_attn.v_proj.{kind}"]))
        _copy_linear(out, f"{t}.self_attn.out_proj", src, f"{s}.self_attn.o_proj")
        for kind in ("weight", "bias"):
            if f"{s}.mlp.gate_proj.{kind}" in src:  # W_gate and W_up stacked, as our linear1 holds them
                out[f"{t}.feed_forward.linear1.{kind}"] = torch.cat(
                    (src[f"{s}.mlp.gate_proj.{kind}"], src[f"{s}.mlp.up_proj.{kind}"]))
        _copy_linear(out, f"{t}.feed_forward.linear2", src, f"{s}.mlp.down_proj")
        out[f"{t}.self_attn_norm.norm.weight"] = src[f"{s}.input_layernorm.weight"]
        out[f"{t}.feed_forward_norm.norm.weight"] = src[f"{s}.post_attention_layernorm.weight"]
    ours.load_state_dict({k: v.contiguous() for k, v in out.items()}, strict=True)
    return ours.to(m.dtype)


def gpt_neox_config(c) -> ScratchTransformerConfig:
    """Our config for a ``GPTNeoXConfig``; ValueError naming what our model cannot hold."""
    problems = []
    rope = _rope_settings(c, problems)
    activation = _activation(c.hidden_act, problems)
    _refuse("GPT-NeoX", problems)
    return ScratchTransformerConfig(
        vocab_size=c.vocab_size, d_model=c.hidden_size, n_heads=c.num_attention_heads, n_layers=c.num_hidden_layers,
        d_ff=c.intermediate_size, max_position_embeddings=c.max_position_embeddings, position_encoding="rope",
        **rope, norm="layernorm", norm_first=True,
        final_layer_norm=True, parallel_residual=c.use_parallel_residual, activation=activation,
        scale_embeddings=False, dropout=c.hidden_dropout, activation_dropout=0.0,
        attention_dropout=c.attention_dropout, bias=True, attention_bias=c.attention_bias, feed_forward_bias=True,
        layer_norm_eps=c.layer_norm_eps, tie_word_embeddings=c.tie_word_embeddings, bos_token_id=c.bos_token_id,
        eos_token_id=c.eos_token_id, pad_token_id=c.pad_token_id,
    )


def causal_lm_from_gpt_neox(m) -> ScratchTransformerForCausalLM:
    """Build a ``ScratchTransformerForCausalLM`` holding the weights of a ``GPTNeoXForCausalLM`` (Pythia).

    GPT-NeoX is our decoder-only model with: RoPE on the first ``partial_rotary_factor`` of each head (Pythia: a
    quarter), unscaled embeddings, pre-norm LayerNorms and a final one, a parallel residual when
    ``use_parallel_residual`` (x + Attn(LN_1(x)) + FFN(LN_2(x))), the paper's feed-forward (gelu), biases in
    attention as ``attention_bias`` says and always in the feed-forward, and an LM head of its own unless
    ``tie_word_embeddings``.
    """
    if not isinstance(m, GPTNeoXForCausalLM):
        raise ValueError(f"m must be a transformers GPTNeoXForCausalLM, got {type(m).__name__}")
    c, config = m.config, _head_as_loaded(gpt_neox_config(m.config), m)
    ours = ScratchTransformerForCausalLM(config)
    heads, d_head, d_rotary = config.n_heads, config.d_head, config.d_rotary
    src = m.state_dict()
    out = {"model.decoder.embed.token.weight": src["gpt_neox.embed_in.weight"],
           "lm_head.weight": m.get_output_embeddings().weight}
    _copy_linear(out, "model.decoder.stack.norm", src, "gpt_neox.final_layer_norm")
    for i in range(c.num_hidden_layers):
        s, t = f"gpt_neox.layers.{i}", f"model.decoder.stack.layers.{i}"
        for kind in ("weight", "bias") if c.attention_bias else ("weight",):
            # their rows: head by head, (q_h, k_h, v_h) each d_head rows -> ours: all q heads, all k, all v
            q, k, v = src[f"{s}.attention.query_key_value.{kind}"].unflatten(0, (heads, 3, d_head)).unbind(1)
            q, k = (_half_to_pairs(x.flatten(0, 1), heads, d_rotary) for x in (q, k))
            out[f"{t}.self_attn.qkv_proj.{kind}"] = torch.cat((q, k, v.flatten(0, 1)))
        for theirs, mine in (("attention.dense", "self_attn.out_proj"), ("mlp.dense_h_to_4h", "feed_forward.linear1"),
                             ("mlp.dense_4h_to_h", "feed_forward.linear2"), ("input_layernorm", "self_attn_norm.norm"),
                             ("post_attention_layernorm", "feed_forward_norm.norm")):
            _copy_linear(out, f"{t}.{mine}", src, f"{s}.{theirs}")
    ours.load_state_dict({k: v.contiguous() for k, v in out.items()}, strict=True)
    return ours.to(m.dtype)


# model_type -> (our config for its config, converter): the families we can hold
CONVERTERS = {
    "gpt2": (gpt2_config, causal_lm_from_gpt2),
    "llama": (llama_config, causal_lm_from_llama),
    "qwen2": (llama_config, causal_lm_from_llama),
    "mistral": (llama_config, causal_lm_from_llama),
    "gpt_neox": (gpt_neox_config, causal_lm_from_gpt_neox),
}


def _family(model_type, what) -> tuple:
    if model_type not in CONVERTERS:
        raise ValueError(f"cannot convert a {model_type or type(what).__name__!r} model: the families we can hold "
                         f"are {', '.join(sorted(CONVERTERS))}")
    return CONVERTERS[model_type]


def our_config(config) -> ScratchTransformerConfig:
    """Our config for a transformers config of a family we hold: every check a conversion makes that the config alone
    decides (RoPE scaling, sliding windows, activations, a norm's epsilon...), so an app refuses before it downloads
    the weights. ValueError naming what our model cannot hold."""
    return _family(getattr(config, "model_type", None), config)[0](config)


def from_transformers(model) -> ScratchTransformerForCausalLM:
    """A transformers causal LM as our Transformer, the converter chosen by ``model.config.model_type``; a family we
    cannot hold is refused with the list of those we can."""
    return _family(getattr(getattr(model, "config", None), "model_type", None), model)[1](model)
