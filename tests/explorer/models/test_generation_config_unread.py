"""A stranger's generation_config.json is never read: the app decodes with the visitor's settings alone. A repo's file
that watermarks, suppresses tokens, forbids repeats, sets a minimum length and asks for 64 sequences (which made
transformers' loading fail: "weights do not load") is not fetched from the Hub nor unpacked from an upload, and one
already in a folder is not read on loading (``converting.ids_only_decoding``): greedy generation is the argmax chain of
transformers' own model with the same weights, token for token."""

import json
import zipfile

import pytest
import torch
from transformers import AutoModelForCausalLM

from explorer.core.visitor import Visitor, visiting
from explorer.generation.decoding import DecodingSettings, generate_ids
from explorer.models import opening, registry
from modeling import ScratchTransformerForCausalLM
from support.hub_repos import files_of, save_ours, save_transformers_repo

STRANGE = {"watermarking_config": {"greenlist_ratio": 0.25}, "suppress_tokens": list(range(3, 300)),
           "no_repeat_ngram_size": 1, "min_new_tokens": 50, "num_return_sequences": 64, "bos_token_id": 1,
           "eos_token_id": 2}
GREEDY = DecodingSettings(False, max_new_tokens=12)
PROMPT = torch.tensor([[5, 17, 42, 9, 100, 7]])


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """family -> a saved folder without generation_config.json (the reference reads it)."""
    saved = {"gpt2": save_transformers_repo(tmp_path_factory.mktemp("gpt2"), "gpt2"),
             "ours": save_ours(tmp_path_factory.mktemp("ours"))}
    for folder in saved.values():
        (folder / "generation_config.json").unlink(missing_ok=True)
    return saved


@pytest.fixture(scope="module")
def hub(start_fake_hub, folders):
    server = start_fake_hub()
    for family, folder in folders.items():
        server.add_repo(f"strange/{family}", dict(files_of(folder), **{"generation_config.json": json.dumps(STRANGE).encode()}))
    return server


def argmax_chain(folder) -> list[int]:
    """transformers' own greedy continuation of PROMPT from the folder (which holds no generation_config.json)."""
    cls = ScratchTransformerForCausalLM if folder.name.startswith("ours") else AutoModelForCausalLM
    model = cls.from_pretrained(folder).eval()
    with torch.no_grad():
        out = model.generate(PROMPT, attention_mask=torch.ones_like(PROMPT), do_sample=False,
                             max_new_tokens=GREEDY.max_new_tokens, eos_token_id=None, pad_token_id=0)
    return out[0, PROMPT.shape[1]:].tolist()


def no_strange_setting(model) -> bool:
    config = model.generation_config
    return (config.watermarking_config is None and config.suppress_tokens is None and config.no_repeat_ngram_size in (None, 0)
            and config.min_new_tokens is None and config.num_return_sequences in (None, 1))


@pytest.mark.parametrize("family", ["gpt2", "ours"])
def test_a_repos_generation_config_is_not_fetched_and_greedy_stays_the_argmax_chain(hub, folders, family):
    opened = opening.open_repo(f"strange/{family}")
    assert hub.downloads(f"strange/{family}", "generation_config.json") == 0
    _, model, _ = registry.resolve(opened.name)
    assert no_strange_setting(model)
    ours = generate_ids(model, PROMPT, GREEDY)[0, PROMPT.shape[1]:].tolist()
    expected = argmax_chain(folders[family])
    assert ours[:len(expected)] == expected and len(expected) >= 1  # ours stops at the end token where theirs may not


def test_an_uploads_generation_config_is_not_unpacked_and_one_in_its_folder_is_not_read(hub, folders, tmp_path):
    archive = tmp_path / "strange.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for path in folders["ours"].iterdir():
            z.write(path, path.name)
        z.writestr("generation_config.json", json.dumps(STRANGE))
    with visiting(Visitor("visitor-generation-config")):
        opened = opening.open_upload(archive)
        assert not (opened.folder / "generation_config.json").exists()
        folder = tmp_path / "folder"  # a folder that holds one anyway (a Hub cache written before)
        folder.mkdir()
        for path in folders["ours"].iterdir():
            (folder / path.name).write_bytes(path.read_bytes())
        (folder / "generation_config.json").write_text(json.dumps(STRANGE))
        kept = opening.open_folder(folder, "kept", "upload")
        _, model, _ = registry.resolve(kept.name)
    assert no_strange_setting(model)
    ours, expected = generate_ids(model, PROMPT, GREEDY)[0, PROMPT.shape[1]:].tolist(), argmax_chain(folders["ours"])
    assert ours[:len(expected)] == expected
