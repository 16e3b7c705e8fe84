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
    for name in ("open, first", "heads, 128 tokens", "lens, 128 tokens", "gradient step, 128 tokens",
                 "steps, 128 tokens", "trace, 128 tokens"):
        assert re.search(rf"^{name}\s+[\d.]+ s\s+[\d.]+x  peak RSS [\d.]+ GB", out, re.M), name
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
