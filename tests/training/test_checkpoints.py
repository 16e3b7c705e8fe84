"""The checkpoints we ship: they load through the Auto classes, reproduce their recorded numbers on fixed
slices, hold the figures results.json records, and work in pipelines. These read checkpoints/ as committed."""

import json
import math
import shlex

import pytest
import torch
from huggingface_hub import ModelCard
from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer, pipeline

from checkpointing.paths import checkpoints_dir
from checkpointing.scoring import EXTRAPOLATION_FACTORS, bits_per_character, window_losses
from explorer.generation.decoding import rewrite_lines
from modeling import POSITION_ENCODINGS, ScratchTransformerForCausalLM, ScratchTransformerForSeq2SeqLM
from training import train
from training.checkpoints import MODEL_CODE_FILES, MODELING_DIR, generated_copy
from training.corpus import read_pairs, read_split
from training.model_card import TRAIN_COMMAND, TRAINING_LABELS
from training.evaluate import (
    CURVE_SLICE_WINDOWS,
    SEQ2SEQ_SLICE_PAIRS,
    SLICE_CHARS,
    character_error_rate,
    in_context_scores,
    modernize,
    position_losses,
    spelling_scores,
)
from training.presets import ENCODING_SEEDS

ROOT = checkpoints_dir()
EXPERIMENT = [f"shakespeare-{pe}" for pe in POSITION_ENCODINGS]
MAIN, FOLIO = "shakespeare-main", "folio-to-modern"
CAUSAL = EXPERIMENT + [MAIN]
RECORDED_RUNS = ["timeline-repeats", "timeline-plain"]
RESULTS = json.loads((ROOT / "results.json").read_text())
SIZE_LIMIT = 60 * 10**6  # "at most 60 MB", read strictly: decimal megabytes


def summary(name: str) -> dict:
    return json.loads((ROOT / name / "training_summary.json").read_text())


def test_every_checkpoint_is_shipped_with_results_and_a_model_card():
    for name in CAUSAL + [FOLIO]:
        folder = ROOT / name
        assert (folder / "model.safetensors").exists(), name
        assert name in RESULTS["models"], name
        card = ModelCard.load(folder / "README.md")  # the Hub's own parser
        assert card.data.license == "mit" and card.data.library_name == "transformers"
        assert card.data.eval_results and card.data.eval_results[0].dataset_type == "shakespeare-gutenberg"
        trained = summary(name)
        for key, label in TRAINING_LABELS.items():  # the card shows every fact the training recorded
            if trained.get(key) is not None:
                assert f"- {label}: {trained[key]}" in card.text, (name, key)
    assert RESULTS["main_model"] == min(CAUSAL, key=lambda name: RESULTS["models"][name]["bits_per_char"])


@pytest.mark.parametrize("name", CAUSAL + [FOLIO])
def test_every_card_gives_a_training_command_todays_code_accepts(name):
    """A card shows the command as it was run; where that ran an earlier layout (modeling.train --eval-blocks, as
    the first shakespeare-main did), it adds one for today's code. One of them parses with training.train's options."""
    card = (ROOT / name / "README.md").read_text()
    shown = [line.split(": ", 1)[1].strip("`") for line in card.splitlines()
             if line.startswith(("- command (as it was run): ", "- to train it again with today's code"))]
    runnable = [command for command in shown if command.startswith(TRAIN_COMMAND + " ")]
    assert runnable, shown
    args = train.parse_args(shlex.split(runnable[-1].removeprefix(TRAIN_COMMAND)))
    assert args.preset == summary(name)["preset"]
    assert train.settings_from(args) == train.PRESETS[args.preset].train  # the preset holds the run's settings


@pytest.mark.parametrize("name", CAUSAL + [FOLIO])
def test_the_runs_a_checkpoint_continued_or_learned_from_give_commands_that_parse(name):
    """A continued or distilled model's card names the run it started from and its teachers, each with the command
    that trained it, shell-quoted (a --config JSON is one argument): each one parses with training.train's options
    into that run's own preset."""
    trained = summary(name)
    earlier = [trained["started_from"]] if trained.get("started_from") else []
    earlier += trained.get("teachers") or []
    card = (ROOT / name / "README.md").read_text()
    for run in earlier:
        assert f"`{run['command']}`" in card
        if run["command"].startswith("python -m modeling.train "):  # the first main model ran an earlier layout
            continue
        args = train.parse_args(shlex.split(run["command"].removeprefix(TRAIN_COMMAND)))
        assert args.preset == run["preset"], run["command"]  # (a --config that is not one JSON object exits)


