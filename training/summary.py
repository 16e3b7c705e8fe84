"""What a run records about itself in training_summary.json: the device, the wall time summed over resumed
runs, the validation curve and how much the loss still improved over the last fifth of training."""

import json
import platform
import shlex
import sys
import time
from dataclasses import asdict
from pathlib import Path

import torch
from transformers import TrainerCallback


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


def run_summary(*, args, argv: list[str] | None, settings, model_kwargs: dict, model, trainer, result,
                validation_loss: float, clock: WallClock, world: int, passes: float, stored: str,
                float16_change: float | None, start: dict | None, teacher_summaries: list[dict]) -> dict:
    """The run's training_summary.json: what was trained, how, on what, for how long and how well, the command
    that reproduces it and the summaries of the runs it started from and distilled from; None entries left out."""
    curve = validation_curve(trainer.state.log_history)
    launcher = f"torchrun --nproc_per_node={world} -m training.train " if world > 1 else "python -m training.train "
    summary = {
        "preset": args.preset,
        "seed": args.seed,
        "parameters": f"{sum(p.numel() for p in model.parameters()) / 1e6:.2f}M",
        "steps": result.global_step,
        "batch_size": settings.batch_size,
        "context_length": settings.context_length,
        "examples_seen": result.global_step * settings.batch_size,
        "tokens_seen": int(trainer.state.num_input_tokens_seen),  # non-padding input tokens (seq2seq: source tokens)
        "passes_over_train_split": round(passes, 2),
        "learning_rate": settings.learning_rate,
        "schedule": f"{settings.warmup_steps} warm-up steps, "
                    f"{'cosine decay' if settings.schedule == 'cosine' else 'then constant'}, "
                    f"AdamW (weight decay {settings.weight_decay})",
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
    return {k: v for k, v in summary.items() if v is not None}
