"""Train a ScratchTransformer on the Shakespeare corpus with the transformers ``Trainer``.

    python -m training.train --preset shakespeare-rope --output-dir checkpoints/shakespeare-rope
    python -m training.train --preset tiny --output-dir /tmp/tiny --max-steps 20
    torchrun --nproc_per_node=2 -m training.train --preset tiny --output-dir /tmp/tiny-ddp --max-steps 4

Causal LMs read contiguous blocks of ``context_length`` tokens of the train split; the seq2seq preset
reads aligned (First Folio line -> modern line) pairs. Validation runs every ``eval_steps``; Trainer
state goes to ``--work-dir`` (default data/runs/<name>) so ``--resume`` continues from its last
checkpoint, while ``--output-dir`` receives only the final model in Hugging Face layout (weights,
config, generation config, tokenizer, training_summary.json). Seeds are fixed; on CPU denormal floats
are flushed to zero (20x faster backward passes, DESIGN §6). Under torchrun on CPU the gloo backend is
used and rank 0 writes the one final checkpoint.
"""

import argparse
import hashlib
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
from transformers import DataCollatorForSeq2Seq, GenerationConfig, Trainer, TrainingArguments, set_seed

from modeling import ScratchTransformerConfig
from .corpus import DATA_DIR, read_pairs, read_split
from modeling import ScratchTransformerForCausalLM, ScratchTransformerForSeq2SeqLM
from .tokenization import load_tokenizer, train_tokenizer

# The five encoding models differ ONLY in position_encoding: same size, data, steps, seed.
ENCODING_EXPERIMENT = dict(
    model=dict(d_model=192, n_heads=6, n_layers=4, d_ff=768, dropout=0.0, norm_first=True, activation="gelu"),
    train=dict(context_length=128, batch_size=32, max_steps=300, learning_rate=2e-3, warmup_steps=30),
)
PRESETS = {
    **{f"shakespeare-{pe}": dict(model=dict(ENCODING_EXPERIMENT["model"], position_encoding=pe),
                                 train=dict(ENCODING_EXPERIMENT["train"]))
       for pe in ("sinusoidal", "learned", "rope", "alibi", "none")},
    # The main text-generation model: larger, longer context, and about six passes over the train split,
    # so it uses dropout and keeps the checkpoint with the lowest validation loss (keep_best). Its weights
    # ship as float16 (half the bytes; test bits/char moves by 2e-6), loaded back as float32.
    "shakespeare-main": dict(
        model=dict(d_model=256, n_heads=8, n_layers=6, d_ff=1024, dropout=0.1, norm_first=True, activation="gelu",
                   position_encoding="rope"),
        train=dict(context_length=256, batch_size=16, max_steps=2400, learning_rate=1.5e-3, warmup_steps=100,
                   keep_best=True, weights_dtype="float16"),
    ),
    # Small and many steps: learning to copy through cross-attention takes steps more than width
    # (d_model=192, 3+3 layers, 400 steps still ignored its source: CER 0.72 against 0.07 for copying).
    "folio-to-modern": dict(
        model=dict(d_model=128, n_heads=4, n_layers=2, n_encoder_layers=2, d_ff=512, dropout=0.0,
                   position_encoding="sinusoidal", is_encoder_decoder=True),
        train=dict(context_length=64, batch_size=64, max_steps=2000, learning_rate=3e-3, warmup_steps=100),
    ),
    "tiny": dict(
        model=dict(d_model=32, n_heads=2, n_layers=2, d_ff=64, dropout=0.0, position_encoding="rope"),
        train=dict(context_length=32, batch_size=8, max_steps=30, learning_rate=3e-3, warmup_steps=0),
    ),
}


def store_weights_as(output_dir: Path, dtype: str) -> None:
    """Rewrite ``output_dir/model.safetensors`` with its floating-point tensors in ``dtype``.

    config.json keeps ``"dtype": "float32"``, so ``from_pretrained`` upcasts on load and the model
    computes in float32 as trained; only the storage is rounded. float16 keeps 11 significant bits
    (relative rounding error <= 2**-11); weights here lie far inside its range (|w| < 65504).
    """
    from safetensors import safe_open
    from safetensors.torch import save_file

    path = output_dir / "model.safetensors"
    with safe_open(path, framework="pt") as f:
        metadata = f.metadata()
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    target = getattr(torch, dtype)
    if any(t.is_floating_point() and t.abs().max() > torch.finfo(target).max for t in tensors.values()):
        raise ValueError(f"a weight of {path} does not fit in {dtype}")
    save_file({k: t.to(target) if t.is_floating_point() else t for k, t in tensors.items()}, path, metadata)


