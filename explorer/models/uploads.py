"""Uploads: a zip of a ``save_pretrained`` folder (Train one yourself's download is one), unpacked into a folder of
its own under this process's temporary folder (``ROOT``, removed at exit): no path leaves it, only the data files a
model folder holds (config, tokenizer, weights) come out, within the weights' byte limit.
"""

import atexit
import re
import secrets
import shutil
import tempfile
import zipfile
from pathlib import Path

from explorer.core.inputs import InputProblem
from explorer.models.plans import OPTIONAL_FILES, TOKENIZER_FILES, WEIGHTS, limits, megabytes

ROOT = Path(tempfile.mkdtemp(prefix="opened-models-"))  # the unpacked uploads of this process, removed at its exit
atexit.register(shutil.rmtree, ROOT, ignore_errors=True)
MAX_ZIP_MEMBERS = 64


def max_upload_bytes() -> int:
    """The largest upload the app takes: the weights' limit and room for the rest of a model folder."""
    return limits()["bytes"] + 50_000_000


def unpack_zip(archive: Path, target: Path) -> Path:
    """The data files of a zip of a save_pretrained folder (at its top level or in one folder), extracted into
    ``target``: no path leaves it, nothing but config, tokenizer and weight files, the Hub's byte limit."""
    wanted = {"config.json", *TOKENIZER_FILES, *OPTIONAL_FILES, *(n for pair in WEIGHTS.values() for n in pair)}
    try:
        with zipfile.ZipFile(archive) as z:
            members = [m for m in z.infolist() if not m.is_dir()]
            if len(members) > MAX_ZIP_MEMBERS * 16:
                raise InputProblem(f"The zip holds {len(members)} files; a model folder holds a few.")
            total = sum(m.file_size for m in members)
            if total > max_upload_bytes():
                raise InputProblem(f"The zip unpacks to {megabytes(total)}; this app opens at most "
                                   f"{megabytes(limits()['bytes'])} of weights.")
            target.mkdir(parents=True)
            for m in members:
                base = m.filename.replace("\\", "/").rsplit("/", 1)[-1]
                shard = re.fullmatch(r"(model|pytorch_model)-\d{5}-of-\d{5}\.(safetensors|bin)", base)
                if (base in wanted or shard) and m.filename.count("/") <= 1 and not (target / base).exists():
                    with z.open(m) as source, open(target / base, "wb") as out:
                        shutil.copyfileobj(source, out)
    except zipfile.BadZipFile:
        raise InputProblem("That file is not a zip: give the zip of a save_pretrained folder "
                           "(Train one yourself's download is one).") from None
    return target



def unpack_upload(path, source: str = "upload") -> tuple[Path, str]:
    """(a new folder under ``ROOT`` holding the upload's data files, its title for the menu) of an uploaded zip of a
    save_pretrained folder (``source`` "trained": the zip Train one yourself made)."""
    if not path or not Path(str(path)).is_file():
        if source == "trained":
            raise InputProblem("Train a model first: this opens the model the tab just trained.")
        raise InputProblem("Upload a zip of a save_pretrained folder (config.json, model.safetensors, tokenizer.json).")
    folder = unpack_zip(Path(str(path)), ROOT / secrets.token_hex(8))
    title = "trained" if source == "trained" else re.sub(r"[^A-Za-z0-9_.-]+", "-", Path(str(path)).stem)[:40] or "upload"
    return folder, title
