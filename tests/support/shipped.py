"""The checkpoints we ship (checkpoints/ as committed, whatever SCRATCH_CHECKPOINTS says), loaded through the
app's own loader, once per session; and the same for the tiny test checkpoints."""

from pathlib import Path

from explorer.models import catalog, registry
from explorer.generation.decoding import DecodingSettings
from explorer.generation.tokens import forward_inputs

SHIPPED_ROOT = Path(__file__).resolve().parents[2] / "checkpoints"
GREEDY = DecodingSettings(False)


def load(root: Path, name: str):
    """(model, tokenizer) of checkpoint ``root/name``."""
    return registry.shipped_model(catalog.describe_folder(Path(root) / name))


def shipped(name: str):
    return load(SHIPPED_ROOT, name)


def inputs_of(model, tokenizer, text: str) -> dict:
    """What the teaching views feed the model for ``text`` (an encoder-decoder: its greedy rewrite)."""
    return forward_inputs(model, tokenizer, text, GREEDY).inputs
