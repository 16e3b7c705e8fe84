"""Evaluate the checkpoints on the held-out test plays and write checkpoints/results.json.

    python -m training.evaluate                         # every checkpoint (and the experiment's other seeds)
    python -m training.evaluate --only folio-to-modern  # re-evaluate some, merged into results.json

Language models: test loss (nats per token), perplexity, and bits per character, the text read in windows of
L tokens as ``checkpointing.scoring`` describes. Extrapolation repeats this on the whole test split at L = 1x, 2x,
4x and 8x the training context, and records the mean loss at each position of the 8x windows (the per-position
curve), unrounded, over every window and over the first CURVE_SLICE_WINDOWS alone (the slice the tests re-measure);
a learned table has no positions past its end, so its entries past 1x are null and its curve stops at L.

Copying from the context (``in_context``), for every language model: the test text cut into REPEATED_PASSAGES
passages of REPEATED_PASSAGE_TOKENS tokens (half the context where that is less), evenly spaced, each read twice;
the mean loss on the first copy and on the second, and their ratio; and the best head's standard induction and
previous-token scores (``checkpointing.in_context``).

Seq2seq (folio-to-modern), on the first SEQ2SEQ_TEST_PAIRS aligned test pairs in file order:
teacher-forced test loss per target token; for greedy decoding and for beam search: the character
error rate (Levenshtein distance / reference length, summed over pairs), the same after lowercasing
and removing punctuation on both sides, and the share of outputs within one word of the reference's
word count; next to the identity baseline (the Folio line copied unchanged).
"""

import argparse
import json
import math
import re
import statistics
from pathlib import Path

import torch
from rapidfuzz.distance import Levenshtein

from checkpointing.in_context import THRESHOLD, evenly_spaced_passages, head_scores, repeated_passage_losses
from checkpointing.loading import load_checkpoint
from checkpointing.paths import checkpoints_dir, data_dir
from checkpointing.scoring import bits_per_character, extrapolation_lengths, window_losses

from .corpus import read_pairs, read_split
from .presets import ENCODING_SEEDS

SLICE_CHARS = 4000  # the fixed slice the tests reproduce
CURVE_SLICE_WINDOWS = 4  # the per-position curve's slice the tests reproduce: its first windows
REPEATED_PASSAGES = 32  # test passages each read twice (the in-context figures)
REPEATED_PASSAGE_TOKENS = 100  # their length in tokens, at most half the context
SEQ2SEQ_TEST_PAIRS = 1000  # the first N test pairs (in file order)
SEQ2SEQ_SLICE_PAIRS = 100  # the fixed slice of those the tests reproduce
BEAMS = 4
SHOWCASE_LINES = (  # First Folio spelling; shown in results.json and the model card
    "I come to bury Caesar, not to praise him:",
    "Shall I compare thee to a Summers day? Thou art more louely and more temperate:",
    "Stand & vnfold your selfe",
    "Is this a Dagger, which I see before me, The Handle toward my hand?",
)

# Published perplexities against evaluation length, for the ratios next to ours (see results.json "published").
PUBLISHED = {
    "press2022_alibi": {
        "source": "Press, Smith & Lewis 2022, Train Short, Test Long (ALiBi)",
        "setup": "WikiText-103, 16 layers, d_model 1024, trained at L = 512, non-overlapping evaluation",
        "training_length": 512,
        "perplexity": {"sinusoidal": {512: 20.05, 1012: 43.54, 2512: 132.41},
                       "rope": {512: 20.07, 1012: 21.37, 2512: 31.58},
                       "alibi": {512: 19.73, 1012: 18.73, 2512: 18.41}},
        "note": "learned position tables cannot run past L",
    },
    "kazemnejad2023_nope": {
        "source": "Kazemnejad et al. 2023, The Impact of Positional Encoding on Length Generalization in Transformers",
        "setup": "1.3B-parameter code model, trained at context 1024",
        "training_length": 1024,
        "perplexity": {"none": {1024: 3.75, 1400: 3.34, 1800: 39.4},
                       "alibi": {1024: 3.82, 1400: 3.62, 1800: 18.7},
                       "rope": {1024: 3.66, 1400: 147.0, 1800: 722.0}},
    },
}


# ---------------------------------------------------------------------------------------------- metrics


def position_losses(window: dict) -> list[float]:
    """Mean loss at each position p = 1..L-1 of the windows (p tokens of context): the per-position curve, unrounded."""
    counts = window["scored"].sum(0).clamp(min=1)
    return [float(v) for v in window["nll"].sum(0) / counts]


