"""The plan of :class:`~dpdist.algorithms.sparse_covariance.estimator.SparseCovariance`: the
noise, clip and error bound at a size, from public values only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dpdist.algorithms._centering import centring_error
from dpdist.privacy.budget import ApproxDP
from dpdist.privacy.mechanisms.gaussian import wang_xu_calibration
from dpdist.privacy.mechanisms.privcov.calibration import PrivCovCalibration
from dpdist.privacy.mechanisms.privcov.zcdp_calibration import (
    PrivCovGumbelCalibration,
    PrivCovZCDPCalibration,
)
from dpdist.algorithms.plan import Plan
from dpdist.algorithms.sparse_covariance.release import _error_bound, _mechanism_class, _selection_of


@dataclass(frozen=True, kw_only=True)
class SparseCovariancePlan(Plan):
    """:meth:`SparseCovariance.plan`: a :class:`~dpdist.algorithms.plan.Plan` whose
    ``noise_scale`` is the selection's noise scale that the release uses and reports in its
    ``noise_scales`` (the Gumbel scale beta_g for ``selection="gumbel"``, the Laplace scale b
    otherwise, with ``selection="paper"`` also the release's): the calibrated scale
    ``calibrated_noise_scale`` enlarged by the charge for rounding onto its lattice (a
    relative change near 1e-6); and whose ``error_bound`` is, for ``selection="paper"``,
    Theorem 1's ``||M - Sigma||_op <= 6 k (lambda_samp + lambda_priv)`` and, for
    ``selection="gumbel"`` and ``"laplace"``, ``6 k (lambda_samp + lambda_priv) +
    lambda_release`` (:func:`~dpdist.algorithms.sparse_covariance.bounds.privcov_gumbel_error_bound`,
    :func:`~dpdist.algorithms.sparse_covariance.bounds.privcov_zcdp_error_bound`;
    ``release_sigma`` the Gaussian release's sigma, ``selection_share`` the share of rho spent on the selection);
    probability >= 1 - beta, when no entry is clipped (1 - 2 beta with a private mean, whose
    error is added).

    **Scale** (vacuity): ``sigma**2``, the scale of a covariance of sigma-sub-Gaussian rows
    (every entry of Sigma is at most sigma^2 in magnitude; Problem 1's alpha is the error over
    sigma^2). With ``clip`` only, the bound and the scale use ``sigma = clip`` (entries clipped
    to [-R, R] are R-sub-Gaussian, Hoeffding's lemma), so the scale is ``clip**2``.

    **Centring.** ``centering`` is how the fit centres (``"private-mean"``,
    ``"public-mean"`` or ``"assume-centered"``). With a private mean, ``calibration`` is
    PrivCov's at its share ``1 - mean_fraction`` of the budget (``privacy`` is the whole
    budget), ``mean_noise_scale`` the standard deviation of the mean's noise, and
    ``lambda_center`` the largest-entry error of centring at the released mean instead of
    the true one (:func:`~dpdist.algorithms._centering.centring_error`, at beta), added to
    ``lambda_samp``: the bound then holds with probability >= 1 - 2 beta, when no row is
    clipped in either stage.
    """

    k: int
    selection: str
    clip: float
    clip_rule: str
    laplace_rule: str
    calibrated_noise_scale: float
    calibration: PrivCovCalibration | PrivCovZCDPCalibration | PrivCovGumbelCalibration
    release_sigma: float | None
    lambda_release: float | None
    wang_xu_gaussian_sigma: float
    sigma: float | None
    beta: float
    lambda_samp: float
    lambda_priv: float
    relative_error_bound: float
    centering: str = "assume-centered"
    mean_noise_scale: float | None = None
    lambda_center: float = 0.0
    selection_share: float | None = None
    row_clip: float = math.inf
    row_clip_rule: str = "none"
    release_sensitivity: float | None = None
    release_sensitivity_entry: float | None = None
    release_sensitivity_row: float | None = None


def _privcov_plan(cal, clip_rule: str, sigma: float | None, beta: float, *,
                  budget: ApproxDP | None = None, centering=None, mean_mech=None,
                  row_clip_rule: str = "none") -> SparseCovariancePlan:
    s = float(sigma) if sigma is not None else cal.clip
    selection = _selection_of(cal)
    paper = selection == "paper"
    err = _error_bound(cal, s, beta)
    rule = "sigma**2" if sigma is not None else "clip**2: no sigma given, clipped entries are clip-sub-Gaussian"
    lam_c = 0.0 if centering is None else centring_error(centering, mean_mech, s, cal.n_samples, cal.n_features,
                                                         beta)
    bound = err["error_bound"] + 6 * cal.k * lam_c
    if paper:
        metric, laplace_rule = "||M - Sigma||_op, w.p. >= 1 - beta (Theorem 1)", cal.laplace_rule
    elif selection == "laplace":
        metric = "||M - Sigma||_op, w.p. >= 1 - beta (Theorem 1 with the Gaussian release, docs/privacy/privcov.md)"
        laplace_rule = (f"zCDP: selection gets {cal.selection_share:.4f} of rho = {cal.rho:.4g}, "
                        f"b = 2k Delta / sqrt(2 rho_sel / d)")
    else:
        metric = ("||M - Sigma||_op, w.p. >= 1 - beta (Theorem 1 with Gumbel selection and the Gaussian release, "
                  "docs/privacy/privcov.md)")
        laplace_rule = (f"zCDP: selection gets {cal.selection_share:.4f} of rho = {cal.rho:.4g}, "
                        f"Gumbel beta = Delta sqrt(d k / (2 rho_sel))")
    if mean_mech is not None:
        metric = metric.replace("w.p. >= 1 - beta (", "w.p. >= 1 - 2 beta (centring at the private mean, ")
    mech = _mechanism_class(selection).from_calibration(cal)
    return SparseCovariancePlan(
        n_samples=cal.n_samples,
        n_features=cal.n_features,
        privacy=budget if budget is not None else ApproxDP(cal.epsilon, cal.delta),
        noise_scale=mech.noise_scales()["select"],
        error_bound=bound,
        error_metric=metric,
        error_scale=s * s,
        error_scale_rule=rule,
        k=cal.k,
        selection=selection,
        clip=cal.clip,
        clip_rule=clip_rule,
        laplace_rule=laplace_rule,
        calibrated_noise_scale=cal.gumbel_scale if selection == "gumbel" else cal.laplace_scale,
        calibration=cal,
        release_sigma=None if paper else cal.gaussian_sigma,
        lambda_release=None if paper else err["lambda_release"],
        wang_xu_gaussian_sigma=wang_xu_calibration(cal.epsilon, cal.delta, cal.n_samples, cal.n_features,
                                                   cal.clip)["gaussian_sigma"],
        sigma=None if sigma is None else float(sigma),
        beta=beta,
        lambda_samp=err["lambda_samp"],
        lambda_priv=err["lambda_priv"],
        relative_error_bound=bound / (s * s),
        centering=centering.mode if centering is not None else "assume-centered",
        mean_noise_scale=None if mean_mech is None else mean_mech.noise_scales()["gaussian"],
        lambda_center=lam_c,
        selection_share=None if paper else cal.selection_share,
        row_clip=math.inf if paper else cal.row_clip,
        row_clip_rule=row_clip_rule,
        release_sensitivity=None if paper else cal.release_sensitivity,
        release_sensitivity_entry=None if paper else cal.release_sensitivity_entry,
        release_sensitivity_row=None if paper else cal.release_sensitivity_row,
    )
