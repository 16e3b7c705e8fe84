"""Fixtures of the views' tests: the shipped main model and its activation patching of the default example (both
patching test modules read them; computed once per session)."""

import pytest

from explorer.views.patching.analysis import activation_patching
from explorer.views.patching.texts import DEFAULT_CLEAN, change_one_word
from support.shipped import shipped


@pytest.fixture(scope="session")
def main():
    """(model, tokenizer) of shakespeare-main as shipped."""
    return shipped("shakespeare-main")


@pytest.fixture(scope="session")
def default_patching(main):
    """``activation_patching`` of the default example on shakespeare-main, every grid."""
    model, tokenizer = main
    corrupted, _ = change_one_word(tokenizer, DEFAULT_CLEAN)
    return activation_patching(model, tokenizer, DEFAULT_CLEAN, corrupted)
