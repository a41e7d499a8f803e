"""Private k-sparse leading principal component from PrivCov's released matrix.

PrivCov (:func:`~dpdist.algorithms.sparse_covariance.private_sparse_covariance`) releases a
sparse symmetric estimate ``M`` of the second moment; the truncated power method of Yuan and
Zhang (2013) then finds a k-sparse unit vector with a large Rayleigh quotient ``u^T M u``.
Everything after the release reads only ``M``: it is post-processing and costs nothing more.

:func:`truncated_power_method` is the post-processing step (plain NumPy/SciPy on a public
matrix), :func:`sparse_covariance_pca` runs PrivCov and then it, and
:class:`SparseCovariancePCA` is the scikit-learn-style estimator.

Error bound (the derivation behind :meth:`SparseCovariancePCA.plan`)
-------------------------------------------------------------------
Let ``Sigma`` have top eigenvalue ``lambda_1`` with unit eigenvector ``v``, every other
eigenvalue at most ``lambda_2``, and absolute eigengap ``g = lambda_1 - lambda_2 > 0``. Let
``E = M - Sigma`` with ``||E||_op <= eta``. Take any unit vector ``u`` whose Rayleigh
quotient on ``M`` is at least ``v``'s: ``u^T M u >= v^T M v``. Write ``u = c v + s w`` with
``w`` a unit vector orthogonal to ``v`` and ``c^2 + s^2 = 1``, so ``s^2 = sin^2(u, v)``.

1. ``u^T Sigma u = c^2 lambda_1 + s^2 w^T Sigma w <= lambda_1 - g s^2`` (``v^T Sigma w = 0``
   because ``v`` is an eigenvector and ``w`` is orthogonal to it; ``w^T Sigma w <= lambda_2``).
2. ``u^T E u - v^T E v = s^2 (w^T E w - v^T E v) + 2 c s v^T E w``, and each of ``|w^T E w|``,
   ``|v^T E v|``, ``|v^T E w|`` is at most ``eta``, so this is at most ``2 eta s^2 + 2 eta |s|``.
3. ``0 <= u^T M u - v^T M v = (u^T Sigma u - lambda_1) + (u^T E u - v^T E v)
   <= -g s^2 + 2 eta s^2 + 2 eta |s|``, hence ``|s| (g - 2 eta) <= 2 eta``.

So ``sin^2(u, v) <= (2 eta / (g - 2 eta))^2`` when ``g > 2 eta`` (and nothing better than 1
otherwise): a Davis-Kahan bound. ``eta`` is PrivCov's Theorem 1 bound ``6 k (lambda_samp +
lambda_priv)``, which holds with probability at least ``1 - beta`` when ``Sigma`` is k-RCS,
the rows are sigma-sub-Gaussian and no entry is clipped (the default clip level makes that
likely; see :class:`~dpdist.algorithms.sparse_covariance.SparseCovariancePlan`). Model 2 (a
k-sparse spike, ``Sigma = lambda_2 I + (lambda_1 - lambda_2) v v^T``) is k-RCS.

The condition ``u^T M u >= v^T M v`` holds for the k-sparse unit vector that maximises the
Rayleigh quotient of ``M`` (``v`` is one of the candidates), which is what the truncated power
method looks for. It is a local method: Yuan and Zhang (2013) show that it reaches a point
that good when the perturbation restricted to sparse vectors is small against the gap and the
start is close enough to ``v``; this module does not prove that for its start, and the plan
names it as a condition. The start is the top-k truncation of ``M``'s own
leading eigenvector (itself within the same Davis-Kahan bound of ``v``), and the method keeps
the best Rayleigh quotient it meets, so the output is never worse on ``M`` than that start.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from dpdist._validation import check_int, check_positive
from dpdist.algorithms._base import reports_empirical
from dpdist.algorithms._projection import Projection
from dpdist.algorithms._constraints import Params, functional_form
from dpdist.algorithms._utility import search_min_samples
from dpdist.algorithms.sparse_covariance.estimator import SparseCovariance
from dpdist.algorithms.sparse_covariance.plan import SparseCovariancePlan
from dpdist.exceptions import ValidationError
from dpdist.privacy.release import Release

__all__ = [
    "SparseCovariancePCA",
    "SparseCovariancePCAPlan",
    "sparse_component_release",
    "sparse_covariance_pca",
    "sparse_sin2_bound",
    "truncated_power_method",
]

#: Iteration limit and stopping tolerance (on the change of the iterate) of the power method.
MAX_ITER = 200
TOL = 1e-10

MECHANISM_SUFFIX = "k-sparse leading component by the truncated power method (post-processing)"


def _truncate(x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``x`` with all but its k largest-magnitude entries set to zero, scaled to unit norm
    (ties broken by the lower index, a fixed rule), and the sorted indices kept."""
    keep = np.sort(np.argsort(-np.abs(x), kind="stable")[:k])
    out = np.zeros_like(x)
    out[keep] = x[keep]
    norm = np.linalg.norm(out)
    if norm == 0:  # x is zero on its top k: the flat vector on the kept indices
        out[keep] = 1.0
        norm = np.sqrt(k)
    return out / norm, keep


