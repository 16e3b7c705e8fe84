"""modeling/analysis.py: what the app shows, checked without a server."""

import math
import shutil
import threading
from dataclasses import replace

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from fixtures_checkpoints import ENCODINGS, SEQ2SEQ_NAME, checkpoint_config, train_tokenizer
from modeling import ScratchTransformerForCausalLM, ScratchTransformerForSeq2SeqLM
from explorer import analysis as A
from training import evaluate, paths
from modeling.modeling_scratch_transformer import alibi_slopes

TEXT = "Shall I compare thee to a summer's day? Thou art more lovely and more temperate."


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer()


def causal(tokenizer, encoding="rope", seed=0, **overrides):
    torch.manual_seed(seed)
    return ScratchTransformerForCausalLM(checkpoint_config(tokenizer, encoding, **overrides)).eval()


def seq2seq(tokenizer, seed=0, **overrides):
    torch.manual_seed(seed)
    return ScratchTransformerForSeq2SeqLM(checkpoint_config(tokenizer, "sinusoidal", seq2seq=True, **overrides)).eval()


# ---------------------------------------------------------------------------------------------- checkpoints


def test_discover_finds_every_checkpoint_and_tells_seq2seq(tiny_checkpoints):
    catalog = A.discover_checkpoints(tiny_checkpoints)
    assert set(catalog) == {f"shakespeare-{e}" for e in ENCODINGS} | {SEQ2SEQ_NAME}
    assert list(catalog)[-1] == SEQ2SEQ_NAME  # decoder-only models first
    assert catalog[SEQ2SEQ_NAME].is_encoder_decoder and not catalog["shakespeare-rope"].is_encoder_decoder
    assert catalog["shakespeare-alibi"].position_encoding == "alibi"
    assert catalog["shakespeare-learned"].max_positions == 64 and catalog["shakespeare-rope"].max_positions is None


def test_discover_skips_runs_without_weights_unreadable_configs_and_other_models(tiny_checkpoints, tmp_path):
    root = tmp_path / "ckpt"
    shutil.copytree(tiny_checkpoints / "shakespeare-rope", root / "good")
    (root / "half-written").mkdir()
    (root / "half-written" / "config.json").write_text((root / "good" / "config.json").read_text())
    (root / "broken").mkdir()
    (root / "broken" / "config.json").write_text("{not json")
    (root / "broken" / "model.safetensors").write_bytes(b"")
    shutil.copytree(root / "good", root / "someone-elses-model")
    (root / "someone-elses-model" / "config.json").write_text('{"model_type": "gpt2"}')
    assert list(A.discover_checkpoints(root)) == ["good"]


def test_checkpoint_root_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(A.CHECKPOINTS_ENV, str(tmp_path))
    assert A.checkpoint_root() == tmp_path
    monkeypatch.delenv(A.CHECKPOINTS_ENV)
    assert A.checkpoint_root() == paths.REPO_ROOT / "checkpoints"


def test_encoding_models_pick_one_checkpoint_per_encoding(tiny_checkpoints):
    family = A.encoding_models(A.discover_checkpoints(tiny_checkpoints))
    assert family == {e: f"shakespeare-{e}" for e in ENCODINGS}


def test_read_results_follows_the_evaluation_schema(tiny_checkpoints):
    results = A.read_results(tiny_checkpoints)
    assert results.notice == "" and results.main_model == "shakespeare-rope"
    assert set(results.extrapolation) == {f"shakespeare-{e}" for e in ENCODINGS}
    assert results.extrapolation["shakespeare-learned"][128] is None  # null: cannot run that long
    assert list(results.extrapolation["shakespeare-rope"]) == [16, 32, 64, 128, 256]  # int keys, sorted
    assert results.training_context["shakespeare-rope"] == 64
    assert results.metrics["shakespeare-none"]["perplexity"] > 0
    assert results.seq2seq[SEQ2SEQ_NAME] == {"cer": 0.12, "identity_cer": 0.31}


@pytest.mark.parametrize("content", [None, "{broken", '{"models": 3}'])
def test_read_results_tolerates_a_missing_or_broken_file(tmp_path, content):
    if content is not None:
        (tmp_path / "results.json").write_text(content)
    results = A.read_results(tmp_path)
    assert results.extrapolation == {} and results.notice