def position_curve(model, tokenizer, text: str, window: int, window_losses_of_text: dict | None = None) -> dict:
    """results.json's ``position_loss``: the per-position curve over every window of ``text`` (what the app draws),
    and the same curve over the first ``CURVE_SLICE_WINDOWS`` windows alone, which a test re-measures in seconds."""
    full = window_losses(model, tokenizer, text, window) if window_losses_of_text is None else window_losses_of_text
    first = window_losses(model, tokenizer, text, window, max_windows=CURVE_SLICE_WINDOWS)
    return {"window": window, "loss": position_losses(full),
            "slice": {"windows": CURVE_SLICE_WINDOWS, "loss": position_losses(first)}}


def character_error_rate(hypotheses: list[str], references: list[str]) -> float:
    """Sum of Levenshtein distances / sum of reference lengths."""
    return sum(Levenshtein.distance(h, r) for h, r in zip(hypotheses, references)) / sum(len(r) for r in references)


def plain_words(text: str) -> str:
    """Lowercased, punctuation removed, spaces collapsed: what is left is the spelling of the words."""
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).replace("_", " ").split())


def insensitive_cer(hypotheses: list[str], references: list[str]) -> float:
    """The character error rate after lowercasing and removing punctuation on both sides."""
    return character_error_rate([plain_words(h) for h in hypotheses], [plain_words(r) for r in references])


def within_one_word(hypotheses: list[str], references: list[str]) -> float:
    """Share of outputs whose word count is within one of the reference's (a dropped or added word shows here)."""
    return sum(abs(len(h.split()) - len(r.split())) <= 1 for h, r in zip(hypotheses, references)) / len(references)


def spelling_scores(hypotheses: list[str], references: list[str]) -> dict:
    return {"cer": character_error_rate(hypotheses, references), "insensitive_cer": insensitive_cer(hypotheses, references),
            "within_one_word": within_one_word(hypotheses, references)}


# ---------------------------------------------------------------------------------------------- models


def best_head(scores) -> dict:
    """The highest score of a (layers, heads) array and where it is."""
    layer, head = divmod(int(scores.argmax()), scores.shape[1])
    return {"score": float(scores[layer, head]), "layer": layer, "head": head}


def in_context_scores(model, tokenizer, text: str) -> dict:
    """Whether a model copies from its context: the repeated test passages' losses, first and second copy, and the
    best induction and previous-token heads (module docstring)."""
    length = min(REPEATED_PASSAGE_TOKENS, model.config.context_length // 2)
    ids = tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]
    first, second = repeated_passage_losses(model, evenly_spaced_passages(ids, length, REPEATED_PASSAGES))
    scores = head_scores(model)
    return {"passages": REPEATED_PASSAGES, "passage_tokens": length, "first_copy_loss": first,
            "second_copy_loss": second, "repeated_passage_ratio": second / first,
            "induction": best_head(scores["induction"]), "previous_token": best_head(scores["previous token"]),
            "threshold": THRESHOLD}


def evaluate_causal_lm(model, tokenizer, text: str) -> dict:
    """Test bits/char at the training context, and at 1x..8x of it with the per-position curve at 8x."""
    context = model.config.context_length
    limit = model.config.position_limit
    extrapolation, extrapolation_loss, curve, main = {}, {}, None, None
    lengths = extrapolation_lengths(model)
    for length in lengths:
        if limit is not None and length > limit:
            extrapolation[str(length)] = extrapolation_loss[str(length)] = None
            continue
        window = window_losses(model, tokenizer, text, length)
        nats, tokens = float(window["nll"].sum()), int(window["scored"].sum())
        extrapolation[str(length)] = nats / math.log(2) / window["chars"]
        extrapolation_loss[str(length)] = nats / tokens
        if length == context:
            main = {"loss": nats / tokens, "bits_per_char": extrapolation[str(length)], "tokens": tokens, "chars": window["chars"]}
        curve = position_curve(model, tokenizer, text, length, window)  # the longest window the model can read
    slice_result = bits_per_character(model, tokenizer, text[:SLICE_CHARS], context)
    return {
        "test_loss": main["loss"],
        "perplexity": math.exp(main["loss"]),
        "bits_per_char": main["bits_per_char"],
        "training_context": context,
        "position_encoding": model.config.position_encoding,
        "tokens_scored": main["tokens"],
        "chars_scored": main["chars"],
        "extrapolation": extrapolation,
        "extrapolation_loss": extrapolation_loss,
        "position_loss": curve,
        "slice": {"chars": SLICE_CHARS, "bits_per_char": slice_result["bits_per_char"], "loss": slice_result["loss"]},
        "in_context": in_context_scores(model, tokenizer, text),
    }


