"""PrivNorm's and PrivPCA's steps on exact statistics, shared by the estimators and the simulation.

:func:`batch_setup` fixes the batches, tau and the float bounds from checked public parameters
(:func:`friendly_setup` checks them first, for callers that hold unchecked values);
:func:`friendly_tests` runs the private tests on a batch summary (:class:`FriendlyStats`) and
returns only their outcome bits; :func:`release_norm` and :func:`release_pca` noise the
thresholded FriendlyCore average. :mod:`dpdist.algorithms.sparse_pca` runs them where the
statistics live (on the cluster); :mod:`dpdist.simulate` runs the very same functions on
statistics it draws, so that a simulated run applies the estimator's own mechanism.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dpdist._validation import check_int, check_positive, check_probability
from dpdist.engine.privpca.kernels import FriendlyStats
from dpdist.engine.sparse_spectrum import sparse_spectrum
from dpdist.exceptions import ValidationError
from dpdist.privacy.mechanisms.privpca.mechanism import (
    FriendlyTestMechanism,
    PrivNormMechanism,
    PrivPCAMechanism,
)
from dpdist.privacy.noise.streams import NoiseSeed
from dpdist.privacy.mechanisms.privpca.calibration import (
    TAU_CONSTANT,
    batch_sizes,
    check_gap,
    check_k,
    check_n_batches,
    default_n_batches,
    friendly_entry_clip,
    friendly_float_bounds,
    friendly_tau,
)

__all__ = ["FriendlySetup", "batch_setup", "friendly_setup", "friendly_tests", "good_set", "release_norm",
           "release_pca", "top_eigenvector_of_symmetrised"]


def good_set(stats: FriendlyStats, gap: float, lambda_hat: float | None) -> np.ndarray:
    """Good batches: Definition 4 at gap/2 (PrivPCA, ``lambda_hat`` given) or Algorithm 3's
    lambda-free variant (``lambda_hat is None``)."""
    lam1, lam2 = stats.lambda_1, stats.lambda_2
    with np.errstate(invalid="ignore"):
        ok = stats.krcs & (lam2 <= (1.0 - gap / 2.0) * lam1)
        if lambda_hat is None:
            ok &= lam1 > 0
        else:
            ok &= lam1 >= (1.0 - gap / 2.0) * lambda_hat
    return ok


def friendly_tests(
    stats: FriendlyStats,
    gap: float,
    lambda_hat: float | None,
    mech: FriendlyTestMechanism,
    seed: NoiseSeed,
) -> dict:
    """Lines 2-15: the noisy tests on |C| and Z (:class:`FriendlyTestMechanism`). Returns only
    their outcomes, as bits (the algorithm needs nothing more; the noisy statistics stay where
    they were computed). The thresholds are the calibration's (public)."""
    cal = mech.calibration
    count = int(good_set(stats, gap, lambda_hat).sum())
    out = {"count_passed": mech.test("count", count, seed), "count_threshold": cal.count_threshold}
    if not out["count_passed"]:
        return out
    out["weight_threshold"] = cal.weight_threshold
    out["weight_passed"] = mech.test("weight", stats.weight_sum, seed)
    return out


def release_norm(entries: tuple, n_features: int, mech: PrivNormMechanism, seed: NoiseSeed) -> float:
    """Algorithm 3 Lines 17-19: ``||T_5tau(Sigma_bar)||_op`` plus the rounded Gaussian on the
    lattice (:class:`PrivNormMechanism`)."""
    r, c, v = entries
    return mech.release(sparse_spectrum(r, c, v, n_features).operator_norm(), seed)


