"""What a finished (or stopped) live training job hands back: ``LiveResult``, its JSON, and ``save_zip``, the trained
model as a zip of its ``save_pretrained`` folder.
"""

import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

from modeling import ScratchTransformerForCausalLM

from explorer.learning.live_settings import LiveSettings


@dataclass
class LiveResult:
    """The finished (or stopped) job: ``losses`` one per step from step 0, the model as trained, its tokenizer
    (for random tokens, one symbol per token id: ``explorer.generation.symbols``)."""

    settings: LiveSettings
    logged_steps: list[int]
    losses: list[float]
    steps_done: int
    stopped: bool
    seconds: float
    induction: list[list[float]]
    model: ScratchTransformerForCausalLM = field(repr=False)
    tokenizer: object = field(default=None, repr=False)

    def to_json(self) -> dict:
        return {"losses": self.losses, "logged_steps": self.logged_steps, "steps_done": self.steps_done,
                "stopped": self.stopped, "seconds": round(self.seconds, 2), "induction": self.induction,
                "settings": {k: v for k, v in asdict(self.settings).items() if k != "text"}}


def save_zip(result: LiveResult, folder: Path) -> Path:
    """``result``'s model and tokenizer saved with save_pretrained into ``folder``/model, zipped to
    ``folder``/model.zip; load it with ``AutoModelForCausalLM.from_pretrained`` (``trust_remote_code=True``
    where the modeling package is not installed)."""
    target = Path(folder) / "model"
    result.model.save_pretrained(target)
    if result.tokenizer is not None:
        result.tokenizer.save_pretrained(target)
    return Path(shutil.make_archive(str(target), "zip", root_dir=target))
