"""How an opened model's parity reads: ``parity = max |logits_ours − logits_transformers|`` over a fixed input
(``explorer.models.converting``), said as a learner can judge it.

Both models compute the same float32 sums in different orders, so their logits (of size about 1 to 30) agree to
about 1e-6 of their size; ``PARITY_TOLERANCE`` (1e-4, the tests' bound) leaves room for that rounding and nothing
else: above it, the conversion is wrong.
"""

PARITY_TOLERANCE = 1e-4


def parity_words(parity: float) -> str:
    """'logits as transformers' (largest gap 9.5e-07: float rounding)', or the gap as a conversion error."""
    if parity <= PARITY_TOLERANCE:
        return f"logits as transformers' (largest gap {parity:.1e}: float rounding)"
    return f"logits off transformers' by up to {parity:.2g}: a conversion error, report it"