def top_eigenvector_of_symmetrised(rows, cols, vals, n_features: int) -> tuple[np.ndarray, np.ndarray]:
    """Line 22: ``v_1((P~ + P~^T)/2)`` as ``(support, values)``; post-processing only.

    The symmetrised matrix lives on the indices A its entries touch; its spectrum on A is
    computed densely. If every eigenvalue there is negative and some index lies outside A, the
    top eigenvalue of the d x d matrix is 0 and e_j (j the smallest index outside A) is
    returned. The sign is fixed by making the largest-magnitude entry positive.
    """
    active = np.unique(np.concatenate([rows, cols]))
    pos = np.searchsorted(active, rows), np.searchsorted(active, cols)
    a = active.size
    mat = np.zeros((a, a))
    np.add.at(mat, pos, vals / 2.0)
    np.add.at(mat, (pos[1], pos[0]), vals / 2.0)
    w, q = np.linalg.eigh(mat)
    if w[-1] < 0 and a < n_features:
        outside = np.setdiff1d(np.arange(min(n_features, a + 1)), active)
        return np.array([int(outside[0])]), np.array([1.0])
    vec = q[:, -1]
    keep = vec != 0
    vec = vec if vec[np.argmax(np.abs(vec))] > 0 else -vec
    return active[keep], vec[keep]


def release_pca(entries: tuple, n_features: int, k: int, mech: PrivPCAMechanism, seed: NoiseSeed) -> dict:
    """Algorithm 2 Lines 17-22 on ``T_5tau(Sigma_bar)``: u from the component carrying the top
    eigenvalue, the exact top-k^2 of ``u u^T + G`` (:class:`PrivPCAMechanism`), then the top
    eigenvector."""
    r, c, v = entries
    spec = sparse_spectrum(r, c, v, n_features, vectors=True)
    support, u = spec.top_vector()
    pr, pc, pv = mech.projector(support, u, n_features, k, seed)
    vs, vv = top_eigenvector_of_symmetrised(pr, pc, pv, n_features)
    return {"support": vs, "values": vv, "p_rows": pr, "p_cols": pc, "p_values": pv}


@dataclass(frozen=True)
class FriendlySetup:
    n_samples: int
    n_features: int
    k: int
    gap: float
    sigma: float
    n_batches: int
    sizes: tuple
    tau: float
    tau_rule: str
    beta: float
    float_bounds: Any = None


def friendly_setup(n_samples, n_features, k, gap, sigma, n_batches, tau, beta, budgets) -> FriendlySetup:
    """:func:`batch_setup` after checking ``k``, ``gap``, ``sigma``, ``n_batches``, ``tau`` and
    ``beta`` (for callers that hold unchecked values, such as the simulation)."""
    n, d = check_int(n_samples, "n_samples", low=1), check_int(n_features, "n_features", low=1)
    return batch_setup(n, d, check_k(k), check_gap(gap), check_positive(sigma, "sigma"),
                       None if n_batches is None else check_n_batches(n_batches),
                       check_positive(tau, "tau", allow_none=True), check_probability(beta, "beta"), budgets)


def batch_setup(n: int, d: int, k: int, gap: float, sigma: float, n_batches: int | None, tau: float | None,
                beta: float, budgets) -> FriendlySetup:
    """The batches, tau and the float bounds of a fit on ``n x d`` data, from checked parameters
    and a checked size: the rules between them are checked here (at least 20 batches of 2 rows,
    ``k <= d``, ``n_batches <= n // 2``, and the default number of batches for the largest
    budget of ``budgets``, pairs (epsilon, delta))."""
    if n < 2 * 20 or d < 2:
        raise ValidationError(f"need n_samples >= 40 (20 batches of 2 rows) and n_features >= 2, got n={n}, d={d}")
    if k > d:
        check_k(k, d)  # refuses, naming the rule
    if n_batches is None:
        m = max(default_n_batches(e, dl, beta=beta) for e, dl in budgets)
        if m > n // 2:
            raise ValidationError(
                f"the default number of batches for this budget is {m}, which needs n_samples >= {2 * m}; "
                f"got n_samples={n} (pass n_batches= to override, or see plan())"
            )
    else:
        if n_batches > n // 2:
            check_n_batches(n_batches, n)  # refuses, naming the rule
        m = n_batches
    sizes = tuple(batch_sizes(n, m))
    b = min(sizes)
    if tau is None:
        t = friendly_tau(sigma, d, b, beta=beta)
        rule = f"eq. (11): {TAU_CONSTANT} sigma^2 sqrt(log(d/beta)/b), beta={beta}, b={b}"
    else:
        t = tau
        rule = "user-supplied"
    bounds = friendly_float_bounds(n, m, d, friendly_entry_clip(sigma, n, d, beta), t, k)
    return FriendlySetup(n, d, k, gap, sigma, m, sizes, t, rule, float(beta), bounds)