def test_load_checkpoint_loads_once_and_in_eval_mode(tiny_checkpoints):
    first = A.load_checkpoint(tiny_checkpoints / "shakespeare-none")
    assert A.load_checkpoint(tiny_checkpoints / "shakespeare-none")[0] is first[0]
    assert not first[0].training
    assert isinstance(A.load_checkpoint(tiny_checkpoints / SEQ2SEQ_NAME)[0], ScratchTransformerForSeq2SeqLM)


# ---------------------------------------------------------------------------------------------- generate


def test_clean_text_removes_control_characters_but_keeps_emoji_and_newlines():
    text, notices = A.clean_text("a\x00b\x07c\r\nd\te 🙂\u200d")
    assert text == "abc\nd\te 🙂\u200d" and "2 control" in notices[0]
    assert A.clean_text("plain") == ("plain", [])
    cut, notices = A.clean_text("x" * 50, max_chars=10)
    assert cut == "x" * 10 and "first 10" in notices[0]


def test_sampling_at_temperature_zero_becomes_greedy():
    settings, notices = A.sanitize_decoding("Sampling", 0, 40, 0.9, 1.0, 10, 0)
    assert not settings.do_sample and notices == [
        "Temperature 0 means always taking the most likely token: decoding greedily instead of sampling."]


def test_greedy_says_it_ignores_sampling_controls():
    settings, notices = A.sanitize_decoding("Greedy", 0.7, 50, 0.9, 1.0, 10, 0)
    assert not settings.do_sample and settings.top_k == 0
    assert notices == ["Greedy decoding ignores temperature, top-k, top-p (they only shape sampling)."]
    assert A.sanitize_decoding("Greedy", 1.0, 0, 1.0, 1.0, 10, 0)[1] == []


@pytest.mark.parametrize("max_new, expected", [(0, 1), (-5, 1), (10**9, A.MAX_NEW_TOKENS), (None, 64), ("junk", 64)])
def test_max_new_tokens_is_kept_in_range(max_new, expected):
    settings, notices = A.sanitize_decoding("Sampling", 1.0, 0, 1.0, 1.0, max_new, 0)
    assert settings.max_new_tokens == expected
    assert bool(notices) == (max_new not in (None, "junk"))


def test_out_of_range_sampling_values_are_replaced_with_a_notice():
    settings, notices = A.sanitize_decoding("sampling", float("nan"), -3, 1.5, 0, 10, "x")
    assert settings.do_sample and settings.temperature == 1.0 and settings.top_k == 0 and settings.top_p == 1.0
    assert settings.repetition_penalty == 1.0 and settings.seed == 0
    assert len(notices) == 3


def test_long_prompt_keeps_its_end_with_a_notice(tiny_checkpoints):
    model, tokenizer = A.load_checkpoint(tiny_checkpoints / "shakespeare-rope")
    full = tokenizer(TEXT * 10).input_ids
    ids, max_new, notices = A.encode_prompt(model, tokenizer, TEXT * 10, 20)
    assert ids.shape[1] == 64 and ids[0].tolist() == full[-64:] and max_new == 20
    assert "keeping its last 64" in notices[0]
    assert A.encode_prompt(model, tokenizer, "Shall I", 20)[2] == []


def test_learned_positions_bound_prompt_plus_new_tokens(tiny_checkpoints):
    model, tokenizer = A.load_checkpoint(tiny_checkpoints / "shakespeare-learned")
    ids, max_new, notices = A.encode_prompt(model, tokenizer, TEXT * 10, 500)
    assert max_new == 63 and ids.shape[1] + max_new <= 64 and len(notices) == 2


def test_seq2seq_source_keeps_its_beginning(tiny_checkpoints):
    model, tokenizer = A.load_checkpoint(tiny_checkpoints / SEQ2SEQ_NAME)
    ids, _, notices = A.encode_prompt(model, tokenizer, TEXT * 10, 20)
    assert ids[0].tolist() == tokenizer(TEXT * 10).input_ids[:64] and "first 64" in notices[0]


