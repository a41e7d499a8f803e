"""Floating-point error of the engine's Gram sums, added to every Gram-type sensitivity.

A sensitivity proved for exact arithmetic bounds the statistic as the engine *computes* it once
multiplied by ``kappa(n)`` (:func:`gram_rounding_factor`), a function of the public n only.
Nothing here sees data. Why the factor grows linearly in n for every summation order, and what a
tighter bound would need: docs/privacy/float_rounding.md.
"""

from __future__ import annotations

import math

from dpdist.exceptions import ValidationError

__all__ = [
    "GRAM_BATCH_ROWS",
    "GRAM_TREE_FAN_IN",
    "MIN_SENSITIVITY",
    "UNIT_ROUNDOFF",
    "float_sensitivity",
    "gram_rounding_factor",
    "rounding_gamma",
    "summation_depth",
]


#: Unit roundoff of IEEE double precision (round to nearest): u = 2**-53.
UNIT_ROUNDOFF = 2.0**-53


#: Most rows the engine multiplies in one BLAS product, or accumulates in one running sum,
#: before combining partial sums pairwise (``dpdist.engine.gram.GRAM_BATCH_ROWS`` and the
#: kernels of ``dpdist.engine.second_moment``; tests/engine check they do not exceed it).
GRAM_BATCH_ROWS = 4096


#: Largest fan-in of the engine's trees over row chunks (sequential sums inside a node).
GRAM_TREE_FAN_IN = 8


def rounding_gamma(k: int) -> float:
    """Higham's ``gamma_k = k u / (1 - k u)`` (Accuracy and Stability of Numerical
    Algorithms, 2nd ed., Lemma 3.1): a product of k factors ``(1 + d_i)^(+-1)``,
    ``|d_i| <= u``, lies within ``gamma_k`` of 1."""
    k = int(k)
    if not k * UNIT_ROUNDOFF < 0.5:
        raise ValidationError(f"rounding bound undefined for a chain of {k} operations")
    return k * UNIT_ROUNDOFF / (1.0 - k * UNIT_ROUNDOFF)


def summation_depth(n_samples: int, *, batch_rows: int = GRAM_BATCH_ROWS, fan_in: int = GRAM_TREE_FAN_IN) -> int:
    """Bound on the number of floating-point additions on the path from one row's term to a
    released entry of the engine's Gram sums of ``n_samples`` rows.

    The engine sums a row's term in a run of at most ``batch_rows`` rows (a BLAS product and
    a running sum: at most ``batch_rows`` additions), combines the runs of one row chunk
    pairwise (at most ``ceil(log2 n)`` additions), and the chunks in trees of fan-in at most
    ``fan_in`` (at most ``fan_in - 1`` additions per level, at most ``ceil(log2 n)`` levels);
    4 more operations cover the product forming the term, the symmetrisation and the scaling
    by 1/n. Hence ``D(n) = batch_rows + fan_in * ceil(log2 n) + 4``: a function of the public
    n only, whatever the chunking.
    """
    n = max(2, int(n_samples))
    return int(batch_rows) + int(fan_in) * math.ceil(math.log2(n)) + 4


def gram_rounding_factor(n_samples: int, *, batch_rows: int = GRAM_BATCH_ROWS, fan_in: int = GRAM_TREE_FAN_IN) -> float:
    """Factor ``kappa(n) = 1 + 2 n gamma_D`` (D = :func:`summation_depth`) by which every
    Gram-type sensitivity is multiplied, so that it bounds the statistic *as computed*.

    Claim. Let each row i contribute a term ``t_i = y_i y_i^T`` (y_i the row as computed by
    the engine: clipped, scaled, zeroed; a deterministic function of the row and its
    position), and let every term satisfy ``||t_i|| <= B`` in the norm N of the release
    (``|t_i|_{ab} <= B`` entrywise for PrivCov; Frobenius, hence L2 of the upper triangle,
    for the Gaussian releases: ``|| |y_i| |y_i|^T ||_F = ||y_i||^2``). If the exact-arithmetic
    statistic ``S = (1/n) sum_i t_i`` has sensitivity ``Delta >= B / n`` in N, the computed
    ``fl(S)`` has sensitivity at most ``kappa(n) Delta``.

    Proof. Every summation order (BLAS blocking, pairwise or tree combination) computes each
    entry as a sum whose terms pass through at most D rounded operations, so (Higham, Lemma
    3.4 and eq. (3.5), any order; the product and the scaling are two more factors
    ``1 + d``) ``|fl(S) - S| <= gamma_D (1/n) sum_i |t_i|`` entrywise, and
    ``|| (1/n) sum_i |t_i| ||_N <= B`` (the entrywise absolute values of PSD rank-one terms
    keep the bound ``B``). For neighbours D, D' (unchanged rows give bitwise identical
    ``y_i``: the same value, position and public map),
    ``||fl(S) - fl(S')|| <= ||S - S'|| + 2 gamma_D B <= Delta + 2 gamma_D n Delta``.
    With D from :func:`summation_depth` this is a function of the public n only (about
    ``1 + 1e-9 n / 1000``: 1e-6 at n = 1e6, 1e-3 at n = 1e9). Assumptions: IEEE double
    arithmetic with round to nearest, and no overflow (the public bounds keep every partial
    sum below n B). Underflow: an operation in the subnormal range errs by at most 2**-1075
    absolutely instead of u relatively; :func:`float_sensitivity` refuses sensitivities below
    2**-900, where these absolute errors (at most D n d**2 2**-1075 < 2**-960 in total) stay
    far below the slack ``2 n gamma_D Delta >= 2**-940``.
    """
    n = int(n_samples)
    return 1.0 + 2.0 * n * rounding_gamma(summation_depth(n, batch_rows=batch_rows, fan_in=fan_in))


#: Smallest exact-arithmetic sensitivity accepted (see :func:`gram_rounding_factor`).
MIN_SENSITIVITY = 2.0**-900


def float_sensitivity(sensitivity: float, n_samples: int) -> tuple[float, float]:
    """``(kappa(n) * sensitivity, kappa(n))``: a Gram-type sensitivity made valid for the
    computed statistic (:func:`gram_rounding_factor`). Refuses sensitivities outside
    ``[2**-900, 2**1000]`` (public bounds too small or too large for float64)."""
    sensitivity = float(sensitivity)
    if not (MIN_SENSITIVITY <= sensitivity <= 2.0**1000):
        raise ValidationError(
            f"the sensitivity {sensitivity!r} (from the public clip/radius and n) is outside the range "
            "where float64 rounding can be bounded: choose a clip or radius of moderate magnitude"
        )
    kappa = gram_rounding_factor(n_samples)
    return sensitivity * kappa, kappa
