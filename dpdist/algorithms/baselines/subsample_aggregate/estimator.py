"""The estimator :class:`SubsampleAggregateSecondMoment`: it validates, calls
:func:`~dpdist.algorithms.baselines.subsample_aggregate.release.subsample_aggregate_second_moment`
and copies the release to ``*_`` attributes.
"""

from __future__ import annotations

from typing import Any

from dpdist._validation import check_bool, check_int
from dpdist.algorithms._base import Estimator
from dpdist.privacy.budget import check_delta, check_epsilon
from dpdist.privacy.release import Release
from dpdist.privacy.mechanisms.second_moment import check_alpha, check_m, check_xi
from dpdist.privacy.mechanisms.subsample_aggregate import (
    baseline_guarantee,
    baseline_threshold,
    tlap_support,
)
from dpdist.algorithms.baselines.subsample_aggregate.plan import SubsampleAggregatePlan, baseline_utility_min_samples
from dpdist.algorithms.baselines.subsample_aggregate.release import _check_sizes, subsample_aggregate_second_moment


class SubsampleAggregateSecondMoment(Estimator):
    """Subsample-and-aggregate second moment (MS25 Algorithm 3), (2 eps, 4 e^eps delta)-DP.

    Parameters
    ----------
    epsilon, delta, m, alpha, xi, unsafe_no_privacy, random_state, scheduler, on_nonfinite
        See :func:`subsample_aggregate_second_moment`.

    Attributes
    ----------
    second_moment_ : ndarray (d, d)
    privacy_ : ApproxDP or None
        (2 epsilon, 4 e^epsilon delta); None for a NOT PRIVATE (unsafe) run.
    q_tilde_ : float
        The noisy agreement score (released by the TLap step).
    release_ : Release

    Notes
    -----
    **Guarantee.** (2 epsilon, 4 e^epsilon delta)-DP under replace-one neighbours provided
    MS25's n-condition holds (checked in :meth:`fit` before data are read, from the shape);
    see :func:`subsample_aggregate_second_moment`. When it fails, :meth:`fit` raises unless
    ``unsafe_no_privacy=True``, and the result is labelled NOT PRIVATE. A failed fit changes
    nothing (:mod:`dpdist.algorithms._base`).
    """

    def __init__(
        self,
        epsilon: float,
        delta: float,
        *,
        m: int,
        alpha: float = 0.5,
        xi: float = 0.1,
        unsafe_no_privacy: bool = False,
        random_state: int | None = None,
        scheduler: Any = None,
        on_nonfinite: str = "zero",
    ) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.m = m
        self.alpha = alpha
        self.xi = xi
        self.unsafe_no_privacy = unsafe_no_privacy
        self.random_state = random_state
        self.scheduler = scheduler
        self.on_nonfinite = on_nonfinite

    def _fit_release(self, X) -> Release:
        """Run Algorithm 3; raises :class:`NoPrivateResult` when it returns bottom."""
        return subsample_aggregate_second_moment(X, **self.get_params())

    def _fitted_attributes(self, release: Release) -> dict:
        return {
            "release_": release,
            "second_moment_": release.values["second_moment"],
            "privacy_": release.privacy,
            "q_tilde_": float(release.parameters["q_tilde"]),
        }

    def privacy_cost(self):
        """``(2 epsilon, 4 e^epsilon delta)`` (MS25 Lemma A.4); None with ``unsafe_no_privacy=True``
        (the guarantee is then not claimed)."""
        if check_bool(self.unsafe_no_privacy, "unsafe_no_privacy"):
            return None
        return baseline_guarantee(self.epsilon, self.delta)

    def plan(self, n_samples: int, n_features: int) -> "SubsampleAggregatePlan":
        """Groups, noise scales, MS25's sample-size conditions and the predicted error for a
        data size; reads no data (:class:`SubsampleAggregatePlan`). Unlike :meth:`fit`, a size
        below the privacy condition is reported (``privacy_precondition_holds``), not refused."""
        epsilon, delta = check_epsilon(self.epsilon), check_delta(self.delta)
        m, alpha, xi = check_m(self.m), check_alpha(self.alpha), check_xi(self.xi)
        unsafe = check_bool(self.unsafe_no_privacy, "unsafe_no_privacy")
        n = check_int(n_samples, "n_samples", low=2)
        d = check_int(n_features, "n_features", low=2)
        baseline_guarantee(epsilon, delta)  # the fit's refusal of an (epsilon, delta) with no guarantee
        sizes = _check_sizes(n, d, m, epsilon, delta, alpha, xi, True)
        k = sizes.n_groups
        utility_n = baseline_utility_min_samples(m, epsilon, delta)
        threshold = baseline_threshold(k, epsilon, delta)
        unmet = []
        if n < utility_n:
            unmet.append(f"n = {n} is below Lemma A.5's utility condition n >= {utility_n:.4g}")
        if threshold >= 1.0:
            unmet.append(f"the agreement threshold {threshold:.3g} >= 1 (k = {k} groups): Algorithm 3 returns "
                         "bottom unless the TLap noise lands near its support bound")
        return SubsampleAggregatePlan(
            n_samples=n,
            n_features=d,
            privacy=baseline_guarantee(epsilon, delta) if sizes.private else None,
            noise_scale=sizes.eta_b,
            error_bound=2.0 * alpha,
            error_metric="||Sigma^-1/2 M Sigma^-1/2 - I||_op <= 2 alpha, w.p. >= 1 - xi (MS25 Lemma A.5)",
            error_scale=1.0,
            error_scale_rule="1: a relative error of 1 allows M = 0",
            unmet_conditions=tuple(unmet),
            m=m,
            alpha=alpha,
            xi=xi,
            n_groups=k,
            eta_b=sizes.eta_b,
            threshold=threshold,
            tlap_scale=2.0 / (k * epsilon),
            tlap_support=tlap_support(2.0 / k, epsilon, delta),
            privacy_min_samples=sizes.privacy_min_samples,
            utility_min_samples=utility_n,
            privacy_precondition_holds=sizes.private,
            unsafe_no_privacy=unsafe,
        )

    def _check_fit(self, n_samples: int, n_features: int) -> None:
        super()._check_fit(n_samples, n_features)
        _check_sizes(n_samples, n_features, check_m(self.m), check_epsilon(self.epsilon), check_delta(self.delta),
                     check_alpha(self.alpha), check_xi(self.xi), check_bool(self.unsafe_no_privacy, "unsafe_no_privacy"))
