"""The training runs on disk, as Watch it learn reads them: which checkpoints hold one, each run read and checked
(``TrainingRun``, a ``Timeline``), and its snapshots' weights (loaded on first use, the most recently used kept).

A training run is a checkpoint folder with a timeline.json beside the final model (``checkpointing.training_run``):
what was measured at every snapshot, on fixed probes, and the snapshots' float16 weights.
"""

import copy
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from checkpointing.training_run import TIMELINE_FILE, is_timeline, load_snapshot, read_timeline

from explorer.core.inputs import InputProblem, echo, kind_of, whole_number
from explorer.learning.timeline import Timeline
from explorer.models import catalog
from explorer.core.caches import LRUCache

DEFAULT_RUN, CONTROL_RUN = "timeline-repeats", "timeline-plain"  # the run the tab opens on, and its control
TIMELINES = LRUCache(8)  # (timeline.json, its mtime and size) -> its contents
SNAPSHOTS = LRUCache(64)  # (weights file, its mtime and size) -> the snapshot's model: a few hundred kB each


def training_runs(root: Path | None = None) -> dict[str, catalog.CheckpointInfo]:
    """The usable decoder-only checkpoints that hold a training run, by name: the default run, its control, the rest."""
    found = [info for info in catalog.discover_checkpoints(root).values()
             if info.usable and not info.is_encoder_decoder and is_timeline(info.path)]
    found.sort(key=lambda info: (info.name != DEFAULT_RUN, info.name != CONTROL_RUN, info.name))
    return {info.name: info for info in found}


def no_runs_message() -> str:
    return ("No recorded training run found among the checkpoints (a checkpoint folder with a timeline.json): "
            f"train one with `python -m training.train --preset {DEFAULT_RUN} --output-dir checkpoints/{DEFAULT_RUN}`.")


def file_key(path: Path) -> tuple:
    """What a cache of a file's contents is keyed by: its path, modification time and size."""
    stat = path.stat()
    return str(path.resolve()), stat.st_mtime_ns, stat.st_size


@dataclass(frozen=True)
class TrainingRun(Timeline):
    """One run: its checkpoint and its timeline.json, read and checked (``checkpointing.training_run.read_timeline``);
    a ``Timeline`` whose steps are its snapshots."""

    info: catalog.CheckpointInfo
    timeline_json: dict
    where = "snapshot"

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def snapshots(self) -> list[dict]:
        return self.timeline_json["snapshots"]

    @property
    def steps(self) -> list[int]:
        return [s["step"] for s in self.snapshots]

    def scores(self, score: str = "induction") -> np.ndarray:
        return np.asarray([s[score] for s in self.snapshots], dtype=float)


def read_training_run(info: catalog.CheckpointInfo) -> TrainingRun:
    """The run in ``info``'s folder; its timeline.json read once per version of the file."""
    path = info.path / TIMELINE_FILE
    try:
        timeline = TIMELINES.get(file_key(path), lambda: read_timeline(info.path))
    except (OSError, ValueError) as error:
        raise InputProblem(f"The recorded run {info.name} cannot be read: {error}") from None
    return TrainingRun(info, timeline)


def pick_run(name, root: Path | None = None) -> TrainingRun:
    """The run a client names (nothing: the first of ``training_runs``); else an InputProblem naming the runs."""
    runs = training_runs(root)
    if not runs:
        raise InputProblem(no_runs_message())
    if name is None or (isinstance(name, str) and not name.strip()):
        return read_training_run(next(iter(runs.values())))
    if not isinstance(name, str):
        raise InputProblem(f"The run is named by a text, one of: {', '.join(runs)}; got {kind_of(name)}.")
    name = name.strip()
    if name not in runs:
        why = ("has no recorded training (no timeline.json)" if name in catalog.discover_checkpoints(root)
               else "is not a checkpoint here")
        raise InputProblem(f"{echo(name)} {why}; pick a recorded run: {', '.join(runs)}.")
    return read_training_run(runs[name])


def partner(name: str, root: Path | None = None) -> TrainingRun | None:
    """The run ``name`` is compared with: the control for the default run, the default run for any other (else the
    first other run; None when there is none)."""
    runs = training_runs(root)
    preferred = CONTROL_RUN if name == DEFAULT_RUN else DEFAULT_RUN
    others = [other for other in runs if other != name]
    if not others:
        return None
    return read_training_run(runs[preferred if preferred in others else others[0]])


def pick_snapshot(value, run: TrainingRun) -> int:
    """A snapshot index of ``run`` (−1: the last); anything else is an InputProblem saying which exist."""
    n = len(run.snapshots)
    what = (f"The snapshot ({run.name} has {n}: 0 is step {run.steps[0]:,}, {n - 1} is step {run.steps[-1]:,}; "
            "−1 is the last)")
    index = whole_number(value, what, -1, n - 1)
    return n - 1 if index == -1 else index


def snapshot_model(run: TrainingRun, index: int, final):
    """The float32 model of snapshot ``index``, with the generation settings of the run's final model ``final``."""
    entry = run.snapshots[index]

    def load():
        with catalog.LOAD_LOCK:  # built as every model the app loads is: never beside another load
            model = load_snapshot(run.info.path, entry["file"], final.config).requires_grad_(False)
        model.generation_config = copy.deepcopy(final.generation_config)
        return model

    return SNAPSHOTS.get(file_key(run.info.path / entry["file"]), load)
