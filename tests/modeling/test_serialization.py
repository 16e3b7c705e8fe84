"""save_pretrained / from_pretrained: exact round trips, safetensors only, tied weights kept tied."""

import json

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM

from support.tiny_models import POSITION_ENCODINGS, random_ids, tiny_causal_lm, tiny_seq2seq


@pytest.mark.parametrize("kind", ["causal", "seq2seq"])
@pytest.mark.parametrize("position_encoding", POSITION_ENCODINGS)
def test_round_trip_is_exact_and_uses_safetensors_only(tmp_path, kind, position_encoding):
    model = (tiny_causal_lm if kind == "causal" else tiny_seq2seq)(position_encoding)
    model.save_pretrained(tmp_path)
    files = {p.name for p in tmp_path.iterdir()}
    assert "model.safetensors" in files and "config.json" in files
    assert not any(name.endswith((".bin", ".pt", ".pkl", ".pth")) for name in files)
    auto = AutoModelForCausalLM if kind == "causal" else AutoModelForSeq2SeqLM
    loaded = auto.from_pretrained(tmp_path).eval()
    assert type(loaded) is type(model)
    original, restored = model.state_dict(), loaded.state_dict()
    assert original.keys() == restored.keys()
    for name in original:
        assert torch.equal(original[name], restored[name]), name
    ids = random_ids(2, 6)
    with torch.no_grad():
        if kind == "causal":
            assert torch.equal(model(ids).logits, loaded(ids).logits)
        else:
            assert torch.equal(model(ids, decoder_input_ids=ids).logits, loaded(ids, decoder_input_ids=ids).logits)
    assert loaded.lm_head.weight.data_ptr() == loaded.get_input_embeddings().weight.data_ptr()


def test_saved_checkpoint_stores_tied_weights_once_and_ships_its_code(tmp_path):
    model = tiny_seq2seq()
    model.save_pretrained(tmp_path)
    tensors = load_file(tmp_path / "model.safetensors")
    embedding_copies = [k for k in tensors if k.endswith("embed.token.weight") or k == "lm_head.weight"]
    assert len(embedding_copies) == 1
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["model_type"] == "scratch_transformer"
    assert config["auto_map"]["AutoModelForSeq2SeqLM"].endswith("ScratchTransformerForSeq2SeqLM")
    assert (tmp_path / "modeling_scratch_transformer.py").exists()
    assert (tmp_path / "configuration_scratch_transformer.py").exists()
    assert (tmp_path / "recording.py").exists()  # imported by the model module: save_pretrained ships it too
