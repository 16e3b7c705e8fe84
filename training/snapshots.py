"""Record how a model learns: snapshots of a training run, and the figures that show copying appear.

A preset with ``timeline_every`` N gets a ``TimelineRecorder``: at step 0 and every N steps it stores the weights
(float16, ``checkpointing.training_run.save_snapshot``) in the run's work folder, loads them back and measures, on
the snapshot as stored, the validation loss and what ``checkpointing.training_run.measure`` records about copying
(every head's induction and previous-token scores, the repeated-passage loss ratio). Records survive a stop:
``--resume`` keeps those up to the step the Trainer resumes from and records the rest anew.

``ship_timeline`` then picks ``timeline_snapshots`` of the records, denser where the figures change
(``choose_snapshots``), and writes them beside the final model with timeline.json; where the model is stored as
float16, the last snapshot is the model's own weights file, not a second copy of it.
"""

import json
import shutil
from pathlib import Path

import numpy as np
import torch
from transformers import TrainerCallback

from checkpointing.in_context import INDUCTION_LENGTH, SPECIAL_IDS
from checkpointing.loading import WEIGHTS_FILE
from checkpointing.training_run import SNAPSHOT_DIR, load_snapshot, measure, save_snapshot, write_timeline

RECORDS_FILE = "records.jsonl"
PASSAGES = 8  # held-out passages the repeated-passage ratio reads
PASSAGE_TOKENS = 48  # at most; each passage read twice must fit the context
VALIDATION_BLOCKS = 32  # validation blocks a snapshot's loss is measured on


def timeline_probes(validation_ids: np.ndarray, context_length: int) -> dict:
    """The fixed probes every snapshot is measured on: the induction probe's settings, and ``PASSAGES`` passages
    of validation tokens, evenly spaced through the validation text; each probe, read twice, fits the context."""
    half = context_length // 2
    passage = min(PASSAGE_TOKENS, half)
    starts = np.linspace(0, len(validation_ids) - passage, PASSAGES + 2, dtype=int)[1:-1]
    return {"induction": {"length": min(INDUCTION_LENGTH, half), "seed": 0, "skip": SPECIAL_IDS},
            "passages": [validation_ids[s: s + passage].tolist() for s in starts]}