def test_token_streamer_releases_every_token_and_never_half_a_character(tokenizer):
    ids = tokenizer("a 🙂 b c", add_special_tokens=False).input_ids
    streamer = A.TokenStreamer(tokenizer, skip_prompt=True)
    streamer.put(torch.tensor([[tokenizer.bos_token_id]]))  # the prompt: skipped
    for i in ids:
        streamer.put(torch.tensor([i]))
    streamer.end()
    pieces = list(streamer)
    assert "".join(pieces) == "a 🙂 b c" and streamer.n_tokens == len(ids)
    assert not any("\ufffd" in p for p in pieces)
    assert len([p for p in pieces if p]) == len(ids) - 3  # the emoji's 4 byte tokens come out as one piece


def test_gumbel_sampler_draws_from_the_softmax():
    logits = torch.tensor([[1.0, 0.0, -1.0, -30.0]])
    sampler = A.GumbelSampler(seed=0)
    draws = torch.tensor([int(sampler(None, logits).argmax()) for _ in range(4000)])
    frequencies = torch.bincount(draws, minlength=4).float() / len(draws)
    assert torch.allclose(frequencies, logits.softmax(-1)[0], atol=0.025)


def _generate(model, tokenizer, settings):
    ids = tokenizer("Shall I", return_tensors="pt").input_ids
    run = A.start_generation(model, tokenizer, ids, settings)
    text = "".join(run.streamer)
    run.thread.join()
    assert not run.error
    return text, run


