"""Llama-family and GPT-NeoX models as our Transformer (``modeling.convert``), proven equal to transformers' own classes
on random tiny configs, float32, eval mode: logits to 1e-5, greedy generate token for token with and without the KV
cache, ``record()``'s attention weights equal to the reference's ``output_attentions``, and a left-padded batch with
``position_ids``. Each converter refuses what it cannot hold, naming it."""

import pytest
import torch
from transformers import (GPTNeoXConfig, GPTNeoXForCausalLM, LlamaConfig, LlamaForCausalLM, MistralConfig,
                          MistralForCausalLM, OPTConfig, OPTForCausalLM, Qwen2Config, Qwen2ForCausalLM)

from modeling import record
from modeling.convert import CONVERTERS, causal_lm_from_gpt_neox, causal_lm_from_llama, from_transformers

VOCAB = 97
SIZES = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=88, num_hidden_layers=2, max_position_embeddings=64,
             bos_token_id=1, eos_token_id=2, pad_token_id=0, attn_implementation="eager")

REFERENCES = {
    # GQA (8 query heads, 2 key/value heads), untied head, RoPE base 500
    "llama-gqa": lambda: LlamaForCausalLM(LlamaConfig(num_attention_heads=8, num_key_value_heads=2,
                                                      rope_parameters={"rope_type": "default", "rope_theta": 500.0},
                                                      **SIZES)),
    # multi-query attention, biases on every attention and MLP projection, tied head
    "llama-mqa-bias": lambda: LlamaForCausalLM(LlamaConfig(num_attention_heads=4, num_key_value_heads=1,
                                                           attention_bias=True, mlp_bias=True,
                                                           tie_word_embeddings=True, **SIZES)),
    # q, k, v biases without an output bias
    "qwen2": lambda: Qwen2ForCausalLM(Qwen2Config(num_attention_heads=4, num_key_value_heads=2, **SIZES)),
    "mistral": lambda: MistralForCausalLM(MistralConfig(num_attention_heads=4, num_key_value_heads=2,
                                                        sliding_window=None, **SIZES)),
    # Llama 3.1's frequency rule over a trained context of 32 positions, head width 16: pair 0 (wavelength 6.3 <
    # 32 / 4) turns as it was, pair 1 (19.9) is blended, pairs 2 to 7 (62.8 and more > 32 / 1) turn 8 times slower
    "llama3-rope": lambda: LlamaForCausalLM(LlamaConfig(num_attention_heads=4, num_key_value_heads=2, rope_parameters={
        "rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 32}, **SIZES)),
    # PyTorch's tanh-approximated GELU under transformers' other name (Gemma's), gated: ours is gelu_new
    "llama-gelu-tanh": lambda: LlamaForCausalLM(LlamaConfig(num_attention_heads=4, hidden_act="gelu_pytorch_tanh",
                                                            **SIZES)),
    # position interpolation: every pair turns 4 times slower
    "llama-linear-rope": lambda: LlamaForCausalLM(LlamaConfig(num_attention_heads=4, rope_parameters={
        "rope_type": "linear", "rope_theta": 500.0, "factor": 4.0}, **SIZES)),
    # Pythia's block: parallel residual, a quarter of each head rotated, biases, untied head
    "neox-parallel": lambda: GPTNeoXForCausalLM(GPTNeoXConfig(num_attention_heads=4, **SIZES)),
    # sequential residual, half the head rotated, no attention bias
    "neox-sequential": lambda: GPTNeoXForCausalLM(GPTNeoXConfig(
        num_attention_heads=4, use_parallel_residual=False, attention_bias=False,
        rope_parameters={"rope_type": "default", "rope_theta": 1000.0, "partial_rotary_factor": 0.5}, **SIZES)),
}


def reference(name: str):
    """The reference with random weights, norms' gains and biases drawn too (their init is ones and zeros, which
    would hide a gain or bias copied to the wrong place)."""
    torch.manual_seed(0)
    model = REFERENCES[name]().eval()
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dim() == 1:
                parameter.normal_(0.0, 0.5)
    return model


def ids(batch: int, length: int, seed: int = 1) -> torch.Tensor:
    return torch.randint(3, VOCAB, (batch, length), generator=torch.Generator().manual_seed(seed))


@pytest.fixture(scope="module", params=sorted(REFERENCES))
def pair(request):
    ref = reference(request.param)
    return ref, from_transformers(ref).eval()


def test_converted_logits_match_the_reference(pair):
    ref, ours = pair
    x = ids(3, 13)
    with torch.no_grad():
        expected, actual = ref(x).logits, ours(x).logits
    assert (expected - actual).abs().max().item() <= 1e-5


def test_recorded_attention_weights_equal_the_references_output_attentions(pair):
    ref, ours = pair
    x = ids(2, 9)
    with torch.no_grad():
        expected = ref(x, output_attentions=True).attentions
        with record() as recording:
            ours(x)
    assert len(expected) == ours.config.n_layers
    for layer, weights in enumerate(expected):
        assert (recording.attention("decoder", layer).weights - weights).abs().max().item() <= 1e-5


def test_greedy_generate_gives_the_references_tokens_with_and_without_the_cache(pair):
    ref, ours = pair
    x = ids(2, 6, seed=3)
    greedy = dict(max_new_tokens=12, do_sample=False, attention_mask=torch.ones_like(x), pad_token_id=0,
                  eos_token_id=None)
    expected = ref.generate(x, **greedy)
    assert torch.equal(ours.generate(x, **greedy), expected)
    assert torch.equal(ours.generate(x, use_cache=False, **greedy), expected)


def test_left_padded_batch_with_position_ids_gives_the_references_logits(pair):
    """Row 0 has 4 padding tokens on the left; both models get the same mask and positions (counting real tokens)."""
    ref, ours = pair
    x = ids(2, 10, seed=4)
    mask = torch.ones_like(x)
    mask[0, :4] = 0
    x[0, :4] = 0
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        expected = ref(x, attention_mask=mask, position_ids=positions).logits
        actual = ours(x, attention_mask=mask, position_ids=positions).logits
        alone = ours(x[:1, 4:]).logits  # the padded row, unpadded
    real = mask.bool()
    assert (expected - actual)[real].abs().max().item() <= 1e-5
    assert (actual[0, 4:] - alone[0]).abs().max().item() <= 1e-5
    greedy = dict(max_new_tokens=8, do_sample=False, attention_mask=mask, pad_token_id=0, eos_token_id=None)
    assert torch.equal(ours.generate(x, **greedy), ref.generate(x, **greedy))


def test_the_converted_config_names_the_block():
    llama = causal_lm_from_llama(reference("llama-gqa")).config
    assert (llama.norm, llama.feed_forward, llama.activation, llama.n_kv_heads, llama.tie_word_embeddings,
            llama.rope_theta, llama.bias, llama.qkv_bias) == ("rmsnorm", "gated", "silu", 2, False, 500.0, False, False)
    qwen = causal_lm_from_llama(reference("qwen2")).config
    assert (qwen.qkv_bias, qwen.attention_bias, qwen.feed_forward_bias) == (True, False, False)
    neox = causal_lm_from_gpt_neox(reference("neox-parallel")).config
    assert (neox.norm, neox.parallel_residual, neox.rotary_fraction, neox.d_rotary, neox.feed_forward) == (
        "layernorm", True, 0.25, 4, "mlp")


def test_untied_head_stays_its_own_matrix():
    ours = from_transformers(reference("llama-gqa"))
    assert ours.lm_head.weight.data_ptr() != ours.model.decoder.embed.token.weight.data_ptr()
    tied = from_transformers(reference("llama-mqa-bias"))
    assert tied.lm_head.weight.data_ptr() == tied.model.decoder.embed.token.weight.data_ptr()


def test_from_transformers_knows_every_family():
    assert sorted(CONVERTERS) == ["gpt2", "gpt_neox", "llama", "mistral", "qwen2"]
    opt = OPTForCausalLM(OPTConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, ffn_dim=32,
                                   num_attention_heads=2, word_embed_proj_dim=16))
    with pytest.raises(ValueError, match="cannot convert a 'opt' model: the families we can hold are "
                                         "gpt2, gpt_neox, llama, mistral, qwen2"):
        from_transformers(opt)


@pytest.mark.parametrize("make, message", [
    (lambda: MistralForCausalLM(MistralConfig(num_attention_heads=4, num_key_value_heads=2, sliding_window=16,
                                              **SIZES)),
     "sliding_window 16"),
    (lambda: LlamaForCausalLM(LlamaConfig(num_attention_heads=4, rope_parameters={
        "rope_type": "yarn", "rope_theta": 10000.0, "factor": 2.0, "original_max_position_embeddings": 32}, **SIZES)),
     "rope_type 'yarn'"),
    (lambda: LlamaForCausalLM(LlamaConfig(num_attention_heads=4, head_dim=8, **SIZES)),
     "head_dim 8 != hidden_size / num_attention_heads = 16"),
    (lambda: LlamaForCausalLM(LlamaConfig(num_attention_heads=4, hidden_act="quick_gelu", **SIZES)),
     "hidden_act 'quick_gelu'"),
    (lambda: GPTNeoXForCausalLM(GPTNeoXConfig(num_attention_heads=4, rope_parameters={
        "rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.0, "partial_rotary_factor": 0.25}, **SIZES)),
     "rope_type 'dynamic'"),
], ids=["sliding-window", "rope-scaling", "head-dim", "activation", "neox-rope-scaling"])
def test_converters_refuse_what_they_cannot_hold_naming_it(make, message):
    with pytest.raises(ValueError, match="cannot convert this .* exactly: .*" + message.replace("(", r"\(")):
        from_transformers(make())


def test_converters_refuse_other_classes():
    with pytest.raises(ValueError, match="must be a transformers GPTNeoXForCausalLM, got LlamaForCausalLM"):
        causal_lm_from_gpt_neox(reference("llama-gqa"))
    with pytest.raises(ValueError, match="must be a transformers LlamaForCausalLM, Qwen2ForCausalLM or "
                                         "MistralForCausalLM, got GPTNeoXForCausalLM"):
        causal_lm_from_llama(reference("neox-parallel"))


def test_a_long_text_gives_the_references_logits():
    """2,048 tokens at Llama 3's RoPE base: a frequency rounded one bit apart from transformers' (theta^(-2i/d) for
    1 / theta^(2i/d)) turns by a few 1e-4 of a radian more at the far positions; logits must stay within 1e-4."""
    torch.manual_seed(0)
    reference_ = LlamaForCausalLM(LlamaConfig(
        vocab_size=VOCAB, hidden_size=256, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4,
        max_position_embeddings=2048, rope_parameters={"rope_type": "default", "rope_theta": 500000.0})).eval()
    with torch.no_grad():
        for parameter in reference_.parameters():
            parameter.normal_(0.0, 0.5 if parameter.dim() == 1 else 0.2)
    ours = from_transformers(reference_).eval()
    with torch.inference_mode():
        gap = (ours(ids(1, 2048)).logits - reference_(ids(1, 2048)).logits).abs().max().item()
    assert gap <= 1e-4
