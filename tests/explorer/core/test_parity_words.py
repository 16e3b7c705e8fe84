"""explorer/core/parity: a parity (the largest logit gap to transformers' own model) said as good or not."""

from explorer.core.parity import PARITY_TOLERANCE, parity_words


def test_float_rounding_reads_as_the_same_logits_and_more_as_a_conversion_error():
    assert parity_words(9.5e-07) == "logits as transformers' (largest gap 9.5e-07: float rounding)"
    assert parity_words(PARITY_TOLERANCE).startswith("logits as transformers'")
    assert parity_words(0.31) == "logits off transformers' by up to 0.31: a conversion error, report it"
