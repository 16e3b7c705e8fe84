"""What a stranger's tokenizer.json may make the machine do, checked before the tokenizers library reads it; and a
GPT-2's tokenizer saved as vocab.json and merges.txt, read by transformers' own class (``read_vocab_and_merges``).

A tokenizer.json is data, but parts of it decide how long one text takes to read, and a visitor chooses both the
file and the text:
- a regular expression (``{"Regex": ...}`` in a ``Split`` or a ``Replace``) runs in a backtracking engine, onig:
  a pattern such as ``(a|aa)+c`` takes time exponential in the length of a text made for it. onig stops one search
  after 10 million backtracking steps (0.1 s here) with a panic; a pattern that stays under that at each of a
  20,000-character text's positions still takes up to 2·10^11 steps, half an hour of a core, in native code no thread
  can stop, while every interactive view waits for that one slot (``ui.events.INTERACTIVE``). Only the split patterns
  that the families we open publish (``KNOWN_PATTERNS``) are read; the byte-level, digit and whitespace splits built
  into the library take no pattern and are always read;
- a ``Replace`` multiplies a text's length by len(content) / len(pattern), a ``Sequence`` of them by the product, and
  a ``Prepend`` adds its content to every text: at most ``MAX_GROWTH`` times, and ``MAX_CONTENT`` characters a
  rule. A ``Precompiled`` character map (SentencePiece's normalizer) may replace one character by any string and is
  not read.

A tokenizer's model must be BPE or WordLevel (``MODELS``): every family we open uses BPE. A Unigram model (T5's,
ALBERT's) with pieces "a", "aa", ... up to thousands of characters weighs every piece at every position: 5.8 s for a
20,000-character text with pieces up to 2,000 characters, measured here.
"""

import json
from pathlib import Path

from explorer.core.inputs import InputProblem, echo, error_text
from explorer.models.plans import VOCAB_AND_MERGES, VOCAB_AND_MERGES_CLASSES

# The split patterns published in the tokenizer.json of the families the app opens, character for character:
KNOWN_PATTERNS = {
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+": "GPT-2's (its byte-level split, written out)",
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+":
        "Llama 3's",
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+":
        "Qwen2's",
    ".": "one character a token (explorer.generation.symbols: Train one yourself's random-token models)",
}
MAX_GROWTH = 4  # how many times longer the normalizers (or the decoder) may make a text
MAX_CONTENT = 16  # characters a rule's content may hold (a Prepend's, a Replace's: what they add)
MODELS = {"BPE": "GPT-2, Pythia, Llama, Mistral, Qwen2 and ours", "WordLevel": "Train one yourself's random-token models"}
PARTS = ("normalizer", "pre_tokenizer", "post_processor", "decoder")  # the vocabulary and merges ("model") hold no rule


def check_tokenizer_file(path: Path, where: str = "The model") -> None:
    """Refuse (InputProblem) a tokenizer.json whose model is not in ``MODELS``, with a regular expression not in
    ``KNOWN_PATTERNS``, a ``Precompiled`` map, or normalizers or a decoder that make a text over ``MAX_GROWTH`` times
    longer; a file that is not JSON is left to the tokenizers library, which refuses it by name."""
    try:
        parts = json.loads(Path(path).read_bytes())
    except (OSError, ValueError):
        return
    if not isinstance(parts, dict):
        return
    model = parts.get("model")
    if not isinstance(model, dict) or not isinstance(model.get("type"), str):
        return  # not a tokenizer: the library refuses it by name
    if model["type"] not in MODELS:
        read = "; ".join(f"{name} ({who})" for name, who in MODELS.items())
        raise InputProblem(f"{where}'s tokenizer.json holds a {echo(model['type'], 40)} model; this app reads {read}: "
                           "their time per text is bounded by its length.")
    for part in PARTS:
        growth = _growth(parts.get(part), f"{where}'s tokenizer.json ({part})")
        if growth > MAX_GROWTH:
            raise InputProblem(f"{where}'s tokenizer.json ({part}) makes a text {growth:,.0f} times longer (its Replace rules "
                               f"multiplied); this app reads tokenizers that make it at most {MAX_GROWTH} times longer.")


def read_vocab_and_merges(folder: Path, model_type: str, where: str = "The model"):
    """The tokenizer of a folder holding vocab.json and merges.txt in place of tokenizer.json: transformers' own class
    for the family (``VOCAB_AND_MERGES_CLASSES``, never a class the repo names), which builds the byte-level BPE with
    the tokenizers library and GPT-2's split built in: no pattern of the stranger's runs. Its settings come from
    tokenizer_config.json and special_tokens_map.json where present, but never the files: the class reads the paths
    its tokenizer_config names ("vocab", "merges") over its own files, so they are named here, the folder's own; files
    it cannot read are refused by name."""
    import transformers

    own = dict(vocab=str(Path(folder) / VOCAB_AND_MERGES[0]), merges=str(Path(folder) / VOCAB_AND_MERGES[1]))
    try:
        return getattr(transformers, VOCAB_AND_MERGES_CLASSES[model_type]).from_pretrained(folder, trust_remote_code=False,
                                                                                          **own)
    except Exception as error:  # noqa: BLE001 - not JSON, a merge of tokens the vocabulary lacks, ids that are not numbers
        raise InputProblem(f"{where}'s vocab.json and merges.txt are not a byte-level BPE the tokenizers library can "
                           f"read ({error_text(error)}): give the files save_pretrained wrote, or its "
                           "tokenizer.json.") from None


def _growth(rule, where: str) -> float:
    """How many times longer ``rule`` (a part of tokenizer.json, nested) can make a text: Replace rules multiply; every
    regular expression and added content checked on the way."""
    if isinstance(rule, list):
        product = 1.0
        for item in rule:
            product *= _growth(item, where)
        return product
    if not isinstance(rule, dict):
        return 1.0
    if "Regex" in rule:
        _require_known(rule["Regex"], where)
    kind = rule.get("type")
    if kind == "Precompiled":
        raise InputProblem(f"{where} holds a Precompiled character map (a SentencePiece normalizer), which may replace "
                           "one character by any string; this app reads tokenizers without one (byte-level BPE, or "
                           "SentencePiece converted to a Replace of ' ' by '▁', as Llama's and Mistral's are).")
    for key in ("content", "prepend"):
        if isinstance(rule.get(key), str) and len(rule[key]) > MAX_CONTENT:
            raise InputProblem(f"{where}: a {kind} adds {len(rule[key]):,} characters ({echo(rule[key], 40)}); this app "
                               f"reads tokenizers whose rules add at most {MAX_CONTENT}.")
    growth = 1.0
    if kind == "Replace":
        pattern = rule.get("pattern") or {}
        matched = len(pattern.get("String") or "") if isinstance(pattern, dict) else 0
        growth = max(1.0, len(rule.get("content") or "") / max(matched, 1))
    for key, value in rule.items():
        if isinstance(value, (dict, list)):
            growth *= _growth(value, where)
    return growth


def _require_known(pattern, where: str) -> None:
    if pattern not in KNOWN_PATTERNS:
        raise InputProblem(f"{where} splits text with the regular expression {echo(pattern, 120)}, which this app does "
                           "not run: a regular expression can take time exponential in a text's length on a text made "
                           "for it, in code no request can stop. The app reads the splits built into the tokenizers "
                           "library (byte-level, digits, whitespace) and the split patterns GPT-2, Llama 3 and Qwen2 "
                           "publish, character for character.")
