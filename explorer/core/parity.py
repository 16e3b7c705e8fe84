"""How an opened model's parity reads: ``gap = max |logits_ours − logits_transformers|`` over a fixed input
(``explorer.models.converting``), judged against the size of the logits and said as a learner can judge it.

Both models compute the same float32 sums in different orders, so they differ by rounding, and rounding is relative:
a float32 carries about 7 digits of whatever size it holds. Logits of size 1 to 5 (a random model's) agree to about
1e-6; a model whose logits reach 50 (trained GPT-2's are of that size), or whose stream carries values in the
thousands, agrees to a few 1e-4 (measured: a GPT-2 small with logits up to 51 and a residual value of 3000, gap
2.8e-4: 5.5e-6 of the largest logit). So the gap is judged as a fraction of the largest logit (or of 1, for
smaller logits): ``PARITY_TOLERANCE`` (1e-4, the tests' bound at size 1) leaves room for that rounding and nothing
else: above it, the conversion is wrong.
"""

from dataclasses import dataclass

PARITY_TOLERANCE = 1e-4


@dataclass(frozen=True)
class Parity:
    """``gap``: the largest |logit difference| to transformers' own model; ``logit_size``: its largest |logit|."""

    gap: float
    logit_size: float

    @property
    def relative(self) -> float:
        """The gap as a fraction of the logits' size (of 1 for logits below 1)."""
        return self.gap / max(1.0, self.logit_size)

    @property
    def rounding(self) -> bool:
        return self.relative <= PARITY_TOLERANCE

    def words(self) -> str:
        """'logits as transformers' (largest gap 9.5e-07 on logits up to 3.1: float rounding)', or a conversion error."""
        size = f"on logits up to {self.logit_size:.2g}"
        if self.rounding:
            return f"logits as transformers' (largest gap {self.gap:.1e} {size}: float rounding)"
        return f"logits off transformers' by up to {self.gap:.2g} {size}: a conversion error, report it"
