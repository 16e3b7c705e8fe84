"""explorer.views.ablation: removing heads through an edit at the heads' site, checked against the weights."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from explorer.core.inputs import InputProblem
from explorer.views.ablation import ablate_heads, ablated_pass, parse_heads, rank_heads
from explorer.views.forward_pass import attention_kind, recorded_pass
from explorer.views.steps import layer_norm, linear
from modeling import ablate_heads as head_edits
from modeling import Site, record
from support.shipped import inputs_of, shipped

TEXT = "To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer"


@pytest.mark.parametrize("name, kind", [("shakespeare-main", "self"), ("shakespeare-alibi", "self"),
                                        ("folio-to-modern", "encoder"), ("folio-to-modern", "decoder"),
                                        ("folio-to-modern", "cross")])
def test_ablating_nothing_changes_nothing_bit_for_bit(name, kind):
    """Removing no head: the output must be the unmasked model's recorded pass, exactly; and an ablated pass with
    an edit that removes nothing (every head times 1) gives the same logits bit for bit."""
    model, tokenizer = shipped(name)
    result = ablate_heads(model, tokenizer, TEXT, "", kind)
    inputs = inputs_of(model, tokenizer, TEXT)
    with torch.inference_mode(), record():
        plain = model(**inputs, use_cache=False).logits[0].float()
    assert result.removed == [] and torch.equal(result.logits_after, plain)
    assert result.loss_after == result.loss_before and np.array_equal(result.next_after, result.next_before)
    run, attention = recorded_pass(model, tokenizer, TEXT), attention_kind(model, kind)
    every_layer = {Site(attention.stack, layer, attention.part, "heads"): lambda heads: heads * 1.0
                   for layer in range(attention.n_layers(model.config))}
    with torch.inference_mode(), record(edits=every_layer):
        assert torch.equal(model(**inputs, use_cache=False).logits[0].float(), plain)
    assert torch.equal(ablated_pass(run, attention, [])[0], plain)


def attention_record(record, kind: str, layer: int):
    stack = record.encoder if kind == "encoder" else record.decoder
    return stack.layers[layer], stack.layers[layer].cross_attention if kind == "cross" else stack.layers[layer].self_attention


def reference_without_head(model, record, kind: str, layer: int, head: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    """From the FULL model's recording and the weights: zero head ``head``'s slice of the concatenated heads
    of ``layer`` and multiply by W_O (+ b_O). For a self-attention layer without cross-attention, also the
    stream going out of the layer: x + attention, then x + FFN(LN(x)) (pre-norm, GELU).
    Returns (attention output (1, T, D), layer output (1, T, D) or None)."""
    block, attention = attention_record(record, kind, layer)
    modules = (model.model.encoder if kind == "encoder" else model.model.decoder).stack.layers[layer]
    d_head = model.config.d_head
    concatenated = attention.concatenated.clone()
    concatenated[..., head * d_head:(head + 1) * d_head] = 0.0
    out_proj = (modules.cross_attn if kind == "cross" else modules.self_attn).out_proj
    out = linear(concatenated, out_proj.weight, out_proj.bias)
    if kind == "cross" or block.cross_attention is not None:
        return out, None
    x = block.input + out
    ffn = modules.feed_forward
    hidden = F.gelu(linear(layer_norm(x, modules.feed_forward_norm.norm), ffn.linear1.weight, ffn.linear1.bias))
    return out, x + linear(hidden, ffn.linear2.weight, ffn.linear2.bias)


@pytest.mark.parametrize("name, kind, layer, head", [("shakespeare-main", "self", 2, 5), ("shakespeare-main", "self", 5, 1),
                                                     ("shakespeare-sinusoidal", "self", 0, 3),
                                                     ("folio-to-modern", "encoder", 1, 2), ("folio-to-modern", "cross", 1, 0)])
def test_ablating_a_head_equals_zeroing_its_slice_before_w_o(name, kind, layer, head):
    model, tokenizer = shipped(name)
    assert model.config.norm_first and model.config.activation == "gelu"  # what the reference computes
    inputs = inputs_of(model, tokenizer, TEXT)
    attention = attention_kind(model, kind)
    edits = head_edits(attention.stack, attention.part, [(layer, head)], attention.n_layers(model.config), model.config.n_heads)
    with torch.inference_mode():
        with record() as full:
            model(**inputs, use_cache=False)
        with record(edits=edits) as ablated:
            model(**inputs, use_cache=False)
        out, layer_out = reference_without_head(model, full, kind, layer, head)
    block, own = attention_record(ablated, kind, layer)
    torch.testing.assert_close(own.output, out, rtol=0, atol=1e-5)
    if layer_out is not None:
        torch.testing.assert_close(block.output, layer_out, rtol=0, atol=1e-5)
    assert not torch.allclose(own.output, attention_record(full, kind, layer)[1].output, atol=1e-3)


def test_ablating_a_last_layer_head_reaches_the_logits_as_the_reference_says():
    model, tokenizer = shipped("shakespeare-main")
    last = model.config.n_layers - 1
    result = ablate_heads(model, tokenizer, TEXT, f"{last}.5")
    inputs = inputs_of(model, tokenizer, TEXT)
    with torch.inference_mode(), record() as full:
        model(**inputs, use_cache=False)
    with torch.inference_mode():
        _, layer_out = reference_without_head(model, full, "self", last, 5)
        logits = model.lm_head(model.model.decoder.stack.norm(layer_out))[0]
    # float32 rounding of two routes to logits of size ~16: a few units in the last place (rtol 1e-6) plus 1e-5
    torch.testing.assert_close(result.logits_after, logits, rtol=1e-6, atol=1e-5)
    ids = inputs["input_ids"][0]
    expected_loss = F.cross_entropy(logits[:-1], ids[1:])
    assert result.loss_after == pytest.approx(float(expected_loss), abs=1e-5) and abs(result.loss_after - result.loss_before) > 1e-3


def test_loss_before_is_the_models_own_language_model_loss():
    model, tokenizer = shipped("shakespeare-rope")
    result = ablate_heads(model, tokenizer, TEXT, "1")
    ids = tokenizer(TEXT, return_tensors="pt").input_ids
    with torch.inference_mode():
        loss = model(ids, labels=ids).loss
    assert result.loss_before == pytest.approx(float(loss), abs=1e-6)
    assert result.removed == [(1, h) for h in range(model.config.n_heads)]
    np.testing.assert_allclose(result.token_loss_after.mean(), result.loss_after, rtol=1e-6)


@pytest.mark.parametrize("name, kind", [("shakespeare-learned", "self"), ("shakespeare-alibi", "self"),
                                        ("folio-to-modern", "cross"), ("folio-to-modern", "decoder"),
                                        ("folio-to-modern", "encoder")])
def test_ranking_removes_each_head_alone(name, kind):
    """The ranking (each decoder layer's heads run from that layer on) equals removing every head alone through
    ablate_heads (a full pass from the embeddings), to 1e-5 nats, and its threads change nothing."""
    model, tokenizer = shipped(name)
    ranking = rank_heads(model, tokenizer, TEXT, kind)
    np.testing.assert_array_equal(rank_heads(model, tokenizer, TEXT, kind, workers=1).increase, ranking.increase)
    n_layers = model.config.n_encoder_layers if kind == "encoder" else model.config.n_layers
    assert ranking.increase.shape == (n_layers, model.config.n_heads)
    for layer in range(n_layers):
        for head in range(model.config.n_heads):
            alone = ablate_heads(model, tokenizer, TEXT, f"{layer}.{head}", kind)
            assert ranking.increase[layer, head] == pytest.approx(alone.loss_after - alone.loss_before, abs=1e-5)
    top = ranking.order()[0]
    assert top[2] == ranking.increase.max()


@pytest.mark.parametrize("spec, expected", [("0.3, 2.1", [(0, 3), (2, 1)]), (" 1 ", [(1, h) for h in range(4)]),
                                            ("0.1 0.1,0.2", [(0, 1), (0, 2)]), ("", []), (None, [])])
def test_head_lists_read_layer_dot_head_or_a_whole_layer(spec, expected):
    assert parse_heads(spec, n_layers=3, n_heads=4) == expected


@pytest.mark.parametrize("spec, message", [("3.0", "layer 3 does not exist"), ("0.4", "head 4 of layer 0 does not exist"),
                                           ("a.b", "could not read `a.b`"), ("-1", "could not read `-1`"),
                                           (["0.1"], "got a list")])
def test_bad_head_lists_say_what_is_allowed(spec, message):
    with pytest.raises(InputProblem) as error:
        parse_heads(spec, n_layers=3, n_heads=4)
    assert message in str(error.value) and "layer.head" in str(error.value)


def test_text_too_short_to_score_says_so():
    model, tokenizer = shipped("shakespeare-main")
    with pytest.raises(InputProblem, match="at least two tokens"):
        ablate_heads(model, tokenizer, "a", "0.1")


def test_the_default_text_shows_a_typical_effect_and_the_spread_is_the_models_own():
    """On shakespeare-main, removing the default heads, or the head whose removal moves the default text's loss
    most, changes the loss on the default text by an amount inside the middle of what it does on the five fixed
    passages (between their second-lowest and second-highest change): the default is no outlier. Each number of
    the spread is ``ablate_heads`` on that passage."""
    from explorer.views.ablation import DEFAULT_HEADS, DEFAULT_TEXT, SPREAD_PASSAGES, loss_change_spread

    model, tokenizer = shipped("shakespeare-main")
    ranking = rank_heads(model, tokenizer, DEFAULT_TEXT)
    layer, head = np.unravel_index(np.abs(ranking.increase).argmax(), ranking.increase.shape)
    for heads in (DEFAULT_HEADS, f"{layer}.{head}"):
        on_default = ablate_heads(model, tokenizer, DEFAULT_TEXT, heads)
        change = on_default.loss_after - on_default.loss_before
        spread = loss_change_spread(model, tokenizer, heads)
        assert len(spread.changes) == len(SPREAD_PASSAGES) == 5 and DEFAULT_TEXT not in SPREAD_PASSAGES
        ordered = np.sort(spread.changes)
        assert ordered[1] <= change <= ordered[-2], (heads, change, ordered)
        for passage, measured in zip(SPREAD_PASSAGES, spread.changes):
            alone = ablate_heads(model, tokenizer, passage, heads)
            assert measured == pytest.approx(alone.loss_after - alone.loss_before, abs=1e-6)
        line = spread.line()
        assert f"{ordered[0]:+.3f} to {ordered[-1]:+.3f} nats (median {np.median(ordered):+.3f})" in line, line


def test_the_ranking_reports_its_work_weighted_by_the_layers_each_removal_runs():
    """A decoder's removals in layer l run layers l.. L-1: layer 0's are L of the L(L+1)/2 layer-runs, not 1 of L."""
    model, tokenizer = shipped("shakespeare-main")
    reports = []
    rank_heads(model, tokenizer, TEXT, progress=lambda fraction, line: reports.append((fraction, line)), workers=1)
    n = model.config.n_layers
    expected = np.cumsum(np.arange(n, 0, -1)) / (n * (n + 1) / 2)
    np.testing.assert_allclose([fraction for fraction, _ in reports], expected, rtol=1e-12)
    assert reports[0][1] == f"{model.config.n_heads} of {n * model.config.n_heads} heads removed, one at a time"
