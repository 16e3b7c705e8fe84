"""The block options (norm, gated feed-forward, attention-only layers, grouped-query attention, biases, tied head,
partial RoPE, parallel residual), each checked against its formula computed by hand from the module's own weights
(float32, 1e-5 unless stated); and the shipped checkpoints, which predate the options, load and compute exactly as
before."""

import json
import math

import pytest
import torch
import torch.nn.functional as F
from safetensors import safe_open
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

from checkpointing.loading import checkpoint_folders, load_checkpoint
from modeling import record
from modeling.modeling_scratch_transformer import RMSNorm
from support.tiny_models import random_ids, tiny_causal_lm, tiny_config, tiny_seq2seq
from checkpointing.paths import REPO_ROOT

ROOT = REPO_ROOT
# logits at the last position of a fixed input, saved from every shipped checkpoint by the model code before
# the block options existed (commit d75657b), for the ids below
SAVED_LOGITS = ROOT / "tests" / "modeling" / "reference" / "shipped_last_logits.safetensors"
IDS = torch.tensor([[5, 17, 200, 41, 8, 120, 77, 9, 250, 12, 64, 99]])


@pytest.mark.parametrize("folder", checkpoint_folders(ROOT / "checkpoints"), ids=lambda folder: folder.name)
def test_shipped_checkpoints_load_their_weights_unchanged_and_compute_as_before(folder):
    model, _ = load_checkpoint(folder)
    params = dict(model.named_parameters(remove_duplicate=False))
    with safe_open(folder / "model.safetensors", "pt") as stored:
        for name in stored.keys():
            assert torch.equal(params[name], stored.get_tensor(name)), name  # to the bit
    with torch.no_grad():
        if model.config.is_encoder_decoder:
            logits = model(input_ids=IDS, decoder_input_ids=IDS[:, :7]).logits
        else:
            logits = model(IDS).logits
    saved = load_file(SAVED_LOGITS)[folder.name]
    # bit for bit on the machine that saved them; another CPU's kernels may round differently
    torch.testing.assert_close(logits[0, -1], saved, rtol=0, atol=1e-5)


def test_rmsnorm_is_x_over_its_root_mean_square_times_the_gain():
    norm = RMSNorm(6, eps=1e-6)
    with torch.no_grad():
        norm.weight.normal_()
    x = torch.randn(2, 3, 6)
    expected = x / torch.sqrt((x**2).mean(-1, keepdim=True) + 1e-6) * norm.weight
    assert (norm(x) - expected).abs().max().item() <= 1e-5
    model = tiny_causal_lm(norm="rmsnorm")
    assert isinstance(model.model.decoder.stack.norm, RMSNorm)
    assert not any("norm.bias" in name for name, _ in model.named_parameters())


def test_gated_feed_forward_is_swiglu():
    model = tiny_causal_lm(feed_forward="gated", activation="silu", feed_forward_bias=False)
    ffn = model.model.decoder.stack.layers[0].feed_forward
    w_gate, w_up = ffn.linear1.weight.chunk(2)
    x = torch.randn(2, 5, 32)
    expected = (F.silu(x @ w_gate.T) * (x @ w_up.T)) @ ffn.linear2.weight.T
    with record() as recording:
        out = ffn(x)
    assert (out - expected).abs().max().item() <= 1e-5
    assert (recording["decoder", 0, "ffn", "hidden"] - F.silu(x @ w_gate.T) * (x @ w_up.T)).abs().max().item() <= 1e-5
    assert recording["decoder", 0, "ffn", "gate"].shape == recording["decoder", 0, "ffn", "up"].shape == (2, 5, 64)
    assert ffn.linear1.bias is None and ffn.linear2.bias is None


def test_grouped_query_attention_equals_multi_head_attention_with_each_key_head_copied():
    """n_kv_heads=2 of 4: query heads 0, 1 read key/value head 0, heads 2, 3 head 1. A multi-head model whose W^K and
    W^V repeat those rows gives the same logits, and the cache holds 2 heads."""
    gqa = tiny_causal_lm(n_kv_heads=2)
    mha = tiny_causal_lm()
    state = gqa.state_dict()
    for i in range(2):
        q, k, v = state[f"model.decoder.stack.layers.{i}.self_attn.qkv_proj.weight"].split([32, 16, 16])
        repeat = lambda w: w.unflatten(0, (2, 8)).repeat_interleave(2, dim=0).flatten(0, 1)  # noqa: E731
        state[f"model.decoder.stack.layers.{i}.self_attn.qkv_proj.weight"] = torch.cat((q, repeat(k), repeat(v)))
        b = state[f"model.decoder.stack.layers.{i}.self_attn.qkv_proj.bias"].split([32, 16, 16])
        state[f"model.decoder.stack.layers.{i}.self_attn.qkv_proj.bias"] = torch.cat(
            (b[0], *(x.unflatten(0, (2, 8)).repeat_interleave(2, dim=0).flatten() for x in b[1:])))
    mha.load_state_dict(state)
    x = random_ids(2, 9)
    with torch.no_grad():
        out = gqa(x, use_cache=True)
        assert (out.logits - mha(x).logits).abs().max().item() <= 1e-5
        eager = gqa(x, output_attentions=True)
    assert (eager.logits - out.logits).abs().max().item() <= 1e-5  # eager softmax and sdpa agree
    assert out.past_key_values.layers[0].keys.shape == (2, 2, 9, 8)
    assert gqa.model.decoder.stack.layers[0].self_attn.qkv_proj.weight.shape == (32 + 2 * 16, 32)