def test_seeded_sampling_repeats_even_with_concurrent_requests(tiny_checkpoints):
    model, tokenizer = A.load_checkpoint(tiny_checkpoints / "shakespeare-rope")
    settings, _ = A.sanitize_decoding("sampling", 1.0, 0, 1.0, 1.0, 30, 123)
    alone = _generate(model, tokenizer, settings)[0]
    texts = []
    threads = [threading.Thread(target=lambda s=s: texts.append((s, _generate(model, tokenizer, replace(settings, seed=s))[0]))) for s in (123, 7, 123)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [text for seed, text in texts if seed == 123] == [alone, alone]
    assert [text for seed, text in texts if seed == 7] != [alone]


def test_streamed_text_is_the_generated_text_and_counts_its_tokens(tiny_checkpoints):
    model, tokenizer = A.load_checkpoint(tiny_checkpoints / "shakespeare-alibi")
    settings, _ = A.sanitize_decoding("greedy", 1.0, 0, 1.0, 1.0, 15, 0)
    text, run = _generate(model, tokenizer, settings)
    ids = tokenizer("Shall I", return_tensors="pt").input_ids
    expected = model.generate(ids, attention_mask=torch.ones_like(ids), **A.generation_kwargs(model, settings))
    assert text == tokenizer.decode(expected[0, ids.shape[1]:], skip_special_tokens=True)
    assert run.streamer.n_tokens == expected.shape[1] - ids.shape[1] and run.tokens_per_second() > 0


def test_stop_flag_ends_generation(tiny_checkpoints):
    model, tokenizer = A.load_checkpoint(tiny_checkpoints / "shakespeare-rope")
    settings, _ = A.sanitize_decoding("greedy", 1.0, 0, 1.0, 1.0, 400, 0)
    ids = tokenizer("Shall I", return_tensors="pt").input_ids
    run = A.start_generation(model, tokenizer, ids, settings)
    next(iter(run.streamer))
    run.stop.set()
    run.thread.join(timeout=10)
    assert not run.thread.is_alive() and run.streamer.n_tokens < 400


def test_seq2seq_generation_streams_the_rewrite(tiny_checkpoints):
    model, tokenizer = A.load_checkpoint(tiny_checkpoints / SEQ2SEQ_NAME)
    settings, _ = A.sanitize_decoding("greedy", 1.0, 0, 1.0, 1.0, 10, 0)
    text, run = _generate(model, tokenizer, settings)
    assert 0 < run.streamer.n_tokens <= 10  # the decoder start token is not counted
    assert text == A.generate_text(model, tokenizer, "Shall I", settings)[0]


# ---------------------------------------------------------------------------------------------- encodings


def test_sinusoidal_table_is_the_papers_formula():
    table = A.sinusoidal_table(3, 4)
    assert np.allclose(table[1], [math.sin(1), math.cos(1), math.sin(0.01), math.cos(0.01)], atol=1e-6)
    assert table.shape == (3, 4)


def test_learned_table_is_the_checkpoints_weights(tokenizer):
    model = causal(tokenizer, "learned")
    assert np.array_equal(A.learned_table(model), model.model.decoder.embed.position.weight.detach().numpy())
    with pytest.raises(ValueError, match="not a learned table"):
        A.learned_table(causal(tokenizer, "rope"))


def test_rope_angles_turn_pair_i_by_m_theta_i():
    table = A.rope_angle_table(50, 8, theta=10000.0)
    m, i = 7, 1
    angle = m * 10000.0 ** (-2 * i / 8)
    assert table.shape == (50, 4)
    assert math.isclose(table[m, i], math.atan2(math.sin(angle), math.cos(angle)), abs_tol=1e-5)


def test_alibi_biases_are_minus_slope_times_distance():
    table = A.alibi_bias_table(10, 4)
    assert table.shape == (4, 10) and np.all(table[:, 0] == 0)
    assert np.allclose(table[:, 3], -3 * alibi_slopes(4).numpy())


def test_similarity_is_one_at_distance_zero_and_falls_away():
    sinusoidal = A.table_similarity_by_distance(A.sinusoidal_table(64, 32), 40)
    rope = A.rope_similarity_by_distance(40, 8)
    alibi = A.alibi_weight_by_distance(40, 4)
    for curve in (sinusoidal, rope, alibi):
        assert curve.shape == (41,) and math.isclose(curve[0], 1.0, rel_tol=1e-5)
        assert curve[1:].max() < 1.0
    assert np.all(np.diff(alibi) < 0)


@pytest.mark.parametrize("context", [2, 5, 16])
def test_bits_per_character_is_the_evaluations_measure(tokenizer, context):
    """Windows of L tokens overlapping by one: every token but the first scored once, per character scored."""
    model = causal(tokenizer, "rope")
    ids = tokenizer(TEXT, add_special_tokens=False).input_ids
    windows = [ids[s: s + context] for s in range(0, len(ids) - 1, context - 1)]
    with torch.no_grad():
        nll = sum(float(F.cross_entropy(model(torch.tensor([w])).logits[0, :-1], torch.tensor(w[1:]), reduction="sum"))
                  for w in windows)
    scored_chars = len(TEXT) - len(tokenizer.decode(ids[:1]))
    assert math.isclose(A.bits_per_character(model, tokenizer, TEXT, context), nll / (math.log(2) * scored_chars),
                        rel_tol=1e-4)
    assert A.bits_per_character(model, tokenizer, TEXT, context) == evaluate.bits_per_character(
        model, tokenizer, TEXT, context)["bits_per_char"]


def test_bits_per_character_is_none_where_it_cannot_be_measured(tokenizer):
    learned = causal(tokenizer, "learned")
    assert A.bits_per_character(learned, tokenizer, TEXT * 3, 65) is None  # past the 64-row table
    assert A.bits_per_character(learned, tokenizer, TEXT * 3, 64) is not None
    assert A.bits_per_character(learned, tokenizer, "Hi there", 32) is None  # text shorter than a window
    with pytest.raises(ValueError, match="at least 2"):
        A.bits_per_character(learned, tokenizer, TEXT, 1)
    with pytest.raises(ValueError, match="encoder-decoder"):
        A.bits_per_character(seq2seq(tokenizer), tokenizer, TEXT, 16)


def test_recompute_extrapolation_reports_progress_and_blank_lengths(tiny_checkpoints):
    catalog = A.discover_checkpoints(tiny_checkpoints)
    seen = []
    curves, notices = A.recompute_extrapolation(catalog, TEXT * 3, [8, 32, 128], progress=lambda f, d: seen.append(f))
    assert set(curves) == {f"shakespeare-{e}" for e in ENCODINGS}
    assert all(curve[8] > 0 and curve[128] is None for curve in curves.values())
    assert seen[0] == 0 and seen[-1] == 1.0 and seen == sorted(seen)
    assert "128" in notices[0]


# ---------------------------------------------------------------------------------------------- attention


def test_attention_maps_are_the_models_weights(tokenizer):
    model = causal(tokenizer, "alibi")
    maps = A.attention_maps(model, tokenizer, TEXT)
    ids = tokenizer(TEXT, return_tensors="pt").input_ids
    with torch.no_grad():
        expected = model(ids, output_attentions=True).attentions
    weights = maps.weights["self"]
    assert weights.shape == (2, 4, ids.shape[1], ids.shape[1])
    assert np.allclose(weights[1, 2], expected[1][0, 2].numpy(), atol=1e-6)
    assert np.allclose(weights.sum(-1), 1, atol=1e-5) and np.all(np.triu(weights[0, 0], 1) == 0)
    labels = maps.query_labels["self"]
    assert len(set(labels)) == len(labels) == ids.shape[1]  # unique even where tokens repeat
    assert labels[:2] == [f"{i}:{label}" for i, label in enumerate(A.token_labels(tokenizer, ids[0, :2]))]


def test_attention_of_a_long_text_is_cut_with_a_notice(tokenizer):
    maps = A.attention_maps(causal(tokenizer, "learned"), tokenizer, TEXT * 10)
    assert maps.weights["self"].shape[-1] == 64 and "first 64" in maps.notices[0]


def test_seq2seq_shows_encoder_decoder_and_cross_attention(tokenizer):
    model = seq2seq(tokenizer)
    maps = A.attention_maps(model, tokenizer, TEXT)
    source = len(tokenizer(TEXT).input_ids)
    target = len(maps.query_labels["decoder"])
    assert maps.weights["encoder"].shape == (2, 4, source, source)
    assert maps.weights["decoder"].shape == (2, 4, target, target)
    assert maps.weights["cross"].shape == (2, 4, target, source)
    assert maps.key_labels["cross"] == maps.query_labels["encoder"]


def test_token_labels_are_readable(tokenizer):
    ids = tokenizer(" a\n🙂", add_special_tokens=False).input_ids
    labels = A.token_labels(tokenizer, ids)
    assert labels[0] == "␣a" and "↵" in "".join(labels) and not any("\ufffd" in label for label in labels)


# ---------------------------------------------------------------------------------------------- forward pass


def _shapes(trace):
    return {(s.stack, s.step): s.shape for s in trace.steps}


@pytest.mark.parametrize("d_model, n_heads, n_layers, d_ff", [(32, 4, 2, 64), (48, 6, 3, 40)])
def test_forward_trace_reads_shapes_from_the_real_pass(tokenizer, d_model, n_heads, n_layers, d_ff):
    model = causal(tokenizer, "sinusoidal", d_model=d_model, n_heads=n_heads, n_layers=n_layers, d_ff=d_ff)
    trace = A.forward_trace(model, tokenizer, TEXT)
    ids = tokenizer(TEXT, return_tensors="pt").input_ids
    T, V, Dh = ids.shape[1], len(tokenizer), d_model // n_heads
    with torch.no_grad():
        logits = model(ids).logits
    shapes = _shapes(trace)
    assert trace.logits_shape == tuple(logits.shape) == shapes[("", "logits")] == shapes[("", "probabilities")]
    assert shapes[("decoder", "token ids")] == (1, T)
    assert shapes[("decoder", "token embeddings")] == shapes[("decoder", "positional encodings (sinusoidal)")] == (1, T, d_model)
    for name in ("Q", "K", "V"):
        assert shapes[("decoder", f"layer 0 masked self-attention: {name} per head")] == (1, n_heads, T, Dh)
    assert shapes[("decoder", "layer 0 masked self-attention: scores")] == (1, n_heads, T, T)
    assert shapes[("decoder", "layer 0 masked self-attention: weights")] == (1, n_heads, T, T)
    assert shapes[("decoder", "layer 0 masked self-attention: concatenated heads")] == (1, T, d_model)
    assert shapes[("decoder", "layer 0: feed-forward hidden")] == (1, T, d_ff)
    assert [s.step for s in trace.steps if s.step.endswith(" output") and s.step.startswith("layer ") and ":" not in s.step] \
        == [f"layer {i} output" for i in range(n_layers)]
    assert len(trace.top_next) == 10 and math.isclose(sum(p for _, p in trace.top_next), sum(sorted(
        logits[0, -1].softmax(-1).tolist(), reverse=True)[:10]), rel_tol=1e-4)


def test_forward_trace_leaves_the_model_as_it_was(tokenizer):
    model = causal(tokenizer, "rope")
    A.forward_trace(model, tokenizer, TEXT)
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())
    assert all("split_heads" not in m.__dict__ for m in model.modules())


