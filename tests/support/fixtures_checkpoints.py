"""Tiny random checkpoints in the shipped layout, for the app's tests and its benchmark.

``build_checkpoints(root)`` writes ``root/<name>/`` (config.json, model.safetensors,
generation_config.json, tokenizer files) for the five decoder-only encoding models and the
``folio-to-modern`` encoder-decoder, plus ``root/results.json`` in the evaluation's schema. The
tokenizer is a real byte-level BPE trained on a few KB of text, so the app sees what it will see
with the trained checkpoints: merges, multi-byte emoji, special tokens.

``add_slow_checkpoint(root)`` adds ``SLOW_MODEL``, a random model at the shipped main model's size.

``build_timeline_runs(root)`` adds two recorded training runs (``checkpointing.training_run``), byte-level like the
shipped ones: tiny models trained for a few steps, snapshots written and measured by the code training uses.
"""

import json
import math
from pathlib import Path

import torch
from tokenizers import ByteLevelBPETokenizer
from transformers import GenerationConfig, PreTrainedTokenizerFast

from checkpointing.in_context import SPECIAL_IDS, repeat_runs
from checkpointing.training_run import load_snapshot, measure, save_snapshot, write_timeline
from modeling import POSITION_ENCODINGS, ScratchTransformerConfig, ScratchTransformerForCausalLM, ScratchTransformerForSeq2SeqLM
from support.tiny_models import tiny_config
from training.evaluate import PUBLISHED, perplexity_ratios, summarize_seeds
from training.presets import ENCODING_SEEDS
from training.snapshots import timeline_probes, validation_loss
from training.tokenization import byte_tokenizer
from training.checkpoints import copy_model_code

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


def causal_lm(tokenizer, position_encoding: str = "rope", seed: int = 0, **overrides) -> ScratchTransformerForCausalLM:
    """A random decoder-only model of ``checkpoint_config``, seeded, in eval mode."""
    torch.manual_seed(seed)
    return ScratchTransformerForCausalLM(checkpoint_config(tokenizer, position_encoding, **overrides)).eval()


def seq2seq_lm(tokenizer, seed: int = 0, **overrides) -> ScratchTransformerForSeq2SeqLM:
    """A random encoder-decoder of ``checkpoint_config`` (sinusoidal, as folio-to-modern), seeded, in eval mode."""
    torch.manual_seed(seed)
    return ScratchTransformerForSeq2SeqLM(checkpoint_config(tokenizer, "sinusoidal", seq2seq=True, **overrides)).eval()


def load_named(root, name: str):
    """(model, tokenizer) of the checkpoint ``name`` under ``root``, through the app's loader."""
    from explorer.models import catalog, registry

    return registry.shipped_model(catalog.discover_checkpoints(root)[name])


def save_checkpoint(model, tokenizer, directory: Path) -> Path:
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
        decoder_start_token_id=model.config.decoder_start_token_id, max_new_tokens=32,
    )
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    copy_model_code(directory)  # the code copies as the shipped checkpoints carry them (python -m training.checkpoints)
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


# A random model of shakespeare-main's size (d_model 256, 8 heads, 6 layers, d_ff 1024): a real configuration
# slow enough (tens of tokens per second here) that a test can watch its stream and stop it mid-way.
SLOW_MODEL = "shipped-size"
SLOW_SIZE = dict(d_model=256, n_heads=8, n_layers=6, d_ff=1024)


def add_slow_checkpoint(root: Path) -> Path:
    """Write the checkpoint SLOW_MODEL under ``root``; return ``root``."""
    tokenizer = train_tokenizer()
    torch.manual_seed(99)
    model = ScratchTransformerForCausalLM(checkpoint_config(tokenizer, "rope", **SLOW_SIZE)).eval()
    save_checkpoint(model, tokenizer, root / SLOW_MODEL)
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


# name -> the share of its training sequences that are random tokens with repeated runs (the shipped presets' split)
TIMELINE_RUNS = {"timeline-repeats": 0.5, "timeline-plain": 0.0}
TIMELINE_LOG_EVERY = 5  # steps per point of the training curve


