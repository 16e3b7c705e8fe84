"""A Hub repo whose config says ``tie_word_embeddings`` while its weights hold a head of their own (transformers keeps
that head) opens through the fake Hub with transformers' logits (parity within ``PARITY_TOLERANCE``; it read 0.9,
shown as "a conversion error"), and its line counts the parameters it holds, the head's included (the config's numbers
alone count one matrix fewer); so does an upload of it."""

import zipfile

import pytest
from transformers import AutoModelForCausalLM

from explorer.core.inputs import InputProblem
from explorer.core.parity import PARITY_TOLERANCE
from explorer.core.visitor import Visitor, visiting
from explorer.models import opening, plans
from support.hub_repos import files_of, save_untied_said_tied

FAMILIES = ("gpt2", "llama", "gpt_neox")


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    return {family: save_untied_said_tied(tmp_path_factory.mktemp(f"tied-flag-{family}"), family) for family in FAMILIES}


@pytest.fixture(scope="module")
def hub(start_fake_hub, folders):
    server = start_fake_hub()
    for family, folder in folders.items():
        server.add_repo(f"tied-flag/{family}", files_of(folder))
    return server


def held_parameters(folder) -> int:
    return AutoModelForCausalLM.from_pretrained(folder).num_parameters()


@pytest.mark.parametrize("family", FAMILIES)
def test_a_repo_whose_flag_says_tied_opens_with_parity_and_its_own_count(hub, folders, family):
    opened = opening.open_repo(f"tied-flag/{family}")
    assert opened.parity.gap <= PARITY_TOLERANCE
    counted = plans.parameter_count(opened.plan.config)
    assert opened.n_parameters == held_parameters(folders[family]) > counted
    assert "logits as transformers'" in opened.label


def test_an_upload_of_it_opens_alike(folders, tmp_path):
    archive = tmp_path / "tied-flag.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for path in folders["llama"].iterdir():
            z.write(path, path.name)
    with visiting(Visitor("visitor-tied-flag")):
        opened = opening.open_upload(archive)
    assert opened.parity.gap <= PARITY_TOLERANCE
    assert opened.n_parameters == held_parameters(folders["llama"])



def test_the_parameter_limit_holds_for_the_parameters_as_loaded(folders, monkeypatch):
    """A limit between the config's count and the weights held: the plan passes it, the loaded model is refused."""
    folder = folders["gpt_neox"]
    counted = plans.parameter_count(plans.read_config((folder / "config.json").read_bytes(), "x"))
    monkeypatch.setenv(plans.HUB_MAX_PARAMETERS.env, str(counted))
    with visiting(Visitor("visitor-tied-flag-limit")), pytest.raises(
            InputProblem, match=r"Your upload has [\d.]+M parameters; this app opens models of at most"):
        opening.open_folder(folder, "limit", "upload")
    monkeypatch.setenv(plans.HUB_MAX_PARAMETERS.env, str(held_parameters(folder)))
    with visiting(Visitor("visitor-tied-flag-limit")):
        assert opening.open_folder(folder, "limit", "upload").n_parameters == held_parameters(folder)
