"""explorer.views.architecture: what ``describe`` says of every family is what its modules hold, and each formula
names exactly what the model computes (a bias only where there is one, the gate only in a gated feed-forward)."""

import pytest
import torch

from explorer.views.architecture import describe
from modeling.modeling_scratch_transformer import RMSNorm
from support.families import FAMILIES, family
from support.shipped import shipped
from support.tiny_models import tiny_causal_lm, tiny_seq2seq

# family -> what describe must say: (norm, feed-forward, activation, n_heads, n_kv_heads, biases, tied, parallel,
# pre-norm, d_rotary, scaled embeddings)
EXPECTED = {
    "ours": ("LayerNorm", "mlp", "gelu", 8, 8, {"q", "k", "v", "o", "ffn"}, True, False, True, 32, True),
    "paper": ("LayerNorm", "mlp", "relu", 4, 4, {"q", "k", "v", "o", "ffn"}, True, False, False, 0, True),
    "gpt2": ("LayerNorm", "mlp", "gelu_new", 4, 4, {"q", "k", "v", "o", "ffn"}, True, False, True, 0, False),
    "llama": ("RMSNorm", "gated", "silu", 4, 2, set(), False, False, True, 8, False),
    "qwen2": ("RMSNorm", "gated", "silu", 4, 2, {"q", "k", "v"}, False, False, True, 8, False),
    "mistral": ("RMSNorm", "gated", "silu", 4, 1, set(), False, False, True, 8, False),
    "gpt_neox": ("LayerNorm", "mlp", "gelu", 4, 4, {"q", "k", "v", "o", "ffn"}, False, True, True, 2, False),
    "attention-only": ("LayerNorm", "none", "gelu", 4, 4, {"q", "k", "v", "o"}, True, False, True, 8, True),
}


@pytest.mark.parametrize("name", FAMILIES)
def test_describe_says_what_each_family_is(name):
    model, _ = family(name)
    arch = describe(model)
    got = (arch.norm, arch.feed_forward, arch.activation, arch.n_heads, arch.n_kv_heads, set(arch.biases),
           arch.tied_head, arch.parallel_residual, arch.pre_norm, arch.d_rotary, arch.scaled_embeddings)
    assert got == EXPECTED[name]


@pytest.mark.parametrize("name", FAMILIES)
def test_describe_agrees_with_the_modules(name):
    """The norm's class, the LM head's storage, each projection's bias and the rows of qkv_proj are the modules' own."""
    model, _ = family(name)
    arch = describe(model)
    layer = model.model.decoder.stack.layers[0]
    attention = layer.self_attn
    assert isinstance(layer.self_attn_norm.norm, RMSNorm) == (arch.norm == "RMSNorm")
    assert arch.centres == (not isinstance(layer.self_attn_norm.norm, RMSNorm))
    assert arch.tied_head == (model.lm_head.weight.data_ptr() == model.get_input_embeddings().weight.data_ptr())
    for part in "qkv":
        weight, bias = attention.projection(part)
        assert len(arch.qkv_rows()[part]) == weight.shape[0] == attention.rows[part]
        assert arch.has_bias(part) == (bias is not None)
        start = arch.qkv_rows()[part].start
        assert torch.equal(attention.qkv_proj.weight[start:start + weight.shape[0]], weight)
    assert arch.has_bias("o") == (attention.out_proj.bias is not None)
    assert arch.has_bias("ffn") == (layer.feed_forward is not None and layer.feed_forward.linear1.bias is not None)
    assert arch.group_size == attention.num_key_value_groups
    assert (layer.feed_forward is None) == (arch.feed_forward == "none")


def test_grouped_heads_are_said_by_which_query_heads_share_each():
    llama, mistral, gpt2 = (describe(family(n)[0]) for n in ("llama", "mistral", "gpt2"))
    assert [list(llama.query_heads_of(g)) for g in range(2)] == [[0, 1], [2, 3]]
    assert [llama.kv_head_of(h) for h in range(4)] == [0, 0, 1, 1]
    assert "key/value head 0 serves query heads 0–1; key/value head 1 serves query heads 2–3" in llama.kv_sharing()
    assert "grouped-query" in llama.kv_sharing()
    assert [mistral.kv_head_of(h) for h in range(4)] == [0, 0, 0, 0] and "multi-query" in mistral.kv_sharing()
    assert gpt2.kv_sharing() == "" and not gpt2.grouped
    assert llama.qkv_rows() == {"q": range(0, 32), "k": range(32, 48), "v": range(48, 64)}
    assert mistral.qkv_rows() == {"q": range(0, 32), "k": range(32, 40), "v": range(40, 48)}
    assert llama.head_rows("k", 1) == range(40, 48) and llama.head_rows("v", 1) == range(56, 64)


def test_formulas_carry_biases_only_where_the_model_has_them():
    llama, qwen2, gpt2 = (describe(family(n)[0]) for n in ("llama", "qwen2", "gpt2"))
    assert llama.projection_formula("q", "x") == "q = x W_Q^h" and llama.output_formula() == "Concat(…) W_O^T"
    assert qwen2.projection_formula("k", "x", "0", "k_j") == "k_j = x W_K^0 + b_K^0"
    assert qwen2.output_formula() == "Concat(…) W_O^T"
    assert gpt2.projection_formula("v", "x") == "v = x W_V^h + b_V^h" and gpt2.output_formula() == "Concat(…) W_O^T + b_O"


