"""Train a ScratchTransformer on the Shakespeare corpus with the transformers ``Trainer``.

    python -m training.train --preset shakespeare-rope --output-dir checkpoints/shakespeare-rope
    python -m training.train --preset tiny --output-dir /tmp/tiny --max-steps 20
    torchrun --nproc_per_node=2 -m training.train --preset tiny --output-dir /tmp/tiny-ddp --max-steps 4

Presets (``training.presets``) say what to build and how long to train. Causal LMs read contiguous
blocks of ``context_length`` tokens of the train split; the seq2seq preset reads aligned (First Folio
line -> modern line) pairs. The same code runs on a CPU, on CUDA (bf16 autocast where the preset asks
for it) and under torchrun across processes (gloo on CPU, NCCL on CUDA; rank 0 writes the checkpoint).

A preset with ``starts_from`` continues training the model another preset made: ``--init-from`` names that
run's ``--output-dir``, and this run's summary records the earlier one's under ``started_from``. A preset with
``distill_weight`` learns from teachers too (``--teachers``, trained models on the same tokenizer): see
``distillation_loss``.

Trainer state goes to ``--work-dir`` (default data/runs/<output name>) so ``--resume`` continues from
its last checkpoint, across sessions; ``--output-dir`` receives only the final model in Hugging Face
layout (safetensors, config, generation config, tokenizer, training_summary.json). The summary records
the device, the wall time (summed over resumed runs), the tokens seen, the validation curve and how
much validation loss still improved over the last fifth of training. On CPU denormal floats are flushed
to zero (a 20x faster backward pass on the 2-core CPU).
"""

import argparse
import hashlib
import json
import math
import os
import platform
import shlex
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import torch
from transformers import (
    DataCollatorForSeq2Seq,
    GenerationConfig,
    Trainer,
    TrainerCallback,
    TrainingArguments,
    set_seed,
)

from modeling import ScratchTransformerConfig, ScratchTransformerForCausalLM, ScratchTransformerForSeq2SeqLM

from .checkpoints import store_weights_as
from .corpus import plausible_pair, read_pairs, read_split
from .evaluate import bits_per_character
from .paths import data_dir
from .presets import DEFAULT_SEED, PRESETS, TrainSettings
from .renaming import NameSwapper, lowercase_words
from .tokenization import tokenizer_for

FLOAT16_TOLERANCE = 1e-4  # store float16 weights only if validation bits/char moves by less than this
FLOAT16_CHECK_CHARS = 100_000  # validation characters scored with both weight dtypes


class TokenBlocks(torch.utils.data.Dataset):
    """Blocks of ``length`` tokens; each block is its own label sequence.

    Fixed (validation, and the encoding models' training): the non-overlapping blocks ids[i·L : (i+1)·L].
    Shifted (``shifted=True``): block i starts at i·L + s, with s drawn uniformly from [0, L) on every read,
    so each pass cuts the text at new places and no token always sits at position 0 (random crops, as
    nanoGPT samples its batches). One block fewer, so that every shift stays inside the text."""

    def __init__(self, ids, length: int, limit: int | None = None, shifted: bool = False):
        self.ids = torch.as_tensor(np.asarray(ids), dtype=torch.long)
        self.length, self.shifted = length, shifted
        count = len(self.ids) // length - (1 if shifted else 0)
        self.count = count if limit is None else min(count, limit)

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, i: int) -> dict:
        if not 0 <= i < self.count:
            raise IndexError(f"block {i} of {self.count}")
        start = i * self.length + (int(torch.randint(self.length, ())) if self.shifted else 0)
        block = self.ids[start: start + self.length]
        return {"input_ids": block, "labels": block}