class TokenBlocks(torch.utils.data.Dataset):
    """Non-overlapping blocks of ``length`` tokens; each block is its own label sequence."""

    def __init__(self, ids, length: int, limit: int | None = None):
        n = len(ids) // length
        self.blocks = torch.as_tensor(ids[: n * length], dtype=torch.long).view(n, length)[:limit]

    def __len__(self) -> int:
        return len(self.blocks)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.blocks[i], "labels": self.blocks[i]}


def token_ids(split: str, tokenizer, data_dir: Path = DATA_DIR) -> np.ndarray:
    """The token ids of a corpus split, computed once and cached in data/tokens/ under a key of the text
    and the tokenizer (so a changed corpus or tokenizer never reads stale ids). The cache file is
    written atomically: under torchrun every rank may compute it at the same time."""
    text = read_split(split, data_dir)
    key = hashlib.sha256(text.encode() + tokenizer.backend_tokenizer.to_str().encode()).hexdigest()[:16]
    cache = data_dir / "tokens" / f"{split}-{key}.npy"
    if cache.exists():
        return np.load(cache)
    ids = np.asarray(tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"], dtype=np.int32)
    cache.parent.mkdir(parents=True, exist_ok=True)
    partial = cache.with_name(f"{cache.stem}.{os.getpid()}.tmp.npy")
    np.save(partial, ids)
    os.replace(partial, cache)
    return ids


class SpellingPairs(torch.utils.data.Dataset):
    """(First Folio line -> modern line) pairs, each side cut to ``length`` tokens, target ends with EOS."""

    def __init__(self, pairs: list[dict], tokenizer, length: int, limit: int | None = None):
        pairs = pairs[:limit]
        sources = tokenizer([p["folio"] for p in pairs], truncation=True, max_length=length)["input_ids"]
        targets = tokenizer([p["modern"] for p in pairs], truncation=True, max_length=length - 1)["input_ids"]
        self.items = [{"input_ids": s, "labels": t + [tokenizer.eos_token_id]} for s, t in zip(sources, targets)]

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> dict:
        return self.items[i]


def build_model(model_kwargs: dict, tokenizer, context_length: int):
    config = ScratchTransformerConfig(
        vocab_size=len(tokenizer), max_position_embeddings=max(context_length, 64),
        training_context_length=context_length, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
        decoder_start_token_id=tokenizer.bos_token_id, **model_kwargs,
    )
    model_class = ScratchTransformerForSeq2SeqLM if config.is_encoder_decoder else ScratchTransformerForCausalLM
    return model_class(config)


def generation_config_for(model) -> GenerationConfig:
    c = model.config
    common = dict(bos_token_id=c.bos_token_id, eos_token_id=c.eos_token_id, pad_token_id=c.pad_token_id)
    if c.is_encoder_decoder:
        return GenerationConfig(decoder_start_token_id=c.decoder_start_token_id, max_new_tokens=96, do_sample=False,
                                **common)
    return GenerationConfig(max_new_tokens=200, do_sample=True, temperature=0.8, top_p=0.95, **common)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", choices=sorted(PRESETS), required=True)
    parser.add_argument("--config", type=json.loads, default={}, help="JSON object overriding model config fields")
    parser.add_argument("--output-dir", type=Path, required=True)
    parser.add_argument("--work-dir", type=Path, help="Trainer checkpoints and logs (default data/runs/<name>)")
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR)
    parser.add_argument("--max-steps", type=int)
    parser.add_argument("--context-length", type=int)
    parser.add_argument("--batch-size", type=int)
    parser.add_argument("--learning-rate", type=float)
    parser.add_argument("--eval-steps", type=int, default=50)
    parser.add_argument("--eval-blocks", type=int, default=64, help="validation examples per evaluation")
    parser.add_argument("--train-limit", type=int, help="use only the first N training examples (tests)")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--threads", type=int, help="torch CPU threads per process")
    parser.add_argument("--resume", action="store_true", help="continue from the last checkpoint in --work-dir")
    args = parser.parse_args(argv)

    preset = PRESETS[args.preset]
    train_cfg = dict(preset["train"])
    for key in ("max_steps", "context_length", "batch_size", "learning_rate"):
        if getattr(args, key) is not None:
            train_cfg[key] = getattr(args, key)
    model_kwargs = {**preset["model"], **args.config}
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)
    set_seed(args.seed)

    tokenizer = train_tokenizer(args.data_dir)  # reuses data/tokenizer when present
    length = train_cfg["context_length"]
    model = build_model(model_kwargs, tokenizer, length)
    if model.config.is_encoder_decoder:
        train_set = SpellingPairs(read_pairs("train", args.data_dir), tokenizer, length, args.train_limit)
        eval_set = SpellingPairs(read_pairs("validation", args.data_dir), tokenizer, length, args.eval_blocks)
        collator = DataCollatorForSeq2Seq(tokenizer, model=model, label_pad_token_id=-100)
    else:
        train_set = TokenBlocks(token_ids("train", tokenizer, args.data_dir), length, args.train_limit)
        eval_set = TokenBlocks(token_ids("validation", tokenizer, args.data_dir), length, args.eval_blocks)
        collator = None

    work_dir = args.work_dir or args.data_dir / "runs" / args.output_dir.name
    world = int(os.environ.get("WORLD_SIZE", "1"))
    training_args = TrainingArguments(
        output_dir=str(work_dir),
        max_steps=train_cfg["max_steps"],
        per_device_train_batch_size=max(1, train_cfg["batch_size"] // world),
        per_device_eval_batch_size=max(1, train_cfg["batch_size"] // world),
        learning_rate=train_cfg["learning_rate"],
        warmup_steps=train_cfg["warmup_steps"],
        lr_scheduler_type="cosine",
        weight_decay=0.1,
        adam_beta2=0.98,
        max_grad_norm=1.0,
        eval_strategy="steps",
        eval_steps=args.eval_steps,
        save_strategy="steps",
        save_steps=args.eval_steps,
        save_total_limit=1,
        load_best_model_at_end=train_cfg.get("keep_best", False),
        metric_for_best_model="eval_loss",
        greater_is_better=False,
        logging_steps=10,
        seed=args.seed,
        data_seed=args.seed,
        report_to="none",
        use_cpu=not torch.cuda.is_available(),
        ddp_backend="gloo" if world > 1 and not torch.cuda.is_available() else None,
        dataloader_num_workers=0,
        disable_tqdm=False,
    )
    trainer = Trainer(model=model, args=training_args, train_dataset=train_set, eval_dataset=eval_set,
                      data_collator=collator)
    resume = args.resume and any(work_dir.glob("checkpoint-*"))
    start = time.time()
    result = trainer.train(resume_from_checkpoint=True if resume else None)
    metrics = trainer.evaluate()
    elapsed = time.time() - start
    rank = int(os.environ.get("RANK", "0"))
    print(f"rank {rank} of {world}: {result.global_step} steps, {training_args.per_device_train_batch_size} "
          f"examples per step on this process", flush=True)

    if trainer.is_world_process_zero():
        model.generation_config = generation_config_for(model)
        model.config.use_cache = True  # the Trainer turns the KV cache off while training
        trainer.save_model(str(args.output_dir))
        tokenizer.save_pretrained(args.output_dir)
        if train_cfg.get("weights_dtype"):
            store_weights_as(args.output_dir, train_cfg["weights_dtype"])
        (args.output_dir / "training_args.bin").unlink(missing_ok=True)  # a pickle: not shipped
        tokens_per_step = train_cfg["batch_size"] * (length if not model.config.is_encoder_decoder else 1)
        summary = {
            "preset": args.preset,
            "parameters": f"{sum(p.numel() for p in model.parameters()) / 1e6:.2f}M",
            "steps": result.global_step,
            "batch_size": train_cfg["batch_size"],
            "context_length": length,
            "training_examples_seen": result.global_step * train_cfg["batch_size"],
            "tokens_seen": result.global_step * tokens_per_step if not model.config.is_encoder_decoder else None,
            "learning_rate": train_cfg["learning_rate"],
            "schedule": f"{train_cfg['warmup_steps']} warm-up steps, cosine decay, AdamW (weight decay 0.1)",
            "seed": args.seed,
            "processes": world,
            "wall_clock_seconds": round(elapsed),
            "hardware": "CPU" if not torch.cuda.is_available() else torch.cuda.get_device_name(),
            "final_train_loss": round(result.training_loss, 4),
            "final_validation_loss": round(metrics["eval_loss"], 4),
            "weights_stored_as": train_cfg.get("weights_dtype"),
            "kept_checkpoint": (Path(trainer.state.best_model_checkpoint).name if train_cfg.get("keep_best")
                                and trainer.state.best_model_checkpoint else None),
            "command": "python -m training.train " + " ".join(sys.argv[1:] if argv is None else argv),
        }
        summary = {k: v for k, v in summary.items() if v is not None}
        (args.output_dir / "training_summary.json").write_text(json.dumps(summary, indent=1) + "\n")
        print(json.dumps(summary, indent=1))
        print(f"validation perplexity {math.exp(metrics['eval_loss']):.2f}")


if __name__ == "__main__":
    main()
