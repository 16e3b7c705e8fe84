"""explorer.views.trace: the shapes of one forward pass, read from the text's recorded run, safe under concurrency."""

import math
import threading

import pytest
import torch

from explorer.views import trace
from explorer.generation.decoding import DecodingSettings
from explorer.generation.labels import token_labels
from support.fixtures_checkpoints import causal_lm, seq2seq_lm
from modeling import record

TEXT = "Shall I compare thee to a summer's day? Thou art more lovely and more temperate."
GREEDY = DecodingSettings(False, max_new_tokens=40)


def shapes(result):
    return {(s.stack, s.step): s.shape for s in result.steps}


@pytest.mark.parametrize("d_model, n_heads, n_layers, d_ff", [(32, 4, 2, 64), (48, 6, 3, 40)])
def test_forward_trace_reads_shapes_from_the_real_pass(tokenizer, d_model, n_heads, n_layers, d_ff):
    model = causal_lm(tokenizer, "sinusoidal", d_model=d_model, n_heads=n_heads, n_layers=n_layers, d_ff=d_ff)
    result = trace.forward_trace(model, tokenizer, TEXT, GREEDY)
    ids = tokenizer(TEXT, return_tensors="pt").input_ids
    T, Dh = ids.shape[1], d_model // n_heads
    with torch.no_grad():
        logits = model(ids).logits
    found = shapes(result)
    assert result.logits_shape == tuple(logits.shape) == found[("", "logits")] == found[("", "probabilities")]
    assert found[("decoder", "token ids")] == (1, T)
    assert found[("decoder", "token embeddings")] == found[("decoder", "positional encodings (sinusoidal)")] == (1, T, d_model)
    for name in ("Q", "K", "V"):
        assert found[("decoder", f"layer 0 masked self-attention: {name} per head")] == (1, n_heads, T, Dh)
    for name in ("scores", "weights"):
        assert found[("decoder", f"layer 0 masked self-attention: {name}")] == (1, n_heads, T, T)
    assert found[("decoder", "layer 0 masked self-attention: bias")] == (T, T)  # the causal mask, broadcast
    assert found[("decoder", "layer 0 masked self-attention: concatenated heads")] == (1, T, d_model)
    assert found[("decoder", "layer 0: feed-forward hidden")] == (1, T, d_ff)
    assert [s.step for s in result.steps if s.step.startswith("layer ") and s.step.endswith(" output") and ":" not in s.step] \
        == [f"layer {i} output" for i in range(n_layers)]
    top = logits[0, -1].softmax(-1).topk(10)
    assert [token for token, _ in result.top_next] == token_labels(tokenizer, top.indices)
    assert all(math.isclose(p, float(q), rel_tol=1e-5) for (_, p), q in zip(result.top_next, top.values))


@pytest.mark.parametrize("kind", ["decoder-only", "encoder-decoder"])
def test_an_attention_only_model_shows_no_feed_forward_step(tokenizer, kind):
    model = (causal_lm(tokenizer, feed_forward="none") if kind == "decoder-only"
             else seq2seq_lm(tokenizer, feed_forward="none"))
    result = trace.forward_trace(model, tokenizer, TEXT, GREEDY)
    assert not [s.step for s in result.steps if "feed-forward" in s.step]
    outputs = [s for s in result.steps if s.step.startswith("layer ") and s.step.endswith(" output") and ":" not in s.step]
    assert len(outputs) == model.config.n_layers + (model.config.n_encoder_layers if kind == "encoder-decoder" else 0)
    assert all("attention only: no feed-forward" in s.meaning and "of its feed-forward" not in s.meaning for s in outputs)


@pytest.mark.parametrize("kind, norm_first", [("decoder-only", True), ("decoder-only", False),
                                              ("encoder-decoder", True), ("encoder-decoder", False)])
def test_the_feed_forward_reads_the_stream_after_the_sublayer_before_it(tokenizer, kind, norm_first):
    """A decoder layer of an encoder-decoder runs self-attention, cross-attention, then the feed-forward: its
    feed-forward row says it reads the stream after cross-attention; an encoder's or a decoder-only model's, after
    attention (post-norm: after that sublayer's Add & Norm)."""
    build = causal_lm if kind == "decoder-only" else seq2seq_lm
    model = build(tokenizer, norm_first=norm_first, final_layer_norm=norm_first)
    rows = {s.stack: s.meaning for s in trace.forward_trace(model, tokenizer, TEXT, GREEDY).steps
            if s.step == "layer 0: feed-forward hidden"}
    names = {"self_attn": "attention", "cross_attn": "cross-attention"}
    for stack, meaning in rows.items():
        layer = getattr(model.model, stack).stack.layers[0]
        before = [names[n] for n, _ in layer.named_children() if n in names][-1]
        assert meaning.endswith(f"of the stream after {before}" if norm_first else f"the stream after {before}'s Add & Norm")
    assert len(rows) == (2 if kind == "encoder-decoder" else 1)


