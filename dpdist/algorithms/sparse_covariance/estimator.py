"""The estimator :class:`SparseCovariance`: it validates, calls
:func:`~dpdist.algorithms.sparse_covariance.release.private_sparse_covariance` and exposes the
release as ``*_`` attributes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from dpdist._validation import check_int, check_positive
from dpdist.algorithms._base import Estimator, reports_empirical
from dpdist.algorithms._centering import DEFAULT_MEAN_FRACTION, check_centering, mean_mechanism
from dpdist.algorithms._utility import search_min_samples
from dpdist.engine.gram import DEFAULT_TILE
from dpdist.exceptions import ValidationError
from dpdist.privacy.budget import ApproxDP
from dpdist.privacy.release import Release
from dpdist.algorithms.sparse_covariance.bounds import privcov_min_samples
from dpdist.algorithms.sparse_covariance.plan import _privcov_plan
from dpdist.algorithms.sparse_covariance.release import (
    _calibrate,
    _check_params,
    _check_row_clip,
    _check_selection,
    _error_bound,
    _resolve_clips,
    _stage_composition,
    private_sparse_covariance,
)


class SparseCovariance(Estimator):
    """Private sparse covariance (PrivCov, Algorithm 1 of the COLT 2026 paper; by default with
    Gumbel top-k selection and the zCDP analysis of docs/privacy/privcov.md,
    ``selection="gumbel"``).

    Parameters
    ----------
    k : int
        Row sparsity of the estimate (the model's k-RCS level).
    epsilon, delta : float
        Privacy budget: epsilon > 0 (values above 1 are accepted when the per-row split
        still composes to at most epsilon, which is checked), delta in (0, 1).
    sigma : float, optional
        Public sub-Gaussian scale of the rows; sets the clip level R by the paper's rule.
    clip : float, optional
        Truncation level R; overrides the rule. One of ``sigma`` / ``clip`` is required.
    beta : float, default 0.1
        Failure probability of the utility statement (enters R and the error bound).
    random_state : None or int
        None (default) draws noise entropy from the OS; an int makes the noise reproducible
        and marks the release as seeded (tests only).
    scheduler : None, str or distributed.Client
        See :mod:`dpdist.engine.runtime`.
    on_nonfinite : {"zero", "raise"}, default "zero"
        See :func:`private_sparse_covariance` ("raise" reveals one bit).
    tile_size : int, default 2048
    assume_centered : bool, default False
        As scikit-learn's ``EmpiricalCovariance``: False (default) centres the data and
        estimates the covariance; True takes the data as mean-zero and estimates the second
        moment ``(1/n) sum x x^T`` with the whole budget.
    mean : array-like (d,), optional
        A public mean to centre at (recorded as public in the release; costs nothing).
        Without it the mean is released privately with ``mean_fraction`` of the budget.
    mean_fraction : float in (0, 1), default 0.1
        Share of the budget spent on the private mean: of rho for the zCDP selections
        (``"gumbel"``, ``"laplace"``: the two stages compose in zCDP), of (epsilon, delta) for
        ``selection="paper"``.
    mean_clip : float, optional
        L2 radius the rows are scaled to for the private mean; it must cover the norms of the
        raw rows (default ``clip * sqrt(d)``). ``clip`` / ``sigma`` must cover the entries of
        the centred rows ``x - mean``.
    selection : {"gumbel", "laplace", "paper"}, default "gumbel"
        "gumbel": Gumbel top-k selection (the peeling exponential mechanism) and a Gaussian
        release calibrated by zCDP; "laplace": Laplace selection and the same release (the
        proofs are docs/privacy/privcov.md); "paper": Algorithm 1 as the paper writes it. See
        :func:`private_sparse_covariance`.
    row_clip : float, optional
        L2 bound C the entry-clipped rows are scaled to (``"gumbel"`` and ``"laplace"`` only):
        the release's L2 sensitivity becomes ``min(sqrt(d k') 2 R^2 / n, 2 C min(R sqrt(k'),
        C) / n)`` (float factor included), a factor about ``C / (R sqrt(d))``. Default (None):
        with ``sigma``, ``C = sigma sqrt(d + 2 sqrt(d t) + 2 t)``, ``t = log(6 n / beta)`` (no
        Gaussian row scaled but with probability beta/6; R's rule then takes beta/6 too); with
        only ``clip``, no row clip. ``inf``: no row clip.

    Attributes
    ----------
    covariance_ : scipy.sparse.csr_array, (d, d)
        The released symmetric (k+1)-RCS estimate M.
    location_ : ndarray (d,)
        The mean the data were centred at (released or public); zeros with
        ``assume_centered=True``.
    support_ : scipy.sparse.csr_array of bool
        Non-zero pattern of ``covariance_`` (diagonal included).
    selected_ : ndarray (d, k)
        The released sets S_i.
    clip_ : float
        The truncation level R used.
    noise_scale_ : float
        The selection's noise scale used: the Gumbel scale (``"gumbel"``, data units) or the
        Laplace scale b (with ``selection="paper"`` also the release's).
    release_noise_scale_ : float
        The noise scale of the released values: the Gaussian sigma (``"gumbel"``,
        ``"laplace"``) or b (``"paper"``).
    privacy_ : ApproxDP
        The (epsilon, delta) spent.
    release_ : Release
        The full record (mechanism, parameters, calibration, seeding, notes).

    Notes
    -----
    Guarantee, sensitivity and lemmas: see :func:`private_sparse_covariance`.
    Algorithm 1 needs many samples: use :meth:`plan` and :meth:`min_samples` before spending
    budget; a fit whose plan is vacuous warns :class:`~dpdist.exceptions.UtilityWarning`.
    Parameters are validated in :meth:`fit`; a failed fit changes nothing
    (:mod:`dpdist.algorithms._base`).

    Examples
    --------
    >>> import numpy as np, dpdist
    >>> X = np.random.default_rng(0).standard_normal((2000, 6))
    >>> est = dpdist.SparseCovariance(k=2, epsilon=1.0, delta=1e-6, sigma=1.0,
    ...                               random_state=0, scheduler="synchronous").fit(X)
    >>> est.covariance_.shape
    (6, 6)
    """

    def __init__(
        self,
        k: int,
        epsilon: float,
        delta: float,
        *,
        sigma: float | None = None,
        clip: float | None = None,
        beta: float = 0.1,
        random_state: int | None = None,
        scheduler: Any = None,
        on_nonfinite: str = "zero",
        tile_size: int = DEFAULT_TILE,
        assume_centered: bool = False,
        mean: Any = None,
        mean_fraction: float = DEFAULT_MEAN_FRACTION,
        mean_clip: float | None = None,
        selection: str = "gumbel",
        row_clip: float | None = None,
    ):
        self.k = k
        self.epsilon = epsilon
        self.delta = delta
        self.sigma = sigma
        self.clip = clip
        self.beta = beta
        self.random_state = random_state
        self.scheduler = scheduler
        self.on_nonfinite = on_nonfinite
        self.tile_size = tile_size
        self.assume_centered = assume_centered
        self.mean = mean
        self.mean_fraction = mean_fraction
        self.mean_clip = mean_clip
        self.selection = selection
        self.row_clip = row_clip

    def _fit_release(self, X: Any) -> Release:
        return private_sparse_covariance(
            X,
            self.k,
            self.epsilon,
            self.delta,
            sigma=self.sigma,
            clip=self.clip,
            beta=self.beta,
            random_state=self.random_state,
            scheduler=self.scheduler,
            on_nonfinite=self.on_nonfinite,
            tile_size=self.tile_size,
            assume_centered=self.assume_centered,
            mean=self.mean,
            mean_fraction=self.mean_fraction,
            mean_clip=self.mean_clip,
            selection=self.selection,
            row_clip=self.row_clip,
        )

    def _fitted_attributes(self, rel: Release) -> dict:
        M = rel.values["covariance"]
        mu = rel.values.get("mean")
        return {
            "covariance_": M,
            "location_": np.zeros(M.shape[0]) if mu is None else np.asarray(mu, dtype=np.float64),
            "support_": sp.csr_array(M != 0) if M.nnz else sp.csr_array(M.shape, dtype=bool),
            "selected_": rel.values["selected"],
            "clip_": rel.parameters["clip"],
            "noise_scale_": rel.noise_scales.get("gumbel_select", rel.noise_scales.get("laplace_select")),
            "release_noise_scale_": rel.noise_scales.get("gaussian_release", rel.noise_scales.get("laplace_select")),
            "privacy_": rel.privacy,
            "release_": rel,
        }

    def _calibration(self, n_samples: int, n_features: int) -> tuple:
        k, epsilon, delta, sigma, clip, beta = _check_params(self.k, self.epsilon, self.delta, self.sigma,
                                                             self.clip, self.beta)
        selection = _check_selection(self.selection)
        n = check_int(n_samples, "n_samples", low=2)
        d = check_int(n_features, "n_features", low=2)
        if k > d:
            raise ValidationError(f"k must satisfy k <= d = {d} (the number of features), got k={k}")
        centering = check_centering(self.assume_centered, self.mean, self.mean_fraction, self.mean_clip,
                                    n_features=d)
        R, rule, C, c_rule = _resolve_clips(clip, sigma, self.row_clip, selection, n, d, beta)
        mean_share, cov_share = centering.split(epsilon, delta, _stage_composition(selection))
        mean_mech = mean_mechanism(centering, mean_share, n, d, R) if centering.private else None
        return (_calibrate(selection, cov_share.epsilon, cov_share.delta, n, d, k, R, beta, C), rule, centering,
                mean_mech, c_rule)

    def _plan_of(self, n_samples: int, n_features: int) -> "SparseCovariancePlan":
        cal, rule, centering, mean_mech, c_rule = self._calibration(n_samples, n_features)
        return _privcov_plan(cal, rule, self.sigma, float(self.beta), budget=ApproxDP(self.epsilon, self.delta),
                             centering=centering, mean_mech=mean_mech, row_clip_rule=c_rule)

    @reports_empirical("privcov")
    def _paper_plan(self, n_samples: int, n_features: int) -> "SparseCovariancePlan":
        return self._plan_of(n_samples, n_features)

    @reports_empirical("privcov_laplace")
    def _laplace_plan(self, n_samples: int, n_features: int) -> "SparseCovariancePlan":
        return self._plan_of(n_samples, n_features)

    @reports_empirical("privcov_gumbel")
    def _gumbel_plan(self, n_samples: int, n_features: int) -> "SparseCovariancePlan":
        return self._plan_of(n_samples, n_features)

    def plan(self, n_samples: int, n_features: int) -> "SparseCovariancePlan":
        """Clip level, noise scales and error bound for a data size; reads no data.

        Returns a :class:`SparseCovariancePlan`: ``clip``, ``noise_scale`` (the selection's
        Gumbel scale, or Laplace b), ``release_sigma`` (``selection="gumbel"`` and
        ``"laplace"``: the release's Gaussian sigma), ``selection_share`` (their share of rho
        spent on the selection), ``laplace_rule`` (how the selection's scale was set), the
        full ``calibration``, the ``error_bound``
        (operator norm, with probability >= 1 - beta over data and noise, when no entry is
        clipped: Theorem 1's, or its version with the Gaussian release) and its pieces,
        whether it is vacuous, and for comparison the Gaussian scale of the Wang-Xu baseline
        (``wang_xu_sigma``) at the same budget and clip. The measured n* of
        ``dpdist experiment sample-complexity`` (``empirical``) are those of the plan's
        selection: method ``privcov`` for ``"paper"``, ``privcov_laplace`` for ``"laplace"``,
        ``privcov_gumbel`` for ``"gumbel"``.
        """
        selection = _check_selection(self.selection)
        if selection == "paper":
            return self._paper_plan(n_samples, n_features)
        if selection == "laplace":
            return self._laplace_plan(n_samples, n_features)
        return self._gumbel_plan(n_samples, n_features)

    def min_samples(self, target_error: float, n_features: int) -> int:
        """Least n at which :meth:`plan`'s error bound is <= ``target_error`` (needs sigma;
        with a private mean, the bound includes its share of the budget and its error)."""
        k, epsilon, delta, sigma, clip, beta = _check_params(self.k, self.epsilon, self.delta, self.sigma,
                                                             self.clip, self.beta)
        selection = _check_selection(self.selection)
        _check_row_clip(self.row_clip, selection)
        if sigma is None:
            raise ValidationError("min_samples needs sigma (the error bound depends on it)")
        d = check_int(n_features, "n_features", low=2)
        centering = check_centering(self.assume_centered, self.mean, self.mean_fraction, self.mean_clip,
                                    n_features=d)
        k = check_int(k, "k", high=d)
        if centering.private:  # the plan's bound, with the private mean's share and error
            target = check_positive(target_error, "target_error")
            return search_min_samples(lambda n: self.plan(n, d).error_bound, target, start=4, limit=1 << 62)
        if selection == "paper":
            return privcov_min_samples(target_error, epsilon, delta, d, k, sigma=sigma, beta=beta, clip=clip)
        target_error = check_positive(target_error, "target_error")

        def bound(n: int) -> float:
            r, _, c, _ = _resolve_clips(clip, sigma, self.row_clip, selection, n, d, beta)
            return _error_bound(_calibrate(selection, epsilon, delta, n, d, k, r, beta, c), sigma, beta)["error_bound"]

        return search_min_samples(bound, target_error, start=4, limit=1 << 62)