class TimelineRecorder(TrainerCallback):
    """Records a snapshot at step 0 and every ``every`` steps (module docstring) into ``work_dir``/timeline."""

    def __init__(self, every: int, work_dir: Path, probes: dict, validation: torch.Tensor):
        self.every, self.folder, self.probes, self.validation = every, Path(work_dir) / "timeline", probes, validation
        self.records: list[dict] = []
        self.train_curve: list[tuple[int, float]] = []

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        """Keeps the records up to the step training starts from (all of them on a fresh run: none)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        done = state.global_step
        earlier = self.folder / RECORDS_FILE
        lines = earlier.read_text().splitlines() if earlier.exists() else []
        self.records = [r for r in map(json.loads, lines) if r["step"] <= done]
        self.train_curve = [tuple(p) for p in self._read_curve() if p[0] <= done]
        self._write()
        if done == 0 and not self.records:
            self.record(model, 0, 0, None)

    def on_log(self, args, state, control, logs=None, model=None, **kwargs):
        if not logs or "loss" not in logs:
            return
        self.train_curve.append((state.global_step, round(float(logs["loss"]), 6)))
        if state.global_step % self.every == 0 and state.global_step not in {r["step"] for r in self.records}:
            self.record(model, state.global_step, int(state.num_input_tokens_seen), float(logs["loss"]))
        else:
            self._write()

    def record(self, model, step: int, tokens: int, train_loss: float | None) -> dict:
        relative = save_snapshot(model, self.folder, step)
        stored = load_snapshot(self.folder, relative, model.config)
        entry = {"step": step, "tokens": tokens, "train_loss": None if train_loss is None else round(train_loss, 6),
                 "validation_loss": round(validation_loss(stored, self.validation), 6),
                 **measure(stored, self.probes), "file": relative}
        self.records.append(entry)
        self._write()
        return entry

    def _read_curve(self) -> list:
        path = self.folder / "train_curve.json"
        return json.loads(path.read_text()) if path.exists() else []

    def _write(self) -> None:
        (self.folder / RECORDS_FILE).write_text("".join(json.dumps(r) + "\n" for r in self.records))
        (self.folder / "train_curve.json").write_text(json.dumps(self.train_curve))


def validation_loss(model, blocks: torch.Tensor) -> float:
    """Mean next-token loss (nats) over ``blocks`` (n, L), 8 at a time."""
    total, count = 0.0, 0
    with torch.no_grad():
        for batch in blocks.split(8):
            logits = model(batch, use_cache=False).logits[:, :-1].float()
            total += float(torch.nn.functional.cross_entropy(logits.transpose(1, 2), batch[:, 1:], reduction="sum"))
            count += batch[:, 1:].numel()
    return total / count


def change_path(records: list[dict]) -> np.ndarray:
    """Where each record lies along the run, measured by how much has changed since the start: the best induction
    score reached so far + (1 - the lowest repeated-passage ratio so far) + the validation loss shed so far / all
    it sheds + step / steps. Records so far, not each record's own figures, so that noise between records adds
    nothing. Equal distances along it are equal amounts of change: snapshots picked evenly crowd where things move."""
    steps = np.array([r["step"] for r in records], dtype=float)
    induction = np.maximum.accumulate([np.max(r["induction"]) for r in records])
    ratio = np.minimum.accumulate([r["repeated_passage_ratio"] for r in records])
    loss = np.minimum.accumulate([r["validation_loss"] for r in records])
    shed = max(float(loss[0] - loss[-1]), 1e-9)
    return ((induction - induction[0]) + (ratio[0] - ratio) + (loss[0] - loss) / shed
            + (steps - steps[0]) / max(steps[-1] - steps[0], 1.0))


def choose_snapshots(records: list[dict], count: int) -> list[dict]:
    """``count`` records (all if fewer): the first, the last, and between them the ones nearest to evenly spaced
    points of ``change_path``, each record at most once."""
    if len(records) <= count:
        return list(records)
    path = change_path(records)
    chosen = {0, len(records) - 1}
    for target in np.linspace(0.0, path[-1], count)[1:-1]:
        order = np.argsort(np.abs(path - target), kind="stable")
        chosen.add(int(next(i for i in order if i not in chosen)))
    return [records[i] for i in sorted(chosen)]


def ship_timeline(recorder: TimelineRecorder, model, state, output_dir: Path, count: int, run: dict) -> dict:
    """Record the final step if the schedule missed it, copy ``count`` chosen snapshots beside the model in
    ``output_dir`` and write its timeline.json."""
    if recorder.records[-1]["step"] != state.global_step:
        last_loss = recorder.train_curve[-1][1] if recorder.train_curve else None
        recorder.record(model, state.global_step, int(state.num_input_tokens_seen), last_loss)
    chosen = [dict(snapshot) for snapshot in choose_snapshots(recorder.records, count)]
    target = Path(output_dir)
    shutil.rmtree(target / SNAPSHOT_DIR, ignore_errors=True)
    (target / SNAPSHOT_DIR).mkdir(parents=True)
    for snapshot in chosen:
        shutil.copyfile(recorder.folder / snapshot["file"], target / snapshot["file"])
    last = chosen[-1]
    if same_weights(target, last["file"], WEIGHTS_FILE, model.config):  # the model, stored as float16
        (target / last["file"]).unlink()
        last["file"] = WEIGHTS_FILE
    return write_timeline(target, run, recorder.probes, chosen, recorder.train_curve)


def same_weights(folder: Path, first: str, second: str, config) -> bool:
    """Whether two weight files of ``folder`` load as the same model (every weight equal; the files may name tied
    weights differently), each read as ``checkpointing.training_run.load_snapshot`` reads a snapshot."""
    a, b = (load_snapshot(folder, name, config).state_dict() for name in (first, second))
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
