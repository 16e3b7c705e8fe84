"""``forward_from(layer, hidden_states)``: the layers from ``layer`` on, given the residual stream entering it, equal
the full pass (a model is causal in depth), for every block family the app opens; with a cache of the earlier
positions too, and for an encoder-decoder's decoder reading the encoder memory. Tolerance 1e-5 (float32)."""

import pytest
import torch

from modeling import Site, record
from modeling.convert import from_transformers
from support.hub_repos import tiny_transformers_model
from support.tiny_models import random_ids, tiny_causal_lm, tiny_seq2seq

TOLERANCE = 1e-5


def families():
    ours = {f"ours-{encoding}": (lambda e=encoding: tiny_causal_lm(e, n_layers=3)) for encoding in
            ("rope", "alibi", "learned", "sinusoidal", "none")}
    ours["ours-post-norm"] = lambda: tiny_causal_lm("sinusoidal", n_layers=3, norm_first=False)
    ours["ours-gqa-rmsnorm-gated"] = lambda: tiny_causal_lm("rope", n_layers=3, n_kv_heads=2, norm="rmsnorm",
                                                            feed_forward="gated", activation="silu")
    converted = {name: (lambda n=name: from_transformers(tiny_transformers_model(n)).eval())
                 for name in ("gpt2", "llama", "gpt_neox")}
    return {**ours, **converted}


FAMILIES = families()


def inputs_of(model, length=12):
    ids = random_ids(2, length) % model.config.vocab_size
    with torch.inference_mode(), record() as recording:
        logits = model(input_ids=ids, use_cache=False).logits
    return ids, recording, logits


@pytest.mark.parametrize("family", FAMILIES)
def test_forward_from_each_layer_equals_the_full_pass(family):
    model = FAMILIES[family]()
    ids, recording, logits = inputs_of(model)
    for layer in range(model.config.n_layers):
        with torch.inference_mode():
            out = model.forward_from(layer, recording["decoder", layer, None, "input"])
        assert torch.allclose(out.logits, logits, atol=TOLERANCE, rtol=0), (family, layer)


@pytest.mark.parametrize("family", FAMILIES)
def test_forward_from_reads_on_from_a_cache_of_the_earlier_positions(family):
    """Positions 0..p-1 from a cache (the model's own, filled by a pass over them), p.. from layer l's input: the
    logits of positions p.. are the full pass's (RoPE and ALiBi count from the cache's length)."""
    model = FAMILIES[family]()
    ids, recording, logits = inputs_of(model)
    p = 5
    for layer in range(model.config.n_layers):
        with torch.inference_mode():
            cache = model(input_ids=ids[:, :p], use_cache=True).past_key_values
            out = model.forward_from(layer, recording["decoder", layer, None, "input"][:, p:], past_key_values=cache,
                                     use_cache=True)
        assert torch.allclose(out.logits, logits[:, p:], atol=TOLERANCE, rtol=0), (family, layer)


def test_a_recording_around_forward_from_sees_and_edits_the_layers_it_runs():
    model = tiny_causal_lm("rope", n_layers=3)
    ids, recording, logits = inputs_of(model)
    with torch.inference_mode(), record() as seen:
        model.forward_from(1, recording["decoder", 1, None, "input"])
    assert {site.layer for site in seen.values if site.layer is not None} == {1, 2}
    edits = {Site("decoder", 2, "ffn", "output"): torch.zeros_like}
    with torch.inference_mode(), record(keep=lambda s: False, edits=edits):
        from_one = model.forward_from(1, recording["decoder", 1, None, "input"]).logits
    with torch.inference_mode(), record(keep=lambda s: False, edits=edits):
        full = model(input_ids=ids).logits
    assert torch.allclose(from_one, full, atol=TOLERANCE, rtol=0) and not torch.allclose(full, logits, atol=1e-3)


def test_an_encoder_decoder_decoder_reads_on_with_the_memory():
    model = tiny_seq2seq("sinusoidal")
    source, target = random_ids(2, 9), random_ids(2, 7, seed=2)
    mask = torch.ones_like(source)
    mask[1, :3] = 0
    with torch.inference_mode(), record() as recording:
        logits = model(input_ids=source, attention_mask=mask, decoder_input_ids=target).logits
    memory = recording["encoder", None, None, "output"]
    for layer in range(model.config.n_layers):
        with torch.inference_mode():
            hidden = model.model.forward_from(layer, recording["decoder", layer, None, "input"],
                                              encoder_hidden_states=memory, encoder_attention_mask=mask).last_hidden_state
            assert torch.allclose(model.lm_head(hidden), logits, atol=TOLERANCE, rtol=0), layer


def test_a_layer_out_of_range_is_refused():
    model = tiny_causal_lm("rope")
    with pytest.raises(ValueError, match="first_layer must be one of the stack's layers, 0 to 1; got 2"):
        model.forward_from(2, torch.zeros(1, 3, model.config.d_model))
