"""Learning from teachers: trained models on the same tokenizer whose mean distribution the student matches."""

import json
from pathlib import Path

import torch
from transformers import Trainer

from checkpointing.loading import load_checkpoint

from .build import attention_for
from .presets import PRESETS, TrainSettings


def distillation_loss(logits: torch.Tensor, teacher_logits: list[torch.Tensor], labels: torch.Tensor, weight: float,
                      shifted: bool, plain: torch.Tensor | None = None) -> torch.Tensor:
    """Knowledge distillation (Hinton et al. 2015, temperature 1) from an ensemble of teachers:

        loss = (1 - w) * CE(y, q) + w * KL(p_bar || q),   p_bar = mean over teachers of softmax(teacher logits),

    q = softmax(student logits), both terms averaged over the target tokens (labels != -100). The ensemble's
    distribution says which other spellings were plausible, which the one-hot reference does not. ``shifted``:
    a causal LM's logits at t predict labels at t + 1; an encoder-decoder's are aligned with its labels.

    ``plain`` (batch,) bool: the rows that are the text as it is. The other rows teach copying
    (``training.data.WithRepeats``), where teachers that never learned to copy would teach the student not to:
    there w is 0 and the loss is the cross-entropy alone."""
    if shifted:
        logits, labels = logits[:, :-1], labels[:, 1:]
        teacher_logits = [t[:, :-1] for t in teacher_logits]
    keep = labels != -100
    log_q = torch.log_softmax(logits[keep].float(), -1)
    p_bar = torch.stack([torch.softmax(t[keep].float(), -1) for t in teacher_logits]).mean(0)
    cross_entropy = torch.nn.functional.nll_loss(log_q, labels[keep], reduction="none")
    kl = (p_bar * (torch.log(p_bar.clamp_min(1e-30)) - log_q)).sum(-1)
    w = torch.full_like(kl, weight) if plain is None else \
        (weight * plain.to(kl.device)[:, None].expand_as(keep)[keep].float())
    return ((1 - w) * cross_entropy + w * kl).mean()


class DistillingTrainer(Trainer):
    """A ``Trainer`` whose training loss is ``distillation_loss`` against fixed teachers; evaluation keeps the
    plain cross-entropy, so validation losses compare with other runs."""

    def __init__(self, *args, teachers: list, distill_weight: float, **kwargs):
        super().__init__(*args, **kwargs)
        self.teachers, self.distill_weight = teachers, distill_weight

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        plain = inputs.pop("plain", None)  # which rows are the text as it is (training.data.WithRepeats)
        if not model.training:
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        outputs = model(**inputs)
        device = outputs.logits.device
        with torch.no_grad(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=self.args.bf16):
            teacher_logits = [teacher.to(device)(**inputs).logits for teacher in self.teachers]
        shifted = not self.teachers[0].config.is_encoder_decoder
        loss = distillation_loss(outputs.logits, teacher_logits, inputs["labels"], self.distill_weight, shifted, plain)
        return (loss, outputs) if return_outputs else loss


def load_teachers(paths: list[Path], tokenizer, settings: TrainSettings) -> tuple[list, list[dict]]:
    """The teachers a distilling preset learns from, frozen, in eval mode, with the student's attention
    implementation, and each one's training summary (its curve left out). Each must be a trained model on this
    run's tokenizer."""
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