def modernize(model, tokenizer, lines: list[str], batch_size: int = 64, num_beams: int = 1) -> list[str]:
    """Folio lines rewritten into modern spelling: greedy (num_beams=1) or beam search, no other processing."""
    outputs = []
    context = model.config.context_length
    with torch.inference_mode():
        for b in range(0, len(lines), batch_size):
            inputs = tokenizer(lines[b:b + batch_size], return_tensors="pt", padding=True, truncation=True,
                               max_length=context)
            generated = model.generate(**inputs, do_sample=False, num_beams=num_beams, max_new_tokens=context)
            outputs += tokenizer.batch_decode(generated, skip_special_tokens=True)
    return outputs


def teacher_forced_loss(model, tokenizer, pairs: list[dict], batch_size: int = 64) -> float:
    """Mean loss per target token (EOS included) with the reference fed to the decoder."""
    nats, tokens = 0.0, 0
    with torch.inference_mode():
        for b in range(0, len(pairs), batch_size):
            chunk = pairs[b:b + batch_size]
            inputs = tokenizer([p["folio"] for p in chunk], return_tensors="pt", padding=True)
            targets = tokenizer([p["modern"] for p in chunk], padding=True, return_tensors="pt")
            labels = torch.cat([targets.input_ids, torch.full((len(chunk), 1), tokenizer.pad_token_id)], 1)
            labels[torch.arange(len(chunk)), targets.attention_mask.sum(1)] = tokenizer.eos_token_id
            labels[labels == tokenizer.pad_token_id] = -100
            n = int((labels != -100).sum())
            nats += model(**inputs, labels=labels).loss.item() * n
            tokens += n
    return nats / tokens


def evaluate_seq2seq(model, tokenizer, pairs: list[dict]) -> dict:
    pairs = pairs[:SEQ2SEQ_TEST_PAIRS]
    folio, modern = [p["folio"] for p in pairs], [p["modern"] for p in pairs]
    greedy = modernize(model, tokenizer, folio)
    beam = modernize(model, tokenizer, folio, num_beams=BEAMS)
    loss = teacher_forced_loss(model, tokenizer, pairs)
    slice_pairs = SEQ2SEQ_SLICE_PAIRS
    return {
        "test_loss": loss,
        "perplexity": math.exp(loss),
        "pairs": len(pairs),
        "greedy": spelling_scores(greedy, modern),
        f"beam{BEAMS}": spelling_scores(beam, modern),
        "identity": spelling_scores(folio, modern),
        "cer": character_error_rate(greedy, modern),  # greedy, as the app decodes by default
        "identity_cer": character_error_rate(folio, modern),
        "slice": {"pairs": slice_pairs, "greedy_cer": character_error_rate(greedy[:slice_pairs], modern[:slice_pairs])},
        "examples": [{"folio": f, "model": g, "modern": m} for f, g, m in list(zip(folio, greedy, modern))[:5]],
        "showcase": [{"folio": f, "model": g} for f, g in zip(SHOWCASE_LINES, modernize(model, tokenizer, list(SHOWCASE_LINES)))],
    }


# ---------------------------------------------------------------------------------------------- the experiment


def seed_folder(encoding: str, seed: int, root: Path, extra: Path) -> Path:
    """Where the experiment model of one encoding and seed lives: the shipped checkpoint for the first seed,
    ``<extra>/shakespeare-<encoding>-seed<seed>`` for the others (not shipped: the repository stays small)."""
    name = f"shakespeare-{encoding}"
    return root / name if seed == ENCODING_SEEDS[0] else extra / f"{name}-seed{seed}"


def summarize_seeds(runs: dict[int, dict]) -> dict:
    """Mean and spread (max - min) over seeds of bits/char and of each extrapolation length."""
    def stats(values):
        values = [v for v in values if v is not None]
        if not values:
            return None
        return {"mean": statistics.fmean(values), "spread": max(values) - min(values), "n": len(values)}

    lengths = next(iter(runs.values()))["extrapolation"].keys()
    return {
        "bits_per_char": stats([r["bits_per_char"] for r in runs.values()]),
        "extrapolation": {n: stats([r["extrapolation"][n] for r in runs.values()]) for n in lengths},
        "perplexity_ratio": {n: stats([r["perplexity_ratio"][n] for r in runs.values()]) for n in lengths},
    }


