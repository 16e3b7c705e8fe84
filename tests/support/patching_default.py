"""What both patching test modules read: the shipped main model and its activation patching of the default example,
computed once per session (``functools.cache``), as pytest fixtures each module imports."""

import functools

import pytest

from explorer.views.patching.analysis import activation_patching
from explorer.views.patching.texts import DEFAULT_CLEAN, change_one_word
from support.shipped import shipped

MAIN = "shakespeare-main"


@functools.cache
def default_patching_of_main():
    model, tokenizer = shipped(MAIN)
    corrupted, _ = change_one_word(tokenizer, DEFAULT_CLEAN)
    return activation_patching(model, tokenizer, DEFAULT_CLEAN, corrupted)


@pytest.fixture(scope="module")
def main():
    """(model, tokenizer) of shakespeare-main as shipped."""
    return shipped(MAIN)


@pytest.fixture(scope="module")
def default_patching():
    """``activation_patching`` of the default example on shakespeare-main, every grid."""
    return default_patching_of_main()