def _gershgorin_shift(A: sp.csr_array) -> float:
    """A public-from-A shift ``c >= 0`` with ``A + c I`` positive semidefinite (Gershgorin)."""
    absA = abs(A)
    diag = A.diagonal()
    radius = np.asarray(absA.sum(axis=1)).ravel() - np.abs(diag)
    return float(max(0.0, -(diag - radius).min())) if A.shape[0] else 0.0


def _leading_start(A: sp.csr_array) -> np.ndarray:
    """A's leading eigenvector (largest algebraic eigenvalue): dense up to 200 columns, else
    ARPACK from the all-ones vector (deterministic); if ARPACK does not converge, the unit
    vector on A's largest diagonal entry."""
    d = A.shape[0]
    if d <= 200:
        return np.linalg.eigh(A.toarray())[1][:, -1]
    from scipy.sparse.linalg import ArpackNoConvergence, eigsh

    try:
        return eigsh(A, k=1, which="LA", v0=np.ones(d))[1][:, 0]
    except ArpackNoConvergence:
        return np.eye(1, d, int(np.argmax(A.diagonal())))[0]


def truncated_power_method(A: Any, k: int, start: np.ndarray | None = None, *, max_iter: int = MAX_ITER,
                           tol: float = TOL) -> tuple[np.ndarray, np.ndarray, float, int]:
    """k-sparse unit vector with a large Rayleigh quotient on the symmetric matrix ``A``.

    The truncated power method (Yuan and Zhang 2013, Algorithm 1): ``x <- trunc_k(B x)``,
    renormalised, with ``B = A + c I`` and ``c`` a Gershgorin shift making ``B`` positive
    semidefinite. The shift adds ``c`` to every unit vector's Rayleigh quotient, so it changes
    no comparison; and on a positive semidefinite ``B`` an iteration never lowers it: with
    ``y = B x``, convexity gives ``x'^T B x' >= x^T B x + 2 (x' - x)^T y``, and the new iterate
    ``x'`` maximises ``x'^T y`` over k-sparse unit vectors, of which ``x`` is one. The best
    iterate is kept all the same (rounding).

    Parameters
    ----------
    A : (d, d) symmetric array or scipy sparse matrix
    k : int
        Support size, ``1 <= k <= d``.
    start : (d,) array, optional
        Start vector; truncated to its top k entries. Default: the top-k truncation of ``A``'s
        leading eigenvector.
    max_iter : int
    tol : float
        Stop when the iterate moves less than this (Euclidean norm).

    Returns
    -------
    u : (d,) ndarray
        Unit vector with at most k non-zeros; sign: its largest-magnitude entry is positive.
    support : (k,) ndarray
        The k indices the truncation kept for ``u`` (sorted; ``u`` may be zero on some).
    rayleigh : float
        ``u^T A u``, the largest Rayleigh quotient the iteration met.
    n_iter : int
        Iterations run.
    """
    A = sp.csr_array(A, dtype=np.float64)
    d = A.shape[0]
    if A.ndim != 2 or A.shape[1] != d:
        raise ValidationError(f"A must be a square matrix, got shape {A.shape}")
    k = check_int(k, "k", low=1, high=d)
    if start is not None:
        start = np.asarray(start, dtype=np.float64)
        if start.shape != (d,) or not np.all(np.isfinite(start)):
            raise ValidationError(f"start must be a finite vector of length {d}, got shape {start.shape}")
    return _truncated_power(A, k, start, max_iter, tol)