def test_checkpoints_fit_the_size_limit():
    total = sum(f.stat().st_size for f in ROOT.rglob("*") if f.is_file())
    assert total <= SIZE_LIMIT, f"{total / 1e6:.2f} MB"


@pytest.mark.parametrize("name", CAUSAL + [FOLIO])
def test_training_summaries_record_device_and_wall_time(name):
    s = summary(name)
    assert s["device"] and s["wall_clock_seconds"] > 0 and s["command"].startswith(
        ("python -m training.train", "torchrun", "python -m modeling.train"))  # modeling.train: before the layout split
    if s["command"].startswith(("python -m training.train", "torchrun")):  # the current pipeline also counts tokens
        assert s["tokens_seen"] > 0 and s["passes_over_train_split"] > 0
        if s["weights_stored_as"] == "float16":
            assert abs(s["float16_change"]) < 1e-4  # float16 storage moved bits/char by less than 1e-4


def test_the_encoding_experiment_is_controlled_and_trained_until_flat():
    """The five models differ only in position_encoding, saw at least 3 passes over the train split, and their
    validation loss improved by less than 1% over the last fifth of training; two seeds each."""
    configs = {name: json.loads((ROOT / name / "config.json").read_text()) for name in EXPERIMENT}
    ignore = {"position_encoding", "transformers_version"}
    reference = {k: v for k, v in configs[EXPERIMENT[0]].items() if k not in ignore}
    for name in EXPERIMENT:
        assert {k: v for k, v in configs[name].items() if k not in ignore} == reference, name
        assert configs[name]["position_encoding"] == name.removeprefix("shakespeare-")
        s = summary(name)
        for key in ("steps", "batch_size", "context_length", "learning_rate", "settings"):
            assert s[key] == summary(EXPERIMENT[0])[key], (name, key)
    for encoding, entry in RESULTS["experiment"]["encodings"].items():
        assert sorted(map(int, entry["runs"])) == sorted(ENCODING_SEEDS), encoding
        for seed, run in entry["runs"].items():
            assert run["passes_over_train_split"] >= 3, (encoding, seed)
            assert run["last_fifth_improvement"] < 0.01, (encoding, seed)
        values = [run["bits_per_char"] for run in entry["runs"].values()]
        assert entry["bits_per_char"]["mean"] == pytest.approx(sum(values) / len(values))
        assert entry["bits_per_char"]["spread"] == pytest.approx(max(values) - min(values))


@pytest.mark.parametrize("name", CAUSAL)
def test_causal_lm_loads_and_reproduces_its_recorded_loss(name):
    model = AutoModelForCausalLM.from_pretrained(ROOT / name).eval()
    tokenizer = AutoTokenizer.from_pretrained(ROOT / name)
    assert isinstance(model, ScratchTransformerForCausalLM)
    assert next(model.parameters()).dtype == torch.float32  # also where the file stores float16
    recorded = RESULTS["models"][name]["slice"]
    measured = bits_per_character(model, tokenizer, read_split("test")[:SLICE_CHARS], model.config.context_length)
    assert measured["bits_per_char"] == pytest.approx(recorded["bits_per_char"], abs=1e-4)  # float32 sums in another order


@pytest.mark.parametrize("name", CAUSAL + RECORDED_RUNS)
def test_the_per_position_curve_the_app_draws_is_the_models_own(name):
    """results.json's per-position curve (loss at each position of the longest windows) is recorded unrounded, over the
    whole test split (what the app draws) and over its first windows (the slice); the slice, recomputed from the
    checkpoint in a few seconds, equals the recorded one. Unrounded values compared at 1e-4 nats: float32 sums in
    another order and other CPU kernels move them by about 1e-6."""
    model = AutoModelForCausalLM.from_pretrained(ROOT / name).eval()
    tokenizer = AutoTokenizer.from_pretrained(ROOT / name)
    recorded = RESULTS["models"][name]["position_loss"]
    assert recorded["slice"]["windows"] == CURVE_SLICE_WINDOWS
    window = window_losses(model, tokenizer, read_split("test"), recorded["window"], max_windows=CURVE_SLICE_WINDOWS)
    assert window["scored"].all()  # whole windows: every position of the slice is scored in each
    curve = position_losses(window)
    assert len(curve) == len(recorded["loss"]) == recorded["window"] - 1
    assert curve == pytest.approx(recorded["slice"]["loss"], abs=1e-4, rel=0)


