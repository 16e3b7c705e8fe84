"""A pickled checkpoint whose zip records were compressed after torch.save (a few hundred KB holding a gigabyte of
zeros) is refused by name before it is read, with what to give instead; torch.save's own file opens as before."""

import zipfile

import pytest
import torch

from explorer.core.inputs import InputProblem
from explorer.core.visitor import Visitor, visiting
from explorer.models import opening
from support.hub_repos import save_transformers_repo

TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def pickled(tmp_path_factory):
    return save_transformers_repo(tmp_path_factory.mktemp("pickled") / "gpt2", "gpt2", safe=False)


def test_a_pickle_saved_by_torch_opens(pickled):
    with visiting(Visitor("pickle-stored")):
        assert opening.open_folder(pickled, "stored", "upload").parity.gap <= TOLERANCE


def test_a_pickle_with_compressed_records_is_refused_naming_why(pickled, tmp_path):
    folder = tmp_path / "compressed"
    folder.mkdir()
    for path in pickled.iterdir():
        (folder / path.name).write_bytes(path.read_bytes())
    state = torch.load(pickled / "pytorch_model.bin", weights_only=True)
    torch.save({**state, "padding": torch.zeros(50_000_000)}, tmp_path / "plain.bin")  # 200 MB of zeros
    with zipfile.ZipFile(tmp_path / "plain.bin") as plain, \
            zipfile.ZipFile(folder / "pytorch_model.bin", "w", zipfile.ZIP_DEFLATED) as packed:
        for record in plain.namelist():
            packed.writestr(record, plain.read(record))
    assert (folder / "pytorch_model.bin").stat().st_size < 1_000_000
    with visiting(Visitor("pickle-compressed")), pytest.raises(InputProblem) as refused:
        opening.open_folder(folder, "compressed", "upload")
    assert "pytorch_model.bin holds compressed records" in str(refused.value)
    assert "save the weights again with torch.save, or as safetensors" in str(refused.value)