def _truncated_power(A: sp.csr_array, k: int, start: np.ndarray | None, max_iter: int = MAX_ITER,
                     tol: float = TOL) -> tuple[np.ndarray, np.ndarray, float, int]:
    """:func:`truncated_power_method` on checked arguments (a square float64 CSR ``A``,
    ``1 <= k <= d``, ``start`` None or a finite vector of length d)."""
    A = (A + A.T) * 0.5
    if start is None:
        start = _leading_start(A)
    shift = _gershgorin_shift(A)
    x, keep = _truncate(start, k)
    best, best_keep, best_q = x, keep, float(x @ (A @ x))
    n_iter = 0
    for n_iter in range(1, max_iter + 1):
        y = A @ x + shift * x
        x_new, keep = _truncate(y, k)
        q = float(x_new @ (A @ x_new))
        if q > best_q:
            best, best_keep, best_q = x_new, keep, q
        moved = np.linalg.norm(x_new - x)
        x = x_new
        if moved < tol:
            break
    i = int(np.argmax(np.abs(best)))
    return (-best if best[i] < 0 else best), best_keep, best_q, n_iter


def sparse_sin2_bound(operator_error: float, eigengap: float) -> float:
    """``min(1, (2 eta / (g - 2 eta))^2)`` for ``g > 2 eta``, else 1: the bound on ``sin^2``
    between ``Sigma``'s top eigenvector and any unit vector whose Rayleigh quotient on ``M`` is
    at least that eigenvector's, when ``||M - Sigma||_op <= eta`` (module docstring)."""
    eta = float(operator_error)
    g = check_positive(eigengap, "eigengap")
    if not g > 2 * eta:
        return 1.0
    return min(1.0, (2 * eta / (g - 2 * eta)) ** 2)


def sparse_component_release(covariance_release: Release, k: int) -> Release:
    """The k-sparse leading component of a PrivCov release, as a release with the same
    privacy record (the component is post-processing of the released matrix). ``k`` is the
    release's, validated by its fit."""
    M = covariance_release.values["covariance"]
    u, support, rayleigh, n_iter = _truncated_power(sp.csr_array(M, dtype=np.float64), k, None)
    return dataclasses.replace(
        covariance_release,
        mechanism=f"{covariance_release.mechanism}; {MECHANISM_SUFFIX}",
        values={**covariance_release.values, "components": u[None, :], "explained_variance": np.array([rayleigh]),
                "support": support, "n_iter": n_iter},
        notes=tuple(covariance_release.notes) + (
            "components are post-processing of the released covariance (truncated power method)",),
    )


@dataclass(frozen=True, kw_only=True)
class SparseCovariancePCAPlan(SparseCovariancePlan):
    """:meth:`SparseCovariancePCA.plan`: PrivCov's plan (``operator_error_bound`` is its
    Theorem 1 bound) plus, with ``eigengap``, the ``sin^2`` bound of this module's docstring,
    which is then the plan's ``error_bound`` (scale 1, as ``sin^2 <= 1``). Without
    ``eigengap`` the error is PrivCov's operator-norm bound (scale ``sigma**2``)."""

    eigengap: float | None = None
    operator_error_bound: float | None = None
    sin2_bound: float | None = None
    conditions: tuple = ()


#: What the sin^2 bound assumes, besides Theorem 1's conditions.
SIN2_CONDITIONS = (
    "Sigma is k-RCS with a unit top eigenvector v and absolute eigengap eigengap (Model 2 satisfies this)",
    "the truncated power method returns a k-sparse u with u^T M u >= v^T M v (true for the best k-sparse "
    "vector; the method is local, Yuan and Zhang 2013)",
)


