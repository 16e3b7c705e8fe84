"""explorer.views.lens: each layer's residual stream read through the final LayerNorm and the tied LM head."""

import numpy as np
import pytest
import torch

from explorer.views.lens import TOP_K, logit_lens
from support.fixtures_checkpoints import ENCODINGS, SEQ2SEQ_NAME
from modeling import record
from support.shipped import inputs_of, load

TEXT = "Shall I compare thee to a summer's day? Thou art more lovely"


@pytest.fixture(scope="module")
def catalog(tiny_checkpoints):
    """name -> (model, tokenizer) of the tiny checkpoints, loaded on first use."""
    class Tiny(dict):
        def __missing__(self, name):
            self[name] = load(tiny_checkpoints, name)
            return self[name]
    return Tiny()


@pytest.mark.parametrize("name", [f"shakespeare-{e}" for e in ENCODINGS])
def test_last_row_is_the_models_own_prediction_exactly(catalog, name):
    model, tokenizer = catalog[name]
    lens = logit_lens(model, tokenizer, TEXT)
    ids = tokenizer(TEXT, return_tensors="pt").input_ids
    with torch.inference_mode(), record():  # the lens reads a recorded pass (attention by the explicit softmax)
        logits = model(ids, use_cache=False).logits[0].float()
    assert torch.equal(lens.model_logits, logits)
    top = logits[-1].softmax(-1).topk(TOP_K)
    assert np.array_equal(lens.top_ids[-1], top.indices.numpy()) and np.array_equal(lens.top_probs[-1], top.values.numpy())


def reference_logits(model, ids) -> torch.Tensor:
    """(rows, T, vocab): every layer's stream through the final LayerNorm, by its formula, then h W_E^T; the last
    row the model's own logits (the whole projection of every row, as the lens once kept it)."""
    with torch.inference_mode():
        out = model(ids, output_hidden_states=True)
    norm = model.model.decoder.stack.norm
    embedding = model.get_input_embeddings().weight
    rows = []
    for h in out.hidden_states[:-1]:
        centred = h[0] - h[0].mean(-1, keepdim=True)
        normed = centred / torch.sqrt(centred.pow(2).mean(-1, keepdim=True) + norm.eps) * norm.weight + norm.bias
        rows.append(normed @ embedding.T)
    return torch.stack(rows + [out.logits[0].float()])


@pytest.mark.parametrize("position", [None, 0, 7])
def test_every_row_is_the_final_norm_and_lm_head_on_that_layers_stream(catalog, position):
    """Top tokens and next-token probabilities of every row equal the full projection's softmax (1e-5)."""
    model, tokenizer = catalog["shakespeare-rope"]
    lens = logit_lens(model, tokenizer, TEXT, position=position)
    ids = tokenizer(TEXT, return_tensors="pt").input_ids
    probs = reference_logits(model, ids).softmax(-1)
    assert lens.rows == ["embeddings"] + [f"layer {i}" for i in range(model.config.n_layers)]
    top = probs[:, lens.position].topk(TOP_K)
    np.testing.assert_array_equal(lens.top_ids, top.indices.numpy())
    np.testing.assert_allclose(lens.top_probs, top.values.numpy(), atol=1e-5, rtol=0)
    expected = probs[:, :-1].gather(-1, ids[0, 1:][None, :, None].expand(len(probs), -1, 1))[..., 0]
    np.testing.assert_allclose(lens.next_token_probs, expected.numpy(), atol=1e-5, rtol=0)


def test_heatmap_holds_the_probability_of_the_token_that_came_next(catalog):
    model, tokenizer = catalog["shakespeare-alibi"]
    lens = logit_lens(model, tokenizer, TEXT, position=3)
    ids = tokenizer(TEXT).input_ids
    probs = reference_logits(model, torch.tensor([ids])).softmax(-1)
    assert lens.next_token_probs.shape == (model.config.n_layers + 1, len(ids) - 1)
    for t in (0, 5, len(ids) - 2):
        np.testing.assert_allclose(lens.next_token_probs[:, t], probs[:, t, ids[t + 1]].numpy(), atol=1e-5, rtol=0)
    assert lens.position == 3 and np.array_equal(lens.top_ids[:, 0], probs[:, 3].argmax(-1).numpy())


def test_seq2seq_lens_reads_the_decoder(catalog):
    model, tokenizer = catalog[SEQ2SEQ_NAME]
    lens = logit_lens(model, tokenizer, "Shall I compare thee to a Summers day?")
    inputs = inputs_of(model, tokenizer, "Shall I compare thee to a Summers day?")
    with torch.inference_mode(), record():
        logits = model(**inputs, use_cache=False).logits[0].float()
    assert torch.equal(lens.model_logits, logits) and len(lens.tokens) == inputs["decoder_input_ids"].shape[1]


def test_a_one_token_text_has_top_tokens_and_no_next_tokens(catalog):
    model, tokenizer = catalog["shakespeare-learned"]
    lens = logit_lens(model, tokenizer, "S")
    assert len(lens.tokens) == 1 and lens.next_token_probs.shape == (model.config.n_layers + 1, 0)
    assert lens.top_probs.shape == (model.config.n_layers + 1, TOP_K)


@pytest.mark.parametrize("position, message", [(99, r"Position \(−1 for the last\) must be a whole number from -1 to"),
                                               ("x", "got `x`"), (1.5, "whole number"), (float("inf"), "whole number")])
def test_a_bad_position_says_what_is_allowed(catalog, position, message):
    model, tokenizer = catalog["shakespeare-rope"]
    with pytest.raises(ValueError, match=message):
        logit_lens(model, tokenizer, TEXT, position=position)
