"""A stranger's tokenizer.json, checked before it is read (explorer.models.tokenizer_file): the split patterns the
families publish are read, and the tokenizers library reads them; a pattern that backtracks exponentially, rules that
make a text many times longer, and a Precompiled map are refused, naming what and why. Opening such a repo from the
Hub is refused the same way (tests/explorer/models/test_hub_open.py)."""

import json

import pytest
from tokenizers import Tokenizer

from explorer.core.inputs import InputProblem
from explorer.models.tokenizer_file import KNOWN_PATTERNS, MAX_GROWTH, check_tokenizer_file
from support.hub_repos import backtracking_tokenizer, tokenizer

BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}


def tokenizer_json(tmp_path, **parts) -> str:
    """The tests' byte-level BPE tokenizer.json with ``parts`` (normalizer, pre_tokenizer, decoder) replaced."""
    data = json.loads(tokenizer().backend_tokenizer.to_str()) | parts
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(data))
    return path


def split(pattern: str) -> dict:
    return {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False}, BYTE_LEVEL]}


def replace(old: str, new: str) -> dict:
    return {"type": "Replace", "pattern": {"String": old}, "content": new}


@pytest.mark.parametrize("pattern", list(KNOWN_PATTERNS), ids=list(KNOWN_PATTERNS.values()))
def test_the_families_split_patterns_are_read(tmp_path, pattern):
    path = tokenizer_json(tmp_path, pre_tokenizer=split(pattern))
    check_tokenizer_file(path)
    words = Tokenizer.from_file(str(path)).pre_tokenizer.pre_tokenize_str("We'll read 2026 lines.\n")
    assert "".join(w for w, _ in words).replace("Ġ", " ").replace("Ċ", "\n") == "We'll read 2026 lines.\n"


def test_llama_and_mistrals_sentencepiece_rules_are_read(tmp_path):
    """A SentencePiece tokenizer as transformers converts Llama's and Mistral's: ' ' replaced by '▁' (the same
    length), '▁' prepended; the decoder undoes both."""
    path = tokenizer_json(tmp_path, pre_tokenizer=None,
                          normalizer={"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"},
                                                                          replace(" ", "▁")]},
                          decoder={"type": "Sequence", "decoders": [replace("▁", " "), {"type": "ByteFallback"},
                                                                    {"type": "Fuse"},
                                                                    {"type": "Strip", "content": " ", "start": 1, "stop": 0}]})
    check_tokenizer_file(path)
    assert Tokenizer.from_file(str(path)).normalizer.normalize_str("a b") == "▁a▁b"


def test_a_pattern_that_backtracks_is_refused_by_name(tmp_path):
    """(a|aa)+c against a run of a's tries every way to split the run: exponential in its length."""
    path = tmp_path / "tokenizer.json"
    path.write_text(backtracking_tokenizer())
    with pytest.raises(InputProblem) as refused:
        check_tokenizer_file(path, "tiny/evil")
    message = str(refused.value)
    assert "tiny/evil's tokenizer.json (pre_tokenizer)" in message and "`(a|aa)+c`" in message
    assert "exponential" in message and "GPT-2, Llama 3 and Qwen2" in message


def test_a_pattern_in_a_replace_is_checked_too(tmp_path):
    rule = {"type": "Replace", "pattern": {"Regex": "(x+x+)+y"}, "content": ""}
    with pytest.raises(InputProblem, match=r"tokenizer\.json \(normalizer\) splits text with .*`\(x\+x\+\)\+y`"):
        check_tokenizer_file(tokenizer_json(tmp_path, normalizer=rule))


def test_rules_that_lengthen_a_text_many_times_are_refused(tmp_path):
    """Three Replace rules, each a -> aaaa, make a text 64 times longer: a 20,000-character text 1.28M."""
    lengthen = {"type": "Sequence", "normalizers": [replace("a", "aaaa")] * 3}
    with pytest.raises(InputProblem, match=rf"makes a text 64 times longer .* at most {MAX_GROWTH} times"):
        check_tokenizer_file(tokenizer_json(tmp_path, normalizer=lengthen))
    check_tokenizer_file(tokenizer_json(tmp_path, normalizer={"type": "Sequence", "normalizers": [replace("a", "aaaa")]}))
    with pytest.raises(InputProblem, match=r"a Prepend adds 1,000 characters"):
        check_tokenizer_file(tokenizer_json(tmp_path, normalizer={"type": "Prepend", "prepend": "x" * 1000}))
    twice = {"type": "Sequence", "decoders": [replace("ab", "x" * 16)] * 2}  # 8 times longer, twice
    with pytest.raises(InputProblem, match=r"\(decoder\) makes a text 64 times longer"):
        check_tokenizer_file(tokenizer_json(tmp_path, decoder=twice))


def test_the_safety_page_states_the_growth_bound_in_force():
    from pathlib import Path

    safety = (Path(__file__).resolve().parents[3] / "docs" / "safety.md").read_text()
    assert f"make a text at most {MAX_GROWTH} times longer" in safety


def test_a_precompiled_map_is_refused(tmp_path):
    with pytest.raises(InputProblem, match="Precompiled character map"):
        check_tokenizer_file(tokenizer_json(tmp_path, normalizer={"type": "Precompiled", "precompiled_charsmap": ""}))


def test_a_unigram_model_is_refused_and_the_random_token_models_wordlevel_is_read(tmp_path):
    """Pieces 'a' to 2,000 a's: 5.8 s for 20,000 a's (every piece weighed at every position); no family we open uses
    a Unigram model. Train one yourself's random-token models read one symbol a token with a WordLevel model."""
    from tokenizers import models

    from explorer.generation.symbols import symbol_tokenizer

    path = tmp_path / "tokenizer.json"
    path.write_text(Tokenizer(models.Unigram([("<unk>", 0.0)] + [("a" * k, -k) for k in range(1, 50)], 0)).to_str())
    with pytest.raises(InputProblem, match=r"tokenizer\.json holds a `Unigram` model; this app reads BPE \(GPT-2, Pythia"):
        check_tokenizer_file(path)
    path.write_text(symbol_tokenizer(40).backend_tokenizer.to_str())
    check_tokenizer_file(path)
