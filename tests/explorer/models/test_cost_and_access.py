"""What explorer.models bounds before any work starts: the parameter count from the config's numbers alone
(exact against built tiny models of every family), file caps alike for the Hub and uploads, whose token a request
carries (``hub_files.access``), and what a visitor types as a repo (an id or a model page's address)."""

import json

import pytest
from transformers import AutoConfig, AutoModelForCausalLM

from explorer.core.inputs import InputProblem
from explorer.core.visitor import Visitor, visiting
from explorer.models import hub_files, plans
from support.hub_repos import TINY
from support.tiny_models import tiny_causal_lm

VARIANTS = {  # model_type -> config changes beyond TINY's, each a branch of the count
    "gpt2": [{}, {"tie_word_embeddings": False}, {"n_inner": 48}],
    "llama": [{}, {"tie_word_embeddings": True}, {"attention_bias": True, "mlp_bias": True, "head_dim": 16}],
    "qwen2": [{}, {"tie_word_embeddings": True}],
    "mistral": [{}, {"tie_word_embeddings": True}, {"head_dim": 4}],
    "gpt_neox": [{}, {"tie_word_embeddings": True}, {"attention_bias": False}],
}
OURS = [{}, dict(position_encoding="learned"), dict(position_encoding="alibi", feed_forward="none", final_layer_norm=False),
        dict(tie_word_embeddings=False, norm="rmsnorm", feed_forward="gated", n_kv_heads=2, bias=False),
        dict(position_encoding="sinusoidal", qkv_bias=False, attention_bias=True, feed_forward_bias=False)]


def built(model) -> int:
    return sum(p.numel() for p in model.parameters())  # a tied tensor once


@pytest.mark.parametrize("model_type, extra", [(t, e) for t, es in VARIANTS.items() for e in es])
def test_the_count_from_the_numbers_equals_a_built_models(model_type, extra):
    config = AutoConfig.for_model(model_type, vocab_size=100, **{**TINY[model_type], **extra})
    raw = json.loads(config.to_json_string(use_diff=True))  # what a repo's config.json holds: defaults left out
    assert plans.count_parameters(raw) == built(AutoModelForCausalLM.from_config(config))


@pytest.mark.parametrize("options", OURS)
def test_the_count_of_ours_equals_a_built_models(options):
    model = tiny_causal_lm(**options)
    assert plans.count_parameters(model.config.to_dict()) == built(model)


def test_a_million_layers_are_counted_not_built():
    """GPT-2 small's numbers with 10^6 layers: Vd + Pd + L(12d² + 13d) + 2d, d 768, V 50257, P 1024."""
    d, layers = 768, 10**6
    expected = 50257 * d + 1024 * d + layers * (12 * d * d + 13 * d) + 2 * d
    assert plans.count_parameters({"model_type": "gpt2", "n_layer": layers}) == expected
    with pytest.raises(InputProblem, match="parameters; this app opens models of at most"):
        plans.plan("A repo", {"config.json": 100, "tokenizer.json": 100, "model.safetensors": 100},
                   json.dumps({"model_type": "gpt2", "n_layer": layers}).encode())


@pytest.mark.parametrize("bad", [{"n_layer": "12"}, {"n_layer": -1}, {"n_embd": 1.5}, {"vocab_size": True}])
def test_numbers_that_are_not_sizes_are_refused_by_name(bad):
    with pytest.raises(InputProblem, match=f"`{next(iter(bad))}`"):
        plans.count_parameters({"model_type": "gpt2", **bad})


def test_every_file_a_plan_reads_has_a_cap_in_a_listing():
    sizes = {"config.json": 100, "tokenizer.json": plans.FILE_CAPS["tokenizer.json"] + 1, "model.safetensors": 100}
    with pytest.raises(InputProblem, match=r"tokenizer.json is [\d,]+ bytes \(at most"):
        plans.plan("A repo", sizes, json.dumps({"model_type": "gpt2"}).encode())


