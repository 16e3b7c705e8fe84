"""Storing the weights as float16 when that leaves validation bits per character as they were."""

import math
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file
from transformers import DataCollatorForSeq2Seq

from checkpointing.loading import load_checkpoint
from checkpointing.scoring import bits_per_character

from .corpus import read_pairs, read_split
from .data import SpellingPairs

FLOAT16_TOLERANCE = 1e-4  # store float16 weights only if validation bits/char moves by less than this
FLOAT16_CHECK_CHARS = 100_000  # validation characters scored with both weight dtypes


def store_weights_as(output_dir: Path, dtype: str) -> None:
    """Rewrite ``output_dir/model.safetensors`` with its floating-point tensors in ``dtype``.

    config.json keeps ``"dtype": "float32"``, so ``from_pretrained`` upcasts on load and the model
    computes in float32 as trained; only the storage is rounded. float16 keeps 11 significant bits
    (relative rounding error <= 2**-11); weights here lie far inside its range (|w| < 65504).
    """
    path = output_dir / "model.safetensors"
    with safe_open(path, framework="pt") as f:
        metadata = f.metadata()
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    target = getattr(torch, dtype)
    if any(t.is_floating_point() and t.abs().max() > torch.finfo(target).max for t in tensors.values()):
        raise ValueError(f"a weight of {path} does not fit in {dtype}")
    save_file({k: t.to(target) if t.is_floating_point() else t for k, t in tensors.items()}, path, metadata)


def validation_bits_per_char(model, tokenizer, root: Path) -> float:
    text = read_split("validation", root)[:FLOAT16_CHECK_CHARS]
    return bits_per_character(model.eval(), tokenizer, text, model.config.context_length)["bits_per_char"]


def validation_spelling_bits_per_char(model, tokenizer, root: Path, pairs: int = 256) -> float:
    """Bits per modern character of the first ``pairs`` validation pairs, teacher-forced: the sum over the target
    tokens (EOS included) of -log2 p(token), over the characters of the modern lines. The mean loss alone is in
    nats per token, not in the unit of FLOAT16_TOLERANCE."""
    chosen = read_pairs("validation", root)[:pairs]
    batch = DataCollatorForSeq2Seq(tokenizer, model=model, label_pad_token_id=-100)(
        list(SpellingPairs(chosen, tokenizer, model.config.context_length)))
    with torch.inference_mode():
        mean_nats = model.eval()(**batch).loss.item()
    tokens = int((batch["labels"] != -100).sum())
    return mean_nats * tokens / math.log(2) / sum(len(pair["modern"]) for pair in chosen)


def store_float16_if_harmless(output_dir: Path, root: Path) -> tuple[str, float | None]:
    """Store the saved weights as float16 when validation bits/char moves by less than FLOAT16_TOLERANCE
    (a seq2seq model: bits per modern character, teacher-forced); else keep float32.
    Both sides are measured on the checkpoint as loaded from ``output_dir``, never on the model in memory: after a
    bf16 run, accelerate leaves that model's forward wrapped in autocast, so it would compare bf16 with float16.
    Returns (dtype stored, the change measured)."""
    def measure(m, t):
        if m.config.is_encoder_decoder:
            return validation_spelling_bits_per_char(m, t, root)
        return validation_bits_per_char(m, t, root)

    before = measure(*load_checkpoint(output_dir))
    original = (output_dir / "model.safetensors").read_bytes()
    store_weights_as(output_dir, "float16")
    after = measure(*load_checkpoint(output_dir))
    change = abs(after - before)
    if change >= FLOAT16_TOLERANCE:
        (output_dir / "model.safetensors").write_bytes(original)
        return "float32", change
    return "float16", change
