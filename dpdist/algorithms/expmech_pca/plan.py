"""The plan of :class:`~dpdist.algorithms.expmech_pca.estimator.ExpMechSparsePCA`."""

from __future__ import annotations

from dataclasses import dataclass

from dpdist.privacy.expmech_calibration import ExpMechCalibration
from dpdist.privacy.plan import Plan


@dataclass(frozen=True, kw_only=True)
class ExpMechPlan(Plan):
    """:meth:`ExpMechSparsePCA.plan`: a :class:`~dpdist.privacy.plan.Plan` whose
    ``noise_scale`` is the block's Gaussian sigma (sigma_priv) and whose ``error_bound`` is
    Theorem 7's: with ``eigengap``, the ``sin^2`` bound (scale 1, as ``sin^2 <= 1``); without,
    the Rayleigh deficit ``lambda_1 - v_hat^T Sigma v_hat`` (scale ``sigma**2``, which bounds
    lambda_1 for sigma-sub-Gaussian rows). With ``clip`` only, both use ``sigma = clip``
    (entries clipped to [-clip, clip] are clip-sub-Gaussian). An infeasible enumeration
    (``C(d, k) > max_subsets``) is an unmet condition. With a private mean the calibration
    gives the block ``1 - mean_fraction`` of the Gaussian part (``privacy`` is the whole budget) and ``error`` adds
    ``eta_center`` (k times :func:`~dpdist.algorithms._centering.centring_error`, at beta) to
    the deficit like the sampling term; the bound then holds with probability >= 1 - 2 beta.
    """

    mechanism: str
    k: int
    n_subsets: int
    max_subsets: int
    feasible: bool
    dense_second_moment_bytes: int
    clip: float
    noise_scales: dict
    calibration: ExpMechCalibration
    error: dict
    centering: str = "assume-centered"
    mean_noise_scale: float | None = None
