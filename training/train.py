"""Train a ScratchTransformer on the Shakespeare corpus with the transformers ``Trainer``.

    python -m training.train --preset shakespeare-rope --output-dir checkpoints/shakespeare-rope
    python -m training.train --preset tiny --output-dir /tmp/tiny --max-steps 20
    torchrun --nproc_per_node=2 -m training.train --preset tiny --output-dir /tmp/tiny-ddp --max-steps 4

Presets (``training.presets``) say what to build and how long to train. Causal LMs read contiguous
blocks of ``context_length`` tokens of the train split; the seq2seq preset reads aligned (First Folio
line -> modern line) pairs (``training.data``). The same code runs on a CPU, on CUDA (bf16 autocast where the
preset asks for it) and under torchrun across processes (gloo on CPU, NCCL on CUDA; rank 0 writes the checkpoint).

A preset with ``starts_from`` continues training the model another preset made: ``--init-from`` names that
run's ``--output-dir``, and this run's summary records the earlier one's under ``started_from``
(``training.build``). A preset with ``distill_weight`` learns from teachers too (``--teachers``, trained models on
the same tokenizer): see ``training.distillation``.

Trainer state goes to ``--work-dir`` (default data/runs/<output name>) so ``--resume`` continues from
its last checkpoint, across sessions; ``--output-dir`` receives only the final model in Hugging Face
layout (safetensors, config, generation config, tokenizer, training_summary.json). The summary
(``training.summary``) records the device, the wall time (summed over resumed runs), the tokens seen, the
validation curve and how much validation loss still improved over the last fifth of training. A preset that
stores float16 weights does so only where validation bits per character stays put (``training.float16``).
On CPU denormal floats are flushed to zero (a 20x faster backward pass).
"""

import argparse
import json
import math
import os
from dataclasses import replace
from pathlib import Path

import torch
from transformers import Trainer, TrainingArguments, set_seed

from checkpointing.paths import data_dir

from .build import attention_for, generation_config_for, starting_model
from .data import training_data
from .distillation import DistillingTrainer, load_teachers
from .float16 import store_float16_if_harmless
from .presets import DEFAULT_SEED, PRESETS, TrainSettings
from .summary import WallClock, run_summary
from .snapshots import VALIDATION_BLOCKS, TimelineRecorder, ship_timeline, timeline_probes
from .tokenization import tokenizer_for

SCHEDULERS = {"cosine": "cosine", "constant": "constant_with_warmup"}  # a preset's schedule -> the Trainer's name
LOGGING_STEPS = 10  # the training loss is logged (and a timeline may snapshot) every this many steps


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
    parser.add_argument("--random-repeat-share", type=float,
                        help="share of sequences replaced by random tokens with repeated runs (0 to 1)")
    parser.add_argument("--passage-repeat-share", type=float,
                        help="share of the other (text) sequences with repeated runs (0 to 1)")
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
                                                     "shifted_blocks", "renamed_share", "distill_weight",
                                                     "random_repeat_share", "passage_repeat_share")
                 if getattr(args, key) is not None}
    settings = replace(preset, **overrides)
    if settings.schedule not in SCHEDULERS:
        raise SystemExit(f"schedule must be one of {', '.join(SCHEDULERS)}; preset {args.preset} has {settings.schedule!r}")
    return settings


