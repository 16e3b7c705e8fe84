"""The model code each shipped checkpoint carries.

    python -m training.checkpoints      # copy modeling's remote code into every checkpoint folder

A checkpoint loads with ``trust_remote_code=True`` where ``modeling`` is not importable because it carries
the model's code beside its weights (config.json's ``auto_map`` names it). Those copies are generated from
the package by this one command, never edited by hand; a test keeps them byte-equal to the package.
Checking and loading a checkpoint folder is ``checkpointing.loading``.
"""

import argparse
import shutil
from pathlib import Path

import modeling
from checkpointing.loading import checkpoint_folders

MODELING_DIR = Path(modeling.__file__).resolve().parent
# what save_pretrained ships as remote code: the model module and the modules it imports (relative imports)
MODEL_CODE_FILES = ("configuration_scratch_transformer.py", "modeling_scratch_transformer.py", "recording.py")


def ship_model_code(root: Path | None = None) -> list[Path]:
    """Copy the package's model code into every checkpoint folder; return the files that changed."""
    changed = []
    for folder in checkpoint_folders(root):
        for name in MODEL_CODE_FILES:
            source, target = MODELING_DIR / name, folder / name
            if not target.exists() or target.read_bytes() != source.read_bytes():
                shutil.copyfile(source, target)
                changed.append(target)
    return changed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, help="checkpoint root (default: the repository's checkpoints/)")
    args = parser.parse_args()
    changed = ship_model_code(args.root)
    print(f"{len(changed)} file(s) updated" + "".join(f"\n  {path}" for path in changed))


if __name__ == "__main__":
    main()