@pytest.mark.parametrize("name", [MAIN, "shakespeare-rope", "shakespeare-learned"])
def test_causal_lm_works_in_a_text_generation_pipeline(name):
    generator = pipeline("text-generation", model=str(ROOT / name), device="cpu")
    torch.manual_seed(0)
    out = generator("ROMEO:\n", max_new_tokens=30, do_sample=True, top_k=40)[0]["generated_text"]
    assert out.startswith("ROMEO:\n") and len(out) > len("ROMEO:\n") + 20


@pytest.mark.parametrize("name", CAUSAL + RECORDED_RUNS)
def test_the_in_context_figures_are_the_models_own(name):
    """results.json's repeated test passages and best heads, measured again on the checkpoint (a few seconds)."""
    model = AutoModelForCausalLM.from_pretrained(ROOT / name).eval()
    tokenizer = AutoTokenizer.from_pretrained(ROOT / name)
    recorded = RESULTS["models"][name]["in_context"]
    measured = in_context_scores(model, tokenizer, read_split("test"))
    for key in ("first_copy_loss", "second_copy_loss", "repeated_passage_ratio"):
        assert measured[key] == pytest.approx(recorded[key], abs=1e-5), key  # float32 sums in another order
    for key in ("induction", "previous_token"):
        assert (measured[key]["layer"], measured[key]["head"]) == (recorded[key]["layer"], recorded[key]["head"])
        assert measured[key]["score"] == pytest.approx(recorded[key]["score"], abs=1e-5)
    assert (measured["passages"], measured["passage_tokens"]) == (recorded["passages"], recorded["passage_tokens"])


def test_main_model_copies_from_its_context_and_reads_the_plays_no_worse():
    """The main model learned to copy from its context without losing the plays: on the repeated test passages the
    second copy costs at most half the first, its best head is an induction head by the standard score (at least 0.3,
    and labelled so in the app: the threshold), fed by a previous-token head in an earlier layer (the two-head
    circuit), and its test bits/char is no worse than the 1.908 of the model it was taught from. Each figure is
    re-measured from the checkpoint above (in-context figures, slice)."""
    entry = RESULTS["models"][MAIN]
    figures = entry["in_context"]
    assert figures["second_copy_loss"] <= 0.5 * figures["first_copy_loss"]
    assert figures["induction"]["score"] >= max(0.3, figures["threshold"])
    assert figures["previous_token"]["score"] >= figures["threshold"]
    assert figures["previous_token"]["layer"] < figures["induction"]["layer"]
    assert entry["bits_per_char"] <= 1.908
    for name in EXPERIMENT:  # none of the others copies
        assert RESULTS["models"][name]["in_context"]["repeated_passage_ratio"] > 0.95, name
        assert RESULTS["models"][name]["in_context"]["induction"]["score"] < 0.1, name


def test_main_model_is_the_best_we_ship():
    """At most 2.2 bits per character on the whole held-out test split, and at most the 1.936 of the best
    single run it was distilled from (the target of 1.85 is not reached: docs/main-model.md); better than every experiment
    model; its figure on the fixed slice is re-measured above."""
    entry = RESULTS["models"][MAIN]
    assert entry["bits_per_char"] <= 2.2
    assert entry["bits_per_char"] <= 1.936
    assert entry["chars_scored"] >= 0.99 * RESULTS["test_chars"]
    assert entry["bits_per_char"] < min(RESULTS["models"][name]["bits_per_char"] for name in EXPERIMENT)


