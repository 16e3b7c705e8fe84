"""The model code each shipped checkpoint carries, and bringing an older checkpoint's weights up to it.

    python -m training.checkpoints                    # copy modeling's remote code into every checkpoint folder
    python -m training.checkpoints --upgrade FOLDER   # rewrite an older folder's weights for today's model code

A checkpoint loads with ``trust_remote_code=True`` where ``modeling`` is not importable because it carries
the model's code beside its weights (config.json's ``auto_map`` names it). Those copies are generated from
the package by this one command, never edited by hand: each copy's first line says so (``GENERATED_HEADER``), and
the rest of it is byte-equal to the package (a test keeps it so).
Checking and loading a checkpoint folder is ``checkpointing.loading``.

``--upgrade``: checkpoints written before the attention stacked W^Q, W^K and W^V into one ``qkv_proj`` store
``q_proj``, ``k_proj`` and ``v_proj`` apart. The upgrade concatenates them row-wise (q, then k, then v: exactly
the stacked matrix, no arithmetic, dtype kept) in every weights file of the folder (model.safetensors and a
timeline's snapshots), each file replaced atomically, and gives the folder today's model code.
"""

import argparse
import os
import re
import shutil
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

import modeling
from checkpointing.loading import checkpoint_folders

MODELING_DIR = Path(modeling.__file__).resolve().parent
# what save_pretrained ships as remote code: the model module and the modules it imports (relative imports)
MODEL_CODE_FILES = (
    "configuration_scratch_transformer.py", "modeling_scratch_transformer.py", "position_encodings.py", "recording.py",
)
# the first line of every copy; a comment, so the module's docstring stays its first statement
GENERATED_HEADER = ("# GENERATED from modeling/{name} by `python -m training.checkpoints`: edit modeling/, then run that "
                    "command; never edit this copy.\n")
SEPARATE_PROJECTION = re.compile(r"^(?P<attention>.+)\.(?P<part>[qkv])_proj\.(?P<kind>weight|bias)$")


def generated_copy(name: str) -> bytes:
    """What a checkpoint's copy of ``modeling/<name>`` holds: the header line, then the package's file unchanged."""
    return GENERATED_HEADER.format(name=name).encode() + (MODELING_DIR / name).read_bytes()


def copy_model_code(folder: Path) -> list[Path]:
    """Write the package's model code into ``folder`` (``generated_copy``); return the files that changed."""
    changed = []
    for name in MODEL_CODE_FILES:
        target, copy = Path(folder) / name, generated_copy(name)
        if not target.exists() or target.read_bytes() != copy:
            target.write_bytes(copy)
            changed.append(target)
    return changed


def ship_model_code(root: Path | None = None) -> list[Path]:
    """Copy the package's model code into every checkpoint folder; return the files that changed."""
    return [path for folder in checkpoint_folders(root) for path in copy_model_code(folder)]


def stack_qkv(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """State dict with separate ``….{q,k,v}_proj.{weight,bias}`` -> the same with ``….qkv_proj.{weight,bias}``:
    torch.cat((q, k, v)) along the rows. Raises ValueError if an attention has some of the three but not all."""
    out, groups = {}, {}
    for name, tensor in tensors.items():
        match = SEPARATE_PROJECTION.match(name)
        if match is None:
            out[name] = tensor
        else:
            groups.setdefault((match["attention"], match["kind"]), {})[match["part"]] = tensor
    for (attention, kind), parts in groups.items():
        if set(parts) != set("qkv"):
            raise ValueError(f"{attention} stores {', '.join(p + '_proj.' + kind for p in sorted(parts))} but not all "
                             f"three of q_proj, k_proj and v_proj")
        out[f"{attention}.qkv_proj.{kind}"] = torch.cat([parts[p] for p in "qkv"])
    return out


def upgrade_weights(folder: Path) -> list[Path]:
    """Rewrite every weights file of ``folder`` (model.safetensors, snapshots/*.safetensors) that stores Q, K and V
    apart with them stacked (``stack_qkv``); return the files rewritten. A file is written beside the old one and
    moved over it, so an interrupted upgrade leaves every file either old or new, never half-written."""
    folder, rewritten = Path(folder), []
    for path in sorted([folder / "model.safetensors", *folder.glob("snapshots/*.safetensors")]):
        if not path.exists():
            continue
        with safe_open(path, framework="pt") as f:
            if not any(SEPARATE_PROJECTION.match(name) for name in f.keys()):
                continue
            metadata, tensors = f.metadata(), {name: f.get_tensor(name) for name in f.keys()}
        partial = path.with_name(path.name + ".upgrading")
        save_file(stack_qkv(tensors), partial, metadata)
        os.replace(partial, path)
        rewritten.append(path)
    return rewritten


def upgrade_checkpoint(folder: Path) -> list[Path]:
    """``upgrade_weights``, then today's model code into the folder if it carries remote code; the files changed."""
    folder = Path(folder)
    if not (folder / "config.json").exists():
        raise FileNotFoundError(f"{folder} holds no config.json: not a checkpoint folder")
    carries_code = any((folder / name).exists() for name in MODEL_CODE_FILES)
    weights = upgrade_weights(folder)  # first: a file it refuses leaves the folder's code as it was
    return weights + (copy_model_code(folder) if carries_code else [])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, help="checkpoint root (default: the repository's checkpoints/)")
    parser.add_argument("--upgrade", type=Path, nargs="+", metavar="FOLDER",
                        help="checkpoint folders to bring up to today's weights layout and model code")
    args = parser.parse_args()
    changed = ([path for folder in args.upgrade for path in upgrade_checkpoint(folder)] if args.upgrade
               else ship_model_code(args.root))
    print(f"{len(changed)} file(s) updated" + "".join(f"\n  {path}" for path in changed))


if __name__ == "__main__":
    main()
