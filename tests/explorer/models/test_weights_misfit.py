"""Weights that cannot serve their config are refused naming what is wrong, in words a repo's owner can act on: a
tensor stored at another shape than the config makes it (file's shape, then the config's; it read "You set
`ignore_mismatched_sizes` to `False`... look at the above report", a report the visitor never sees), one the config
needs and the file lacks, NaN or infinite numbers (they opened, every logit NaN and the parity shown as "a conversion
error"), and a Llama-family ``pad_token_id`` outside the vocabulary, refused before the weights download (transformers'
"Padding_idx must be within num_embeddings" came after it)."""

import json
import shutil

import pytest
from safetensors.torch import load_file, save_file

from explorer.core.inputs import InputProblem
from explorer.core.visitor import Visitor, visiting
from explorer.models import opening
from support.hub_repos import save_ours, save_transformers_repo

FAMILIES = ("gpt2", "llama")


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    return {family: save_transformers_repo(tmp_path_factory.mktemp(f"misfit-{family}"), family) for family in FAMILIES}


def changed(source, folder, weights=None, **config):
    """A copy of ``source`` with ``weights(tensors) -> tensors`` applied to its safetensors and ``config`` set."""
    shutil.copytree(source, folder)
    if weights is not None:
        tensors = weights(load_file(folder / "model.safetensors"))
        save_file({k: v.contiguous() for k, v in tensors.items()}, folder / "model.safetensors", metadata={"format": "pt"})
    raw = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**raw, **config}))
    return folder


def refusal(folder) -> str:
    with visiting(Visitor("visitor-misfit")), pytest.raises(InputProblem) as refused:
        opening.open_folder(folder, "misfit", "upload")
    return str(refused.value)


def first_matrix(tensors: dict) -> str:
    return sorted(name for name, tensor in tensors.items() if tensor.dim() == 2)[0]


@pytest.mark.parametrize("family", FAMILIES)
def test_a_tensor_of_another_shape_is_named_with_both_shapes(saved, family, tmp_path):
    tensors = load_file(saved[family] / "model.safetensors")
    name = first_matrix(tensors)
    rows, columns = tensors[name].shape
    folder = changed(saved[family], tmp_path / "x", lambda t: {**t, name: t[name][:-1]})
    assert refusal(folder) == (f"Your upload's weights do not fit its config.json: `{name}` is stored as {rows - 1} × "
                               f"{columns} where the config makes it {rows} × {columns}. The config and the weights "
                               "must come from one save_pretrained.")


def test_tensors_the_config_needs_and_the_file_lacks_are_named_and_counted(saved, tmp_path):
    folder = changed(saved["llama"], tmp_path / "x", attention_bias=True)  # 2 layers x q, k, v, o biases
    assert refusal(folder).startswith("Your upload's weights do not fit its config.json: "
                                      "`model.layers.0.self_attn.k_proj.bias` is not in the weights (and 7 more).")


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_weights_that_are_not_finite_are_refused_by_name(saved, family, value, tmp_path):
    tensors = load_file(saved[family] / "model.safetensors")
    name = first_matrix(tensors)

    def spoiled(t):
        spoilt = t[name].clone()
        spoilt[0, 0] = value
        return {**t, name: spoilt}

    message = refusal(changed(saved[family], tmp_path / "x", spoiled))
    assert message.startswith(f"Your upload's weights hold numbers that are not finite (NaN or infinity): `{name}` "
                              "holds some.")


@pytest.mark.parametrize("pad", [384, 10**9, -385])
def test_a_llama_pad_id_outside_the_vocabulary_is_refused_before_its_weights_download(start_fake_hub, saved, pad,
                                                                                       tmp_path):
    folder = changed(saved["llama"], tmp_path / "x", pad_token_id=pad)
    vocab = json.loads((folder / "config.json").read_text())["vocab_size"]
    assert vocab == 384
    hub = start_fake_hub()
    hub.add_folder("misfit/pad", folder)
    with pytest.raises(InputProblem, match=rf"config.json has pad_token_id `{pad}`, but its vocab_size is 384 "
                                           r"\(ids 0 to 383\): a Llama model's embedding"):
        opening.open_repo("misfit/pad")
    assert hub.downloads("misfit/pad", "model.safetensors") == 0


def test_a_pad_id_within_the_vocabulary_or_counted_from_its_end_opens(saved, tmp_path):
    for pad in (383, -1):
        with visiting(Visitor("visitor-misfit")):
            assert opening.open_folder(changed(saved["llama"], tmp_path / f"pad{pad}", pad_token_id=pad), "pad",
                                       "upload").parity.gap <= 1e-4


@pytest.mark.parametrize("family", FAMILIES)
def test_finite_weights_whose_logits_overflow_are_refused_saying_so(saved, family, tmp_path):
    """Every weight times 1e18: each is finite, their products pass float32's 3.4e38 (it opened, parity NaN, shown as
    "a conversion error, report it")."""
    folder = changed(saved[family], tmp_path / "x", lambda t: {k: v * 1e18 for k, v in t.items()})
    assert refusal(folder) == ("Your upload's logits are not finite (NaN or infinity) on a plain text of 32 tokens, in "
                               "transformers' own model too: its weights overflow float32 on the way. This app opens "
                               "models whose outputs are numbers.")


def test_one_of_ours_whose_logits_overflow_is_refused_alike(tmp_path):
    folder = changed(save_ours(tmp_path / "ours"), tmp_path / "x", lambda t: {k: v * 1e18 for k, v in t.items()})
    assert refusal(folder).startswith("Your upload's logits are not finite (NaN or infinity) on a plain text of 32 "
                                      "tokens: its weights overflow float32 on the way.")
