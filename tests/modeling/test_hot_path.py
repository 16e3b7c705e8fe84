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


def test_the_backward_of_the_head_split_writes_the_qkv_gradient_once():
    """q, k, v = split(x W_qkv): the backward stacks the three heads' gradients straight into the product's layout,
    one write of B x T x 3D, and hands it to W_qkv's backward as a view; it does not copy the stack once more into
    the product's layout (a GPU moves every byte of it twice). SDPA's own backward is not counted."""
    model = tiny_causal_lm("learned")
    attention = model.model.decoder.stack.layers[0].self_attn
    x = torch.randn(2, 9, model.config.d_model, requires_grad=True)
    q, k, v = attention.project(x, "qkv")
    heads = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    with torch.profiler.profile() as profiler:
        heads.sum().backward()

    def inside(event, names):
        parent = event.cpu_parent
        while parent is not None and not any(n in parent.name for n in names):
            parent = parent.cpu_parent
        return parent is not None

    writes = [e.name for e in profiler.events() if e.name in ("aten::copy_", "aten::cat")
              and not inside(e, ("scaled_dot_product", "aten::copy_", "aten::cat", "aten::sum", "aten::ones_like"))]
    assert writes == ["aten::cat"]  # the stack
    assert x.grad.abs().sum() > 0  # and the gradient arrived