def test_forward_trace_ignores_other_requests_on_the_same_model(tokenizer):
    model = causal(tokenizer, "rope")
    alone = A.forward_trace(model, tokenizer, TEXT).steps
    busy, done = threading.Event(), threading.Event()

    def other_requests():
        ids = tokenizer("Another request entirely", return_tensors="pt").input_ids
        while not done.is_set():
            with torch.no_grad():
                model(ids, output_attentions=True)
            busy.set()

    worker = threading.Thread(target=other_requests)
    worker.start()
    busy.wait(10)
    try:
        traces = [A.forward_trace(model, tokenizer, TEXT).steps for _ in range(3)]
    finally:
        done.set()
        worker.join()
    assert all(trace == alone for trace in traces)


@pytest.mark.parametrize("encoding, step, shape", [
    ("rope", "RoPE rotation (cos, sin)", lambda T, H, Dh: (1, 1, T, Dh // 2)),
    ("alibi", "ALiBi bias (+ mask)", lambda T, H, Dh: (1, H, T, T)),
    ("none", "positional encoding (none)", lambda T, H, Dh: ()),
    ("learned", "positional encodings (learned)", lambda T, H, Dh: (1, T, H * Dh)),
])
def test_forward_trace_shows_each_encoding_where_it_acts(tokenizer, encoding, step, shape):
    trace = A.forward_trace(causal(tokenizer, encoding), tokenizer, TEXT)
    T = len(tokenizer(TEXT).input_ids)
    assert _shapes(trace)[("decoder", step)] == shape(T, 4, 8)


def test_forward_trace_of_seq2seq_has_cross_attention_over_the_source(tokenizer):
    model = seq2seq(tokenizer)
    trace = A.forward_trace(model, tokenizer, TEXT)
    shapes = _shapes(trace)
    S = shapes[("encoder", "token ids")][1]
    T = shapes[("decoder", "token ids")][1]
    assert shapes[("decoder", "layer 0 cross-attention: Q per head")] == (1, 4, T, 8)
    assert shapes[("decoder", "layer 0 cross-attention: K per head")] == (1, 4, S, 8)
    assert shapes[("decoder", "layer 0 cross-attention: weights")] == (1, 4, T, S)
    assert trace.logits_shape == (1, T, len(tokenizer))


# ---------------------------------------------------------------------------------------------- figures


def test_attention_figures_have_a_cell_per_layer_and_head_and_hover_labels(tokenizer):
    maps = A.attention_maps(causal(tokenizer, "rope"), tokenizer, TEXT)
    grid = A.attention_grid_figure(maps, "self")
    assert len(grid.data) == 2 * 4 and all(t.type == "heatmap" for t in grid.data)
    head = A.attention_head_figure(maps, "self", 1, None)
    assert list(head.data[0].x) == maps.key_labels["self"]  # no markup characters in these labels
    assert A.plotly_text(["0:<s>", "a&b"]) == ["0:&lt;s&gt;", "a&amp;b"]
    assert np.allclose(head.data[0].z, maps.weights["self"][1].mean(0))
    assert "query %{y}" in head.data[0].hovertemplate and "weight %{z" in head.data[0].hovertemplate


def test_extrapolation_figure_draws_one_line_per_model_with_gaps():
    fig = A.extrapolation_figure({"a": {16: 2.0, 32: 1.9, 64: None}, "b": {16: 2.2, 32: 2.1, 64: 2.0}}, 32)
    assert [t.name for t in fig.data] == ["a", "b"] and list(fig.data[0].y) == [2.0, 1.9, None]
    assert "No extrapolation" in A.extrapolation_figure({}).layout.annotations[0].text


def test_encoding_figures_from_checkpoints_and_without_any(tiny_checkpoints, tmp_path):
    figures, notices = A.encoding_figures(A.discover_checkpoints(tiny_checkpoints))
    assert notices == [] and set(figures) == {"sinusoidal", "learned", "rope", "alibi", "similarity"}
    assert np.asarray(figures["sinusoidal"].data[0].z).shape == (64, 32)
    assert np.asarray(figures["learned"].data[0].z).shape == (64, 32)
    assert np.asarray(figures["alibi"].data[0].z).shape == (4, 64)
    assert len(figures["similarity"].data) == 4
    empty, notices = A.encoding_figures({})
    assert np.asarray(empty["sinusoidal"].data[0].z).shape == (256, 256) and len(notices) == 2
