"""A SentencePiece-style tokenizer as Llama 2's and Mistral's are on the Hub: BPE over text whose spaces are ▁,
a ▁ put before the text, a byte fallback piece <0x00> ... <0xFF> for every character outside the vocabulary, and
a decoder that drops the space the text starts with. Trained on a few KB, saved and loaded again as a repo is."""

import functools
import json
import tempfile

from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import AutoTokenizer, LlamaTokenizer

from support.fixtures_checkpoints import SAMPLE_TEXT

SPECIAL = ("<unk>", "<s>", "</s>")  # ids 0, 1, 2; then the 256 byte pieces, ids 3 ... 258, as in Llama 2


@functools.cache
def sentencepiece_tokenizer(vocab_size: int = 512):
    """A trained ``LlamaTokenizer`` (transformers' own class), through ``save_pretrained`` and ``AutoTokenizer``."""
    learner = Tokenizer(models.BPE(unk_token="<unk>"))
    learner.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=True)
    learner.train_from_iterator([SAMPLE_TEXT * 4], trainers.BpeTrainer(vocab_size=vocab_size - 256, min_frequency=1,
                                                                       special_tokens=list(SPECIAL), show_progress=False))
    learned = learner.get_vocab()
    pieces = [*SPECIAL, *(f"<0x{b:02X}>" for b in range(256))]
    pieces += [p for p, _ in sorted(learned.items(), key=lambda item: item[1]) if p not in SPECIAL]
    merges = [tuple(merge) for merge in json.loads(learner.to_str())["model"]["merges"]]
    folder = tempfile.mkdtemp(prefix="sentencepiece-")
    LlamaTokenizer(vocab={p: i for i, p in enumerate(pieces)}, merges=merges).save_pretrained(folder)
    return AutoTokenizer.from_pretrained(folder)
