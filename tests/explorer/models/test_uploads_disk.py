"""The uploads' disk is bounded before a byte is written: per
browser session (``SCRATCH_UPLOAD_DISK_SESSION``) and for all of them (``SCRATCH_UPLOAD_DISK``), each upload in its
session's folder; only the files a model needs come out of a zip."""

import zipfile

import pytest

from explorer.core.inputs import InputProblem
from explorer.core.settings import UPLOAD_DISK, UPLOAD_DISK_SESSION
from explorer.core.visitor import Visitor, visiting
from explorer.models import uploads
from support import hub_repos


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    """A zip of a tiny GPT-2's save_pretrained folder, with an unused pickle of zeros beside its safetensors; the
    bytes needed: all but the pickle and generation_config.json (never read: converting.ids_only_decoding)."""
    tmp = tmp_path_factory.mktemp("uploads-disk")
    files = hub_repos.files_of(hub_repos.save_transformers_repo(tmp / "gpt2", "gpt2"))
    path = tmp / "model.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in {**files, "pytorch_model.bin": bytes(1_000_000), "notes/README.md": b"hi"}.items():
            z.writestr(name, data)
    assert "generation_config.json" in files
    return path, sum(len(data) for name, data in files.items() if name != "generation_config.json")


def test_an_upload_holds_only_what_the_model_needs_in_its_sessions_folder(archive):
    path, needed = archive
    with visiting(Visitor("disk-a")):
        folder, title = uploads.unpack_upload(path)
        assert folder.parent == uploads.session_folder() and folder.parent.parent == uploads.ROOT
    assert not {"pytorch_model.bin", "generation_config.json"} & {p.name for p in folder.iterdir()}
    assert uploads.disk_used(folder) == needed


def test_a_sessions_disk_and_all_sessions_disk_are_bounded(archive, monkeypatch):
    path, needed = archive
    monkeypatch.setenv(UPLOAD_DISK_SESSION.env, str(2 * needed))
    with visiting(Visitor("disk-b")):
        uploads.unpack_upload(path)
        uploads.unpack_upload(path)
        with pytest.raises(InputProblem, match="would take your uploads past"):
            uploads.unpack_upload(path)
        assert uploads.disk_used(uploads.session_folder()) == 2 * needed  # nothing of the third was written
    monkeypatch.setenv(UPLOAD_DISK.env, str(uploads.disk_used(uploads.ROOT) + needed - 1))
    with visiting(Visitor("disk-c")), pytest.raises(InputProblem, match="would take all visitors' uploads past"):
        uploads.unpack_upload(path)
