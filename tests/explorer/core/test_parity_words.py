"""explorer/core/parity: a parity (the largest logit gap to transformers' own model) judged against the logits' size
and said as good or not."""

from explorer.core.parity import PARITY_TOLERANCE, Parity


def test_float_rounding_reads_as_the_same_logits_and_more_as_a_conversion_error():
    assert Parity(9.5e-07, 3.1).words() == ("logits as transformers' (largest gap 9.5e-07 on logits up to 3.1: float "
                                            "rounding)")
    assert Parity(PARITY_TOLERANCE, 0.5).rounding
    assert Parity(0.31, 4.0).words() == "logits off transformers' by up to 0.31 on logits up to 4: a conversion error, report it"


def test_the_gap_is_judged_as_a_fraction_of_the_logits_size():
    """float32 keeps about 7 digits of whatever size it holds: a GPT-2 small whose logits reach 51 differed from
    transformers' by 2.8e-4 (5.5e-6 of them), which the absolute bound of 1e-4 called a conversion error."""
    assert Parity(2.8e-4, 51.0).rounding and Parity(2.8e-4, 51.0).relative == 2.8e-4 / 51.0
    assert Parity(1e30, 1e37).rounding  # finite but absurd logits: the same digits, far from 1
    assert not Parity(0.9, 51.0).rounding  # a head stored apart and tied anyway: 2% of the logits' size wrong
    assert not Parity(1.5e-4, 0.2).rounding  # logits below 1 are held to the gap itself: 1e-4
