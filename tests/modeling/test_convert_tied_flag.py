"""A config that says ``tie_word_embeddings`` while its checkpoint stores an LM head unlike the embedding: transformers
keeps the stored head (it warns and does not tie), so the converters tie ours as the loaded model holds its weights, not
as the flag says (``convert._head_as_loaded``). Each family, saved untied and its config's flag then set: ours equals
transformers' logits (float32, 1e-5) with a head of its own; a model truly tied stays tied."""

import pytest
import torch
from transformers import AutoModelForCausalLM

from modeling.convert import CONVERTERS, from_transformers
from support.hub_repos import TINY, save_untied_said_tied, tokenizer, transformers_model

TOLERANCE = 1e-5
IDS = torch.tensor([[5, 17, 42, 9, 100, 7, 3, 64]])


@pytest.mark.parametrize("family", sorted(CONVERTERS))
def test_a_head_stored_apart_under_a_tied_flag_is_converted_as_loaded(family, tmp_path):
    theirs = AutoModelForCausalLM.from_pretrained(save_untied_said_tied(tmp_path, family)).eval()
    head, embedding = theirs.get_output_embeddings().weight, theirs.get_input_embeddings().weight
    assert theirs.config.tie_word_embeddings and not torch.equal(head, embedding)  # kept apart, as transformers loads it
    ours = from_transformers(theirs).eval()
    assert not ours.config.tie_word_embeddings
    assert ours.lm_head.weight.data_ptr() != ours.model.decoder.embed.token.weight.data_ptr()
    assert torch.equal(ours.lm_head.weight, head) and torch.equal(ours.model.decoder.embed.token.weight, embedding)
    with torch.inference_mode():
        assert (ours(IDS).logits - theirs(IDS).logits).abs().max().item() <= TOLERANCE
    assert ours.num_parameters() == theirs.num_parameters()


@pytest.mark.parametrize("family", ["gpt2", "gpt_neox"])
def test_a_model_truly_tied_stays_tied(family):
    tok = tokenizer()
    theirs = transformers_model(family, tok, vocab_size=len(tok), **{**TINY[family], "tie_word_embeddings": True})
    ours = from_transformers(theirs).eval()
    assert ours.config.tie_word_embeddings
    assert ours.lm_head.weight.data_ptr() == ours.model.decoder.embed.token.weight.data_ptr()
    with torch.inference_mode():
        assert (ours(IDS).logits - theirs(IDS).logits).abs().max().item() <= TOLERANCE