def test_folio_to_modern_meets_its_three_targets_and_reproduces_its_slice():
    """Its recorded figures on the first 1000 aligned test pairs, greedy as the app decodes, against its
    targets: CER at most 0.035, case- and punctuation-insensitive CER at most 0.015 and at least 98% of outputs
    within one word. Identity's figures are recomputed from today's pairs, so the recorded ones are of these pairs;
    greedy CER is re-measured on a fixed slice of them."""
    model = AutoModelForSeq2SeqLM.from_pretrained(ROOT / FOLIO).eval()
    tokenizer = AutoTokenizer.from_pretrained(ROOT / FOLIO)
    assert isinstance(model, ScratchTransformerForSeq2SeqLM)
    recorded = RESULTS["models"][FOLIO]
    assert recorded["pairs"] == 1000
    pairs = read_pairs("test")[:recorded["pairs"]]
    greedy, beam, identity = recorded["greedy"], recorded["beam4"], recorded["identity"]
    assert spelling_scores([p["folio"] for p in pairs], [p["modern"] for p in pairs]) == pytest.approx(identity, abs=1e-12)
    assert greedy["cer"] <= 0.035 and greedy["insensitive_cer"] <= 0.015 and greedy["within_one_word"] >= 0.98
    for decoded in (greedy, beam):
        assert decoded["cer"] < identity["cer"] / 2 and decoded["insensitive_cer"] < identity["insensitive_cer"] / 3
    predictions = modernize(model, tokenizer, [p["folio"] for p in pairs[:SEQ2SEQ_SLICE_PAIRS]])
    cer = character_error_rate(predictions, [p["modern"] for p in pairs[:SEQ2SEQ_SLICE_PAIRS]])
    assert cer == pytest.approx(recorded["slice"]["greedy_cer"], abs=2e-3)  # a rounding flip or two of 100 lines


def test_folio_to_modern_rewrites_a_passage_well_only_line_by_line_as_the_app_feeds_it():
    """Why the app rewrites a passage line by line (``generation.rewrite_lines``): the model was trained on single
    lines. On four held-out lines of Julius Caesar fed whole its CER is 0.68 ("lend me your ear's: chance, to
    bury,"); fed line by line it is 0.047, below copying the Folio (0.058)."""
    model = AutoModelForSeq2SeqLM.from_pretrained(ROOT / FOLIO).eval()
    tokenizer = AutoTokenizer.from_pretrained(ROOT / FOLIO)
    pairs = read_pairs("test")
    start = next(i for i, p in enumerate(pairs) if p["folio"].startswith("Friends, Romans, Countrymen"))
    chunk = pairs[start:start + 4]
    folio, modern = "\n".join(p["folio"] for p in chunk), "\n".join(p["modern"] for p in chunk)
    lines, notices = rewrite_lines(folio)
    assert lines == [p["folio"] for p in chunk] and not notices
    by_line = "\n".join(modernize(model, tokenizer, lines))
    whole = modernize(model, tokenizer, [folio])[0]
    line_cer, whole_cer, identity_cer = (character_error_rate([text], [modern]) for text in (by_line, whole, folio))
    assert line_cer < identity_cer and whole_cer > 5 * line_cer, (line_cer, whole_cer, identity_cer)


def test_results_json_is_complete():
    for name in CAUSAL:
        entry = RESULTS["models"][name]
        assert math.isclose(entry["perplexity"], math.exp(entry["test_loss"]), rel_tol=1e-9)
        context = entry["training_context"]
        assert list(entry["extrapolation"]) == [str(f * context) for f in EXTRAPOLATION_FACTORS]
        values = [v for v in entry["extrapolation"].values() if v is not None]
        assert values and all(0 < v < 8 for v in values)
        curve = entry["position_loss"]
        expected = context if entry["position_encoding"] == "learned" else EXTRAPOLATION_FACTORS[-1] * context
        assert curve["window"] == expected and len(curve["loss"]) == expected - 1
    assert all(v is None for v in list(RESULTS["models"]["shakespeare-learned"]["extrapolation"].values())[1:])
    assert {"press2022_alibi", "kazemnejad2023_nope"} <= set(RESULTS["published"])


@pytest.mark.parametrize("name", CAUSAL + [FOLIO])
def test_shipped_remote_code_is_the_package_code(name):
    """Each checkpoint ships a copy of the model code for trust_remote_code; it must not drift. Its first line says it
    is generated and names the command; the rest is the package's file byte for byte."""
    for file in MODEL_CODE_FILES:
        copy = (ROOT / name / file).read_bytes()
        assert copy == generated_copy(file), (name, file)
        first, rest = copy.split(b"\n", 1)
        assert first.startswith(b"# GENERATED") and b"python -m training.checkpoints" in first and b"modeling/" + file.encode() in first
        assert rest == (MODELING_DIR / file).read_bytes()