@pytest.mark.parametrize("norm_first, added", [(True, "residual add"), (False, "Add & Norm")])
def test_the_stream_after_cross_attention_is_named_by_how_it_is_added(tokenizer, norm_first, added):
    model = seq2seq_lm(tokenizer, norm_first=norm_first, final_layer_norm=norm_first)
    steps = [s.step for s in trace.forward_trace(model, tokenizer, TEXT, GREEDY).steps if "after cross-attention" in s.step]
    assert steps == [f"layer 0: after cross-attention's {added}"]


def test_every_row_names_where_its_tensor_is_in_the_models_output(tokenizer):
    model = causal_lm(tokenizer, "rope")
    result = trace.forward_trace(model, tokenizer, TEXT, GREEDY)
    ids = tokenizer(TEXT, return_tensors="pt").input_ids
    with torch.no_grad(), record() as recording:
        model(ids, use_cache=False)
    for step in result.steps:
        if step.source.startswith("recording."):
            tensor = eval(step.source, {"recording": recording})  # noqa: S307 - our own attribute paths
            assert tuple(tensor.shape) == step.shape, step


def test_forward_trace_leaves_the_model_as_it_was(tokenizer):
    model = causal_lm(tokenizer, "rope")
    before = {name: dict(vars(m)) for name, m in model.named_modules()}
    trace.forward_trace(model, tokenizer, TEXT, GREEDY)
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())
    assert {name: dict(vars(m)) for name, m in model.named_modules()} == before


def test_concurrent_traces_on_one_shared_model_are_whole_and_identical(tokenizer):
    """Four threads trace the same model at once, over and over; every table is the single-threaded one."""
    model = causal_lm(tokenizer, "rope")
    texts = [TEXT, "To be, or not to be", "Another request entirely, longer than the others by a few words"]
    alone = {text: trace.forward_trace(model, tokenizer, text, GREEDY) for text in texts}
    results, errors, start = [], [], threading.Barrier(4)

    def client(i):
        start.wait()
        try:
            for k in range(6):
                text = texts[(i + k) % len(texts)]
                results.append((text, trace.forward_trace(model, tokenizer, text, GREEDY)))
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(results) == 24
    for text, result in results:
        assert result.steps == alone[text].steps and result.top_next == alone[text].top_next
        assert sum("per head" in s.step for s in result.steps) == 3  # Q, K and V rows are all there


@pytest.mark.parametrize("encoding, step, shape", [
    ("rope", "RoPE rotation (cos, sin)", lambda T, H, Dh: (1, 1, T, Dh // 2)),
    ("rope", "layer 0 masked self-attention: Q rotated (RoPE)", lambda T, H, Dh: (1, H, T, Dh)),
    ("alibi", "layer 0 masked self-attention: bias", lambda T, H, Dh: (1, H, T, T)),
    ("none", "positional encoding (none)", lambda T, H, Dh: ()),
    ("learned", "positional encodings (learned)", lambda T, H, Dh: (1, T, H * Dh)),
])
def test_forward_trace_shows_each_encoding_where_it_acts(tokenizer, encoding, step, shape):
    result = trace.forward_trace(causal_lm(tokenizer, encoding), tokenizer, TEXT, GREEDY)
    T = len(tokenizer(TEXT).input_ids)
    assert shapes(result)[("decoder", step)] == shape(T, 4, 8)


def test_forward_trace_of_seq2seq_has_cross_attention_and_says_what_the_decoder_read(tokenizer):
    model = seq2seq_lm(tokenizer)
    result = trace.forward_trace(model, tokenizer, TEXT, GREEDY)
    found = shapes(result)
    S, T = found[("encoder", "token ids")][1], found[("decoder", "token ids")][1]
    assert found[("decoder", "layer 0 cross-attention: Q per head")] == (1, 4, T, 8)
    assert found[("decoder", "layer 0 cross-attention: K per head")] == (1, 4, S, 8)
    assert found[("decoder", "layer 0 cross-attention: weights")] == (1, 4, T, S)
    assert result.logits_shape == (1, T, len(tokenizer)) and len(result.decoder_tokens) == T
    assert result.decoded_with == "greedy" and result.rewrite
