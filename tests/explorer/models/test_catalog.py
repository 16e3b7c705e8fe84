"""explorer.models.catalog: discovery (damaged checkpoints marked with the reason), results.json, menus, the loader."""

import json
import shutil

import pytest
from safetensors.torch import load_file, save_file

from support.fixtures_checkpoints import SLOW_MODEL
from checkpointing import paths
from checkpointing.loading import checkpoint_problems
from explorer.models import catalog, registry
from explorer.core.inputs import InputProblem
from support.fixtures_checkpoints import ENCODINGS, SEQ2SEQ_NAME, TIMELINE_RUNS
from modeling import ScratchTransformerConfig, ScratchTransformerForSeq2SeqLM
from support.shipped import SHIPPED_ROOT

WEIGHTS = "model.safetensors"


def test_discover_finds_every_checkpoint_and_tells_seq2seq(tiny_checkpoints):
    found = catalog.discover_checkpoints(tiny_checkpoints)
    assert set(found) == {f"shakespeare-{e}" for e in ENCODINGS} | {SEQ2SEQ_NAME, SLOW_MODEL} | set(TIMELINE_RUNS)
    assert list(found)[-1] == SEQ2SEQ_NAME  # decoder-only models first
    assert found[SEQ2SEQ_NAME].is_encoder_decoder and not found["shakespeare-rope"].is_encoder_decoder
    assert found["shakespeare-alibi"].position_encoding == "alibi"
    assert found["shakespeare-learned"].config.position_limit == 64 and found["shakespeare-rope"].config.position_limit is None
    assert all(info.usable and info.problems == () for info in found.values())


def test_parameter_count_is_read_from_the_weights_file(tiny_checkpoints):
    info = catalog.discover_checkpoints(tiny_checkpoints)["shakespeare-rope"]
    model, _ = registry.shipped_model(info)
    assert info.n_parameters == sum(p.numel() for p in model.parameters())  # tied embeddings counted once


def test_discover_follows_the_environment(monkeypatch, tiny_checkpoints, tmp_path):
    monkeypatch.setenv(paths.CHECKPOINTS_ENV, str(tmp_path))
    assert catalog.discover_checkpoints() == {}
    monkeypatch.setenv(paths.CHECKPOINTS_ENV, str(tiny_checkpoints))
    assert "shakespeare-rope" in catalog.discover_checkpoints()


def damage(folder, how):
    weights = folder / WEIGHTS
    if how == "missing tensor":
        tensors = load_file(weights)
        tensors.pop("model.decoder.stack.layers.1.feed_forward.linear2.weight")
        save_file(tensors, weights, metadata={"format": "pt"})
    elif how == "wrong shape":
        tensors = load_file(weights)
        tensors["model.decoder.stack.layers.0.feed_forward.linear1.bias"] = tensors["model.decoder.stack.layers.0.feed_forward.linear1.bias"][:5]
        save_file(tensors, weights, metadata={"format": "pt"})
    elif how == "truncated":
        weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    elif how == "empty":
        weights.write_bytes(b"")
    elif how == "no weights":
        weights.unlink()
    elif how == "config":
        (folder / "config.json").write_text("{not json")
    elif how == "tokenizer":
        (folder / "tokenizer.json").write_text("{")


