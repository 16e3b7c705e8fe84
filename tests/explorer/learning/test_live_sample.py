"""explorer/learning/live_snapshots.sample: Train one yourself's greedy sample of a text, decoded whole."""

import torch
from transformers import GenerationConfig

from explorer.learning.live_settings import LiveSettings
from explorer.learning.live_snapshots import SAMPLE_PROMPT_TOKENS, sample
from support.fixtures_checkpoints import causal_lm, train_tokenizer


def test_a_text_sample_decodes_a_character_split_across_tokens_whole():
    """Before, each token was decoded alone and the pieces joined: 'é', two tokens of one byte each, read '��'."""
    tokenizer = train_tokenizer()
    model = causal_lm(tokenizer).eval()
    settings = LiveSettings(data="own-text", text="Café déjà vu, naïve thee", sample_tokens=6, context_length=64)
    ids = tokenizer(settings.text, add_special_tokens=False).input_ids[:SAMPLE_PROMPT_TOKENS]
    assert len(tokenizer("é", add_special_tokens=False).input_ids) == 2  # one byte a token

    written = sample(model, settings, tokenizer)

    out = model.generate(torch.tensor([ids]), generation_config=GenerationConfig(
        max_new_tokens=6, do_sample=False, pad_token_id=1, eos_token_id=None, bos_token_id=0))
    assert written.prompt == [tokenizer.decode(ids)] and "é" in written.prompt[0] and "\ufffd" not in written.prompt[0]
    assert written.prompt[0] + written.tokens[0] == tokenizer.decode(out[0])
