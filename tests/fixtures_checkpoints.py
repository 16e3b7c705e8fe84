"""Tiny random checkpoints in the shipped layout, for the app's tests and its benchmark.

``build_checkpoints(root)`` writes ``root/<name>/`` (config.json, model.safetensors,
generation_config.json, tokenizer files) for the five decoder-only encoding models and the
``folio-to-modern`` encoder-decoder, plus ``root/results.json`` in the evaluation's schema. The
tokenizer is a real byte-level BPE trained on a few KB of text, so the app sees what it will see
with the trained checkpoints: merges, multi-byte emoji, special tokens.
"""

import json
import math
from pathlib import Path

import torch
from tokenizers import ByteLevelBPETokenizer
from transformers import GenerationConfig, PreTrainedTokenizerFast

from modeling import POSITION_ENCODINGS, ScratchTransformerConfig, ScratchTransformerForCausalLM, ScratchTransformerForSeq2SeqLM
from tiny_models import tiny_config
from training.evaluate import PUBLISHED, perplexity_ratios, summarize_seeds
from training.presets import ENCODING_SEEDS

ENCODINGS = POSITION_ENCODINGS
SEQ2SEQ_NAME = "folio-to-modern"

# Sonnet 18 and the opening of Sonnet 116 (public domain), in modern and First Folio-like spelling.
SAMPLE_TEXT = """Shall I compare thee to a summer's day?
Thou art more lovely and more temperate:
Rough winds do shake the darling buds of May,
And summer's lease hath all too short a date;
Sometime too hot the eye of heaven shines,
And often is his gold complexion dimm'd;
And every fair from fair sometime declines,
By chance or nature's changing course untrimm'd;
But thy eternal summer shall not fade,
Nor lose possession of that fair thou ow'st;
Nor shall death brag thou wander'st in his shade,
When in eternal lines to time thou grow'st:
So long as men can breathe or eyes can see,
So long lives this, and this gives life to thee.
Let me not to the marriage of true minds
Admit impediments. Love is not love
Which alters when it alteration finds,
Or bends with the remover to remove.
Shall I compare thee to a Summers day? Thou art more louely and more temperate,
Rough windes do shake the darling buds of Maie, And Sommers lease hath all too short a date.
"""


def train_tokenizer(text: str = SAMPLE_TEXT * 4, vocab_size: int = 384) -> PreTrainedTokenizerFast:
    """A byte-level BPE with <pad>=0, <s>=1, </s>=2, wrapped as a transformers fast tokenizer."""
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator([text], vocab_size=vocab_size, min_frequency=1,
                            special_tokens=["<pad>", "<s>", "</s>"], show_progress=False)
    return PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, bos_token="<s>", eos_token="</s>",
                                   pad_token="<pad>", model_max_length=10**6)


def checkpoint_config(tokenizer, position_encoding: str, seq2seq: bool = False, **overrides) -> ScratchTransformerConfig:
    """``tiny_config`` sized to ``tokenizer``, trained-context 64, initialised as the real models are."""
    values = dict(vocab_size=len(tokenizer), training_context_length=64, position_encoding=position_encoding,
                  initializer_range=0.02, pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
                  eos_token_id=tokenizer.eos_token_id)
    return tiny_config(seq2seq=seq2seq, **{**values, **overrides})


def save_checkpoint(model, tokenizer, directory: Path) -> Path:
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
        decoder_start_token_id=model.config.decoder_start_token_id, max_new_tokens=32,
    )
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def build_checkpoints(root: Path, seed: int = 0, **config_overrides) -> Path:
    """Write the six tiny checkpoints and a results.json under ``root``; return ``root``."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    tokenizer = train_tokenizer()
    for i, encoding in enumerate(ENCODINGS):
        torch.manual_seed(seed + i)
        model = ScratchTransformerForCausalLM(checkpoint_config(tokenizer, encoding, **config_overrides)).eval()
        save_checkpoint(model, tokenizer, root / f"shakespeare-{encoding}")
    torch.manual_seed(seed + len(ENCODINGS))
    model = ScratchTransformerForSeq2SeqLM(checkpoint_config(tokenizer, "sinusoidal", seq2seq=True, **config_overrides)).eval()
    save_checkpoint(model, tokenizer, root / SEQ2SEQ_NAME)

    lengths = (16, 32, 64, 128, 256)
    results = {"main_model": "shakespeare-rope", "models": {}}
    for i, encoding in enumerate(ENCODINGS):
        curve = {str(n): (None if encoding == "learned" and n > 64 else round(2.0 + 0.1 * i + 0.002 * n, 4)) for n in lengths}
        window = 64 if encoding == "learned" else lengths[-1]  # the longest window the model can read
        results["models"][f"shakespeare-{encoding}"] = {
            "test_loss": 1.2 + 0.05 * i, "perplexity": 3.3 + 0.1 * i, "bits_per_char": 2.1 + 0.05 * i,
            "training_context": 64, "extrapolation": curve,
            "extrapolation_loss": {n: None if v is None else 0.9 * v for n, v in curve.items()},
            "position_loss": {"window": window, "loss": [round(3.0 + 0.1 * i - 0.3 * math.log(p), 4) for p in range(1, window)]},
        }
    results["models"][SEQ2SEQ_NAME] = {"cer": 0.12, "identity_cer": 0.31}
    results["experiment"] = experiment_results(results["models"])
    results["published"] = PUBLISHED
    (root / "results.json").write_text(json.dumps(results, indent=2))
    return root


def experiment_results(models: dict) -> dict:
    """The experiment's section of results.json, as ``training.evaluate`` computes it from each seed's results:
    the shipped models as the first seed, and a second seed 0.01 bits/char worse (its losses 0.007 nats worse)."""
    experiment = {"seeds": list(ENCODING_SEEDS), "encodings": {}}
    for encoding in ENCODINGS:
        first = models[f"shakespeare-{encoding}"]
        second = {**first, "bits_per_char": first["bits_per_char"] + 0.01 * (1 + ENCODINGS.index(encoding)),
                  "extrapolation_loss": {n: None if v is None else v + 0.007 * int(n) / 64 for n, v in first["extrapolation_loss"].items()}}
        runs = {}
        for seed, result in zip(ENCODING_SEEDS, (first, second)):
            runs[seed] = {k: result[k] for k in ("bits_per_char", "extrapolation", "extrapolation_loss", "training_context")}
            runs[seed]["perplexity_ratio"] = perplexity_ratios(result)
        experiment["encodings"][encoding] = {"runs": runs, **summarize_seeds(runs)}
    return json.loads(json.dumps(experiment))  # keys as results.json has them (seeds as strings)


if __name__ == "__main__":
    import sys

    print(build_checkpoints(Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/tiny-checkpoints")))