@pytest.mark.parametrize("how, reason", [
    ("missing tensor", "lacks 1 tensor(s): model.decoder.stack.layers.1.feed_forward.linear2.weight"),
    ("wrong shape", "has shape [5], the config needs [64]"),
    ("truncated", "damaged or truncated"),
    ("empty", "model.safetensors is empty"),
    ("no weights", "model.safetensors is missing"),
    ("config", "config.json is not readable JSON"),
    ("tokenizer", "tokenizer.json is not readable JSON"),
])
def test_a_damaged_checkpoint_is_listed_with_its_reason_and_refused(tiny_checkpoints, tmp_path, how, reason):
    root = tmp_path / "root"
    shutil.copytree(tiny_checkpoints / "shakespeare-rope", root / "good")
    shutil.copytree(tiny_checkpoints / "shakespeare-rope", root / "broken")
    damage(root / "broken", how)
    found = catalog.discover_checkpoints(root)
    assert found["good"].usable and not found["broken"].usable
    assert reason in "; ".join(found["broken"].problems)
    assert found["broken"].problems == tuple(checkpoint_problems(root / "broken"))  # training's own checker
    lines = dict((name, label) for label, name in catalog.menu_choices(found, catalog.read_results(root)))
    assert lines["broken"].startswith("broken · ⚠ cannot be used: ")
    assert catalog.default_model(found, catalog.Results()) == "good"
    with pytest.raises(InputProblem, match="broken cannot be used: ") as problem:
        registry.resolve("broken", root)
    assert reason.split(":")[0] in str(problem.value)
    assert "broken" not in catalog.encoding_models(found).values()
    assert (found["broken"].config is None) == (how == "config")


def test_a_checkpoint_damaged_after_discovery_is_refused_when_loaded(tiny_checkpoints, tmp_path):
    """The loader goes through training.checkpoints.load_checkpoint: missing tensors fail loudly, by name."""
    shutil.copytree(tiny_checkpoints / "shakespeare-none", tmp_path / "later")
    info = catalog.discover_checkpoints(tmp_path)["later"]
    damage(tmp_path / "later", "missing tensor")
    with pytest.raises(Exception, match="lacks 1 tensor.*linear2.weight"):
        registry.shipped_model(info)


def test_discover_skips_other_models_and_is_remembered_until_a_file_changes(tiny_checkpoints, tmp_path):
    shutil.copytree(tiny_checkpoints / "shakespeare-rope", tmp_path / "good")
    shutil.copytree(tiny_checkpoints / "shakespeare-rope", tmp_path / "someone-elses-model")
    (tmp_path / "someone-elses-model" / "config.json").write_text('{"model_type": "gpt2"}')
    first = catalog.discover_checkpoints(tmp_path)
    assert list(first) == ["good"] and catalog.discover_checkpoints(tmp_path)["good"] is first["good"]
    damage(tmp_path / "good", "empty")
    assert not catalog.discover_checkpoints(tmp_path)["good"].usable


def test_encoding_models_pick_one_checkpoint_per_encoding(tiny_checkpoints):
    family = catalog.encoding_models(catalog.discover_checkpoints(tiny_checkpoints))
    assert family == {e: f"shakespeare-{e}" for e in ENCODINGS} and list(family) == list(ENCODINGS)


def test_read_results_follows_the_evaluation_schema(tiny_checkpoints):
    results = catalog.read_results(tiny_checkpoints)
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
    results = catalog.read_results(tmp_path)
    assert results.extrapolation == {} and results.notice and str(tmp_path) not in results.notice


def test_menus_have_one_line_per_model_saying_what_it_is(tiny_checkpoints):
    found, results = catalog.discover_checkpoints(tiny_checkpoints), catalog.read_results(tiny_checkpoints)
    lines = {name: label for label, name in catalog.menu_choices(found, results)}
    assert list(lines) == list(found)
    rope = found["shakespeare-rope"]
    assert lines["shakespeare-rope"] == (f"shakespeare-rope · rope positions · {rope.n_parameters / 1e3:.0f}k parameters · "
                                         f"context 64 · the main model, {results.metrics['shakespeare-rope']['bits_per_char']:.2f} bits/char")
    assert "encoding experiment" in lines["shakespeare-alibi"]
    assert lines[SLOW_MODEL].startswith(f"{SLOW_MODEL} · rope positions · {found[SLOW_MODEL].n_parameters / 1e6:.1f}M parameters")
    assert lines[SEQ2SEQ_NAME].endswith("rewrites its input (character error rate 0.120; copying the input: 0.310)")
    for name in TIMELINE_RUNS:
        assert lines[name] == (f"{name} · rope positions · {found[name].n_parameters / 1e3:.0f}k parameters · context 128 · "
                               "a recorded training run (Watch it learn)")


