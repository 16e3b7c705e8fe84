"""explorer/generation/model_ids: a text holding a token added to the tokenizer beyond the model's embedding rows is
refused by every view that reads a text or a typed token, naming the token, before the model sees it; a token added
within the rows (as Llama's special tokens are) is read as any other."""

import pytest
import torch

from explorer.core.inputs import InputProblem
from explorer.generation.decoding import DecodingSettings, generate_text
from explorer.generation.model_ids import model_ids, require_rows
from explorer.learning.gradient_step import gradient_step
from explorer.views import forward_pass, lens, sampling
from explorer.views.patching.analysis import activation_patching
from support.fixtures_checkpoints import causal_lm, seq2seq_lm, train_tokenizer

ADDED = "<|added|>"
GREEDY = DecodingSettings(False, max_new_tokens=3)


@pytest.fixture(scope="module")
def tokenizer():
    """The tests' 384-token tokenizer with one token added on top: id 384."""
    tok = train_tokenizer()
    tok.add_tokens([ADDED], special_tokens=True)
    assert tok.convert_tokens_to_ids(ADDED) == 384
    return tok


@pytest.fixture(scope="module")
def model():
    return causal_lm(train_tokenizer()).eval()  # 384 rows: ids 0 to 383


REFUSED = {  # view -> (call, what the message names)
    "generate": (lambda m, t: generate_text(m, t, f"the {ADDED} king", GREEDY), "The text"),
    "next token": (lambda m, t: sampling.next_token_distribution(m, t, f"the {ADDED}", GREEDY), "The text"),
    "forward pass": (lambda m, t: forward_pass.recorded_pass(m, t, f"the {ADDED} king"), "The text"),
    "logit lens": (lambda m, t: lens.logit_lens(m, t, f"{ADDED} the king"), "The text"),
    "patching, clean": (lambda m, t: activation_patching(m, t, f"the {ADDED} king", "the good king"), "The clean text"),
    "patching, corrupted": (lambda m, t: activation_patching(m, t, "the good king", f"the {ADDED} king"),
                            "The corrupted text"),
    "patching, answer": (lambda m, t: activation_patching(m, t, "the bad king", "the old king", answer=ADDED),
                         "The answer"),
    "gradient step, text": (lambda m, t: gradient_step(f"the {ADDED} king", m, t, -1, None, 0.01), "The text"),
    "gradient step, target": (lambda m, t: gradient_step("the good king", m, t, -1, ADDED, 0.01), "The target"),
}


@pytest.mark.parametrize("view", REFUSED)
def test_every_view_refuses_a_token_beyond_the_embedding_by_name(model, tokenizer, view):
    call, what = REFUSED[view]
    with pytest.raises(InputProblem) as refused:  # before: ValueError from the embedding, or IndexError in the logits
        call(model, tokenizer)
    message = str(refused.value)
    assert message.startswith(f"{what} contains `{ADDED}` (id 384): a token added") and "it reads ids 0 to 383" in message
    assert message.endswith("Leave it out.")


def test_an_encoder_decoders_source_is_checked_too(tokenizer):
    model = seq2seq_lm(train_tokenizer()).eval()
    with pytest.raises(InputProblem, match=r"The text contains `<\|added\|>` \(id 384\)"):
        generate_text(model, tokenizer, f"the {ADDED} king", GREEDY)


def test_a_token_added_within_the_rows_is_read(tokenizer):
    """A model with rows for the added token (vocab 400) reads it: only ids beyond the rows are refused."""
    model = causal_lm(train_tokenizer(), vocab_size=400).eval()
    ids = model_ids(tokenizer, f"the {ADDED} king", 400, "The text")
    assert 384 in ids[0].tolist()
    run = forward_pass.recorded_pass(model, tokenizer, f"the {ADDED} king")
    assert run.logits.shape[-1] == 400 and 384 in run.read.target_ids.tolist()


def test_the_message_names_three_tokens_and_counts_the_rest(tokenizer):
    tok = train_tokenizer()
    tok.add_tokens([f"<|x{i}|>" for i in range(5)], special_tokens=True)
    with pytest.raises(InputProblem) as refused:
        require_rows(torch.tensor([[5, 386, 384, 388, 385, 384, 387]]), tok, 384, "The text")
    message = str(refused.value)
    assert "`<|x0|>` (id 384), `<|x1|>` (id 385), `<|x2|>` (id 386) and 2 more: tokens added" in message
    assert message.endswith("Leave them out.")
    require_rows(torch.tensor([0, 383]), tok, 384, "The text")  # within the rows: nothing raised
