"""A recorded training run: a model folder that also holds how the model learned.

    <folder>/                                the final model, Hugging Face layout (``from_pretrained`` loads it)
    <folder>/timeline.json                   what was measured at every snapshot, and the probes it was measured on
    <folder>/snapshots/step-000500.safetensors   the weights at step 500, float16

timeline.json holds ``snapshots``: one entry per snapshot, in step order, each with the step, the tokens seen,
the training loss (mean over the logging steps just before; null at step 0), the validation loss, every head's
induction and previous-token scores ((layers, heads) lists) and the repeated-passage loss ratio
(``checkpointing.in_context``); ``probes``: the induction probe's length, seed and skipped ids, and the token ids
of the passages the ratio reads (so a snapshot's figures can be measured again from the folder alone);
``train_curve``: the training loss at every logged step; ``run``: the preset, the data and the model's size.

Every figure is measured on the snapshot as stored (float16 weights, computed in float32), so measuring a
snapshot again gives the same numbers (``measure``).
"""

import copy
import json
from pathlib import Path

import torch
from safetensors.torch import load_model, save_model

from modeling import ScratchTransformerConfig, ScratchTransformerForCausalLM

from .in_context import head_scores, repeated_passage_ratio

TIMELINE_FILE = "timeline.json"
SNAPSHOT_DIR = "snapshots"
SNAPSHOT_FIELDS = ("step", "tokens", "train_loss", "validation_loss", "induction", "previous_token",
                   "repeated_passage_ratio", "file")


def is_timeline(folder: Path) -> bool:
    return (Path(folder) / TIMELINE_FILE).is_file()


def snapshot_file(step: int) -> str:
    return f"{SNAPSHOT_DIR}/step-{step:06d}.safetensors"


def save_snapshot(model, folder: Path, step: int) -> str:
    """The model's weights at ``step`` as float16 (tied weights once) under ``folder``; returns the relative path."""
    relative = snapshot_file(step)
    path = Path(folder) / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    save_model(copy.deepcopy(model).to(torch.float16), str(path))
    return relative


def load_snapshot(folder: Path, relative: str, config: ScratchTransformerConfig) -> ScratchTransformerForCausalLM:
    """A float32 model in eval mode holding the snapshot's float16 weights; every weight must be in the file."""
    model = ScratchTransformerForCausalLM(config)
    load_model(model, str(Path(folder) / relative), strict=True)
    return model.eval()


def measure(model, probes: dict) -> dict:
    """The figures a snapshot records about copying, from ``probes`` as timeline.json stores them."""
    induction = probes["induction"]
    scores = head_scores(model, induction["length"], induction["seed"], induction["skip"])
    return {"induction": scores["induction"].astype(float).round(6).tolist(),
            "previous_token": scores["previous token"].astype(float).round(6).tolist(),
            "repeated_passage_ratio": round(repeated_passage_ratio(model, probes["passages"]), 6)}


def write_timeline(folder: Path, run: dict, probes: dict, snapshots: list[dict], train_curve: list) -> dict:
    """Write ``folder``/timeline.json (the snapshots' weight files must be in place already); returns what it wrote."""
    timeline = {"run": run, "probes": probes, "snapshots": snapshots, "train_curve": [list(p) for p in train_curve]}
    (Path(folder) / TIMELINE_FILE).write_text(json.dumps(timeline, separators=(",", ":")) + "\n")
    return read_timeline(folder)


def read_timeline(folder: Path) -> dict:
    """timeline.json of ``folder``, checked: snapshots in step order, each with every field and its weights file."""
    folder = Path(folder)
    timeline = json.loads((folder / TIMELINE_FILE).read_text())
    snapshots = timeline.get("snapshots") or []
    if not snapshots:
        raise ValueError(f"{folder / TIMELINE_FILE} lists no snapshots")
    steps = [s.get("step") for s in snapshots]
    if steps != sorted(set(steps)):
        raise ValueError(f"{folder / TIMELINE_FILE}: snapshot steps must increase; got {steps}")
    for snapshot in snapshots:
        missing = [name for name in SNAPSHOT_FIELDS if name not in snapshot]
        if missing:
            raise ValueError(f"{folder / TIMELINE_FILE}: the snapshot at step {snapshot['step']} lacks {missing}")
        if not (folder / snapshot["file"]).is_file():
            raise ValueError(f"{folder}: the weights of step {snapshot['step']} ({snapshot['file']}) are missing")
    return timeline
