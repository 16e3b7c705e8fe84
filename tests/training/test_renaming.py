"""Invented names for the Folio pairs (training.renaming): which words are names, and how they are swapped."""

import re

import pytest
import torch

from training import train
from training.corpus import plausible_pair, read_pairs
from training.data import SpellingPairs
from training.renaming import NameSwapper, copied_names, invented_name, lowercase_words
from training.tokenization import tokenizer_for

COMMON = lowercase_words(["my lord, what a page is this", "the gods of Rome"])


def test_a_copied_name_is_capitalised_unchanged_and_never_a_lowercase_word():
    folio = "Heauen blesse him: Farwell Bertram, my Lord. What Page? Rome, Rome"
    modern = "Heaven bless him!--Farewell, Bertram, my lord. What Page? Rome, Rome"
    # "Heauen"/"Farwell" change; "Lord" becomes "lord"; "What" and "Page" are lowercase words elsewhere;
    # "Rome" is kept once however often it appears.
    assert copied_names(folio, modern, COMMON) == ["Bertram", "Rome"]
    assert copied_names("Caesar comes", "Caesar comes", COMMON) == []  # the first word of a line is never a name
    assert copied_names("not neere Caska", "not near Casca", COMMON) == []  # the modern edition respells it
    assert copied_names("O Ay me", "O Ay me", COMMON) == []  # shorter than three letters


def test_invented_names_use_no_letter_that_folio_spelling_swaps():
    generator = torch.Generator().manual_seed(0)
    names = [invented_name(generator) for _ in range(2000)]
    assert len(set(names)) > 1500  # fresh names, not a short list
    for name in names:
        assert re.fullmatch(r"[A-Z][a-z]{3,}", name), name
        assert not re.search(r"[vj]|u[aeiou]", name.lower()), name  # Folio "u"/"v" and "i"/"j" never arise


def test_the_swapper_puts_one_invented_name_in_both_lines_and_changes_nothing_else():
    swapper = NameSwapper(1.0, COMMON, seed=3)
    folio, modern = "Daughter of Gerard de Narbon, Gerard?", "daughter of Gerard de Narbon, Gerard?"
    new_folio, new_modern = swapper(folio, modern)
    gerard, narbon = re.fullmatch(r"Daughter of (\w+) de (\w+), (\w+)\?", new_folio).group(1, 2)
    assert {gerard, narbon}.isdisjoint({"Gerard", "Narbon"}) and gerard != narbon
    assert new_folio == f"Daughter of {gerard} de {narbon}, {gerard}?"
    assert new_modern == f"daughter of {gerard} de {narbon}, {gerard}?"
    assert swapper("Heere will I stand", "Here will I stand") == ("Heere will I stand", "Here will I stand")
    assert NameSwapper(0.0, COMMON)(folio, modern) == (folio, modern)
    with pytest.raises(ValueError, match="between 0 and 1"):
        NameSwapper(1.5, COMMON)


def test_a_share_of_the_reads_of_real_training_pairs_are_renamed_and_retokenized():
    """On the cleaned training pairs: about 10% have copied names; with share 0.5 a seeded
    swapper renames 45-55% of 1000 reads of those pairs (binomial sd 1.6%), each read tokenized from the
    renamed text, and a name stands for a name, word for word."""
    pairs = [p for p in read_pairs("train") if plausible_pair(p)]
    common = lowercase_words(p["modern"] for p in pairs)  # as training.train builds it
    named = [i for i, p in enumerate(pairs) if copied_names(p["folio"], p["modern"], common)]
    assert 0.05 < len(named) / len(pairs) < 0.2
    tokenizer = tokenizer_for("bpe")
    data = SpellingPairs(pairs, tokenizer, 64, rename=NameSwapper(0.5, common, seed=0))
    renamed = 0
    for read in range(1000):
        i = named[read % len(named)]
        item = data[i]
        if item != data.items[i]:
            renamed += 1
            source = tokenizer.decode(item["input_ids"], skip_special_tokens=True)
            target = tokenizer.decode(item["labels"], skip_special_tokens=True)
            assert source != pairs[i]["folio"] and item["labels"][-1] == tokenizer.eos_token_id
            assert len(source.split()) == len(pairs[i]["folio"].split())  # a name for a name, word for word
            assert len(target.split()) == len(pairs[i]["modern"].split())
    assert 450 <= renamed <= 550, renamed
    unnamed = next(i for i in range(len(pairs)) if i not in named)
    assert data[unnamed] is data.items[unnamed]  # a pair without names is read as tokenized once


def test_the_renamed_share_is_a_training_setting_the_command_line_can_set():
    args = train.parse_args(["--preset", "folio-to-modern", "--output-dir", "out", "--renamed-share", "0.25"])
    assert train.settings_from(args).renamed_share == 0.25
    default = train.parse_args(["--preset", "folio-to-modern", "--output-dir", "out"])
    assert train.settings_from(default).renamed_share == train.PRESETS["folio-to-modern"].train.renamed_share