def training_arguments(settings: TrainSettings, work_dir: Path, seed: int, world: int,
                       pairs: bool) -> TrainingArguments:
    """The Trainer's arguments for a preset's settings, split over ``world`` processes; ``pairs``: the model
    reads padded pairs, whose padding is not counted in the tokens seen."""
    cuda = torch.cuda.is_available()
    return TrainingArguments(
        output_dir=str(work_dir),
        max_steps=settings.max_steps,
        per_device_train_batch_size=max(1, settings.batch_size // world),
        per_device_eval_batch_size=max(1, settings.batch_size // world),
        learning_rate=settings.learning_rate,
        warmup_steps=settings.warmup_steps,
        lr_scheduler_type=SCHEDULERS[settings.schedule],
        weight_decay=settings.weight_decay,
        adam_beta2=0.98,
        max_grad_norm=1.0,
        bf16=settings.precision == "bf16",
        train_sampling_strategy="group_by_length" if settings.group_by_length else "random",
        # Our datasets hold only what the model or the loss reads; left True, the Trainer would drop the column
        # "plain" (training.data.WithRepeats) before the distillation loss sees it, as the model does not take it.
        remove_unused_columns=False,
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
        logging_steps=LOGGING_STEPS,
        include_num_input_tokens_seen="non_padding" if pairs else "all",  # blocks: no padding
        seed=seed,
        data_seed=seed,
        report_to="none",
        use_cpu=not cuda,
        ddp_backend=None if world == 1 else ("nccl" if cuda else "gloo"),
        dataloader_num_workers=0,
        disable_tqdm=False,
    )


def plain_validation_loss(trainer: Trainer, label_smoothing: float) -> float:
    """The validation loss as plain cross-entropy; the evaluation also ends the curve. Under label smoothing the
    curve is the smoothed loss trained on, so the plain loss is evaluated again without the smoother."""
    validation_loss = trainer.evaluate()["eval_loss"]
    if label_smoothing:
        trainer.label_smoother = None
        validation_loss = trainer.evaluate(metric_key_prefix="plain")["plain_loss"]
    return validation_loss


def save_trained(trainer: Trainer, tokenizer, output_dir: Path, weights_dtype: str,
                 root: Path) -> tuple[str, float | None]:
    """Write the model as served (fused attention, KV cache on, its generation config) and its tokenizer to
    ``output_dir``, float16 if the preset asks and that is harmless. Returns (dtype stored, the change measured)."""
    model = trainer.model
    model.config._attn_implementation = "sdpa"  # what the checkpoint is served with
    model.generation_config = generation_config_for(model)
    model.config.use_cache = True  # the Trainer turns the KV cache off while training
    trainer.save_model(str(output_dir))
    tokenizer.save_pretrained(output_dir)
    (output_dir / "training_args.bin").unlink(missing_ok=True)  # a pickle: not shipped
    if weights_dtype == "float16":
        return store_float16_if_harmless(output_dir, root)
    return "float32", None


def timeline_recorder(settings: TrainSettings, work_dir: Path, data) -> TimelineRecorder | None:
    """The recorder of a preset that keeps a timeline (``timeline_every``), measuring on validation text."""
    if not settings.timeline_every:
        return None
    if settings.timeline_every % LOGGING_STEPS:
        raise SystemExit(f"timeline_every must be a multiple of the logging interval {LOGGING_STEPS}; "
                         f"got {settings.timeline_every}")
    validation = data.validation
    blocks = torch.stack([validation[i]["input_ids"] for i in range(min(VALIDATION_BLOCKS, len(validation)))])
    probes = timeline_probes(validation.ids.numpy(), settings.context_length)
    return TimelineRecorder(settings.timeline_every, work_dir, probes, blocks)


def data_description(settings: TrainSettings) -> str:
    """What the language model read, in words."""
    parts = ["Shakespeare's plays (train split)"]
    if settings.random_repeat_share:
        parts.append(f"{settings.random_repeat_share:.0%} of sequences random tokens with repeated runs")
    if settings.passage_repeat_share:
        parts.append(f"{settings.passage_repeat_share:.0%} of the text sequences with repeated runs")
    if len(parts) > 1:
        parts.append(f"{settings.copy_share:.0%} of a repeating sequence's tokens copies")
    return "; ".join(parts)


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
    teachers, teacher_summaries = load_teachers(args.teachers, tokenizer, settings)
    model, start = starting_model(args.preset, args.init_from, model_kwargs, tokenizer, settings.context_length,
                                  attention_for(settings.precision, settings.context_length))
    data = training_data(model, tokenizer, settings, root, args.train_limit, args.seed)

    work_dir = args.work_dir or root / "runs" / args.output_dir.name
    work_dir.mkdir(parents=True, exist_ok=True)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    training_args = training_arguments(settings, work_dir, args.seed, world, model.config.is_encoder_decoder)
    resume = args.resume and any(work_dir.glob("checkpoint-*"))
    clock = WallClock(work_dir, resume)
    recorder = timeline_recorder(settings, work_dir, data)
    common = dict(model=model, args=training_args, train_dataset=data.train, eval_dataset=data.validation,
                  data_collator=data.collator, callbacks=[clock] + ([recorder] if recorder else []))
    trainer = (DistillingTrainer(**common, teachers=teachers, distill_weight=settings.distill_weight) if teachers
               else Trainer(**common))
    result = trainer.train(resume_from_checkpoint=True if resume else None)
    validation_loss = plain_validation_loss(trainer, settings.label_smoothing)
    rank = int(os.environ.get("RANK", "0"))
    print(f"rank {rank} of {world}: {result.global_step} steps, {training_args.per_device_train_batch_size} "
          f"examples per step on this process", flush=True)
    if not trainer.is_world_process_zero():
        leave_together()
        return

    stored, float16_change = save_trained(trainer, tokenizer, args.output_dir, settings.weights_dtype, root)
    passes = data.passes(int(trainer.state.num_input_tokens_seen), result.global_step * settings.batch_size)
    summary = run_summary(args=args, argv=argv, settings=settings, model_kwargs=model_kwargs, model=model,
                          trainer=trainer, result=result, validation_loss=validation_loss, clock=clock, world=world,
                          passes=passes, stored=stored, float16_change=float16_change, start=start,
                          teacher_summaries=teacher_summaries)
    if recorder and settings.timeline_snapshots:
        run = {"preset": args.preset, "seed": args.seed, "data": data_description(settings),
               "batch_size": settings.batch_size, "context_length": settings.context_length}
        ship_timeline(recorder, trainer.model, trainer.state, args.output_dir, settings.timeline_snapshots, run)
    (args.output_dir / "training_summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k != "validation_curve"}, indent=1))
    print(f"validation perplexity {math.exp(validation_loss):.2f}")
    leave_together()


def leave_together() -> None:
    """Under torchrun, every process waits for the first to write the model, then all leave the process group: a
    process that exits with the group alive can abort in its threads' teardown (SIGABRT: 'terminate called without
    an active exception'), failing the run after its work is done."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
