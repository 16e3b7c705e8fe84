"""A Llama or Mistral repo whose tokenizer is SentencePiece-style, as Llama 2's and Mistral 7B's are on the Hub
(tests/support/sentencepiece.py: ▁ for a space, byte pieces <0x00>..<0xFF>, a decoder that drops the first space),
opened through the fake Hub by the real huggingface_hub client: its tokenizer.json passes the stranger's-file check,
the model converts with parity, the tokens are labelled as the model reads them (␣ for ▁, a split character's
bytes), and the views' numbers and greedy text are transformers' own (float32, within 1e-4; about 1e-7 measured)."""

import pytest
import torch
from transformers import AutoModelForCausalLM

from explorer.models import opening, registry
from support.hub_repos import TINY, transformers_model
from support.sentencepiece import sentencepiece_tokenizer

TOLERANCE = 1e-4
FAMILIES = ("llama", "mistral")
TEXT = "Shall I compare thee to a summer's day? Thou art more lovely, ½ more"  # ½: not in the vocabulary


@pytest.fixture(scope="module")
def repos(start_fake_hub, tmp_path_factory):
    """{family: the folder its repo was saved from}, each served as tiny/sp-<family>."""
    hub, tokenizer, folders = start_fake_hub(), sentencepiece_tokenizer(), {}
    for family in FAMILIES:
        folder = tmp_path_factory.mktemp(f"sp-{family}")
        model = transformers_model(family, tokenizer, vocab_size=len(tokenizer), **TINY[family])
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        hub.add_folder(f"tiny/sp-{family}", folder)
        folders[family] = folder
    return folders


def reference(folder):
    return AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()


@pytest.mark.parametrize("family", FAMILIES)
def test_a_sentencepiece_repo_opens_and_every_view_reads_transformers_numbers(repos, family):
    from explorer.generation.decoding import DecodingSettings
    from explorer.views.attention import attention_maps
    from explorer.views.forward_pass import recorded_pass
    from explorer.views.lens import logit_lens

    opened = opening.open_repo(f"tiny/sp-{family}")
    assert opened.model_type == family and opened.parity is not None and opened.parity.gap <= TOLERANCE
    _, model, tokenizer = registry.resolve(f"tiny/sp-{family}")
    run = recorded_pass(model, tokenizer, TEXT)
    ids = run.read.inputs["input_ids"]
    pieces = tokenizer.convert_ids_to_tokens(ids[0].tolist())
    assert "▁I" in pieces and "<0xC2>" in pieces and "<0xBD>" in pieces  # ½ is the bytes c2 bd
    labels = [label.split(":", 1)[1] for label in run.tokens("queries")]
    assert "␣I" in labels and "⟨c2⟩" in labels and "⟨bd⟩" in labels and not any("▁" in label for label in labels)
    with torch.no_grad():
        theirs = reference(repos[family])(ids, output_attentions=True)
    weights = attention_maps(model, tokenizer, TEXT, DecodingSettings(False)).weights["self"]
    assert abs(weights - torch.stack([a[0] for a in theirs.attentions]).numpy()).max() <= TOLERANCE
    assert (run.logits - theirs.logits[0]).abs().max().item() <= TOLERANCE
    assert (logit_lens(model, tokenizer, TEXT).model_logits - theirs.logits[0]).abs().max().item() <= TOLERANCE


@pytest.mark.parametrize("family", FAMILIES)
def test_greedy_text_of_a_sentencepiece_repo_is_transformers_own(repos, family):
    from explorer.generation.decoding import generate_text, sanitize_decoding

    opening.open_repo(f"tiny/sp-{family}")
    _, model, tokenizer = registry.resolve(f"tiny/sp-{family}")
    settings, _ = sanitize_decoding("greedy", 1.0, 0, 1.0, 1.0, 12, 0)
    ids = tokenizer("Shall I", return_tensors="pt").input_ids
    theirs = reference(repos[family]).generate(ids, max_new_tokens=12, do_sample=False, eos_token_id=None)
    whole = tokenizer.decode(theirs[0], skip_special_tokens=True)
    assert whole.startswith("Shall I") and "Shall I" + generate_text(model, tokenizer, "Shall I", settings)[0] == whole
