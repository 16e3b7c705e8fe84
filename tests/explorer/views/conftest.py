"""What the view tests share: the shipped main model and its activation patching of the default example, computed
once per session, as fixtures (both patching test modules read them)."""

import pytest

from explorer.views.patching.analysis import activation_patching
from explorer.views.patching.texts import DEFAULT_CLEAN, change_one_word
from support.shipped import shipped

MAIN = "shakespeare-main"


@pytest.fixture(scope="session")
def main():
    """(model, tokenizer) of shakespeare-main as shipped."""
    return shipped(MAIN)


@pytest.fixture(scope="session")
def default_patching(main):
    """``activation_patching`` of the default example on shakespeare-main, every grid."""
    model, tokenizer = main
    corrupted, _ = change_one_word(tokenizer, DEFAULT_CLEAN)
    return activation_patching(model, tokenizer, DEFAULT_CLEAN, corrupted)