def test_qkv_bias_alone_as_qwen2():
    attention = tiny_causal_lm(bias=False, qkv_bias=True).model.decoder.stack.layers[0].self_attn
    assert attention.qkv_proj.bias is not None and attention.out_proj.bias is None
    attention = tiny_causal_lm(attention_bias=False).model.decoder.stack.layers[0]
    assert attention.self_attn.qkv_proj.bias is None and attention.feed_forward.linear1.bias is not None


def test_untied_lm_head_is_its_own_matrix_and_survives_save_and_load(tmp_path):
    model = tiny_causal_lm(tie_word_embeddings=False)
    assert model.lm_head.weight.data_ptr() != model.model.decoder.embed.token.weight.data_ptr()
    model.save_pretrained(tmp_path)
    loaded = type(model).from_pretrained(tmp_path).eval()
    assert torch.equal(loaded.lm_head.weight, model.lm_head.weight)
    assert not torch.equal(loaded.lm_head.weight, loaded.model.decoder.embed.token.weight)


def test_partial_rotary_turns_only_the_first_dimensions_of_each_head():
    """rotary_fraction 0.5 of an 8-wide head: dimensions 0..3 turn (two pairs), 4..7 are the unrotated query."""
    model = tiny_causal_lm(rotary_fraction=0.5, rope_theta=100.0)
    x = random_ids(1, 6)
    with record() as recording:
        model(x)
    attention = recording.attention("decoder", 0)
    q, rotated = attention.query, attention.query_rotated
    assert torch.equal(rotated[..., 4:], q[..., 4:])
    positions = torch.arange(6, dtype=torch.float32)
    for pair in range(2):
        angle = positions * 100.0 ** (-2 * pair / 4)
        x0, x1 = q[..., 2 * pair], q[..., 2 * pair + 1]
        expected = torch.stack((x0 * angle.cos() - x1 * angle.sin(), x0 * angle.sin() + x1 * angle.cos()), -1)
        assert (rotated[..., 2 * pair: 2 * pair + 2] - expected).abs().max().item() <= 1e-5
    assert recording.decoder.rotary[0].shape == (1, 1, 6, 2)


def test_parallel_residual_adds_attention_and_feed_forward_of_the_same_input():
    model = tiny_causal_lm(parallel_residual=True)
    layer = model.model.decoder.stack.layers[0]
    with record() as recording:
        model(random_ids(2, 7))
    x = recording["decoder", 0, None, "input"]
    attention = recording["decoder", 0, "self", "output"]
    with torch.no_grad():
        ffn = layer.feed_forward(layer.feed_forward_norm.norm(x))
    assert (recording["decoder", 0, "self", "input"] - layer.self_attn_norm.norm(x)).abs().max().item() <= 1e-6
    assert (recording["decoder", 0, None, "after_self_attention"] - (x + attention)).abs().max().item() <= 1e-6
    assert (recording["decoder", 0, None, "output"] - (x + attention + ffn)).abs().max().item() <= 1e-5


def test_config_round_trips_every_option(tmp_path):
    config = tiny_config(norm="rmsnorm", feed_forward="gated", activation="silu", n_kv_heads=1, bias=False,
                         qkv_bias=True, rotary_fraction=0.5, position_encoding="rope", parallel_residual=True,
                         tie_word_embeddings=False, rope_theta=500.0)
    config.save_pretrained(tmp_path)
    loaded = type(config).from_pretrained(tmp_path)
    assert loaded.to_dict() == config.to_dict()
    assert (loaded.num_key_value_heads, loaded.d_rotary, loaded.attention_bias, loaded.qkv_bias) == (1, 4, False, True)


STYLES = {
    "llama": dict(norm="rmsnorm", feed_forward="gated", activation="silu", n_kv_heads=2, bias=False,
                  tie_word_embeddings=False),
    "neox": dict(parallel_residual=True, rotary_fraction=0.5, tie_word_embeddings=False),
}


@pytest.mark.parametrize("style", sorted(STYLES))
def test_the_views_read_a_llama_and_a_neox_block(style):
    """The step-by-step view recomputes an attention sublayer of these blocks (RMSNorm, grouped-query keys, half the
    head rotated, the parallel residual's stream) equal to the model's own numbers, and the logit lens's last row
    is the model's own logits (untied head)."""
    from explorer.views import lens, steps
    from training.tokenization import byte_tokenizer

    tokenizer = byte_tokenizer()
    model = tiny_causal_lm("rope", vocab_size=len(tokenizer), pad_token_id=1, bos_token_id=0, eos_token_id=0,
                           **STYLES[style])
    text = "To be, or not to be: that is the question."
    for head in range(4):
        view = steps.attention_steps(model, tokenizer, text, "self", 1, head, 7)
        assert view.parity.gap <= 1e-5 and len(view.steps) >= 10
    ids = tokenizer(text, return_tensors="pt").input_ids
    with torch.no_grad():
        expected = model(ids).logits[0].float()
    torch.testing.assert_close(lens.logit_lens(model, tokenizer, text).model_logits, expected, rtol=0, atol=1e-5)


