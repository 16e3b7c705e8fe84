"""The byte-level BPE tokenizer: lossless on the whole corpus, loadable with AutoTokenizer."""

from transformers import AutoTokenizer

from training.corpus import SPLITS, read_split
from training.tokenization import END_OF_TEXT, PAD, VOCAB_SIZE, byte_tokenizer, tokenizer_dir, train_tokenizer


def test_round_trip_is_lossless_on_the_whole_corpus(corpus):
    tokenizer = train_tokenizer()
    for split in SPLITS:
        text = read_split(split)
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        assert tokenizer.decode(ids) == text
        assert 2.5 < len(text) / len(ids) < 4.0  # characters per token: BPE merges do compress


def test_any_text_round_trips_even_emoji_and_control_characters(corpus):
    tokenizer = train_tokenizer()
    for text in ["ROMEO:\n  But soft!\twhat light", "🙂 naïve café \x07\x00\u200b", "   leading spaces", ""]:
        assert tokenizer.decode(tokenizer(text, add_special_tokens=False)["input_ids"]) == text


def test_autotokenizer_loads_it_with_its_special_tokens(corpus):
    train_tokenizer()
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir())
    assert len(tokenizer) == VOCAB_SIZE
    assert tokenizer.eos_token == tokenizer.bos_token == END_OF_TEXT and tokenizer.pad_token == PAD
    assert tokenizer.pad_token_id != tokenizer.eos_token_id


def test_the_byte_tokenizer_gives_every_byte_its_own_token_and_round_trips():
    tokenizer = byte_tokenizer()
    assert len(tokenizer) == 258 and tokenizer.pad_token_id == 1 and tokenizer.eos_token_id == 0
    for text in ["Stand & vnfold your selfe", "🙂 naïve ‘tis \x07", ""]:
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        assert len(ids) == len(text.encode()) and tokenizer.decode(ids) == text


def test_saved_tokenizers_carry_no_machine_local_flags(tmp_path, corpus):
    for name, tokenizer in (("bpe", train_tokenizer()), ("bytes", byte_tokenizer())):
        tokenizer.save_pretrained(tmp_path / name)
        config = (tmp_path / name / "tokenizer_config.json").read_text()
        assert '"is_local"' not in config and '"local_files_only"' not in config and '"name_or_path"' not in config
