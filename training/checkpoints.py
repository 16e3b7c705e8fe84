"""The model code each shipped checkpoint carries, and storing its weights in another dtype.

    python -m training.checkpoints      # copy modeling's remote code into every checkpoint folder

A checkpoint loads with ``trust_remote_code=True`` where ``modeling`` is not importable because it carries
the model's code beside its weights (config.json's ``auto_map`` names it). Those copies are generated from
the package by this one command, never edited by hand; a test keeps them byte-equal to the package.
Checking and loading a checkpoint folder is ``checkpointing.loading``.
"""

import argparse
import shutil
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

import modeling
from checkpointing.loading import checkpoint_folders

MODELING_DIR = Path(modeling.__file__).resolve().parent
# what save_pretrained ships as remote code: the model module and the configuration it imports (relative import)
MODEL_CODE_FILES = ("configuration_scratch_transformer.py", "modeling_scratch_transformer.py")


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


def store_weights_as(output_dir: Path, dtype: str) -> None:
    """Rewrite ``output_dir/model.safetensors`` with its floating-point tensors in ``dtype``.

    config.json keeps ``"dtype": "float32"``, so ``from_pretrained`` upcasts on load and the model
    computes in float32 as trained; only the storage is rounded. float16 keeps 11 significant bits
    (relative rounding error <= 2**-11); weights here lie far inside its range (|w| < 65504).
    """
    path = output_dir / "model.safetensors"
    with safe_open(path, framework="pt") as f:
        metadata = f.metadata()
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    target = getattr(torch, dtype)
    if any(t.is_floating_point() and t.abs().max() > torch.finfo(target).max for t in tensors.values()):
        raise ValueError(f"a weight of {path} does not fit in {dtype}")
    save_file({k: t.to(target) if t.is_floating_point() else t for k, t in tensors.items()}, path, metadata)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, help="checkpoint root (default: the repository's checkpoints/)")
    args = parser.parse_args()
    changed = ship_model_code(args.root)
    print(f"{len(changed)} file(s) updated" + "".join(f"\n  {path}" for path in changed))


if __name__ == "__main__":
    main()