def in_context(score: float, layer: int = 1, head: int = 3) -> dict:
    """results.json's in_context entry (training.evaluate.in_context_scores) with the best induction head given."""
    return {"passages": 32, "passage_tokens": 32, "first_copy_loss": 4.0, "second_copy_loss": 2.0,
            "repeated_passage_ratio": 0.5, "induction": {"score": score, "layer": layer, "head": head},
            "previous_token": {"score": 0.9, "layer": 0, "head": 0}, "threshold": 0.4}


def test_a_model_with_an_induction_head_says_it_copies_from_its_context(tiny_checkpoints, tmp_path):
    """The menu line names the head when it reaches the threshold the Attention heads tab labels with, not below."""
    results = json.loads((tiny_checkpoints / "results.json").read_text())
    results["models"]["shakespeare-rope"]["in_context"] = in_context(0.4, layer=1, head=3)
    results["models"]["shakespeare-alibi"]["in_context"] = in_context(0.399)
    (tmp_path / "results.json").write_text(json.dumps(results))
    read = catalog.read_results(tmp_path)
    assert read.induction["shakespeare-rope"] == {"score": 0.4, "layer": 1, "head": 3, "threshold": 0.4}
    lines = {name: label for label, name in catalog.menu_choices(catalog.discover_checkpoints(tiny_checkpoints), read)}
    assert lines["shakespeare-rope"].endswith(" bits/char, copies from its context (induction head L1.H3)")
    assert [name for name, line in lines.items() if "copies" in line] == ["shakespeare-rope"]


def test_of_the_shipped_models_the_main_one_and_the_repeats_run_say_they_copy():
    found, results = catalog.discover_checkpoints(SHIPPED_ROOT), catalog.read_results(SHIPPED_ROOT)
    lines = {name: label for label, name in catalog.menu_choices(found, results)}
    assert {name for name, line in lines.items() if "copies from its context" in line} == {"shakespeare-main",
                                                                                          "timeline-repeats"}
    assert lines["shakespeare-main"].endswith("the main model, 1.90 bits/char, copies from its context "
                                              "(induction head L4.H7)")


def test_the_architecture_line_counts_encoder_and_decoder_layers_apart():
    """An encoder-decoder's stacks may differ in depth (folio-to-modern: 4 + 3); the line names both."""
    config = ScratchTransformerConfig(vocab_size=50, d_model=32, n_heads=4, n_layers=3, n_encoder_layers=4, d_ff=64,
                                      is_encoder_decoder=True)
    line = catalog.config_summary("m", config)
    assert "4 encoder + 3 decoder layers" in line and "encoder-decoder" in line
    causal = ScratchTransformerConfig(vocab_size=50, d_model=32, n_heads=4, n_layers=3, d_ff=64)
    assert "3 layers" in catalog.config_summary("c", causal) and "encoder +" not in catalog.config_summary("c", causal)
    assert "d_ff=64" in catalog.config_summary("c", causal)


def test_the_architecture_line_of_an_attention_only_model_says_it_has_no_feed_forward():
    config = ScratchTransformerConfig(vocab_size=50, d_model=32, n_heads=4, n_layers=2, feed_forward="none")
    line = catalog.config_summary("a", config)
    assert "attention only (no feed-forward)" in line and "d_ff" not in line


def test_default_model_is_the_main_model_else_the_first_usable_language_model(tiny_checkpoints):
    found = catalog.discover_checkpoints(tiny_checkpoints)
    assert catalog.default_model(found, catalog.read_results(tiny_checkpoints)) == "shakespeare-rope"
    assert catalog.default_model(found, catalog.Results(main_model="gone")) == list(found)[0]
    assert catalog.default_model({}, catalog.Results()) is None
    assert catalog.seq2seq_model(found) == SEQ2SEQ_NAME


def test_load_model_loads_once_and_in_eval_mode(tiny_checkpoints):
    found = catalog.discover_checkpoints(tiny_checkpoints)
    first = registry.shipped_model(found["shakespeare-none"])
    assert registry.shipped_model(found["shakespeare-none"])[0] is first[0] and not first[0].training
    assert isinstance(registry.shipped_model(found[SEQ2SEQ_NAME])[0], ScratchTransformerForSeq2SeqLM)


