"""A checkpoint folder: where the folders are, what is wrong with one, and loading it.

``checkpoint_problems`` says what is wrong with a folder before anything is loaded (unreadable config,
missing, empty or truncated weights, tensors missing, unexpected or of the wrong shape, an unreadable
tokenizer); ``load_checkpoint`` refuses such a folder with a ``CheckpointError`` that names the problems,
so no weight is ever silently left at its random initialisation.
"""

import json
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

from modeling import ScratchTransformerConfig

from .paths import checkpoints_dir


def checkpoint_folders(root: Path | None = None) -> list[Path]:
    """Every ``root/<name>/`` that holds a config.json."""
    root = checkpoints_dir() if root is None else Path(root)
    return sorted(config.parent for config in root.glob("*/config.json"))


class CheckpointError(ValueError):
    """A checkpoint folder that cannot be served as it is; the message lists every problem found."""


WEIGHTS_FILE = "model.safetensors"


def _model_class(config: ScratchTransformerConfig):
    return AutoModelForSeq2SeqLM if config.is_encoder_decoder else AutoModelForCausalLM


def read_config(folder: Path) -> ScratchTransformerConfig:
    """The folder's config.json as a validated ScratchTransformerConfig, or a CheckpointError saying why not."""
    path = Path(folder) / "config.json"
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        raise CheckpointError(f"{path.name} is missing") from None
    except (OSError, ValueError) as error:
        raise CheckpointError(f"{path.name} is not readable JSON ({error})") from None
    if not isinstance(raw, dict) or raw.get("model_type") != ScratchTransformerConfig.model_type:
        kind = raw.get("model_type") if isinstance(raw, dict) else None
        raise CheckpointError(f"{path.name} describes a model of type {kind!r}, not {ScratchTransformerConfig.model_type!r}")
    try:
        return ScratchTransformerConfig.from_dict(raw)
    except (ValueError, TypeError) as error:
        raise CheckpointError(f"{path.name} is not a valid configuration: {error}") from None


def expected_tensors(config: ScratchTransformerConfig) -> dict[str, tuple[int, ...]]:
    """Name -> shape of every tensor the weights file must hold: the model's state dict without the tied
    copies, which save_pretrained leaves out (built on the meta device: no memory, no initialisation)."""
    with torch.device("meta"):
        model = _model_class(config).from_config(config)
    tied = set(model.all_tied_weights_keys)
    return {name: tuple(t.shape) for name, t in model.state_dict().items() if name not in tied}


def checkpoint_problems(folder: Path) -> list[str]:
    """Everything that would keep ``folder`` from loading as a whole, correct model; [] when it is sound."""
    folder = Path(folder)
    try:
        config = read_config(folder)
    except CheckpointError as error:
        return [str(error)]
    problems = []
    weights = folder / WEIGHTS_FILE
    if not weights.exists():
        problems.append(f"{WEIGHTS_FILE} is missing")
    elif weights.stat().st_size == 0:
        problems.append(f"{WEIGHTS_FILE} is empty")
    else:
        try:
            with safe_open(weights, framework="pt") as f:
                found = {name: tuple(f.get_slice(name).get_shape()) for name in f.keys()}
        except (SafetensorError, OSError) as error:
            problems.append(f"{WEIGHTS_FILE} is damaged or truncated ({error})")
        else:
            expected = expected_tensors(config)
            missing = sorted(set(expected) - set(found))
            unexpected = sorted(set(found) - set(expected))
            wrong = sorted(n for n in set(expected) & set(found) if expected[n] != found[n])
            if missing:
                problems.append(f"{WEIGHTS_FILE} lacks {len(missing)} tensor(s): {', '.join(missing[:5])}"
                                + (" ..." if len(missing) > 5 else ""))
            if unexpected:
                problems.append(f"{WEIGHTS_FILE} has {len(unexpected)} tensor(s) this model does not use: "
                                f"{', '.join(unexpected[:5])}" + (" ..." if len(unexpected) > 5 else ""))
            if any(name.endswith(("q_proj.weight", "k_proj.weight", "v_proj.weight")) for name in unexpected):
                problems.append(f"it stores Q, K and V apart (q_proj, k_proj, v_proj), as checkpoints did before "
                                f"they were stacked into qkv_proj: `python -m training.checkpoints --upgrade {folder}` "
                                "rewrites it")
            for name in wrong[:5]:
                problems.append(f"{WEIGHTS_FILE}: {name} has shape {list(found[name])}, the config needs {list(expected[name])}")
    tokenizer = folder / "tokenizer.json"
    if not tokenizer.exists():
        problems.append("tokenizer.json is missing")
    else:
        try:
            json.loads(tokenizer.read_text())
        except (OSError, ValueError) as error:
            problems.append(f"tokenizer.json is not readable JSON ({error})")
    return problems


def load_checkpoint(folder: Path):
    """(model in eval mode, tokenizer) from a checkpoint folder; the Auto class follows the config.

    Raises CheckpointError naming every problem (see ``checkpoint_problems``); loading also checks
    transformers' own loading report, so a tensor that would stay randomly initialised is an error."""
    folder = Path(folder)
    problems = checkpoint_problems(folder)
    if problems:
        raise CheckpointError(f"checkpoint {folder.name} cannot be loaded: " + "; ".join(problems))
    config = read_config(folder)
    model, info = _model_class(config).from_pretrained(folder, output_loading_info=True)
    reported = {k: v for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    if reported:
        raise CheckpointError(f"checkpoint {folder.name} did not load cleanly: {reported}")
    return model.eval(), AutoTokenizer.from_pretrained(folder)
