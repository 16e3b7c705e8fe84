"""A sharded checkpoint's index names its shards, and transformers joins each name to the folder: an index is a
stranger's file, and it names shards by file name, beside it, or it is refused (``plans.check_shard_index``, read
whatever the source). An upload whose index named an absolute path or a ``../`` path opened the weights found there
(another visitor's upload, an operator's cached model). Sharded models open from an upload and from the Hub alike."""

import json
import shutil
import zipfile

import pytest
from safetensors.torch import load_file

from explorer.core.inputs import InputProblem
from explorer.core.parity import PARITY_TOLERANCE
from explorer.core.visitor import Visitor, visiting
from explorer.models import opening
from support.hub_repos import files_of, save_transformers_repo, tiny_transformers_model, tokenizer

INDEX = "model.safetensors.index.json"


@pytest.fixture(scope="module")
def sharded(tmp_path_factory):
    """A tiny GPT-2 saved in shards of at most 40 KB (its 160 KB of weights in several files) with its index."""
    folder = tmp_path_factory.mktemp("sharded")
    tiny_transformers_model("gpt2", seed=4).save_pretrained(folder, max_shard_size="40KB")
    tokenizer().save_pretrained(folder)
    assert (folder / INDEX).exists() and len(list(folder.glob("model-*.safetensors"))) >= 3
    return folder


@pytest.fixture(scope="module")
def elsewhere(tmp_path_factory):
    """Another model's weights elsewhere on the server, in one file."""
    return save_transformers_repo(tmp_path_factory.mktemp("elsewhere"), "gpt2", seed=9) / "model.safetensors"


def zipped(folder, archive):
    with zipfile.ZipFile(archive, "w") as z:
        for path in folder.iterdir():
            z.write(path, path.name)
    return archive


def upload(archive):
    with visiting(Visitor("visitor-shards")):
        return opening.open_upload(archive)


def with_index(sharded, folder, index: bytes):
    """The sharded folder with its index replaced by ``index``."""
    shutil.copytree(sharded, folder)
    (folder / INDEX).write_bytes(index)
    return folder


def test_a_sharded_upload_opens_with_parity(sharded, tmp_path):
    assert upload(zipped(sharded, tmp_path / "sharded.zip")).parity.gap <= PARITY_TOLERANCE


def test_a_sharded_hub_repo_opens_with_parity(start_fake_hub, sharded):
    hub = start_fake_hub()
    hub.add_folder("shards/tiny", sharded)
    assert opening.open_repo("shards/tiny").parity.gap <= PARITY_TOLERANCE


@pytest.mark.parametrize("how", ["absolute", "relative"])
def test_an_index_naming_weights_elsewhere_on_the_server_is_refused(sharded, elsewhere, tmp_path, how):
    """Every tensor mapped to another model's file by path: it opened, with that model's weights."""
    path = str(elsewhere) if how == "absolute" else "../" * 12 + str(elsewhere).lstrip("/")
    index = json.dumps({"metadata": {}, "weight_map": {name: path for name in load_file(elsewhere)}}).encode()
    folder = with_index(sharded, tmp_path / "spoof", index)
    for shard in folder.glob("model-*.safetensors"):
        shard.unlink()  # nothing but the index: every weight would come from the path
    with pytest.raises(InputProblem) as refused:
        upload(zipped(folder, tmp_path / "spoof.zip"))
    assert str(refused.value) == (f"Your upload's {INDEX} names shards it lacks: `{path}` (an index names files beside "
                                  "it, by name).")


@pytest.mark.parametrize("index", [b"not json", b"[1, 2]", b'{"weight_map": {}}', b'{"metadata": {}}'])
def test_an_index_that_is_no_index_is_refused_by_name(sharded, tmp_path, index):
    folder = with_index(sharded, tmp_path / "broken", index)
    with pytest.raises(InputProblem, match=f"Your upload's {INDEX} is not an index of shards"):
        upload(zipped(folder, tmp_path / "broken.zip"))


def test_a_hub_index_naming_a_shard_the_repo_lacks_is_refused_before_the_shards(start_fake_hub, sharded):
    files = files_of(sharded)
    first = sorted(name for name in files if name.startswith("model-"))[0]
    hub = start_fake_hub()
    hub.add_repo("shards/lacking", {name: data for name, data in files.items() if name != first})
    with pytest.raises(InputProblem, match=f"names shards it lacks: `{first}`"):
        opening.open_repo("shards/lacking")
    assert all(hub.downloads("shards/lacking", name) == 0 for name in files if name.startswith("model-"))