def test_the_families_are_listed_each_with_its_type_once():
    line = plans.families_line()
    assert "GPT-2 (`gpt2`)" in line and line.count("scratch_transformer") == 1


@pytest.mark.parametrize("typed, repo_id", [("https://huggingface.co/openai-community/gpt2", "openai-community/gpt2"),
                                            ("huggingface.co/EleutherAI/pythia-14m/tree/step1000", "EleutherAI/pythia-14m"),
                                            ("https://huggingface.co/gpt2", "gpt2")])
def test_a_model_pages_address_gives_its_repo_id(typed, repo_id):
    assert hub_files.check_repo_id(typed) == repo_id


@pytest.mark.parametrize("typed, box, expected", [
    ("huggingface.co/EleutherAI/pythia-14m/tree/step1000", "", ("EleutherAI/pythia-14m", "step1000")),
    ("https://huggingface.co/EleutherAI/pythia-14m/tree/step1000", "step1000", ("EleutherAI/pythia-14m", "step1000")),
    ("https://huggingface.co/gpt2/blob/refs%2Fpr%2F3/config.json", None, ("gpt2", "refs/pr/3")),
    ("https://huggingface.co/openai-community/gpt2", "v1", ("openai-community/gpt2", "v1")),
    ("openai-community/gpt2", None, ("openai-community/gpt2", None))])
def test_a_pages_address_at_a_revision_opens_that_revision(typed, box, expected):
    assert hub_files.check_repo_and_revision(typed, box) == expected


def test_an_address_and_a_revision_box_that_disagree_are_refused():
    with pytest.raises(InputProblem, match=r"is at revision `step1000`, but the revision box says `main`"):
        hub_files.check_repo_and_revision("https://huggingface.co/EleutherAI/pythia-14m/tree/step1000", "main")
    with pytest.raises(InputProblem, match="is not a revision"):
        hub_files.check_repo_and_revision("https://huggingface.co/gpt2/tree/a..b")


@pytest.mark.parametrize("typed", ["https://example.com/a/b", "https://huggingface.co/datasets/a/b", "a/b/c", "bad id!"])
def test_a_bad_repo_id_gets_our_message_not_the_libraries(typed):
    with pytest.raises(InputProblem) as error:
        hub_files.check_repo_id(typed)
    assert "repo_type" not in str(error.value) and "A repo id is `name` or `owner/name`" in str(error.value)


def test_the_machines_token_acts_for_the_operator_only(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_machine")
    monkeypatch.delenv("SPACE_ID", raising=False)
    monkeypatch.delenv(hub_files.SHARE_TOKEN_ENV, raising=False)
    stranger, signed_in = Visitor("s1"), Visitor("s2", oauth_token="hf_own")
    monkeypatch.setitem(hub_files._serving, "host", "0.0.0.0")  # restored after: an app server may share the process
    assert hub_files.access() == hub_files.Access("hf_machine", True, "operator")  # Python, outside a request: LOCAL
    with visiting(stranger):
        assert hub_files.access() == hub_files.Access(False, False, "anonymous")  # token=False: no fall-back
    with visiting(signed_in):
        assert hub_files.access() == hub_files.Access("hf_own", False, "visitor")
    monkeypatch.setenv(hub_files.SHARE_TOKEN_ENV, "1")
    with visiting(stranger):
        assert hub_files.access() == hub_files.Access("hf_machine", False, "shared")
    monkeypatch.delenv(hub_files.SHARE_TOKEN_ENV)
    for host in ("127.0.0.1", "::1", "localhost"):
        monkeypatch.setitem(hub_files._serving, "host", host)
        with visiting(stranger):
            assert hub_files.access().whose == "operator"
    monkeypatch.setenv("SPACE_ID", "someone/space")
    with visiting(stranger):
        assert hub_files.access().whose == "anonymous"
