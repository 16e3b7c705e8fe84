"""Evaluate every checkpoint on the held-out test plays and write checkpoints/results.json.

    python -m training.evaluate                     # all checkpoints in checkpoints/
    python -m training.evaluate --max-chars 100000  # a prefix of the test split, for speed

Language models: test loss (nats per token), perplexity, and bits per character, which does not
depend on the tokenizer: total negative log-likelihood in bits / number of characters scored.
Scoring uses windows of L tokens that overlap by one token: window k covers tokens
[k(L-1), k(L-1)+L) and scores its last L-1 tokens, so every token but the very first is scored exactly
once, each with 1..L-1 tokens of context. The characters of the scored tokens come from the tokenizer's
offsets: a window scores the characters between the end of its first token and the end of its last, so
a character split over several byte tokens (any non-ASCII one, e.g. a curly quote) counts once.
Extrapolation repeats this at L = 1x, 2x, 4x, 8x the training context on the first
EXTRAPOLATION_CHARS characters of the test split (all four lengths on the same text, so the curve
compares like with like); a learned table has no positions past its end, so those entries are null.

Seq2seq (folio-to-modern): teacher-forced test loss and perplexity per target token, and the
character error rate (Levenshtein distance / reference length, summed over pairs) of greedy
generations against the modern line, next to the identity baseline (the Folio line copied unchanged).
"""

import argparse
import json
import math
from pathlib import Path

import torch
from rapidfuzz.distance import Levenshtein

from .checkpoints import load_checkpoint
from .corpus import DATA_DIR, read_pairs, read_split
from .paths import checkpoints_dir

CHECKPOINTS = checkpoints_dir()
EXTRAPOLATION_FACTORS = (1, 2, 4, 8)
EXTRAPOLATION_CHARS = 100_000
SLICE_CHARS = 4000  # the fixed slice the tests reproduce
SEQ2SEQ_TEST_PAIRS = 1000  # the first N test pairs (in file order) for CER


def training_context(model) -> int:
    return model.config.context_length


def bits_per_character(model, tokenizer, text: str, context_length: int, batch_size: int = 8,
                       progress=None) -> dict:
    """{"bits_per_char", "loss" (nats/token), "tokens", "chars"} of ``text`` scored in windows of
    ``context_length`` tokens (see the module docstring). ``progress(fraction)`` is called per batch."""
    if context_length < 2:
        raise ValueError(f"context_length must be at least 2, got {context_length}")
    encoding = tokenizer(text, return_offsets_mapping=True, add_special_tokens=False)
    ids = torch.tensor(encoding["input_ids"])
    # end offset of each token; tokens of one multi-byte character share its (start, end), so the
    # characters of tokens i+1..j are ends[j] - ends[i], each character counted once
    ends = [end for _, end in encoding["offset_mapping"]]
    if len(ids) < 2:
        raise ValueError("the text is too short to score: it needs at least two tokens")
    stride = context_length - 1
    starts = list(range(0, len(ids) - 1, stride))
    total_nats, total_tokens, total_chars = 0.0, 0, 0
    with torch.inference_mode():
        for b in range(0, len(starts), batch_size):
            windows = [ids[s:s + context_length] for s in starts[b:b + batch_size]]
            width = max(len(w) for w in windows)
            batch = torch.zeros(len(windows), width, dtype=torch.long)
            mask = torch.zeros(len(windows), width, dtype=torch.long)
            for row, w in enumerate(windows):  # right padding: causal, so real positions are unaffected
                batch[row, :len(w)], mask[row, :len(w)] = w, 1
            logits = model(batch, attention_mask=mask).logits.float()
            nll = torch.nn.functional.cross_entropy(
                logits[:, :-1].flatten(0, 1), batch[:, 1:].flatten(), reduction="none"
            ).view(len(windows), width - 1)
            scored = mask[:, 1:].bool()
            total_nats += nll[scored].sum().item()
            total_tokens += int(scored.sum())
            for row, s in enumerate(starts[b:b + batch_size]):
                total_chars += ends[s + len(windows[row]) - 1] - ends[s]
            if progress is not None:
                progress(min(1.0, (b + batch_size) / len(starts)))
    return {
        "bits_per_char": total_nats / math.log(2) / total_chars,
        "loss": total_nats / total_tokens,
        "tokens": total_tokens,
        "chars": total_chars,
    }


