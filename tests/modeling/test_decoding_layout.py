"""ScratchTransformerPreTrainedModel.lay_out_for_decoding: the widening linear maps' weights kept (in, out) in memory,
the model's numbers, names, shapes and saved files unchanged (the speed: benchmarks/real_size.py's generation)."""

import pytest
import torch

from modeling import ScratchTransformerForCausalLM
from support.tiny_models import random_ids, tiny_causal_lm


@pytest.mark.parametrize("position_encoding, extra", [("learned", {}), ("rope", {"ffn_type": "swiglu", "norm_type": "rmsnorm",
                                                                              "n_kv_heads": 2})])
def test_the_decoding_layout_keeps_every_number_and_saves_as_before(tmp_path, position_encoding, extra):
    model, ids = tiny_causal_lm(position_encoding, **extra), random_ids(2, 9)
    model.eval()
    with torch.no_grad():
        before = model(ids).logits
        greedy = model.generate(ids[:1], max_new_tokens=6, do_sample=False)
    shapes = {name: p.shape for name, p in model.named_parameters()}
    model.lay_out_for_decoding()
    strided = [name for name, p in model.named_parameters() if not p.is_contiguous()]
    widening = [name for name, m in model.named_modules() if isinstance(m, torch.nn.Linear)
                and m.out_features > m.in_features and m is not model.lm_head]
    head = "model.decoder.embed.token.weight"  # the tied LM head (vocabulary 384 > d_model 32), named as the embedding
    assert strided == [head] + [f"{name}.weight" for name in widening] and len(strided) > 1  # the wide maps alone
    assert model.lm_head.weight is model.get_input_embeddings().weight  # still tied
    assert {name: p.shape for name, p in model.named_parameters()} == shapes
    with torch.no_grad():
        torch.testing.assert_close(model(ids).logits, before, atol=1e-5, rtol=0)
        assert torch.equal(model.generate(ids[:1], max_new_tokens=6, do_sample=False), greedy)
    model.save_pretrained(tmp_path)
    again = ScratchTransformerForCausalLM.from_pretrained(tmp_path).eval()
    assert all(torch.equal(a, b) for a, b in zip(again.state_dict().values(), model.state_dict().values()))
    assert all(p.is_contiguous() for p in again.parameters())
