"""Weight converters from reference implementations, so that parity with them is provable.

- ``transformer_from_torch``: ``torch.nn.Transformer(batch_first=True)`` -> ``modeling.Transformer``.
- ``causal_lm_from_gpt2``: ``transformers.GPT2LMHeadModel`` -> ``ScratchTransformerForCausalLM``.
- ``from_transformers``: any causal LM of a family above, chosen by ``config.model_type``.

Both references stack the Q, K, V projections into one (3D, D) matrix, as our ``qkv_proj`` does, so it is copied
as it is. GPT-2's ``Conv1D`` stores weights as (in, out), the transpose of ``nn.Linear``.
"""

import torch
import torch.nn.functional as F
from torch import nn
from transformers import GPT2LMHeadModel

from .configuration_scratch_transformer import ScratchTransformerConfig
from .modeling_scratch_transformer import ScratchTransformerForCausalLM, Transformer


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
    enc_layer, dec_layer = m.encoder.layers[0], m.decoder.layers[0]
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


def causal_lm_from_gpt2(m) -> ScratchTransformerForCausalLM:
    """Build a ``ScratchTransformerForCausalLM`` holding the weights of a ``GPT2LMHeadModel``.

    GPT-2 is our decoder-only model with: learned positions, unscaled embeddings, pre-norm with a
    final LayerNorm, gelu_new, biases everywhere, tied LM head, no dropout inside the MLP.
    """
    if not isinstance(m, GPT2LMHeadModel):
        raise ValueError(f"m must be a transformers GPT2LMHeadModel, got {type(m).__name__}")
    c = m.config
    if getattr(c, "scale_attn_by_inverse_layer_idx", False) or getattr(c, "reorder_and_upcast_attn", False):
        raise ValueError("GPT-2 variants with scale_attn_by_inverse_layer_idx / reorder_and_upcast_attn are not supported")
    if not getattr(c, "scale_attn_weights", True):
        raise ValueError("GPT-2 without scale_attn_weights is not supported (we always scale by 1/sqrt(d_k))")
    config = ScratchTransformerConfig(
        vocab_size=c.vocab_size,
        d_model=c.n_embd,
        n_heads=c.n_head,
        n_layers=c.n_layer,
        d_ff=c.n_inner or 4 * c.n_embd,
        max_position_embeddings=c.n_positions,
        position_encoding="learned",
        norm_first=True,
        final_layer_norm=True,
        activation={"gelu_new": "gelu_new", "gelu": "gelu", "relu": "relu"}[c.activation_function],
        scale_embeddings=False,
        dropout=c.resid_pdrop,
        activation_dropout=0.0,  # GPT-2's MLP has no dropout inside
        attention_dropout=c.attn_pdrop,
        layer_norm_eps=c.layer_norm_epsilon,
        bos_token_id=c.bos_token_id,
        eos_token_id=c.eos_token_id,
        pad_token_id=getattr(c, "pad_token_id", None),
        tie_word_embeddings=True,
    )
    src = m.state_dict()
    out = {
        "model.decoder.embed.token.weight": src["transformer.wte.weight"],
        "model.decoder.embed.position.weight": src["transformer.wpe.weight"],
        "model.decoder.stack.norm.weight": src["transformer.ln_f.weight"],
        "model.decoder.stack.norm.bias": src["transformer.ln_f.bias"],
        "lm_head.weight": src["transformer.wte.weight"],
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


CONVERTERS = {"gpt2": causal_lm_from_gpt2}  # model_type -> converter; the families we can hold


def from_transformers(model) -> ScratchTransformerForCausalLM:
    """A transformers causal LM as our Transformer, the converter chosen by ``model.config.model_type``; a family we
    cannot hold is refused with the list of those we can."""
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    if model_type not in CONVERTERS:
        raise ValueError(f"cannot convert a {model_type or type(model).__name__!r} model: the families we can hold "
                         f"are {', '.join(sorted(CONVERTERS))}")
    return CONVERTERS[model_type](model)