class SparseCovariancePCA(Projection, SparseCovariance):
    """Private k-sparse leading principal component: PrivCov, then the truncated power method.

    Takes exactly :class:`~dpdist.SparseCovariance`'s parameters (every one reaches PrivCov
    unchanged) and returns, besides PrivCov's attributes, the k-sparse leading component of
    the released matrix.

    Attributes
    ----------
    components_ : ndarray of shape (1, n_features)
        Unit vector with at most ``k`` non-zeros.
    explained_variance_ : ndarray of shape (1,)
        ``components_ @ covariance_ @ components_.T``: the component's variance under the
        released matrix (post-processing, not an independent estimate).
    support_ : ndarray of shape (k,)
        The k indices the component is supported on (sorted).
    covariance_ : scipy.sparse.csr_array
        PrivCov's released matrix M.
    selected_, clip_, noise_scale_, privacy_, release_
        As in :class:`~dpdist.SparseCovariance`.
    n_iter_ : int
        Power-method iterations run.

    Notes
    -----
    **Guarantee.** Exactly that of :class:`~dpdist.SparseCovariance` with the same parameters:
    (epsilon, delta)-DP under replace-one neighbours, for any input (sensitivity, lemmas and
    caveats in :func:`~dpdist.algorithms.sparse_covariance.private_sparse_covariance`). The
    component is computed from the released matrix alone (post-processing), so it costs
    nothing more. :meth:`plan` bounds ``sin^2`` to the top eigenvector under a sparse spike
    model (derivation in :mod:`dpdist.algorithms.sparse_covariance_pca`).

    Examples
    --------
    >>> from dpdist.data.model2 import make_model2
    >>> m = make_model2(5_000, 20, 3, gap=0.5, lambda1=2.0, random_state=0)
    >>> est = SparseCovariancePCA(3, 1.0, 1e-6, sigma=m.sigma, random_state=0, scheduler="synchronous")
    >>> est.fit(m.X).components_.shape
    (1, 20)
    """

    def _release_validated(self, X: Any, p: Params, plan: Any) -> Release:
        return sparse_component_release(super()._release_validated(X, p, plan), p.k)

    def _fitted_attributes(self, rel: Release) -> dict:
        return {
            **super()._fitted_attributes(rel),
            "components_": rel.values["components"],
            "explained_variance_": rel.values["explained_variance"],
            "support_": rel.values["support"],
            "n_iter_": rel.values["n_iter"],
        }

    def _plan_validated(self, p: Params) -> SparseCovariancePCAPlan:
        return self._component_plan(p)

    def plan(self, n_samples: int, n_features: int, *, eigengap: float | None = None) -> SparseCovariancePCAPlan:
        """PrivCov's plan and, with ``eigengap`` (absolute, ``lambda_1 - lambda_2`` of the model),
        the ``sin^2`` bound to the top eigenvector; reads no data.

        The bound is ``(2 eta / (eigengap - 2 eta))^2`` with ``eta`` PrivCov's Theorem 1
        operator-norm bound (1 when ``eigengap <= 2 eta``); it holds with probability at least
        ``1 - beta`` under the conditions listed in the plan's ``conditions``.
        """
        return self._component_plan(self._validated_at(n_samples, n_features), eigengap)

    @reports_empirical("privcov_power")
    def _component_plan(self, p: Params, eigengap: float | None = None) -> SparseCovariancePCAPlan:
        base = self._plan_of(p)  # PrivCov's plan, without its measured n*
        fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(base) if f.init}
        fields.update(operator_error_bound=base.error_bound)
        if eigengap is not None:
            sin2 = sparse_sin2_bound(base.error_bound, eigengap)
            fields.update(eigengap=float(eigengap), sin2_bound=sin2, error_bound=sin2,
                          error_metric="sin^2(u, v_1), w.p. >= 1 - beta (Theorem 1 and Davis-Kahan)",
                          error_scale=1.0, error_scale_rule="1: sin^2 <= 1 always", conditions=SIN2_CONDITIONS)
        return SparseCovariancePCAPlan(**fields)

    def min_samples(self, target_sin2: float, n_features: int, *, eigengap: float) -> int:
        """Least n at which :meth:`plan` predicts ``sin^2 <= target_sin2`` (needs ``sigma``)."""
        if self.sigma is None:
            raise ValidationError("min_samples needs sigma (the error bound depends on it)")
        target_sin2 = check_positive(target_sin2, "target_sin2")
        d = check_int(n_features, "n_features", low=2)
        check_positive(eigengap, "eigengap")
        p = self._validate_params(fit=False)
        return search_min_samples(lambda n: self._component_plan(self._validate_together(p, n, d), eigengap).sin2_bound,
                                  target_sin2, start=4, limit=1 << 62)


sparse_covariance_pca = functional_form(
    SparseCovariancePCA, name="sparse_covariance_pca", positional=("k", "epsilon", "delta"),
    summary="(epsilon, delta)-DP k-sparse leading principal component of ``X``: PrivCov "
            "(:func:`~dpdist.algorithms.sparse_covariance.private_sparse_covariance`), then "
            ":func:`truncated_power_method` on the released matrix.",
    returns="""\
Release
    PrivCov's release (parameters, noise scales, events and seeding unchanged), with
    ``values["components"]`` (1 x d, unit, k-sparse), ``values["explained_variance"]``
    (the Rayleigh quotient of the component on the released matrix), ``values["support"]``
    and ``values["n_iter"]`` (power-method iterations; :data:`MAX_ITER` and :data:`TOL`
    are fixed by the library version the release records).

Notes
-----
**Guarantee.** Exactly PrivCov's: (epsilon, delta)-DP under replace-one neighbours, for
any input; the power method reads only the released matrix, so it is post-processing and
costs nothing more. The release keeps PrivCov's events, mechanisms, seeding and notes.""",
)