def perplexity_ratios(result: dict) -> dict:
    """Perplexity at kL / perplexity at L, from the per-token losses: exp(loss(kL) - loss(L))."""
    losses = result["extrapolation_loss"]
    base = losses[str(result["training_context"])]
    return {n: None if loss is None else math.exp(loss - base) for n, loss in losses.items()}


def evaluate_experiment(models: dict, text: str, root: Path, extra: Path, recorded: dict | None = None) -> dict:
    """Every seed of every encoding model: per-seed results, then mean and spread. A seed whose model is not here
    (the other seeds are not shipped) keeps its figures from ``recorded``, the experiment results.json held."""
    experiment = {"seeds": list(ENCODING_SEEDS), "encodings": {}}
    for encoding in sorted({m["position_encoding"] for n, m in models.items() if n.startswith("shakespeare-")
                            and n != "shakespeare-main" and "position_encoding" in m}):
        runs = {}
        for seed in ENCODING_SEEDS:
            folder = seed_folder(encoding, seed, root, extra)
            if seed == ENCODING_SEEDS[0]:
                result = models[folder.name]
            elif (folder / "config.json").exists():
                result = evaluate_causal_lm(*load_checkpoint(folder), text)
            elif str(seed) in ((recorded or {}).get("encodings", {}).get(encoding, {}).get("runs", {})):
                runs[seed] = recorded["encodings"][encoding]["runs"][str(seed)]
                print(f"  {encoding} seed {seed}: not here ({folder}); its recorded figures kept", flush=True)
                continue
            else:
                continue
            runs[seed] = {k: result[k] for k in ("bits_per_char", "test_loss", "extrapolation", "extrapolation_loss",
                                                 "training_context")}
            runs[seed]["perplexity_ratio"] = perplexity_ratios(result)
            summary = folder / "training_summary.json"
            if summary.exists():  # how long it trained, and whether validation loss had flattened
                trained = json.loads(summary.read_text())
                runs[seed].update({k: trained.get(k) for k in ("steps", "passes_over_train_split", "last_fifth_improvement")})
            print(f"  {encoding} seed {seed}: {runs[seed]['bits_per_char']:.4f} bits/char", flush=True)
        experiment["encodings"][encoding] = {"runs": runs, **summarize_seeds(runs)}
    return experiment


def evaluate_all(root: Path | None = None, data: Path | None = None, only: list[str] | None = None,
                 extra: Path | None = None) -> dict:
    """Evaluate the checkpoints under ``root`` (or just ``only``, merged into the existing results.json)."""
    root = root or checkpoints_dir()
    data = data or data_dir()
    extra = extra or data / "experiment"
    text = read_split("test", data)
    results_file = root / "results.json"
    previous = json.loads(results_file.read_text()) if results_file.exists() else {}
    models = previous.get("models", {}) if only else {}
    for config_file in sorted(root.glob("*/config.json")):
        name = config_file.parent.name
        if only and name not in only:
            continue
        model, tokenizer = load_checkpoint(config_file.parent)
        if model.config.is_encoder_decoder:
            models[name] = evaluate_seq2seq(model, tokenizer, read_pairs("test", data))
        else:
            models[name] = evaluate_causal_lm(model, tokenizer, text)
        print(name, json.dumps({k: v for k, v in models[name].items()
                                if k not in ("examples", "showcase", "position_loss")}), flush=True)
    causal = {n: r for n, r in models.items() if "bits_per_char" in r}
    experiment = previous.get("experiment")
    if not only or any(n.startswith("shakespeare-") and n != "shakespeare-main" for n in only):
        experiment = evaluate_experiment(models, text, root, extra, previous.get("experiment"))
    results = {
        "main_model": min(causal, key=lambda n: causal[n]["bits_per_char"]) if causal else None,
        "test_chars": len(text),
        "method": __doc__.strip().split("\n\n", 2)[-1],
        "models": models,
        "experiment": experiment,
        "published": PUBLISHED,
    }
    results_file.write_text(json.dumps(results, indent=1) + "\n")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoints", type=Path, help="checkpoint root (default: the repository's checkpoints/)")
    parser.add_argument("--data-dir", type=Path, help="corpus (default: the repository's data/)")
    parser.add_argument("--experiment-dir", type=Path, help="the experiment's other seeds (default: data/experiment)")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="re-evaluate these checkpoints only (merged)")
    parser.add_argument("--threads", type=int)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    evaluate_all(args.checkpoints, args.data_dir, args.only, args.experiment_dir)


if __name__ == "__main__":
    main()