def test_an_attention_only_layer_is_x_plus_attention_of_its_layer_norm():
    """feed_forward="none" (Elhage et al. 2021): layer(x) = x + Attn(LN(x)), Attn computed by hand from the layer's own
    weights (causal softmax of q k^T / sqrt(d_head), heads concatenated, W_O): within 1e-6 in float32."""
    model = tiny_causal_lm("learned", feed_forward="none")
    with record() as recording:
        model(random_ids(2, 7))
    d, heads = 32, 4
    for i, layer in enumerate(model.model.decoder.stack.layers):
        assert layer.feed_forward is None and layer.feed_forward_norm is None
        x = recording["decoder", i, None, "input"]
        norm = layer.self_attn_norm.norm
        centred = x - x.mean(-1, keepdim=True)
        normed = centred / torch.sqrt(centred.pow(2).mean(-1, keepdim=True) + 1e-5) * norm.weight + norm.bias
        q, k, v = (normed @ layer.self_attn.qkv_proj.weight.T + layer.self_attn.qkv_proj.bias).split(d, -1)
        q, k, v = (t.unflatten(-1, (heads, d // heads)).transpose(1, 2) for t in (q, k, v))  # (B, H, T, d_head)
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // heads)
        scores = scores.masked_fill(torch.ones(7, 7, dtype=torch.bool).triu(1), float("-inf"))
        concatenated = (scores.softmax(-1) @ v).transpose(1, 2).flatten(2)
        attention = concatenated @ layer.self_attn.out_proj.weight.T + layer.self_attn.out_proj.bias
        assert (recording["decoder", i, None, "output"] - (x + attention)).abs().max().item() <= 1e-6
        record_ = recording.layer("decoder", i)
        assert record_.feed_forward_hidden is None and record_.feed_forward_output is None
        assert not any(site.part == "ffn" for site in recording.values)


def test_an_attention_only_encoder_decoder_adds_nothing_after_its_attention():
    """Encoder and decoder layers alike: the layer's output is the stream after its last attention, exactly."""
    model = tiny_seq2seq(feed_forward="none")
    with record() as recording:
        model(random_ids(1, 6), decoder_input_ids=random_ids(1, 4, seed=2))
    for i in range(2):
        assert torch.equal(recording["encoder", i, None, "output"], recording["encoder", i, None, "after_self_attention"])
        assert torch.equal(recording["decoder", i, None, "output"], recording["decoder", i, None, "after_cross_attention"])
    assert not any("feed_forward" in name for name, _ in model.named_parameters())


def test_an_attention_only_model_has_exactly_the_attention_norm_and_embedding_parameters():
    """Counted by hand, d_model D = 32, 2 layers, vocab V = 64, 64 learned positions P, tied head: V D + P D, then each
    layer W^{Q,K,V} (3 D D + 3 D), W_O (D D + D) and its LayerNorm (2 D), then the final LayerNorm (2 D). The same
    model with a feed-forward (d_ff F = 64) has D F + F + F D + D and a LayerNorm (2 D) more a layer."""
    D, V, P, F, layers = 32, 64, 64, 64, 2
    by_hand = V * D + P * D + layers * (3 * D * D + 3 * D + D * D + D + 2 * D) + 2 * D
    attention_only = tiny_causal_lm("learned", feed_forward="none")
    assert not any("feed_forward" in name for name, _ in attention_only.named_parameters())
    assert attention_only.num_parameters() == by_hand == 12_736
    with_mlp = tiny_causal_lm("learned", d_ff=F)
    assert with_mlp.num_parameters() - by_hand == layers * (D * F + F + F * D + D + 2 * D)


def test_an_attention_only_model_saves_loads_and_generates(tmp_path):
    model = tiny_causal_lm("rope", feed_forward="none")
    model.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert (saved["feed_forward"], saved["d_ff"]) == ("none", None)
    with safe_open(tmp_path / "model.safetensors", "pt") as stored:
        assert not any("feed_forward" in name for name in stored.keys())
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    ids = random_ids(1, 6)
    with torch.no_grad():
        assert torch.equal(loaded(ids).logits, model(ids).logits)
        generated = loaded.generate(ids, max_new_tokens=5, do_sample=False)
        greedy = ids
        for _ in range(5):  # the same greedy tokens without a cache, one whole forward pass a token
            greedy = torch.cat((greedy, loaded(greedy).logits[:, -1:].argmax(-1)), dim=1)
    assert torch.equal(generated, greedy)
