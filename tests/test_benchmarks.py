"""The speed benchmarks race fair peers: the functional floor in benchmarks.generation is the model's own step."""

import pytest
import torch
from transformers import DynamicCache

from benchmarks.generation import functional_decode, functional_steps_per_second, matrix_products
from benchmarks.gpt2_reference import gpt2_like
from modeling import ScratchTransformerConfig, ScratchTransformerForCausalLM
from modeling.convert import causal_lm_from_gpt2

SMALL = ScratchTransformerConfig(vocab_size=97, d_model=32, n_heads=4, n_layers=2, d_ff=64, dropout=0.0,
                                 activation="gelu", norm_first=True)


def test_the_functional_floor_computes_the_models_own_logits_step_by_step():
    torch.manual_seed(0)
    model = causal_lm_from_gpt2(gpt2_like(SMALL, positions=32)).eval()
    ids = torch.randint(1, SMALL.vocab_size, (1, 5))
    step = functional_decode(model)
    with torch.inference_mode():
        cache = DynamicCache(config=model.config)
        token = model(ids, past_key_values=cache, use_cache=True).logits[:, -1:].argmax(-1)
        mine = [(layer.keys, layer.values) for layer in cache.layers]
        for position in range(5, 15):
            expected, got = model(token, past_key_values=cache, use_cache=True).logits, step(token, position, mine)
            torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)
            token = expected[:, -1:].argmax(-1)
    assert functional_steps_per_second(model, ids, new_tokens=4) > 0  # runs its own check first


def test_the_functional_floor_refuses_a_model_it_does_not_describe():
    model = ScratchTransformerForCausalLM(ScratchTransformerConfig(**{**SMALL.to_dict(), "position_encoding": "rope"}))
    with pytest.raises(ValueError, match="GPT-2-shaped"):
        functional_decode(model)


def test_the_matrix_products_are_the_models_own_in_either_memory_order():
    torch.manual_seed(0)
    model = causal_lm_from_gpt2(gpt2_like(SMALL, positions=32)).eval()
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    assert len(linears) == 6 * SMALL.n_layers + 1  # Q, K, V, out, two feed-forward layers a layer; the head
    with torch.inference_mode():
        as_linear, transposed = matrix_products(model, "(out, in)")(), matrix_products(model, "(in, out)")()
        assert len(as_linear) == len(transposed) == len(linears)
        for module, a, b in zip(linears, as_linear, transposed):
            assert a.shape == b.shape == (1, module.out_features)
            torch.testing.assert_close(b, a, atol=1e-5, rtol=0)  # the same arithmetic, another summation order
        x = torch.randn(1, SMALL.d_model, generator=torch.Generator().manual_seed(0))  # matrix_products' first input
        torch.testing.assert_close(as_linear[0], linears[0](x), atol=0, rtol=0)
    with pytest.raises(ValueError, match=r"stored_as must be"):
        matrix_products(model, "(in,out)")
