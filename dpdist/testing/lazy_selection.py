"""Audit adapter for PrivCov's lazy selection sampler (:mod:`dpdist.privacy.lazy_selection`).

Same adversarial pair, statistic and claim as ``privcov/selection`` in
:mod:`dpdist.testing.mechanisms` (k = 1, d = 4, R = 1: one score of row 0 moves by exactly
Delta; statistic: 1 if S_0 = {1}; claim Delta/b-DP with Delta and b from
``privcov_calibration``), but the noise is drawn by the lazy noise tree
(:class:`~dpdist.privacy.lazy_selection.LazySelectionNoise`, purpose ``privcov/select``, the
score bound of :func:`~dpdist.privacy.lazy_selection.privcov_score_bound`) through the engine
kernels PrivCov runs (per-row-block ``prepare_rows``, two column tiles searched by
:func:`~dpdist.engine.topk.chunk_row_topk` and merged by
:func:`~dpdist.engine.topk.combine_row_topk`). Trial t is row t of one tile (its own noise
tree). The twin halves the Laplace scale of the magnitude law.
"""

from __future__ import annotations

import dataclasses

import numpy as np

__all__ = ["privcov_lazy_selection_case"]


def privcov_lazy_selection_case(noise_multiplier: float = 1.0):
    """PrivCov's noisy top-k selection through the lazy sampler, data-level (see the module)."""
    from dpdist.engine.topk import chunk_row_topk, combine_row_topk
    from dpdist.privacy.lazy_selection import LaplaceMagnitude, LazySelectionNoise, privcov_score_bound
    from dpdist.testing import mechanisms as m

    k = 1
    cal = m._privcov_cal(k, 1.0)
    b = noise_multiplier * cal.laplace_scale
    S = m._privcov_selection_moments()
    bound = privcov_score_bound(m.PRIVCOV_CLIP, m.PRIVCOV_N)

    def mech(which: int, n: int, seed: int) -> np.ndarray:
        lazy = LazySelectionNoise(m._seed(seed), "privcov/select", LaplaceMagnitude(b), m.PRIVCOV_D, score_bound=bound)
        tile = np.ascontiguousarray(np.broadcast_to(S[which][0], (n, m.PRIVCOV_D)))
        state = lazy.prepare_rows(np.arange(n), k)
        h = m.PRIVCOV_D // 2
        parts = [chunk_row_topk(tile[:, :h], 0, 0, k, lazy, state), chunk_row_topk(tile[:, h:], 0, h, k, lazy, state)]
        return (combine_row_topk(parts, k).cols[:, 0] == 1).astype(np.float64)

    # the same claim, pair and trials as the dense case: only the noise path differs
    dense = m.privcov_selection_case(noise_multiplier)
    return dataclasses.replace(
        dense,
        name=m._twin_name("privcov/selection-lazy", noise_multiplier),
        component="noisy top-k selection S_i drawn by the lazy noise tree (O(d k) draws), pair moving one "
        "score of row i by Delta: Delta/b-DP, Delta and b from privcov_calibration",
        mechanism=mech,
        parameters={**dense.parameters, "score_bound": bound},
    )
