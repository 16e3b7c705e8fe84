"""training.checkpoints: a damaged checkpoint is refused with the reason, never served half-initialised;
the model code each checkpoint ships is regenerated from the package."""

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from support.fixtures_checkpoints import SEQ2SEQ_NAME
from checkpointing import loading
from training import checkpoints


@pytest.fixture
def copy(tiny_checkpoints, tmp_path):
    def make(name="shakespeare-rope"):
        target = tmp_path / name
        shutil.copytree(tiny_checkpoints / name, target)
        return target
    return make


@pytest.mark.parametrize("name", ["shakespeare-rope", "shakespeare-learned", SEQ2SEQ_NAME])
def test_a_sound_checkpoint_has_no_problems_and_loads(tiny_checkpoints, name):
    assert loading.checkpoint_problems(tiny_checkpoints / name) == []
    model, tokenizer = loading.load_checkpoint(tiny_checkpoints / name)
    assert not model.training and len(tokenizer) == model.config.vocab_size


def test_a_missing_tensor_is_named_and_loading_refuses(copy):
    folder = copy()
    tensors = load_file(folder / "model.safetensors")
    del tensors["model.decoder.stack.layers.1.feed_forward.linear2.weight"]
    save_file(tensors, folder / "model.safetensors", {"format": "pt"})
    problems = loading.checkpoint_problems(folder)
    assert problems == ["model.safetensors lacks 1 tensor(s): model.decoder.stack.layers.1.feed_forward.linear2.weight"]
    with pytest.raises(loading.CheckpointError, match="layers.1.feed_forward.linear2.weight"):
        loading.load_checkpoint(folder)


def test_unexpected_and_wrong_shape_tensors_are_named(copy):
    folder = copy()
    tensors = load_file(folder / "model.safetensors")
    tensors["model.decoder.extra.weight"] = torch.zeros(3)
    tensors["model.decoder.stack.norm.weight"] = torch.ones(31)
    save_file(tensors, folder / "model.safetensors", {"format": "pt"})
    problems = loading.checkpoint_problems(folder)
    assert "model.safetensors has 1 tensor(s) this model does not use: model.decoder.extra.weight" in problems
    assert "model.safetensors: model.decoder.stack.norm.weight has shape [31], the config needs [32]" in problems


