"""The old floating-point noise of the second-moment baselines: a twin, not used to release.

The estimators release through the float-safe mechanism objects of
:mod:`dpdist.privacy.mechanisms.second_moment` and :mod:`dpdist.privacy.mechanisms.subsample`
(lattice noise, exactly sampled). :func:`truncated_laplace` draws TLap by inverse CDF of a
53-bit uniform and is kept as the reference of the truncated law (GAP 13) that
``tests/algorithms/test_subsample_aggregate.py`` checks. The support test's twins of every
inverse-CDF path are :class:`dpdist.testing.support.InverseCdfSampler`. The purposes are
re-exported from their module of definition.
"""

from __future__ import annotations

from dpdist.privacy.mechanisms.second_moment import PURPOSE_LAMBDA, PURPOSE_LEVEL, PURPOSE_ONE_SHOT, PURPOSE_RADIUS
from dpdist.privacy.noise import NoiseSeed, bounded_laplace_from_uniform

__all__ = [
    "PURPOSE_LAMBDA",
    "PURPOSE_LEVEL",
    "PURPOSE_ONE_SHOT",
    "PURPOSE_RADIUS",
    "truncated_laplace",
]


def truncated_laplace(seed: NoiseSeed, purpose: str, index: int, sensitivity: float, epsilon: float, support: float) -> float:
    """One TLap(Delta, eps, delta) draw: Laplace(Delta/eps) conditioned on |z| <= A (GAP 13)."""
    u = seed.uniforms(purpose, int(index), 0, 1)
    return float(bounded_laplace_from_uniform(u, float(sensitivity) / float(epsilon), float(support))[0])
