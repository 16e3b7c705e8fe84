"""Parity: two computations of the same numbers (ours and transformers' logits for an opened model; a step of
attention recomputed and the model's own number) judged as float32 rounding or not, and said as a learner can judge it.

The two compute the same float32 sums in different orders, so they differ by rounding, and rounding is relative: a
float32 carries about 7 digits of whatever size it holds. Logits of size 1 to 5 (a random model's) agree to about
1e-6; a model whose logits reach 50 (trained GPT-2's are of that size), or whose stream carries values in the
thousands, agrees to a few 1e-4 (measured: a GPT-2 small with logits up to 51 and a residual value of 3000, gap
2.8e-4: 5.5e-6 of the largest logit; its layer-0 attention recomputed, 2.8e-5 on numbers up to 11.5). So a gap is
judged as a fraction of the largest number compared (or of 1, for smaller numbers): ``PARITY_TOLERANCE`` (1e-4, the
tests' bound at size 1) leaves room for that rounding and nothing else: above it, the computation is wrong.
"""

from dataclasses import dataclass

PARITY_TOLERANCE = 1e-4


@dataclass(frozen=True)
class Parity:
    """``gap``: the largest |difference| between the two; ``size``: the largest |number| of the reference."""

    gap: float
    size: float

    @classmethod
    def between(cls, mine, reference) -> "Parity":
        """The parity of two tensors of one shape (``reference`` the model's own, or transformers')."""
        reference = reference.float()
        return cls(float((mine.float() - reference).abs().max()), float(reference.abs().max()))

    @property
    def relative(self) -> float:
        """The gap as a fraction of the numbers' size (of 1 for numbers below 1)."""
        return self.gap / max(1.0, self.size)

    @property
    def rounding(self) -> bool:
        return self.relative <= PARITY_TOLERANCE

    def words(self) -> str:
        """An opened model's logits: 'logits as transformers' (largest gap 9.5e-07 on logits up to 3.1: float
        rounding)', or the gap as a conversion error."""
        size = f"on logits up to {self.size:.2g}"
        if self.rounding:
            return f"logits as transformers' (largest gap {self.gap:.1e} {size}: float rounding)"
        return f"logits off transformers' by up to {self.gap:.2g} {size}: a conversion error, report it"


def worst(parities) -> Parity:
    """The parity farthest from rounding (the largest relative gap) among ``parities``; none: a gap of 0."""
    return max(parities, key=lambda parity: parity.relative, default=Parity(0.0, 0.0))
