"""The estimator :class:`ExpMechSparsePCA` and its functional form :func:`expmech_pca`.

The estimator lists its parameters once (``_parameter_constraints``); ``fit`` validates them
once, fixes the clip level, the centring and the calibration from them and the data's shape
(``_validate_together``), plans once, and runs
:func:`~dpdist.algorithms.expmech_pca.release.run_expmech` on those values.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpdist._validation import check_int, check_positive
from dpdist.algorithms._base import Estimator, reports_empirical
from dpdist.algorithms._projection import Projection
from dpdist.algorithms._centering import CENTERING_CONSTRAINTS, DEFAULT_MEAN_FRACTION, centering_of, centring_error
from dpdist.algorithms._constraints import Delta, Epsilon, Integer, Real, functional_form
from dpdist.algorithms.expmech_pca.plan import ExpMechPlan, error_bound, expmech_min_samples
from dpdist.algorithms.expmech_pca.release import (
    DEFAULT_BETA,
    DEFAULT_MAX_SUBSETS,
    MECHANISM,
    calibrate,
    check_range,
    resolve_clip,
    run_expmech,
)
from dpdist.engine.subsets import DEFAULT_SUBSETS_PER_TASK
from dpdist.exceptions import ValidationError
from dpdist.privacy.budget import ApproxDP
from dpdist.privacy.release import Release

__all__ = ["ExpMechSparsePCA", "expmech_pca"]


class ExpMechSparsePCA(Projection, Estimator):
    """Private leading k-sparse principal component by the exponential mechanism (Algorithm 4).

    Parameters
    ----------
    k : int
        Support size of the released vector.
    epsilon, delta : float
        Total budget (replace-one neighbours); ``epsilon/2`` selects the support,
        ``(epsilon/2, delta)`` releases the block (Lemma 29).
    sigma : float, optional
        Public sub-Gaussian scale; sets ``tau = 2 sigma sqrt(log(4 n d / beta))`` when
        ``clip`` is not given (and is needed by :meth:`min_samples`).
    clip : float, optional
        Public entry truncation level tau (overrides ``sigma`` for the clip). One of ``sigma``
        and ``clip`` is required.
    max_subsets : int
        Refuse (``ValidationError``) when ``C(d, k)`` exceeds it, before reading data (default
        :data:`~dpdist.algorithms.expmech_pca.release.DEFAULT_MAX_SUBSETS`).
    beta : float
        Failure probability used for tau and by :meth:`plan`.
    random_state : None or int
        ``None``: OS entropy (the only mode for real releases); an int seeds the noise (tests
        and reproduction only).
    scheduler : optional
        Where the graph runs (:func:`dpdist.engine.runtime.compute`).
    on_nonfinite : {"zero", "raise"}, default "zero"
        "zero": rows holding NaN or inf become zero rows before any statistic (uncounted).
        "raise": explicit validation mode, refuse before releasing (reveals one bit, recorded
        in the release's notes).
    subsets_per_task : int
        Candidate subsets scored by one task of the exhaustive enumeration of the ``C(d, k)``
        subsets (not a chunk of rows; it does not change the output).
    assume_centered, mean, mean_fraction, mean_clip
        Centring, as :class:`~dpdist.SparseCovariance`: by default the scores and the block are
        those of the covariance around a mean released with ``mean_fraction`` of the Gaussian
        part of the budget (rows scaled to L2 norm ``mean_clip``, default ``tau sqrt(d)``):
        with the selection by basic composition, the mean and the block form one Gaussian
        mechanism (GDP) and the mean takes ``mean_fraction`` of its ``mu^2``; in zCDP it takes
        ``mean_fraction`` of rho (:func:`~dpdist.privacy.mechanisms.expmech.expmech_split`).
        ``assume_centered=True``: those of the second moment.

    Attributes
    ----------
    components_ : ndarray of shape (1, n_features)
        Unit vector supported on ``support_``.
    support_ : ndarray of shape (k,)
    noise_scale_ : float
        Gaussian scale of the block release (sigma_priv).
    selection_scale_ : float
        Gumbel scale of the selection, in score units (``8 k tau^2 / (epsilon n)``).
    clip_ : float
    privacy_ : ApproxDP
    release_ : Release
        ``values``: ``components`` (1, d) unit vector supported on ``support``, ``support``
        (k,), ``noisy_block`` (the released ``Sigma_hat_S + G_S``, not symmetrised), and
        ``block_eigenvalue`` (top eigenvalue of the symmetrised noisy block).

    Notes
    -----
    Guarantee: ``(epsilon, delta)``-DP under replace-one neighbours (rows), for every input,
    by Lemma 29 of the COLT 2026 paper. Entries are truncated to ``[-tau, tau]`` with a
    public tau; the score ``lambda_1(Sigma_hat_S)`` of each support S has global sensitivity
    ``2 k tau^2 / n`` and the ``k x k`` block the same Frobenius sensitivity. The support is
    drawn by the exponential mechanism at ``epsilon_sel`` (Lemma 28; the paper's
    ``epsilon/2``), sampled exactly by Gumbel-max: ``argmax_S epsilon_sel n q(S) / (4 k tau^2)
    + Gumbel_S`` over all ``C(d, k)`` supports; the block is released with i.i.d. ``N(0,
    sigma^2)`` noise, sigma the exact requirement of its share (below the printed line 11's);
    ``epsilon_sel`` and the composition of the two (basic, or zCDP with the selection's
    bounded range) minimise the error bound
    (:func:`~dpdist.privacy.mechanisms.expmech.expmech_split`); symmetrising and the
    eigenvector are post-processing. Parameters are validated in :meth:`fit`; a failed fit
    changes nothing (:mod:`dpdist.algorithms._base`).

    Cost: ``C(d, k)`` score evaluations (exact enumeration; refused above ``max_subsets``),
    and every enumeration task holds the dense ``d x d`` clipped second moment (``8 d^2``
    bytes; :meth:`plan` reports it).

    Float-safe: the selection is the exact exponential mechanism on lattice scores
    (exact Gumbel-max, certified comparisons; every support has positive probability under
    every dataset) and the block is released on a lattice with an exactly sampled rounded
    Gaussian; the argument and its residuals are written once in
    :mod:`dpdist.privacy.mechanisms.expmech`. Only the winning support and the noisy block
    leave the workers; the noisy maximum and the scores do not. ``on_nonfinite="raise"``
    refuses data with NaN/inf: the check runs in the same pass and the release task outputs
    nothing when it fails (the refusal itself reveals one bit). Floating point: the Gumbel
    weight and the block noise use the sensitivities of the computed scores and block
    (:func:`~dpdist.privacy.mechanisms.expmech.expmech_calibration`).

    Centring: the private mean (:mod:`dpdist.privacy.mechanisms.mean`) is released first;
    ``x -> x - mu_hat`` is then a fixed per-row map before the truncation to tau, so the
    sensitivities above are unchanged (the mean is public by then); tau must cover the
    entries of ``x - mu_hat``. The mean joins the Gaussian part of the budget: with the
    selection by basic composition, the mean and the block are one Gaussian mechanism in GDP;
    in zCDP the mean takes ``mean_fraction`` of rho
    (:func:`~dpdist.algorithms.expmech_pca.release.calibrate`). The accountant re-derives
    (epsilon, delta) from the three events together.

    Examples
    --------
    >>> from dpdist.data.model2 import make_model2
    >>> m = make_model2(20_000, 20, 2, gap=0.5, lambda1=2.0, random_state=0)
    >>> est = ExpMechSparsePCA(2, 1.0, 1e-6, sigma=m.sigma, random_state=0, scheduler="synchronous")
    >>> est.fit(m.X).components_.shape
    (1, 20)
    """

    def __init__(
        self,
        k: int,
        epsilon: float,
        delta: float,
        *,
        sigma: float | None = None,
        clip: float | None = None,
        max_subsets: int = DEFAULT_MAX_SUBSETS,
        beta: float = DEFAULT_BETA,
        random_state: Any = None,
        scheduler: Any = None,
        on_nonfinite: str = "zero",
        subsets_per_task: int = DEFAULT_SUBSETS_PER_TASK,
        assume_centered: bool = False,
        mean: Any = None,
        mean_fraction: float = DEFAULT_MEAN_FRACTION,
        mean_clip: float | None = None,
    ) -> None:
        self.k = k
        self.epsilon = epsilon
        self.delta = delta
        self.sigma = sigma
        self.clip = clip
        self.max_subsets = max_subsets
        self.beta = beta
        self.random_state = random_state
        self.scheduler = scheduler
        self.on_nonfinite = on_nonfinite
        self.subsets_per_task = subsets_per_task
        self.assume_centered = assume_centered
        self.mean = mean
        self.mean_fraction = mean_fraction
        self.mean_clip = mean_clip

    #: ExpMechPCA accepts one row and one column.
    _min_shape = (1, 1)

    _parameter_constraints = {
        "k": Integer(),
        "epsilon": Epsilon(),
        "delta": Delta(),
        "sigma": Real(low=0.0, allow_none=True),
        "clip": Real(low=0.0, allow_none=True),
        "max_subsets": Integer(),
        "beta": Real(low=0.0, high=1.0),
        **CENTERING_CONSTRAINTS,
    }

    def _validate_together(self, params, n_samples, n_features):
        """``k <= d``, the clip level (``sigma`` or ``clip`` is required), the centring (a public
        mean's length) and the calibration of the whole budget, the private mean's included."""
        n, d = check_int(n_samples, "n_samples", low=1), check_int(n_features, "n_features", low=1)
        if params.k > d:
            raise ValidationError(f"k must satisfy 1 <= k <= d = {d}, got k={params.k}")
        tau, source = resolve_clip(params.sigma, params.clip, n, d, params.beta)
        centering = centering_of(params, n_features=d)
        cal, mech, mean_share, share = calibrate(centering, params.epsilon, params.delta, n, d, params.k, tau,
                                                 params.beta)
        return params.replace(n_samples=n, n_features=d, clip=tau, clip_source=source, centering=centering,
                              calibration=cal, mean_mechanism=mech, mean_share=mean_share, share=share)

    def _release_validated(self, X: Any, params, plan) -> Release:
        return run_expmech(X, params)

    def _fitted_attributes(self, rel: Release) -> dict:
        mu = rel.values.get("mean")
        return {
            "release_": rel,
            "components_": rel.values["components"],
            "location_": np.zeros(rel.parameters["n_features"]) if mu is None else np.asarray(mu, dtype=np.float64),
            "support_": rel.values["support"],
            "noise_scale_": rel.noise_scales["block_gaussian_sigma"],
            "selection_scale_": rel.noise_scales["selection_gumbel_scale"],
            "clip_": rel.parameters["clip"],
            "privacy_": rel.privacy,
        }

    def _check_fit(self, n_samples: int, n_features: int) -> None:
        """Every check before the data are read, the enumeration's size included (a ledger
        reserves nothing for a fit that would be refused)."""
        params = self._validate_together(self._validate_params(), n_samples, n_features)
        check_range(params.calibration, params.max_subsets)

    @reports_empirical("expmech")
    def plan(self, n_samples: int, n_features: int, *, eigengap: float | None = None) -> "ExpMechPlan":
        """Noise scales and the predicted error at this size, without reading data.

        Parameters
        ----------
        n_samples, n_features : int
        eigengap : float, optional
            Absolute eigengap ``lambda_1 - lambda_2`` of the population covariance (a model
            assumption); with it the plan's error is the ``sin^2`` bound of Theorem 7's proof.

        Returns
        -------
        ExpMechPlan
            ``n_subsets``, ``feasible`` (``n_subsets <= max_subsets``), ``clip``,
            ``noise_scales``, the calibration, and ``error``: the pieces of
            :func:`~dpdist.algorithms.expmech_pca.plan.expmech_error_bound`, holding with
            probability >= 1 - beta (with ``clip`` only, computed at ``sigma = clip``).
        """
        return self._plan_validated(self._validated_at(n_samples, n_features), eigengap)

    def _plan_validated(self, params, eigengap: float | None = None) -> ExpMechPlan:
        cal, centering, mean_mech = params.calibration, params.centering, params.mean_mechanism
        sigma = params.sigma if params.sigma is not None else cal.clip
        error = error_bound(cal, sigma, params.beta, eigengap)
        # centring at the released mean moves every k x k block by at most k lambda_center in
        # operator norm: the sampling term's role in the deficit (twice)
        error["eta_center"] = cal.k * centring_error(centering, mean_mech, sigma, cal.n_samples, cal.n_features,
                                                     params.beta)
        error["rayleigh_deficit_bound"] += 2.0 * error["eta_center"]
        if eigengap is not None:
            error["sin2_bound"] = min(1.0, error["rayleigh_deficit_bound"] / error["eigengap"])
        prob = "1 - 2 beta (Theorem 7, plus centring at the private mean)" if mean_mech else "1 - beta (Theorem 7)"
        feasible = cal.n_subsets <= params.max_subsets and cal.n_subsets < 1 << 62
        if eigengap is not None:
            bound, metric, scale, rule = (error["sin2_bound"], f"sin^2(v_hat, v_1), w.p. >= {prob}",
                                          1.0, "1: sin^2 <= 1 always")
        else:
            bound, metric, scale = (error["rayleigh_deficit_bound"],
                                    f"lambda_1 - v_hat^T Sigma v_hat, w.p. >= {prob}", sigma * sigma)
            rule = "sigma**2 (lambda_1 <= sigma^2)" if params.sigma is not None else \
                "clip**2: no sigma given, clipped entries are clip-sub-Gaussian"
        return ExpMechPlan(
            n_samples=cal.n_samples,
            n_features=cal.n_features,
            privacy=ApproxDP(params.epsilon, params.delta),
            noise_scale=cal.gaussian_sigma,
            error_bound=bound,
            error_metric=metric,
            error_scale=scale,
            error_scale_rule=rule,
            unmet_conditions=() if feasible else (
                f"C(d, k) = {cal.n_subsets:.3g} supports exceed max_subsets = {params.max_subsets}: the fit is "
                "refused",),
            mechanism=MECHANISM,
            k=cal.k,
            n_subsets=int(cal.n_subsets),
            max_subsets=params.max_subsets,
            feasible=feasible,
            dense_second_moment_bytes=8 * cal.n_features**2,  # held densely by the enumeration's tasks
            clip=cal.clip,
            noise_scales={"selection_gumbel_scale": cal.gumbel_scale, "block_gaussian_sigma": cal.gaussian_sigma},
            calibration=cal,
            error=error,
            centering=centering.mode,
            mean_noise_scale=None if mean_mech is None else mean_mech.noise_scales()["gaussian"],
        )

    def min_samples(self, target_sin2: float, n_features: int, *, eigengap: float) -> int:
        """Least n for which :meth:`plan` predicts ``sin^2 <= target_sin2`` (needs ``sigma``)."""
        p = self._validate_params(fit=False)
        if p.sigma is None:
            raise ValidationError("min_samples needs sigma (the sub-Gaussian scale of the model)")
        d = check_int(n_features, "n_features")
        if centering_of(p, n_features=d).private:
            # the plan's bound, with the private mean's share and error
            from dpdist.algorithms._utility import search_min_samples

            target = check_positive(target_sin2, "target_sin2")
            return search_min_samples(
                lambda n: self._plan_validated(self._validate_together(p, n, d), eigengap).error_bound, target,
                start=4, limit=1 << 62)
        return expmech_min_samples(target_sin2, p.epsilon, p.delta, d, p.k, sigma=p.sigma, eigengap=eigengap,
                                   beta=p.beta, clip=p.clip)


expmech_pca = functional_form(
    ExpMechSparsePCA, name="expmech_pca", positional=("k", "epsilon", "delta"),
    summary="Private k-sparse leading eigenvector by the exhaustive exponential mechanism (Algorithm 4).",
    returns="""
    Release
        ``values``: ``components`` (1, d) unit vector supported on ``support``, ``support`` (k,),
        ``noisy_block`` (the released ``Sigma_hat_S + G_S``, not symmetrised), and
        ``block_eigenvalue`` (top eigenvalue of the symmetrised noisy block).""",
)