def token_ids(split: str, tokenizer, root: Path | None = None) -> np.ndarray:
    """The token ids of a corpus split, computed once and cached in data/tokens/ under a key of the text
    and the tokenizer (so a changed corpus or tokenizer never reads stale ids). The cache file is
    written atomically: under torchrun every rank may compute it at the same time."""
    root = data_dir() if root is None else root
    text = read_split(split, root)
    key = hashlib.sha256(text.encode() + tokenizer.backend_tokenizer.to_str().encode()).hexdigest()[:16]
    cache = root / "tokens" / f"{split}-{key}.npy"
    if cache.exists():
        return np.load(cache)
    ids = np.asarray(tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"], dtype=np.int32)
    cache.parent.mkdir(parents=True, exist_ok=True)
    partial = cache.with_name(f"{cache.stem}.{os.getpid()}.tmp.npy")
    np.save(partial, ids)
    os.replace(partial, cache)
    return ids


class SpellingPairs(torch.utils.data.Dataset):
    """(First Folio line -> modern line) pairs, each side cut to ``length`` tokens, target ends with EOS.

    With ``rename`` (a ``training.renaming.NameSwapper``), each read may replace the pair's copied names by
    invented ones, the same on both sides, and tokenizes the result anew."""

    def __init__(self, pairs: list[dict], tokenizer, length: int, limit: int | None = None, rename=None):
        self.pairs, self.tokenizer, self.length, self.rename = pairs[:limit], tokenizer, length, rename
        self.items = self.encode([p["folio"] for p in self.pairs], [p["modern"] for p in self.pairs])

    def encode(self, folio: list[str], modern: list[str]) -> list[dict]:
        sources = self.tokenizer(folio, truncation=True, max_length=self.length)["input_ids"]
        targets = self.tokenizer(modern, truncation=True, max_length=self.length - 1)["input_ids"]
        return [{"input_ids": s, "labels": t + [self.tokenizer.eos_token_id]} for s, t in zip(sources, targets)]

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> dict:
        if self.rename is None:
            return self.items[i]
        pair = self.pairs[i]
        folio, modern = self.rename(pair["folio"], pair["modern"])
        if folio == pair["folio"]:
            return self.items[i]
        return self.encode([folio], [modern])[0]


def attention_for(precision: str, context_length: int) -> str:
    """The attention implementation to train with. Under bf16 autocast on a CPU, torch's fused attention is
    slower than the explicit softmax on short sequences and faster on long ones (forward + backward, one
    thread, 8 heads of 44: 214 vs 530 ms at 32 x 128 tokens, 538 vs 465 ms at 16 x 256, 2389 vs 1327 ms at
    8 x 512); on CUDA, and in float32, the fused one."""
    cpu_bf16 = precision == "bf16" and not torch.cuda.is_available()
    return "eager" if cpu_bf16 and context_length < 256 else "sdpa"


def build_model(model_kwargs: dict, tokenizer, context_length: int, attn_implementation: str = "sdpa"):
    config = ScratchTransformerConfig(
        attn_implementation=attn_implementation,
        vocab_size=len(tokenizer), max_position_embeddings=max(context_length, 64),
        training_context_length=context_length, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
        decoder_start_token_id=tokenizer.bos_token_id, **model_kwargs,
    )
    model_class = ScratchTransformerForSeq2SeqLM if config.is_encoder_decoder else ScratchTransformerForCausalLM
    return model_class(config)


def starting_model(preset_name: str, init_from: Path | None, model_kwargs: dict, tokenizer, context_length: int,
                   attn_implementation: str):
    """(model, the starting model's training summary or None). Fresh weights, or, for a preset that starts from
    another, the model that preset's run wrote to ``init_from``, float32, with this preset's config fields applied."""
    starts_from = PRESETS[preset_name].starts_from
    if starts_from is None:
        if init_from is not None:
            raise SystemExit(f"--init-from: preset {preset_name} trains from fresh weights; presets that start from a "
                             f"trained model: {', '.join(n for n, p in PRESETS.items() if p.starts_from) or 'none'}")
        return build_model(model_kwargs, tokenizer, context_length, attn_implementation), None
    summary_file = init_from / "training_summary.json" if init_from else None
    if summary_file is None or not summary_file.is_file():
        raise SystemExit(f"preset {preset_name} starts from a trained {starts_from} model: pass --init-from with the "
                         f"--output-dir of `python -m training.train --preset {starts_from}` (a folder holding "
                         f"training_summary.json); got {init_from}")
    start = json.loads(summary_file.read_text())
    if start.get("preset") != starts_from:
        raise SystemExit(f"--init-from {init_from} holds a {start.get('preset')} model; preset {preset_name} starts "
                         f"from a {starts_from} model")
    config = ScratchTransformerConfig.from_pretrained(init_from)
    if config.vocab_size != len(tokenizer):
        raise SystemExit(f"--init-from {init_from}: its vocabulary has {config.vocab_size} tokens, this run's "
                         f"tokenizer {len(tokenizer)}")
    if "dropout" in model_kwargs and "activation_dropout" not in model_kwargs and config.activation_dropout == config.dropout:
        # the trained model's feed-forward dropout followed its dropout (the config's default): it follows the new one
        model_kwargs = {**model_kwargs, "activation_dropout": model_kwargs["dropout"]}
    model_class = ScratchTransformerForSeq2SeqLM if config.is_encoder_decoder else ScratchTransformerForCausalLM
    model = model_class.from_pretrained(init_from, dtype=torch.float32, attn_implementation=attn_implementation,
                                        **model_kwargs)
    return model, start


def distillation_loss(logits: torch.Tensor, teacher_logits: list[torch.Tensor], labels: torch.Tensor, weight: float,
                      shifted: bool) -> torch.Tensor:
    """Knowledge distillation (Hinton et al. 2015, temperature 1) from an ensemble of teachers:

        loss = (1 - w) * CE(y, q) + w * KL(p_bar || q),   p_bar = mean over teachers of softmax(teacher logits),

    q = softmax(student logits), both terms averaged over the target tokens (labels != -100). The ensemble's
    distribution says which other spellings were plausible, which the one-hot reference does not. ``shifted``:
    a causal LM's logits at t predict labels at t + 1; an encoder-decoder's are aligned with its labels."""
    if shifted:
        logits, labels = logits[:, :-1], labels[:, 1:]
        teacher_logits = [t[:, :-1] for t in teacher_logits]
    keep = labels != -100
    log_q = torch.log_softmax(logits[keep].float(), -1)
    p_bar = torch.stack([torch.softmax(t[keep].float(), -1) for t in teacher_logits]).mean(0)
    cross_entropy = torch.nn.functional.nll_loss(log_q, labels[keep])
    kl = (p_bar * (torch.log(p_bar.clamp_min(1e-30)) - log_q)).sum(-1).mean()
    return (1 - weight) * cross_entropy + weight * kl


class DistillingTrainer(Trainer):
    """A ``Trainer`` whose training loss is ``distillation_loss`` against fixed teachers; evaluation keeps the
    plain cross-entropy, so validation losses compare with other runs."""

    def __init__(self, *args, teachers: list, distill_weight: float, **kwargs):
        super().__init__(*args, **kwargs)
        self.teachers, self.distill_weight = teachers, distill_weight

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        if not model.training:
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        outputs = model(**inputs)
        device = outputs.logits.device
        with torch.no_grad(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=self.args.bf16):
            teacher_logits = [teacher.to(device)(**inputs).logits for teacher in self.teachers]
        shifted = not self.teachers[0].config.is_encoder_decoder
        loss = distillation_loss(outputs.logits, teacher_logits, inputs["labels"], self.distill_weight, shifted)
        return (loss, outputs) if return_outputs else loss


def load_teachers(paths: list[Path], tokenizer, settings: TrainSettings) -> tuple[list, list[dict]]:
    """The teachers a distilling preset learns from, frozen, in eval mode, with the student's attention
    implementation, and each one's training summary (its curve left out). Each must be a trained model on this
    run's tokenizer."""
    from .checkpoints import load_checkpoint

    if not 0.0 <= settings.distill_weight <= 1.0:
        raise SystemExit(f"the distillation weight must be between 0 and 1 (the share of the loss that is KL to the "
                         f"teachers), got {settings.distill_weight}")
    if settings.distill_weight and not paths:
        raise SystemExit(f"this preset distils (distill_weight {settings.distill_weight}): pass --teachers with one or "
                         f"more trained model folders (each a training.train --output-dir)")
    if paths and not settings.distill_weight:
        raise SystemExit("--teachers: this preset does not distil (its distill_weight is 0); presets that do: "
                         + (", ".join(n for n, p in PRESETS.items() if p.train and p.train.distill_weight) or "none"))
    teachers, summaries = [], []
    for path in paths:
        summary_file = path / "training_summary.json"
        if not summary_file.is_file():
            raise SystemExit(f"--teachers {path}: not a trained model folder (no training_summary.json)")
        teacher, _ = load_checkpoint(path)
        if teacher.config.vocab_size != len(tokenizer):
            raise SystemExit(f"--teachers {path}: its vocabulary has {teacher.config.vocab_size} tokens, this run's "
                             f"tokenizer {len(tokenizer)}")
        teacher.config._attn_implementation = attention_for(settings.precision, settings.context_length)
        teachers.append(teacher.float().eval().requires_grad_(False))
        summaries.append({k: v for k, v in json.loads(summary_file.read_text()).items() if k != "validation_curve"})
    return teachers, summaries


def generation_config_for(model) -> GenerationConfig:
    c = model.config
    common = dict(bos_token_id=c.bos_token_id, eos_token_id=c.eos_token_id, pad_token_id=c.pad_token_id)
    if c.is_encoder_decoder:
        return GenerationConfig(decoder_start_token_id=c.decoder_start_token_id, max_new_tokens=160, do_sample=False,
                                **common)
    return GenerationConfig(max_new_tokens=200, do_sample=True, temperature=0.8, top_p=0.95, **common)


def device_description() -> str:
    """What trained the model, for the summary and the model card."""
    if torch.cuda.is_available():
        return f"CUDA: {torch.cuda.get_device_name()}"
    name = platform.processor() or platform.machine()
    try:
        name = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                    if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"CPU: {name}, {torch.get_num_threads()} torch thread(s) per process"


class WallClock(TrainerCallback):
    """Wall time summed over resumed runs: kept in ``<work dir>/wall_clock.json`` at every save. A run that does
    not resume starts from 0, also in a work dir an earlier run left behind."""

    def __init__(self, work_dir: Path, resume: bool):
        self.file = work_dir / "wall_clock.json"
        self.before = json.loads(self.file.read_text())["seconds"] if resume and self.file.exists() else 0.0
        self.start = time.time()

    def seconds(self) -> float:
        return self.before + time.time() - self.start

    def on_save(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            self.file.write_text(json.dumps({"seconds": self.seconds(), "step": state.global_step}))


def validation_curve(log_history: list[dict]) -> list[list[float]]:
    """[[step, validation loss], ...] from the Trainer's log, one entry per step (under label smoothing, the
    smoothed loss it trains on; the summary's validation_loss is plain cross-entropy)."""
    curve = {entry["step"]: entry["eval_loss"] for entry in log_history if "eval_loss" in entry}
    return [[step, round(loss, 4)] for step, loss in sorted(curve.items())]


def last_fifth_improvement(curve: list[list[float]], max_steps: int) -> float | None:
    """Relative drop in validation loss from the first evaluation in the last fifth of training to the last:
    (L(0.8 T) - L(T)) / L(0.8 T). Below 1% the loss has flattened."""
    late = [loss for step, loss in curve if step >= 0.8 * max_steps]
    return None if len(late) < 2 else round((late[0] - late[-1]) / late[0], 5)


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
    from .checkpoints import load_checkpoint

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


def parse_args(argv: list[str] | None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", choices=sorted(PRESETS), required=True)
    parser.add_argument("--config", type=json.loads, default={}, help="JSON object overriding model config fields")
    parser.add_argument("--output-dir", type=Path, required=True)
    parser.add_argument("--work-dir", type=Path, help="Trainer checkpoints and logs (default data/runs/<name>)")
    parser.add_argument("--data-dir", type=Path, help="corpus and tokenizer (default: the repository's data/)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--max-steps", type=int)
    parser.add_argument("--context-length", type=int)
    parser.add_argument("--batch-size", type=int)
    parser.add_argument("--learning-rate", type=float)
    parser.add_argument("--eval-steps", type=int)
    parser.add_argument("--eval-examples", type=int, help="validation sequences (or pairs) per evaluation")
    parser.add_argument("--precision", choices=["fp32", "bf16"])
    parser.add_argument("--shifted-blocks", action=argparse.BooleanOptionalAction,
                        help="cut the training text at a random shift on every read (language models)")
    parser.add_argument("--renamed-share", type=float,
                        help="seq2seq: share of pairs read with their names replaced by invented ones (0 to 1)")
    parser.add_argument("--train-limit", type=int, help="use only the first N training examples (tests)")
    parser.add_argument("--threads", type=int, help="torch CPU threads per process")
    parser.add_argument("--resume", action="store_true", help="continue from the last checkpoint in --work-dir")
    parser.add_argument("--init-from", type=Path,
                        help="the trained model a preset with starts_from begins with (that preset's --output-dir)")
    parser.add_argument("--distill-weight", type=float,
                        help="share of the training loss that is KL to the teachers (0 to 1; presets that distil)")
    parser.add_argument("--teachers", type=Path, nargs="+", default=[],
                        help="trained model folders a preset with distill_weight learns from (their mean distribution)")
    return parser.parse_args(argv)


def settings_from(args) -> TrainSettings:
    preset = PRESETS[args.preset].train
    overrides = {key: getattr(args, key) for key in ("max_steps", "context_length", "batch_size", "learning_rate",
                                                     "eval_steps", "eval_examples", "precision",
                                                     "shifted_blocks", "renamed_share", "distill_weight")
                 if getattr(args, key) is not None}
    return replace(preset, **overrides)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    settings = settings_from(args)
    model_kwargs = {**PRESETS[args.preset].model, **args.config}
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)
    set_seed(args.seed)
    root = args.data_dir or data_dir()

    tokenizer = tokenizer_for(settings.tokenizer, root)  # the BPE is trained once, then reused
    length = settings.context_length
    teachers, teacher_summaries = load_teachers(args.teachers, tokenizer, settings)
    model, start = starting_model(args.preset, args.init_from, model_kwargs, tokenizer, length,
                                  attention_for(settings.precision, length))
    if model.config.is_encoder_decoder:
        pairs = [pair for pair in read_pairs("train", root) if plausible_pair(pair)]
        rename = (NameSwapper(settings.renamed_share, lowercase_words(p["modern"] for p in pairs), args.seed)
                  if settings.renamed_share else None)
        train_set = SpellingPairs(pairs, tokenizer, length, args.train_limit, rename)
        eval_set = SpellingPairs(read_pairs("validation", root), tokenizer, length, settings.eval_examples)
        collator = DataCollatorForSeq2Seq(tokenizer, model=model, label_pad_token_id=-100)
        train_tokens = None  # a pass is counted in pairs, not tokens
    else:
        ids = token_ids("train", tokenizer, root)
        train_set = TokenBlocks(ids, length, args.train_limit, shifted=settings.shifted_blocks)
        eval_set = TokenBlocks(token_ids("validation", tokenizer, root), length, settings.eval_examples)
        collator, train_tokens = None, len(ids)

    work_dir = args.work_dir or root / "runs" / args.output_dir.name
    work_dir.mkdir(parents=True, exist_ok=True)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    cuda = torch.cuda.is_available()
    training_args = TrainingArguments(
        output_dir=str(work_dir),
        max_steps=settings.max_steps,
        per_device_train_batch_size=max(1, settings.batch_size // world),
        per_device_eval_batch_size=max(1, settings.batch_size // world),
        learning_rate=settings.learning_rate,
        warmup_steps=settings.warmup_steps,
        lr_scheduler_type="cosine",
        weight_decay=settings.weight_decay,
        adam_beta2=0.98,
        max_grad_norm=1.0,
        bf16=settings.precision == "bf16",
        train_sampling_strategy="group_by_length" if settings.group_by_length else "random",
        eval_strategy="steps",
        eval_steps=settings.eval_steps,
        save_strategy="steps",
        save_steps=settings.eval_steps,
        # --resume must find the last checkpoint, also after a finished run. With a best checkpoint tracked and
        # save_total_limit=1, the Trainer deletes the last one at the end of training when an earlier one scored
        # better, so: no best tracked unless the preset keeps it, and then room for both.
        save_total_limit=2 if settings.keep_best else 1,
        load_best_model_at_end=settings.keep_best,
        label_smoothing_factor=settings.label_smoothing,
        metric_for_best_model="eval_loss" if settings.keep_best else None,
        greater_is_better=False if settings.keep_best else None,
        logging_steps=10,
        include_num_input_tokens_seen="non_padding" if model.config.is_encoder_decoder else "all",  # blocks: no padding
        seed=args.seed,
        data_seed=args.seed,
        report_to="none",
        use_cpu=not cuda,
        ddp_backend=None if world == 1 else ("nccl" if cuda else "gloo"),
        dataloader_num_workers=0,
        disable_tqdm=False,
    )
    resume = args.resume and any(work_dir.glob("checkpoint-*"))
    clock = WallClock(work_dir, resume)
    common = dict(model=model, args=training_args, train_dataset=train_set, eval_dataset=eval_set,
                  data_collator=collator, callbacks=[clock])
    trainer = (DistillingTrainer(**common, teachers=teachers, distill_weight=settings.distill_weight) if teachers
               else Trainer(**common))
    result = trainer.train(resume_from_checkpoint=True if resume else None)
    validation_loss = trainer.evaluate()["eval_loss"]  # also the curve's last point
    if settings.label_smoothing:  # the curve is the smoothed loss trained on; the summary's loss is plain cross-entropy
        trainer.label_smoother = None
        validation_loss = trainer.evaluate(metric_key_prefix="plain")["plain_loss"]
    rank = int(os.environ.get("RANK", "0"))
    print(f"rank {rank} of {world}: {result.global_step} steps, {training_args.per_device_train_batch_size} "
          f"examples per step on this process", flush=True)
    if not trainer.is_world_process_zero():
        return

    model.config._attn_implementation = "sdpa"  # what the checkpoint is served with
    model.generation_config = generation_config_for(model)
    model.config.use_cache = True  # the Trainer turns the KV cache off while training
    trainer.save_model(str(args.output_dir))
    tokenizer.save_pretrained(args.output_dir)
    (args.output_dir / "training_args.bin").unlink(missing_ok=True)  # a pickle: not shipped
    stored, float16_change = "float32", None
    if settings.weights_dtype == "float16":
        stored, float16_change = store_float16_if_harmless(args.output_dir, root)
    curve = validation_curve(trainer.state.log_history)
    tokens_seen = int(trainer.state.num_input_tokens_seen)
    launcher = f"torchrun --nproc_per_node={world} -m training.train " if world > 1 else "python -m training.train "
    summary = {
        "preset": args.preset,
        "seed": args.seed,
        "parameters": f"{sum(p.numel() for p in model.parameters()) / 1e6:.2f}M",
        "steps": result.global_step,
        "batch_size": settings.batch_size,
        "context_length": length,
        "examples_seen": result.global_step * settings.batch_size,
        "tokens_seen": tokens_seen,  # non-padding input tokens (for seq2seq: source tokens)
        "passes_over_train_split": round(tokens_seen / train_tokens if train_tokens
                                         else result.global_step * settings.batch_size / len(train_set), 2),
        "learning_rate": settings.learning_rate,
        "schedule": f"{settings.warmup_steps} warm-up steps, cosine decay, AdamW (weight decay {settings.weight_decay})",
        "precision": "bf16 autocast" if settings.precision == "bf16" else "fp32",
        "device": device_description(),
        "processes": world,
        "wall_clock_seconds": round(clock.seconds()),
        "mean_train_loss": round(result.training_loss, 4),
        "validation_loss": round(validation_loss, 4),
        "validation_curve": curve,
        "last_fifth_improvement": last_fifth_improvement(curve, settings.max_steps),
        "kept_checkpoint": (Path(trainer.state.best_model_checkpoint).name if settings.keep_best
                            and trainer.state.best_model_checkpoint else None),
        "weights_stored_as": stored,
        "float16_change": None if float16_change is None else float(f"{float16_change:.2e}"),
        "settings": asdict(settings),
        "model": model_kwargs,
        "command": launcher + shlex.join(sys.argv[1:] if argv is None else argv),  # quoted: pastes into a shell
        # the run this one continued: its summary, less its curve (preset, steps, wall time, command, ...)
        "started_from": {k: v for k, v in start.items() if k != "validation_curve"} if start else None,
        "teachers": teacher_summaries or None,  # the models distilled from: each one's summary, less its curve
    }
    summary = {k: v for k, v in summary.items() if v is not None}
    (args.output_dir / "training_summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k != "validation_curve"}, indent=1))
    print(f"validation perplexity {math.exp(validation_loss):.2f}")


if __name__ == "__main__":
    main()
