"""Uploads: a zip of a ``save_pretrained`` folder (Train one yourself's download is one), unpacked into a folder of
its own under this process's temporary folder (``ROOT``, one folder per browser session; removed at exit, and on
SIGTERM by the app): no path leaves it, and only the files a model needs come out (config, tokenizer, the weights of
one format: safetensors when the zip has them, never a pickle beside them), each within its cap (``plans.file_cap``).

Disk is bounded before a byte is written: what the uploads hold in all (``SCRATCH_UPLOAD_DISK``) and per session
(``SCRATCH_UPLOAD_DISK_SESSION``), counted with the new upload's files.
"""

import atexit
import hashlib
import os
import re
import secrets
import shutil
import tempfile
import zipfile
from pathlib import Path

from explorer.core import visitor
from explorer.core.inputs import InputProblem
from explorer.core.settings import UPLOAD_DISK, UPLOAD_DISK_SESSION, megabytes
from explorer.models.plans import FILE_CAPS, TOKENIZER_FILES, WEIGHTS, file_cap, limits

ROOT = Path(tempfile.mkdtemp(prefix="opened-models-"))  # the unpacked uploads of this process, removed at its exit
atexit.register(shutil.rmtree, ROOT, ignore_errors=True)
MAX_ZIP_MEMBERS = 64
_SHARD = re.compile(r"(model|pytorch_model)-\d{5}-of-\d{5}\.(safetensors|bin)")


def _gradio_cache() -> Path:
    """Where gradio keeps what visitors upload (``GRADIO_TEMP_DIR``, else the system's temporary folder's gradio/)."""
    return Path(os.environ.get("GRADIO_TEMP_DIR") or Path(tempfile.gettempdir()) / "gradio").resolve()


def remove_all() -> None:
    """Remove every unpacked upload (the app calls it on SIGTERM; exit does through atexit)."""
    shutil.rmtree(ROOT, ignore_errors=True)


def disk_used(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) if folder.exists() else 0


def session_folder() -> Path:
    """The folder of the visitor's uploads under ``ROOT`` (a digest of the session: no name a visitor chose)."""
    session = visitor.current().session
    return ROOT / (hashlib.sha256(session.encode()).hexdigest()[:16] if session else "local")


class UploadsFull(InputProblem):
    """An upload that would take all visitors' uploads past their bound (idle pages' uploads may make room)."""


def _check_disk(folder: Path, adding: int) -> None:
    """Refuse an upload of ``adding`` bytes that would take the session's or all uploads' disk past its bound."""
    for used, bound, whose, problem in ((disk_used(folder.parent), UPLOAD_DISK_SESSION.value(), "your uploads", InputProblem),
                                        (disk_used(ROOT), UPLOAD_DISK.value(), "all visitors' uploads", UploadsFull)):
        if used + adding > bound:
            raise problem(f"This upload ({megabytes(adding)}) would take {whose} past {megabytes(bound)} on disk "
                          f"({megabytes(used)} held now). Close a model you opened, or try again later.")


def _needed(members: list) -> list:
    """The members a model needs, by their base names: config, tokenizer, and the weights of one format (safetensors
    when any are there), at the zip's top level or in one folder; the first of each name."""
    def base(m):
        return m.filename.replace("\\", "/").rsplit("/", 1)[-1]

    shallow = [m for m in members if m.filename.replace("\\", "/").count("/") <= 1]
    names = {base(m) for m in shallow}
    use = "safetensors" if any(n.endswith(".safetensors") or n == WEIGHTS["safetensors"][1] for n in names) else "pickle"
    shard_ext = ".safetensors" if use == "safetensors" else ".bin"
    wanted = {"config.json", *TOKENIZER_FILES, *WEIGHTS[use]}
    chosen = {}
    for m in shallow:
        name = base(m)
        if (name in wanted or (_SHARD.fullmatch(name) and name.endswith(shard_ext))) and name not in chosen:
            chosen[name] = m
    return list(chosen.values())


def max_upload_bytes() -> int:
    """The largest upload the app takes: the weights' limit and room for the rest of a model folder."""
    return limits()["bytes"] + 50_000_000


def unpack_zip(archive: Path, target: Path, disk_bounded: bool = False) -> Path:
    """The files a model needs from a zip of a save_pretrained folder (at its top level or in one folder), extracted
    into ``target``: no path leaves it, nothing but config, tokenizer and one format's weights, each within its cap;
    ``disk_bounded``: within the uploads' disk bounds too (``target``'s parent is the session's folder)."""
    try:
        with zipfile.ZipFile(archive) as z:
            members = [m for m in z.infolist() if not m.is_dir()]
            if len(members) > MAX_ZIP_MEMBERS * 16:
                raise InputProblem(f"The zip holds {len(members)} files; a model folder holds a few.")
            needed = _needed(members)
            names = {m.filename: m.filename.replace("\\", "/").rsplit("/", 1)[-1] for m in needed}
            too_large = [f"{names[m.filename]} is {m.file_size:,} bytes (at most {file_cap(names[m.filename]):,})"
                         for m in needed if names[m.filename] in FILE_CAPS and m.file_size > file_cap(names[m.filename])]
            if too_large:
                raise InputProblem(f"Your upload cannot be opened: its {'; its '.join(too_large)}.")
            total = sum(m.file_size for m in needed)
            if total > max_upload_bytes():
                raise InputProblem(f"The zip unpacks to {megabytes(total)}; this app opens at most "
                                   f"{megabytes(limits()['bytes'])} of weights.")
            if disk_bounded:
                _check_disk(target, total)
            target.mkdir(parents=True)
            for m in needed:  # zipfile reads no more than a member's declared size (and checks its CRC)
                with z.open(m) as source, open(target / names[m.filename], "wb") as out:
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
    folder = unpack_zip(Path(str(path)), session_folder() / secrets.token_hex(8), disk_bounded=True)
    if source == "upload" and _gradio_cache() in Path(str(path)).resolve().parents:
        Path(str(path)).unlink(missing_ok=True)  # the visitor's zip, unpacked: gradio's copy is no longer needed
    title = "trained" if source == "trained" else re.sub(r"[^A-Za-z0-9_.-]+", "-", Path(str(path)).stem)[:40] or "upload"
    return folder, title