def build_timeline_runs(root: Path, steps: int = 20, every: int = 10, batch_size: int = 4, context_length: int = 128,
                        seed: int = 0, **config_overrides) -> Path:
    """Write ``root/timeline-repeats`` and ``root/timeline-plain``: byte-level models (2 layers, 4 heads, d_model
    32, RoPE; ``config_overrides`` change them) trained ``steps`` AdamW steps from scratch on SAMPLE_TEXT (the first
    three quarters; the rest validates), the first with half its sequences replaced by random tokens with repeated
    runs. A snapshot at step 0 and every ``every`` steps, measured on the weights as stored
    (``checkpointing.training_run.measure``); the final model beside them in the shipped layout, then timeline.json.
    Returns ``root``."""
    root = Path(root)
    tokenizer = byte_tokenizer()
    ids = torch.tensor(tokenizer(SAMPLE_TEXT * 4).input_ids)
    split = len(ids) * 3 // 4
    data = dict(train_ids=ids[:split], probes=timeline_probes(ids[split:].numpy(), context_length),
                validation=ids[split:][: (len(ids) - split) // context_length * context_length].view(-1, context_length))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny steps: two threads on a busy 2-core machine wait on each other (10x slower)
    torch.set_flush_denormal(True)  # as training does on a CPU: tiny gradients otherwise slow the steps 20x
    try:
        for name, random_share in TIMELINE_RUNS.items():
            torch.manual_seed(seed)
            config = checkpoint_config(tokenizer, "rope", **{"training_context_length": context_length,
                                       "max_position_embeddings": context_length, **config_overrides})
            model = ScratchTransformerForCausalLM(config)
            snapshots, curve = train_recorded(model, root / name, random_share, steps, every, batch_size, seed, **data)
            save_checkpoint(model.eval(), tokenizer, root / name)
            run = {"preset": name, "seed": seed, "data": f"the sample text; {random_share:.0%} of sequences random "
                   "tokens with repeated runs", "batch_size": batch_size, "context_length": context_length}
            write_timeline(root / name, run, data["probes"], snapshots, curve)
    finally:
        torch.set_flush_denormal(False)
        torch.set_num_threads(threads)
    return root


def train_recorded(model, folder: Path, random_share: float, steps: int, every: int, batch_size: int, seed: int,
                   train_ids: torch.Tensor, validation: torch.Tensor, probes: dict) -> tuple[list[dict], list]:
    """Train ``model`` (see ``build_timeline_runs``); -> (the snapshots' entries, the training curve)."""
    context_length = validation.shape[1]
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    draw = torch.Generator().manual_seed(seed)
    snapshots, curve, losses = [], [], []

    def snapshot(step: int, train_loss: float | None):
        relative = save_snapshot(model, folder, step)
        stored = load_snapshot(folder, relative, model.config)
        snapshots.append({"step": step, "tokens": step * batch_size * context_length, "train_loss": train_loss,
                          "validation_loss": round(validation_loss(stored, validation), 6), **measure(stored, probes),
                          "file": relative})

    snapshot(0, None)
    for step in range(1, steps + 1):
        starts = torch.randint(0, len(train_ids) - context_length, (batch_size,), generator=draw).tolist()
        batch = torch.stack([train_ids[s: s + context_length] for s in starts])
        for row in range(batch_size):
            if float(torch.rand((), generator=draw)) < random_share:
                noise = torch.randint(SPECIAL_IDS, model.config.vocab_size, (context_length,), generator=draw)
                batch[row] = repeat_runs(noise, 0.5, draw)
        loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(float(loss.detach()))
        if step % TIMELINE_LOG_EVERY == 0:
            curve.append([step, round(sum(losses[-TIMELINE_LOG_EVERY:]) / TIMELINE_LOG_EVERY, 6)])
        if step % every == 0:
            snapshot(step, curve[-1][1])
    return snapshots, curve


if __name__ == "__main__":
    import sys

    print(build_checkpoints(Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/tiny-checkpoints")))