@pytest.mark.parametrize("name, message", [
    ("no-such-model", "Unknown model `no-such-model`; pick one of: shakespeare-alibi,"),
    (["shakespeare-rope"], "Pick a model: its name is a text such as 'shakespeare-main'; got a list"),
    ({"a": 1}, "got a dictionary"),
    ("<img src=x onerror=alert(1)>", "Unknown model `<img src=x onerror=alert(1)>`"),
])
def test_resolve_names_what_exists(tiny_checkpoints, name, message):
    with pytest.raises(InputProblem) as problem:
        registry.resolve(name, tiny_checkpoints)
    assert message in str(problem.value)


def test_no_checkpoints_message_hides_the_servers_paths(tmp_path):
    with pytest.raises(InputProblem) as problem:
        registry.resolve("shakespeare-rope", tmp_path)
    assert "No checkpoints found" in str(problem.value) and str(tmp_path) not in str(problem.value)
    assert json.dumps(catalog.no_checkpoints_message()).count("/") == 0


def test_encoding_family_maps_each_encoding_and_finds_the_shared_training_context(tiny_checkpoints, tmp_path):
    family = catalog.encoding_family(catalog.discover_checkpoints(tiny_checkpoints))
    assert family.models == {e: f"shakespeare-{e}" for e in ENCODINGS} and family.context == 64
    assert family.encodings == {f"shakespeare-{e}": e for e in ENCODINGS} and list(family.encodings.values()) == list(ENCODINGS)
    for name in ("shakespeare-rope", "shakespeare-alibi", SEQ2SEQ_NAME):
        shutil.copytree(tiny_checkpoints / name, tmp_path / name)
    assert catalog.encoding_family(catalog.discover_checkpoints(tmp_path)).context == 64
    config = json.loads((tmp_path / "shakespeare-alibi" / "config.json").read_text())
    (tmp_path / "shakespeare-alibi" / "config.json").write_text(json.dumps({**config, "training_context_length": 32}))
    mixed = catalog.encoding_family(catalog.discover_checkpoints(tmp_path))
    assert mixed.models == {"rope": "shakespeare-rope", "alibi": "shakespeare-alibi"} and mixed.context is None  # no one context
    assert catalog.encoding_family({}) == catalog.EncodingFamily({}, None)



def test_the_architecture_line_names_the_norm_feed_forward_shared_heads_rotary_share_and_scaling_residual_and_head():
    llama_like = ScratchTransformerConfig(vocab_size=50, d_model=32, n_heads=4, n_kv_heads=2, n_layers=2, d_ff=64,
                                          norm="rmsnorm", feed_forward="gated", activation="silu",
                                          tie_word_embeddings=False, position_encoding="rope")
    line = catalog.config_summary("l", llama_like)
    assert "RMSNorm" in line and "LayerNorm" not in line and "gated feed-forward (silu)" in line
    assert "2 key/value heads (shared)" in line and "untied head" in line and "pre-norm" in line
    neox_like = ScratchTransformerConfig(vocab_size=50, d_model=32, n_heads=4, n_layers=2, d_ff=64, position_encoding="rope",
                                         rotary_fraction=0.25, parallel_residual=True, activation="gelu")
    line = catalog.config_summary("n", neox_like)
    assert "rope on 2 of 8 dims" in line and "parallel residual" in line and "feed-forward (gelu)" in line
    assert "LayerNorm" in line and "key/value" not in line and "slowed" not in line
    llama_3_2 = ScratchTransformerConfig(vocab_size=50, d_model=32, n_heads=4, n_layers=2, position_encoding="rope",
                                         rope_frequency_scaling={"rope_type": "llama3", "factor": 32.0,
                                                                 "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                                                 "original_max_position_embeddings": 8192})
    assert "position encoding **rope, frequencies slowed 32× (llama3)**" in catalog.config_summary("l3", llama_3_2)
