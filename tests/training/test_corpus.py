"""The corpus: verified source, whole-play splits, Folio/modern pairs from the same plays."""

import shutil

import pytest

from training import corpus as C


def test_splits_are_disjoint_and_cover_every_text(corpus):
    plays = corpus["plays"]
    members = {s: set(corpus["splits"][s]["plays"]) for s in C.SPLITS}
    assert members["train"].isdisjoint(members["validation"])
    assert members["train"].isdisjoint(members["test"])
    assert members["validation"].isdisjoint(members["test"])
    assert set().union(*members.values()) == set(plays)
    assert members["test"] == set(C.TEST_PLAYS) and members["validation"] == set(C.VALIDATION_PLAYS)
    assert len(plays) == 42  # 37 plays + 5 poems in the source package


def test_split_sizes_are_about_ten_percent(corpus):
    chars = {s: corpus["splits"][s]["chars"] for s in C.SPLITS}
    total = sum(chars.values())
    assert 0.07 < chars["test"] / total < 0.13 and 0.07 < chars["validation"] / total < 0.13


def test_split_files_are_deterministic_and_hold_whole_plays(corpus):
    modern, _ = C.read_texts(C.fetch_source())
    for split in C.SPLITS:
        expected = "\n".join(modern[n] for n in sorted(n for n in modern if C.split_of(n) == split))
        assert C.read_split(split) == expected
    test_text = C.read_split("test")
    assert "Is this a dagger which I see before me" in test_text  # Macbeth is a test play
    assert "To be, or not to be" not in test_text and "To be, or not to be" in C.read_split("train")


def test_folio_pairs_come_from_the_same_plays_as_their_split(corpus):
    for split in C.SPLITS:
        pairs = C.read_pairs(split)
        assert pairs and {C.split_of(p["play"]) for p in pairs} == {split}
    assert corpus["splits"]["train"]["folio_pairs"] > 50_000


def test_alignment_pairs_folio_and_modern_spelling_of_the_same_line():
    folio = "  Fran. Nay answer me: Stand & vnfold\nyour selfe\n\n   Bar. Long liue the King\n"
    modern = "Fran.\nNay, answer me: stand, and unfold yourself.\n\nBer.\nLong live the king!\n"
    pairs = C.align_play(folio, modern)
    assert ("Long liue the King", "Long live the king!") in pairs


def test_alignment_takes_every_folio_word_that_a_modern_word_joins():
    """The Folio splits what the modern edition joins: "to morrow?" is "tomorrow?", not "to" alone (the old
    alignment paired "Will you Dine with me to" with "...tomorrow?", a word no model can read off its input)."""
    folio = "   Cassi. Will you Dine with me to morrow?\n  Cask. I, if I be aliue, and your minde hold\n"
    modern = "CASSIUS.\nWill you dine with me tomorrow?\n\nCASCA.\nAy, if I be alive, and your mind hold,\n"
    assert C.align_play(folio, modern) == [("Will you Dine with me to morrow?", "Will you dine with me tomorrow?"),
                                           ("I, if I be aliue, and your minde hold", "Ay, if I be alive, and your mind hold,")]
    folio = "   Por. Why sent you for me? I must go in: Aye me! How weake a thing\n"
    modern = "PORTIA.\nWhy sent you for me?\nI must go in.--[Aside.] Ah me, how weak a thing\n"
    assert ("I must go in: Aye me! How weake a thing", "I must go in.-- Ah me, how weak a thing") in C.align_play(folio, modern)


def test_stage_directions_are_taken_out_of_modern_lines():
    modern = ("[Enter, in procession, with music, Caesar; Antony, for the\ncourse; a great crowd following.]\n\n"
              "CAESAR.\nCalpurnia.\n\nCASCA.\nHe's ta'en; [Shout.] and, hark! they shout for joy.\n[Exit.]\n")
    # the direction over two lines and the inline ones are gone; "CAESAR." and "Calpurnia." read as speaker names
    assert C._modern_lines(modern) == ["He's ta'en; and, hark! they shout for joy."]
    assert C._modern_words("When he doth run his course.--Antonius,--") == [
        "When", "he", "doth", "run", "his", "course.", "Antonius,"]


def test_a_corrupted_download_is_refused(tmp_path):
    archive = C.fetch_source()
    (tmp_path / "download").mkdir()
    broken = tmp_path / "download" / C.SOURCE_FILE
    shutil.copy(archive, broken)
    with open(broken, "r+b") as f:
        f.seek(1000)
        byte = f.read(1)
        f.seek(1000)
        f.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(RuntimeError, match="expected " + C.SOURCE_SHA256):
        C.fetch_source(tmp_path)
    assert not broken.exists()


def test_cleaning_normalises_layout_only():
    assert C.clean("\r\n\r\nLine one  \r\n\n\n\n\n\nLine two\t\n\n") == "Line one\n\n\nLine two\n"


@pytest.mark.parametrize("folio, modern, plausible", [
    ("Stand & vnfold your selfe", "Stand, and unfold yourself", True),
    ("Vpon a labouring day, without the signe", "Upon a labouring day without the sign", True),
    ("And when I haue stolne vpon these Son", "And when I have stol'n upon these sons-in-law,", True),
    ("harke, I will tell you what our sport shall be Hast", "Hark, I will tell you what our sport shall be. [They converse apart.]", False),
    ("Beare free and patient thoughts. Enter Lear. But who comes heere?", "Bear free and patient thoughts.--But who comes here?", False),
    ("I heard not of it before I would it were not notorious. Was this Gentlewoman the", "I would it were not notorious.--Was this gentlewoman the", False),
    ("What wills Lord Talbot, pleaseth Burgonie", "Welcome, brave captain and victorious lord!", False),
])
def test_implausible_pairs_are_told_apart(folio, modern, plausible):
    assert C.plausible_pair({"folio": folio, "modern": modern}) is plausible
