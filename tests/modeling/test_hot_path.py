"""What one forward pass issues: nothing that reads a value back from the device (on a GPU each read stalls the kernel
queue), and no operator that changes nothing. Counted with torch.profiler on the CPU."""

import pytest
import torch

from support.tiny_models import VOCAB, random_ids, tiny_causal_lm


SYNCS = {"aten::item", "aten::is_nonzero", "aten::_local_scalar_dense"}  # a value read back to Python: a GPU sync


@pytest.mark.parametrize("position_encoding", ["learned", "rope", "sinusoidal", "alibi"])
def test_a_forward_pass_reads_no_value_back_from_the_device(position_encoding):
    """The range checks of token ids and learned positions cost no sync: a bad id still gets its message (test_config.py)."""
    model, ids = tiny_causal_lm(position_encoding), random_ids(2, 9)
    calls = []
    for kwargs in ({}, {"labels": ids}):  # inference, and a training forward with its loss
        with torch.profiler.profile() as profiler:
            model(ids, **kwargs)
        calls += [e.name for e in profiler.events() if e.name in SYNCS]
    with torch.no_grad():  # a decoding step through the cache
        cache = model(ids, use_cache=True).past_key_values
        with torch.profiler.profile() as profiler:
            model(ids[:, :1], past_key_values=cache, use_cache=True)
    calls += [e.name for e in profiler.events() if e.name in SYNCS]
    assert calls == []


def test_inference_issues_no_dropout_and_training_still_drops():
    model, ids = tiny_causal_lm("learned", dropout=0.5, activation_dropout=0.5), random_ids(2, 9)
    with torch.profiler.profile() as profiler, torch.no_grad():
        model(ids)
    assert "aten::dropout" not in {e.name for e in profiler.events()}
    model.train()
    with torch.no_grad():
        first, second = model(ids).logits, model(ids).logits
    assert (first - second).abs().max() > 0.1  # a different mask each call


@pytest.mark.parametrize("scale", [True, False])
def test_an_unscaled_token_embedding_issues_the_lookup_alone(scale):
    """GPT-2, Llama and Pythia do not scale E[x] by sqrt(d_model): no multiply by 1, forward or backward; ours does."""
    from modeling.modeling_scratch_transformer import TokenEmbedding

    embedding, ids = TokenEmbedding(VOCAB, 16, scale=scale), random_ids(2, 9)
    with torch.profiler.profile() as profiler:
        embedding(ids).sum().backward()
    multiplies = [e.name for e in profiler.events() if e.name == "aten::mul"]
    assert (len(multiplies) > 0) == scale
    torch.testing.assert_close(embedding(ids), embedding.weight[ids] * (16 ** 0.5 if scale else 1.0), rtol=0, atol=0)