def evaluate_causal_lm(model, tokenizer, text: str) -> dict:
    context = training_context(model)
    main = bits_per_character(model, tokenizer, text, context)
    extrapolation = {}
    for factor in EXTRAPOLATION_FACTORS:
        length = factor * context
        if model.config.position_limit is not None and length > model.config.position_limit:
            extrapolation[str(length)] = None
        else:
            sample = text[:EXTRAPOLATION_CHARS]
            extrapolation[str(length)] = bits_per_character(model, tokenizer, sample, length)["bits_per_char"]
    slice_result = bits_per_character(model, tokenizer, text[:SLICE_CHARS], context)
    return {
        "test_loss": main["loss"],
        "perplexity": math.exp(main["loss"]),
        "bits_per_char": main["bits_per_char"],
        "training_context": context,
        "position_encoding": model.config.position_encoding,
        "tokens_scored": main["tokens"],
        "chars_scored": main["chars"],
        "extrapolation_chars": min(len(text), EXTRAPOLATION_CHARS),
        "extrapolation": extrapolation,
        "slice": {"chars": SLICE_CHARS, "bits_per_char": slice_result["bits_per_char"], "loss": slice_result["loss"]},
    }


def character_error_rate(hypotheses: list[str], references: list[str]) -> float:
    """Sum of Levenshtein distances / sum of reference lengths."""
    return sum(Levenshtein.distance(h, r) for h, r in zip(hypotheses, references)) / sum(len(r) for r in references)


def modernize(model, tokenizer, lines: list[str], batch_size: int = 64, max_new_tokens: int = 96) -> list[str]:
    """Greedy rewriting of Folio lines into modern spelling."""
    outputs = []
    with torch.inference_mode():
        for b in range(0, len(lines), batch_size):
            inputs = tokenizer(lines[b:b + batch_size], return_tensors="pt", padding=True, truncation=True,
                               max_length=training_context(model))
            generated = model.generate(**inputs, do_sample=False, num_beams=1, max_new_tokens=max_new_tokens)
            outputs += tokenizer.batch_decode(generated, skip_special_tokens=True)
    return outputs


def evaluate_seq2seq(model, tokenizer, pairs: list[dict]) -> dict:
    pairs = pairs[:SEQ2SEQ_TEST_PAIRS]
    folio, modern = [p["folio"] for p in pairs], [p["modern"] for p in pairs]
    nats, tokens = 0.0, 0
    with torch.inference_mode():
        for b in range(0, len(pairs), 64):
            inputs = tokenizer(folio[b:b + 64], return_tensors="pt", padding=True)
            targets = tokenizer(modern[b:b + 64], padding=True, return_tensors="pt")
            labels = torch.cat([targets.input_ids, torch.full((len(targets.input_ids), 1), tokenizer.pad_token_id)], 1)
            lengths = targets.attention_mask.sum(1)
            labels[torch.arange(len(labels)), lengths] = tokenizer.eos_token_id
            labels[labels == tokenizer.pad_token_id] = -100
            loss = model(**inputs, labels=labels).loss.item()
            n = int((labels != -100).sum())
            nats, tokens = nats + loss * n, tokens + n
    predictions = modernize(model, tokenizer, folio)
    return {
        "test_loss": nats / tokens,
        "perplexity": math.exp(nats / tokens),
        "cer": character_error_rate(predictions, modern),
        "identity_cer": character_error_rate(folio, modern),
        "pairs": len(pairs),
        "examples": [{"folio": f, "model": p, "modern": m} for f, p, m in list(zip(folio, predictions, modern))[:5]],
    }


def evaluate_all(root: Path = CHECKPOINTS, data_dir: Path = DATA_DIR, max_chars: int | None = None,
                 only: list[str] | None = None) -> dict:
    """Evaluate the checkpoints under ``root`` (or just ``only``, merged into the existing results.json)."""
    text = read_split("test", data_dir)[:max_chars]
    results_file = root / "results.json"
    models = json.loads(results_file.read_text())["models"] if only and results_file.exists() else {}
    for config_file in sorted(root.glob("*/config.json")):
        name = config_file.parent.name
        if only and name not in only:
            continue
        model, tokenizer = load_checkpoint(config_file.parent)
        if model.config.is_encoder_decoder:
            models[name] = evaluate_seq2seq(model, tokenizer, read_pairs("test", data_dir))
        else:
            models[name] = evaluate_causal_lm(model, tokenizer, text)
        print(name, json.dumps({k: v for k, v in models[name].items() if k != "examples"}))
    causal = {n: r for n, r in models.items() if "bits_per_char" in r}
    results = {
        "main_model": min(causal, key=lambda n: causal[n]["bits_per_char"]) if causal else None,
        "test_chars": len(text),
        "method": __doc__.strip().split("\n\n", 2)[-1],
        "models": models,
    }
    results_file.write_text(json.dumps(results, indent=1) + "\n")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoints", type=Path, default=CHECKPOINTS)
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR)
    parser.add_argument("--max-chars", type=int, help="evaluate on this many characters of the test split")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="re-evaluate these checkpoints only (merged)")
    parser.add_argument("--threads", type=int)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    evaluate_all(args.checkpoints, args.data_dir, args.max_chars, args.only)


if __name__ == "__main__":
    main()
