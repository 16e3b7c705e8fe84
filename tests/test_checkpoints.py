"""The checkpoints we ship: they load through the Auto classes, reproduce their recorded numbers,
and work in pipelines. These read checkpoints/ as committed; a missing checkpoint is a failure."""

import json
import math
from pathlib import Path

import pytest
import torch
from huggingface_hub import ModelCard
from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer, pipeline

from modeling import ScratchTransformerForCausalLM, ScratchTransformerForSeq2SeqLM
from training.checkpoints import MODEL_CODE_FILES, MODELING_DIR
from training.corpus import read_split
from training.evaluate import SLICE_CHARS, bits_per_character, character_error_rate, modernize

ROOT = Path(__file__).resolve().parent.parent / "checkpoints"
ENCODINGS = ["sinusoidal", "learned", "rope", "alibi", "none"]
EXPERIMENT = [f"shakespeare-{pe}" for pe in ENCODINGS]
MAIN = "shakespeare-main"
CAUSAL = EXPERIMENT + [MAIN]
RESULTS = json.loads((ROOT / "results.json").read_text()) if (ROOT / "results.json").exists() else {}


def test_every_checkpoint_is_shipped_with_results_and_a_model_card():
    for name in CAUSAL + ["folio-to-modern"]:
        folder = ROOT / name
        assert (folder / "model.safetensors").exists(), name
        assert name in RESULTS["models"], name
        card = ModelCard.load(folder / "README.md")  # the Hub's own parser
        assert card.data.license == "mit" and card.data.library_name == "transformers"
        assert card.data.pipeline_tag in ("text-generation", "text2text-generation")
        assert card.data.eval_results and card.data.eval_results[0].dataset_type == "shakespeare-gutenberg"
    assert RESULTS["main_model"] == min(CAUSAL, key=lambda name: RESULTS["models"][name]["bits_per_char"])
    total = sum(f.stat().st_size for f in ROOT.rglob("*") if f.is_file())
    assert total <= 80 * 10**6  # "at most 80 MB", read strictly: decimal megabytes


def test_the_encoding_experiment_is_controlled():
    """The five models differ only in position_encoding (same size, data, steps, seed)."""
    configs = {name: json.loads((ROOT / name / "config.json").read_text()) for name in EXPERIMENT}
    summaries = {name: json.loads((ROOT / name / "training_summary.json").read_text()) for name in EXPERIMENT}
    ignore = {"position_encoding", "transformers_version"}
    reference = {k: v for k, v in configs[EXPERIMENT[0]].items() if k not in ignore}
    for name in EXPERIMENT:
        assert {k: v for k, v in configs[name].items() if k not in ignore} == reference, name
        assert configs[name]["position_encoding"] == name.removeprefix("shakespeare-")
        for key in ("steps", "batch_size", "context_length", "seed", "learning_rate"):
            assert summaries[name][key] == summaries[EXPERIMENT[0]][key], (name, key)


@pytest.mark.parametrize("name", CAUSAL)
def test_causal_lm_loads_and_reproduces_its_recorded_loss(name):
    model = AutoModelForCausalLM.from_pretrained(ROOT / name).eval()
    tokenizer = AutoTokenizer.from_pretrained(ROOT / name)
    assert isinstance(model, ScratchTransformerForCausalLM)
    assert next(model.parameters()).dtype == torch.float32  # also where the file stores float16
    recorded = RESULTS["models"][name]["slice"]
    measured = bits_per_character(model, tokenizer, read_split("test")[:SLICE_CHARS], model.config.training_context_length)
    assert measured["bits_per_char"] == pytest.approx(recorded["bits_per_char"], rel=0.01)
    assert measured["bits_per_char"] < 4.0  # far better than chance (log2 of ~70 characters = 6.1)


@pytest.mark.parametrize("name", [MAIN, "shakespeare-rope", "shakespeare-learned"])
def test_causal_lm_works_in_a_text_generation_pipeline(name):
    generator = pipeline("text-generation", model=str(ROOT / name), device="cpu")
    torch.manual_seed(0)
    out = generator("ROMEO:\n", max_new_tokens=30, do_sample=True, top_k=40)[0]["generated_text"]
    assert out.startswith("ROMEO:\n") and len(out) > len("ROMEO:\n") + 20


def test_main_model_meets_the_target():
    """The app's main model: at most 2.2 bits per character on the held-out test plays (issue 3), a
    larger model than the experiment's, trained at a longer context (its loss on the fixed slice is
    re-measured above)."""
    entry = RESULTS["models"][RESULTS["main_model"]]
    assert entry["bits_per_char"] <= 2.2
    assert entry["chars_scored"] >= 0.99 * RESULTS["test_chars"]  # the whole test split, not a slice
    best_experiment = min(RESULTS["models"][name]["bits_per_char"] for name in EXPERIMENT)
    assert entry["bits_per_char"] < best_experiment


def test_folio_to_modern_loads_and_beats_copying():
    name = "folio-to-modern"
    model = AutoModelForSeq2SeqLM.from_pretrained(ROOT / name).eval()
    tokenizer = AutoTokenizer.from_pretrained(ROOT / name)
    assert isinstance(model, ScratchTransformerForSeq2SeqLM)
    recorded = RESULTS["models"][name]
    assert recorded["cer"] < recorded["identity_cer"]
    folio = ["Stand & vnfold your selfe", "Long liue the King", "Haue you had quiet Guard?"]
    modern = ["Stand, and unfold yourself", "Long live the king", "Have you had quiet guard?"]
    predictions = modernize(model, tokenizer, folio)
    assert character_error_rate(predictions, modern) < character_error_rate(folio, modern)


def test_results_json_is_complete():
    for name in CAUSAL:
        entry = RESULTS["models"][name]
        assert math.isclose(entry["perplexity"], math.exp(entry["test_loss"]), rel_tol=1e-9)
        context = entry["training_context"]
        assert list(entry["extrapolation"]) == [str(f * context) for f in (1, 2, 4, 8)]
        values = [v for v in entry["extrapolation"].values() if v is not None]
        assert values and all(0 < v < 8 for v in values)
    assert all(v is None for v in list(RESULTS["models"]["shakespeare-learned"]["extrapolation"].values())[1:])


@pytest.mark.parametrize("name", CAUSAL + ["folio-to-modern"])
def test_shipped_remote_code_is_the_package_code(name):
    """Each checkpoint ships a copy of the model code for trust_remote_code; it must not drift."""
    for file in MODEL_CODE_FILES:
        assert (ROOT / name / file).read_text() == (MODELING_DIR / file).read_text(), (name, file)
