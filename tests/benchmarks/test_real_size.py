"""benchmarks.real_size runs every figure of the real-size table (at the tiny size: that it runs and prints, no timing
asserted), and the training and generation benchmarks take GPT-2 small's and the Llama block's sizes."""

import re

from benchmarks import real_size, training_step
from benchmarks.gpt2_reference import sized_config
from modeling import ScratchTransformerConfig


def test_real_size_prints_every_view_as_seconds_and_multiples_of_a_forward_pass(monkeypatch, capsys):
    for name in ("HF_ENDPOINT", "HF_HOME", "HF_HUB_CACHE", "HF_HUB_OFFLINE"):  # the benchmark points them at its Hub
        monkeypatch.setenv(name, "")  # restored after the test
        monkeypatch.delenv(name)
    real_size.main(["--size", "tiny", "--repeats", "1", "--revisions", "2"])
    out = capsys.readouterr().out
    assert re.search(r"^tiny: [\d.]+M parameters; one forward pass over 128 tokens \d+ ms", out, re.M)
    assert re.search(r"^open, first\s+[\d.]+ s\s+[\d.]+x  peak RSS [\d.]+ GB$", out, re.M)
    for name in ("heads, 128 tokens", "lens, 128 tokens", "gradient step, 128 tokens",
                 "steps, 128 tokens", "trace, 128 tokens"):
        assert re.search(rf"^{name}\s+[\d.]+ s\s+[\d.]+x  peak RSS [\d.]+ GB, -?\d+ MB on top \(-?[\d.]+x the weights\)",
                         out, re.M), name
    assert re.search(r"^generation, greedy\s+[\d.]+ tokens/s; GPT2LMHeadModel [\d.]+ tokens/s \([\d.]+x\)$", out, re.M)
    assert re.search(r"^watch it learn from the Hub\s+[\d.]+ s\s+\d+x  2 revisions of \d+ MB .* revisions' weights$",
                     out, re.M)


def test_real_size_texts_are_distinct_and_exactly_the_length_asked():
    from support.fixtures_checkpoints import train_tokenizer

    tokenizer = train_tokenizer()
    texts = real_size.texts_of_tokens(tokenizer, 128, 8)
    assert len(set(texts)) == 8
    assert all(len(tokenizer(t, add_special_tokens=False).input_ids) == 128 for t in texts)


def test_gpt2_small_is_gpt2_configs_defaults():
    from transformers import GPT2Config

    ours, theirs = sized_config("gpt2-small", None), GPT2Config()
    assert (ours.vocab_size, ours.d_model, ours.n_heads, ours.n_layers, ours.d_ff, ours.max_position_embeddings) == (
        theirs.vocab_size, theirs.n_embd, theirs.n_head, theirs.n_layer, 4 * theirs.n_embd, theirs.n_positions)
    assert ours.activation == theirs.activation_function and ours.layer_norm_eps == theirs.layer_norm_epsilon


def test_the_sizes_race_their_own_peers():
    small = ScratchTransformerConfig(vocab_size=97, d_model=32, n_heads=4, n_layers=2, d_ff=64, dropout=0.0,
                                     position_encoding="learned", max_position_embeddings=16)
    assert list(training_step.build_models(small, 16, size="gpt2-small")) == [
        "GPT2LMHeadModel", training_step.OURS, training_step.MINIMAL]
    assert list(training_step.build_models(small, 16, size="llama-small")) == [
        training_step.MINIMAL, training_step.LLAMA, training_step.OURS_LLAMA]


def test_the_real_sizes_are_the_published_models_sizes():
    """benchmarks.measuring.REAL_SIZES, counted from their configs' numbers as the app counts a Hub repo's: GPT-2
    small's 124,439,808 parameters and SmolLM-135M's 134,515,008 (each model card's figure)."""
    from transformers import AutoConfig

    from benchmarks.measuring import REAL_SIZES
    from explorer.models.plans import count_parameters

    counted = {size: count_parameters(AutoConfig.for_model(model_type, **sizes).to_dict())
               for size, (model_type, sizes) in REAL_SIZES.items()}
    assert counted == {"gpt2-small": 124_439_808, "smollm-135m": 134_515_008}


def test_a_real_size_is_built_as_its_own_class_and_converted_to_ours(monkeypatch):
    """measuring.real_size's path at a tiny Llama's size: transformers' own class, then ours, equal logits."""
    import torch

    from benchmarks import measuring
    from support.hub_repos import transformers_model

    monkeypatch.setitem(measuring.REAL_SIZES, "tiny-llama", ("llama", dict(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        vocab_size=400, max_position_embeddings=64, tie_word_embeddings=True)))
    ours, tokenizer = measuring.real_size("tiny-llama")
    theirs = transformers_model("llama", tokenizer, **measuring.REAL_SIZES["tiny-llama"][1])
    ids = tokenizer("Shall I compare thee", return_tensors="pt").input_ids
    with torch.inference_mode():
        assert torch.allclose(ours(ids).logits, theirs(ids).logits, atol=1e-5)
    assert type(theirs).__name__ == "LlamaForCausalLM" and ours.config.n_kv_heads == 2
