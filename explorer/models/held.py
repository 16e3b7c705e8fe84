"""What the app holds for a model: ``Opened`` (a model opened from the Hub, an upload or Train one yourself: what it is,
where its files are, its menu line) and what a model costs in memory: its weights (``model_bytes``) and its tokenizer
(``tokenizer_bytes``, estimated from the size of its files).
"""

from dataclasses import dataclass, field
from pathlib import Path

import torch

from explorer.core.parity import Parity
from explorer.models.plans import Plan, TOKENIZER_FILES

# A loaded tokenizer's memory per byte of its files, measured here (transformers 5.23, PreTrainedTokenizerFast, RSS
# before and after loading): a BPE tokenizer.json of 1M vocabulary entries (20.9 MB) took 317 MB (x15.2), of 300k
# entries (6.2 MB) 100 MB (x16.1), the shipped 260 KB one 4.8 MB (x18, the fixed cost included)
TOKENIZER_BYTES_PER_FILE_BYTE = 16


@dataclass
class Opened:
    """A model opened in the app. ``name`` is its menu value; ``source`` "hub", "upload" or "trained"."""

    name: str
    source: str
    family: str
    model_type: str
    n_parameters: int
    commit: str | None
    parity: Parity | None  # None: one of ours, loaded with our own classes
    folder: Path = field(repr=False)
    plan: Plan = field(repr=False)
    key: tuple = ()  # where its weights come from, whoever opened it: ("hub", repo, commit) or ("folder", path)
    repo_id: str | None = None
    revision: str | None = None
    seconds: float = 0.0

    @property
    def label(self) -> str:
        where = {"hub": "the Hub", "upload": "your upload", "trained": "trained by you"}[self.source]
        commit = f" · commit {self.commit[:7]}" if self.commit else ""
        parity = "" if self.parity is None else f" · {self.parity.words()}"
        source = f"from {where}" if self.source == "hub" else where
        return f"{self.name} · {self.family} · {_size(self.n_parameters)} · {source}{commit}{parity}"

    def to_json(self) -> dict:
        return {"name": self.name, "family": self.family, "model_type": self.model_type,
                "parameters": self.n_parameters, "commit": self.commit,
                "parity": None if self.parity is None else self.parity.gap,
                "logit_size": None if self.parity is None else self.parity.size, "source": self.source,
                "repo_id": self.repo_id, "revision": self.revision, "seconds": round(self.seconds, 2)}


def _size(n: int) -> str:
    return f"{n / 1e6:.1f}M parameters" if n >= 1e6 else f"{n / 1e3:.1f}K parameters"


def model_bytes(model: torch.nn.Module) -> int:
    """Memory a model's parameters and buffers take, shared storage counted once."""
    seen, total = set(), 0
    for t in [*model.parameters(), *model.buffers()]:
        key = t.untyped_storage().data_ptr()
        if key not in seen:
            seen.add(key)
            total += t.untyped_storage().nbytes()
    return total


def tokenizer_bytes(folder: Path) -> int:
    """The memory a folder's tokenizer takes once loaded: ``TOKENIZER_BYTES_PER_FILE_BYTE`` x its files' bytes."""
    total = 0
    for name in TOKENIZER_FILES:
        try:
            total += (Path(folder) / name).stat().st_size
        except OSError:
            pass
    return TOKENIZER_BYTES_PER_FILE_BYTE * total
