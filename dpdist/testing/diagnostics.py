"""NOT PRIVATE diagnostics: exact, unnoised statistics of the data, for tests and debugging.

Nothing here may reach a release: each function reads the data and reports on individual
rows or exact statistics. They live in :mod:`dpdist.testing`, never in a public algorithm
module, so that ``dpdist.algorithms`` holds private computations only.
"""

from __future__ import annotations

import math

import numpy as np

from dpdist.engine import second_moment_kernels as engine
from dpdist.privacy.release import Release
from dpdist.privacy.mechanisms.second_moment import GROWTH

__all__ = ["second_moment_diagnostics"]


def second_moment_diagnostics(X: np.ndarray, release: Release) -> dict:
    """NOT PRIVATE (tests and debugging only; it reads the data and reports about rows).

    Replays a release's public transforms on ``X`` (in memory) and returns, per level, the
    exact Sigma of the level's rows, and the indices of rows clipped at that level (level 0:
    the top-level clip to R_hat; level k >= 1: the shrink S), for Lemma 3.9 checks.
    """
    p = release.parameters
    X = engine.chunk_sanitize(np.asarray(X))
    s0 = 1.0 / math.sqrt((1.0 - p["alpha"]) * p["lambda_min"])
    radii = p["level_radii"]
    steps = [(s0, radii[0])]
    for k, pi in enumerate(release.values["projections"]):
        steps.append((math.sqrt(GROWTH) * pi, radii[k + 1]))
    y = X
    clipped, sigmas = [], []
    for a, r in steps:
        z = y * a if np.ndim(a) == 0 else y @ a.T
        norms = np.linalg.norm(z, axis=1)
        clipped.append(np.flatnonzero(norms > r * (1 + 1e-12)))
        y = engine.chunk_clip_rows(z, r)
        sigmas.append(y.T @ y / len(y))
    return {"clipped_indices": clipped, "level_second_moments": sigmas}