@pytest.mark.parametrize("damage, reason", [
    (lambda data: b"", "model.safetensors is empty"),
    (lambda data: data[: len(data) // 2], "model.safetensors is damaged or truncated"),
])
def test_empty_and_truncated_weights_are_refused(copy, damage, reason):
    folder = copy()
    path = folder / "model.safetensors"
    path.write_bytes(damage(path.read_bytes()))
    problems = loading.checkpoint_problems(folder)
    assert len(problems) == 1 and problems[0].startswith(reason)
    with pytest.raises(loading.CheckpointError, match=reason):
        loading.load_checkpoint(folder)


@pytest.mark.parametrize("edit, reason", [
    (lambda c: c.update(n_heads=5), "config.json is not a valid configuration: d_model (hidden_size) must be divisible"),
    (lambda c: c.update(position_encoding="bogus"), "config.json is not a valid configuration: position_encoding must be one of"),
    (lambda c: c.update(model_type="gpt2"), "config.json describes a model of type 'gpt2'"),
])
def test_an_invalid_config_is_refused_with_the_field(copy, edit, reason):
    folder = copy()
    config = json.loads((folder / "config.json").read_text())
    edit(config)
    (folder / "config.json").write_text(json.dumps(config))
    assert loading.checkpoint_problems(folder)[0].startswith(reason)


def test_an_unreadable_tokenizer_is_named(copy):
    folder = copy()
    (folder / "tokenizer.json").write_text("{not json")
    assert loading.checkpoint_problems(folder)[0].startswith("tokenizer.json is not readable JSON")


def test_ship_model_code_copies_the_package_code_into_every_checkpoint(copy):
    folder = copy()
    (folder / "modeling_scratch_transformer.py").write_text("# stale\n")
    changed = checkpoints.ship_model_code(folder.parent)
    assert changed == [folder / "modeling_scratch_transformer.py"]
    for name in checkpoints.MODEL_CODE_FILES:
        assert (folder / name).read_bytes() == checkpoints.generated_copy(name)
    assert checkpoints.ship_model_code(folder.parent) == []
    assert checkpoints.MODEL_CODE_FILES == ("configuration_scratch_transformer.py", "modeling_scratch_transformer.py",
                                            "position_encodings.py", "recording.py")  # the model and what it imports


def as_before_stacking(path):
    """Rewrite a weights file as checkpoints stored it before W^Q, W^K, W^V were stacked: qkv_proj split by hand
    into its three d_model-row blocks, named q_proj, k_proj, v_proj."""
    old = {}
    for name, tensor in load_file(path).items():
        if ".qkv_proj." in name:
            for part, block in zip("qkv", tensor.chunk(3)):
                old[name.replace(".qkv_proj.", f".{part}_proj.")] = block.clone()
        else:
            old[name] = tensor
    save_file(old, path, {"format": "pt"})


@pytest.mark.parametrize("name", ["shakespeare-rope", SEQ2SEQ_NAME])  # self-attention only; and cross-attention
def test_an_old_checkpoint_is_named_as_such_and_the_upgrade_restores_it_exactly(copy, name):
    folder = copy(name)
    original = load_file(folder / "model.safetensors")
    as_before_stacking(folder / "model.safetensors")
    (folder / "modeling_scratch_transformer.py").write_text("# the model code of the day it was written\n")
    assert any(".q_proj." in n for n in load_file(folder / "model.safetensors"))
    problems = loading.checkpoint_problems(folder)
    assert f"`python -m training.checkpoints --upgrade {folder}` rewrites it" in problems[-1]
    with pytest.raises(loading.CheckpointError, match="stores Q, K and V apart"):
        loading.load_checkpoint(folder)

    changed = checkpoints.upgrade_checkpoint(folder)
    assert changed == [folder / "model.safetensors", folder / "modeling_scratch_transformer.py"]
    upgraded = load_file(folder / "model.safetensors")
    assert sorted(upgraded) == sorted(original)
    for key, tensor in original.items():  # the stacked matrix, bit for bit, dtype kept
        assert upgraded[key].dtype == tensor.dtype and torch.equal(upgraded[key], tensor), key
    assert loading.checkpoint_problems(folder) == []
    assert not list(folder.glob("*.upgrading"))
    assert checkpoints.upgrade_checkpoint(folder) == []  # nothing left to do


def test_the_upgrade_rewrites_a_timelines_snapshots_and_refuses_an_incomplete_attention(copy, tmp_path):
    folder = copy()
    (folder / "snapshots").mkdir()
    snapshot = folder / "snapshots" / "step-000010.safetensors"
    shutil.copyfile(folder / "model.safetensors", snapshot)
    as_before_stacking(snapshot)
    assert checkpoints.upgrade_weights(folder) == [snapshot]
    assert load_file(snapshot).keys() == load_file(folder / "model.safetensors").keys()

    as_before_stacking(snapshot)
    broken = load_file(snapshot)
    del broken["model.decoder.stack.layers.0.self_attn.v_proj.bias"]
    save_file(broken, snapshot, {"format": "pt"})
    before = snapshot.read_bytes()
    with pytest.raises(ValueError, match=r"layers\.0\.self_attn stores k_proj\.bias, q_proj\.bias but not all three"):
        checkpoints.upgrade_weights(folder)
    assert snapshot.read_bytes() == before and not list(folder.glob("snapshots/*.upgrading"))
    with pytest.raises(FileNotFoundError, match="not a checkpoint folder"):
        checkpoints.upgrade_checkpoint(tmp_path / "nowhere")