def test_the_norm_and_feed_forward_formulas_are_the_models():
    llama, gpt2, neox, only = (describe(family(n)[0]) for n in ("llama", "gpt2", "gpt_neox", "attention-only"))
    assert llama.norm_formula("x_t") == "RMSNorm(x_t) = x_t / √(mean(x_t²) + ε) · γ" and "mean 0" not in llama.norm_effect()
    assert gpt2.norm_formula("x_t") == "LayerNorm(x_t) = (x_t − mean) / √(var + ε) · γ + β" and "mean 0" in gpt2.norm_effect()
    assert llama.ffn_formula() == "(silu(x W_gate) ⊙ (x W_up)) W_2" and "SwiGLU" in llama.ffn_name()
    assert gpt2.ffn_formula() == "gelu_new(x W_1 + b_1) W_2 + b_2"
    assert only.ffn_formula() == "" and only.residual_formula() == "x ← x + Attn(LayerNorm(x))"
    assert neox.residual_formula() == "x ← x + Attn(LayerNorm_1(x)) + FFN(LayerNorm_2(x))"
    assert llama.residual_formula() == "x ← x + Attn(RMSNorm(x)); then x ← x + FFN(RMSNorm(x))"
    assert describe(family("paper")[0]).residual_formula() == (
        "x ← LayerNorm(x + Attn(x)); then x ← LayerNorm(x + CrossAttn(x, memory)); then x ← LayerNorm(x + FFN(x))")


SUBLAYERS = {"self_attn": "Attn", "cross_attn": "CrossAttn", "feed_forward": "FFN"}
DECODERS = {
    "causal": lambda: tiny_causal_lm("rope"),
    "causal, post-norm": lambda: tiny_causal_lm("rope", norm_first=False, final_layer_norm=False),
    "encoder-decoder": lambda: tiny_seq2seq("sinusoidal"),
    "encoder-decoder, post-norm": lambda: tiny_seq2seq("sinusoidal", norm_first=False, final_layer_norm=False),
    "encoder-decoder, attention-only": lambda: tiny_seq2seq("rope", feed_forward="none"),
    "folio-to-modern": lambda: shipped("folio-to-modern")[0],
}


@pytest.mark.parametrize("build", DECODERS.values(), ids=DECODERS)
def test_the_layer_formula_adds_each_sublayer_of_a_decoder_layer_in_its_order(build):
    """One update per sublayer the decoder's layer holds, in the order it runs them (an encoder-decoder's
    cross-attention reads the memory between attention and feed-forward), each pre- or post-norm as the model is."""
    model = build()
    arch, layer = describe(model), model.model.decoder.stack.layers[0]
    held = [SUBLAYERS[name] for name, _ in layer.named_children() if name in SUBLAYERS]
    memory = {"CrossAttn": ", memory"}
    updates = [f"x ← x + {s}({arch.norm}(x){memory.get(s, '')})" if arch.pre_norm
               else f"x ← {arch.norm}(x + {s}(x{memory.get(s, '')}))" for s in held]
    assert arch.residual_formula() == "; then ".join(updates)
    assert ("CrossAttn" in arch.residual_formula()) == model.config.is_encoder_decoder


def test_the_rotary_share_and_the_head_are_said_as_they_are():
    neox, llama, gpt2 = (describe(family(n)[0]) for n in ("gpt_neox", "llama", "gpt2"))
    assert neox.partial_rotary and "the first d_rotary = 2 of each head's d_head = 8 dimensions (1 pair)" in neox.rotary_text()
    assert "the other 6 pass unrotated" in neox.rotary_text()
    assert not llama.partial_rotary and llama.rotary_text() == (
        "RoPE turns every dimension of each head: d_head = 8, 4 pairs; its frequencies are slowed as Llama 3.1's are, "
        "to read past the 32 tokens it was first trained at: a pair whose wavelength 2π/θ_i is over 64 tokens turns "
        "32× slower; one under 8 tokens turns as θ^(−2i/d_rotary) says; those between, by a blend of the two")
    qwen2 = describe(family("qwen2")[0])  # the default RoPE: nothing slowed, nothing said of it
    assert qwen2.rotary_text() == "RoPE turns every dimension of each head: d_head = 8, 4 pairs"
    assert qwen2.rope_frequency_formula() == "θ_i = θ^(−2i/d_rotary)" and qwen2.rope_scaling_text() == ""
    assert gpt2.rotary_text() == ""
    assert "untied" in llama.head_formula() and "tied" in gpt2.head_formula() and "untied" not in gpt2.head_formula()
    assert gpt2.embedding_formula() == "E[x_t]" and describe(family("ours")[0]).embedding_formula() == "E[x_t] · √d_model"


@pytest.mark.parametrize("name", FAMILIES)
def test_the_summary_names_what_the_model_has_and_nothing_it_lacks(name):
    arch = describe(family(name)[0])
    text = "\n".join(arch.summary())
    other = {"LayerNorm": "RMSNorm", "RMSNorm": "LayerNorm"}[arch.norm]
    assert arch.norm in text and other not in text
    assert ("W_gate" in text) == (arch.feed_forward == "gated") and ("W_1" in text) == (arch.feed_forward == "mlp")
    assert ("grouped-query" in text or "multi-query" in text) == arch.grouped
    assert ("parallel" in text) == arch.parallel_residual and ("post-norm" in text) == (not arch.pre_norm)
    assert ("b_Q" in text) == arch.has_bias("q") and ("b_O" in text) == arch.has_bias("o")
    assert ("untied" in text) == (not arch.tied_head)
    assert ("unrotated" in text) == arch.partial_rotary
    assert ("slower" in text) == bool(arch.rope_scaling)
    assert ("Encoder-decoder" in text) == arch.encoder_decoder
