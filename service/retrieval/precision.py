"""Pure bounds for scanning half-precision vectors and re-scoring in full precision. No I/O.

Every exact statement scans ``embedding_half`` (``search_vectors``, migration 0016): unit vectors at the model's
width in IEEE half precision, the query rounded the same way. How far can a cosine computed there be from the one
computed on the full-precision (float32) vectors?

- Rounding a unit vector ``x`` to half precision moves each coordinate by at most ``u·|xᵢ|`` (``u = 2⁻¹¹``,
  half's unit roundoff) or, below half's normal range, by at most ``2⁻²⁵``; so ``‖x̃ − x‖ ≤ δ = u + 2⁻²⁵·√d``
  and the angle between ``x`` and ``x̃`` is at most ``asin(δ)``.
- Angles obey the triangle inequality and ``|cos a − cos b| ≤ |a − b|``: rounding both the query and the row
  moves their cosine by at most ``2·asin(δ)``.
- pgvector sums in single precision: each computed cosine (half or full) is within ``γ_d = d·2⁻²⁴ / (1 −
  d·2⁻²⁴)`` of its exact value for the dot product and as much again for the norms; the float32 normalisation
  before rounding adds one more ``γ_d``. ``8·γ_d`` covers the two computations with room to spare.

So ``|cos_half − cos_full| ≤ ε(d) = 2·asin(δ) + 8·γ_d`` (1.2e-3 at 384 dimensions). A score is
``w_s·w_v·cos + (the same terms in both)``, so it moves by at most ``w_s·w_v·ε``. If ``H_k`` is the k-th best
half-precision score, every article of the full-precision top-k (ties by id included) has a half score
``≥ H_k − 2·w_s·w_v·ε``: re-scoring every article above that line in full precision returns the full-precision
scan's top-k exactly (``tests/test_search_exact.py`` property-tests it, near-ties straddling the bound included).
"""

from __future__ import annotations

import math

HALF_UNIT_ROUNDOFF = 2.0**-11
HALF_SUBNORMAL_ERROR = 2.0**-25  # half the spacing of half precision's subnormals
SINGLE_UNIT_ROUNDOFF = 2.0**-24
DOUBLE_SLACK = 1e-12  # the statement's own double-precision arithmetic on scores


def summation_error(dimensions: int) -> float:
    """``γ_d``: the relative error bound of a float32 sum of ``d`` products (Higham, Accuracy and Stability)."""
    nu = dimensions * SINGLE_UNIT_ROUNDOFF
    return nu / (1.0 - nu)


def half_cosine_error(dimensions: int) -> float:
    """The most a cosine of unit vectors computed in half precision differs from the float32 one."""
    if dimensions < 1:
        raise ValueError("a vector has at least one dimension")
    delta = HALF_UNIT_ROUNDOFF + HALF_SUBNORMAL_ERROR * math.sqrt(dimensions)
    return 2.0 * math.asin(min(1.0, delta)) + 8.0 * summation_error(dimensions)


def rescore_margin(dimensions: int, *, similarity_weight: float, vector_weight: float = 1.0) -> float:
    """How far below the k-th best half-precision score an article may be and still reach the exact top-k."""
    return 2.0 * abs(similarity_weight * vector_weight) * half_cosine_error(dimensions) + DOUBLE_SLACK


def similarity_margin(dimensions: int) -> float:
    """Half-precision cosines farther than this from a full-precision one are on the same side of it."""
    return half_cosine_error(dimensions) + DOUBLE_SLACK
