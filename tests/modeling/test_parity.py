"""Parity with the reference implementations, through the weight converters (float32, eval mode)."""

import pytest
import torch
from torch import nn
from transformers import GPT2Config, GPT2LMHeadModel

from modeling.convert import causal_lm_from_gpt2, transformer_from_torch


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_matches_torch_nn_transformer(norm_first, activation):
    torch.manual_seed(0)
    ref = nn.Transformer(
        d_model=32, nhead=4, num_encoder_layers=2, num_decoder_layers=3, dim_feedforward=48,
        batch_first=True, norm_first=norm_first, activation=activation,
    ).eval()
    ours = transformer_from_torch(ref).eval()
    src, tgt = torch.randn(3, 9, 32), torch.randn(3, 7, 32)
    causal = ref.generate_square_subsequent_mask(7)
    src_pad = torch.zeros(3, 9, dtype=torch.bool)
    src_pad[0, -3:] = True
    src_pad[2, -1:] = True
    tgt_pad = torch.zeros(3, 7, dtype=torch.bool)
    tgt_pad[1, -2:] = True
    kwargs = dict(tgt_mask=causal, src_key_padding_mask=src_pad, memory_key_padding_mask=src_pad,
                  tgt_key_padding_mask=tgt_pad)
    with torch.no_grad():
        expected, actual = ref(src, tgt, **kwargs), ours(src, tgt, **kwargs)
        # torch's encoder fast path zeroes padded memory rows; compare the memory at real positions
        ref_memory = ref.encoder(src, src_key_padding_mask=src_pad)
        our_memory = ours.encode(src, src_key_padding_mask=src_pad)
    assert (expected - actual).abs().max().item() <= 1e-5
    assert (ref_memory - our_memory)[~src_pad].abs().max().item() <= 1e-5


def test_torch_api_masks_bool_and_float_agree():
    torch.manual_seed(1)
    ref = nn.Transformer(d_model=16, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
                         dim_feedforward=32, batch_first=True).eval()
    ours = transformer_from_torch(ref).eval()
    src, tgt = torch.randn(2, 5, 16), torch.randn(2, 4, 16)
    float_mask = ours.generate_square_subsequent_mask(4)
    bool_mask = float_mask.isinf()
    memory_mask = torch.zeros(4, 5, dtype=torch.bool)
    memory_mask[:, 0] = True
    with torch.no_grad():
        a = ours(src, tgt, tgt_mask=float_mask, memory_mask=memory_mask)
        b = ours(src, tgt, tgt_mask=bool_mask, memory_mask=memory_mask)
        c = ref(src, tgt, tgt_mask=bool_mask, memory_mask=memory_mask)
    assert (a - b).abs().max().item() <= 1e-6
    assert (a - c).abs().max().item() <= 1e-5
    assert torch.equal(float_mask, nn.Transformer.generate_square_subsequent_mask(4))


def _tiny_gpt2(**config):
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=120, n_embd=48, n_head=4, n_layer=3, n_positions=64,
                        bos_token_id=0, eos_token_id=0, pad_token_id=0, **config)
    return GPT2LMHeadModel(config).eval()


@pytest.mark.parametrize("config", [{}, {"tie_word_embeddings": False},
                                    {"reorder_and_upcast_attn": True, "attn_implementation": "eager"},
                                    {"activation_function": "gelu_pytorch_tanh"}, {"activation_function": "silu"}],
                         ids=["tied", "untied", "reordered-upcast", "gelu-pytorch-tanh", "silu"])
def test_causal_lm_from_gpt2_logits_and_greedy_match(config):
    gpt2 = _tiny_gpt2(**config)
    if not gpt2.config.tie_word_embeddings:  # an untied head of its own numbers (its init copies nothing)
        assert gpt2.lm_head.weight.data_ptr() != gpt2.transformer.wte.weight.data_ptr()
    ours = causal_lm_from_gpt2(gpt2).eval()
    tied = ours.lm_head.weight.data_ptr() == ours.model.decoder.embed.token.weight.data_ptr()
    assert tied == gpt2.config.tie_word_embeddings
    ids = torch.randint(1, 120, (2, 12))
    with torch.no_grad():
        ref, out = gpt2(ids, output_hidden_states=True), ours(ids, output_hidden_states=True)
    assert (ref.logits - out.logits).abs().max().item() <= 1e-4
    assert len(ref.hidden_states) == len(out.hidden_states)
    for a, b in zip(ref.hidden_states, out.hidden_states):
        assert (a - b).abs().max().item() <= 1e-4
    mask = torch.ones_like(ids)
    greedy = dict(max_new_tokens=20, do_sample=False, attention_mask=mask, pad_token_id=0)
    assert torch.equal(gpt2.generate(ids, **greedy), ours.generate(ids, **greedy))


def test_gpt2_conversion_ties_the_lm_head():
    ours = causal_lm_from_gpt2(_tiny_gpt2())
    assert ours.lm_head.weight.data_ptr() == ours.model.decoder.embed.token.weight.data_ptr()


def test_converters_refuse_other_models_naming_what_they_take():
    with pytest.raises(ValueError, match="m must be a torch.nn.Transformer, got GPT2LMHeadModel"):
        transformer_from_torch(_tiny_gpt2())
    with pytest.raises(ValueError, match="m must be a transformers GPT2LMHeadModel, got Transformer"):
        causal_lm_from_gpt2(nn.Transformer(d_model=16, nhead=2, num_encoder_layers=1, num_decoder_layers=1, batch_first=True))


def test_gpt2_conversion_trains_like_gpt2_dropout_included():
    """In training mode the converted model drops out where GPT-2 does (embeddings, attention weights, each
    sublayer's output; nothing inside the MLP), drawing the same random masks: equal losses and gradients."""
    gpt2 = _tiny_gpt2()
    ours = causal_lm_from_gpt2(gpt2)
    ids = torch.randint(1, 120, (2, 12), generator=torch.Generator().manual_seed(1))
    losses, grads = [], []
    for model in (gpt2.train(), ours.train()):
        torch.manual_seed(5)
        loss = model(ids, labels=ids).loss
        loss.backward()
        losses.append(loss.item())
        grads.append(model.lm_head.weight.grad.clone())
    assert ours.config.activation_dropout == 0.0 and ours.config.dropout == gpt2.config.resid_pdrop == 0.1
    assert losses[0] == pytest.approx(losses[1], abs=1e-5)
    assert (grads[0] - grads[1]).abs().max().item() <= 1e-5
    torch.manual_seed(6)
    assert ours(ids, labels=ids).loss.item() != pytest.approx(losses[1], abs=1e-3)  # dropout is on: another draw differs
