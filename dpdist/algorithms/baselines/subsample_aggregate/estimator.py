"""The estimator :class:`SubsampleAggregateSecondMoment` and its functional form
:func:`subsample_aggregate_second_moment`.

The estimator lists its parameters once (``_parameter_constraints``); ``fit`` validates them
once, fixes the groups and MS25's conditions from them and the data's shape
(``_validate_together``), plans once, and runs
:func:`~dpdist.algorithms.baselines.subsample_aggregate.release.run_subsample_aggregate` on
those values.
"""

from __future__ import annotations

from typing import Any

from dpdist._validation import check_int
from dpdist.algorithms._base import Estimator
from dpdist.algorithms._constraints import Boolean, Custom, Delta, Epsilon, functional_form
from dpdist.privacy.release import Release
from dpdist.privacy.mechanisms.second_moment import check_alpha, check_m, check_xi
from dpdist.privacy.mechanisms.subsample_aggregate import (
    baseline_guarantee,
    baseline_threshold,
    tlap_support,
)
from dpdist.algorithms.baselines.subsample_aggregate.plan import SubsampleAggregatePlan, utility_min_samples
from dpdist.algorithms.baselines.subsample_aggregate.release import (
    group_sizes,
    refuse_unless_private,
    run_subsample_aggregate,
)

__all__ = ["SubsampleAggregateSecondMoment", "subsample_aggregate_second_moment"]


def _m(value, name):
    return check_m(value)


def _alpha(value, name):
    return check_alpha(value)


def _xi(value, name):
    return check_xi(value)


class SubsampleAggregateSecondMoment(Estimator):
    """Subsample-and-aggregate second moment (MS25 Algorithm 3), (2 eps, 4 e^eps delta)-DP.

    Parameters
    ----------
    epsilon, delta : float
        The per-step parameters of Algorithm 3. The *reported* guarantee is
        (2 epsilon, 4 e^epsilon delta) (Lemma A.4). For equal privacy with a rho-zCDP run use
        :func:`~dpdist.privacy.mechanisms.subsample_aggregate.equal_privacy_baseline_budget`.
    m : int
        Group size (the subsamplability size); needs m >= d.
    alpha : float, default 0.5
        Subsamplability accuracy; the agreement radius is 2 alpha / (1 - alpha).
    xi : float, default 0.1
        The failure probability of this estimator's guarantee (MS25's name for it, where the
        other estimators say ``beta``); it sets the masking scale eta_b.
    unsafe_no_privacy : bool, default False
        Run even when MS25's n-condition for privacy fails. The result is then labelled
        NOT PRIVATE (``Release.private = False``, ``privacy = None``). Experiments only;
        every fit with it emits one :class:`~dpdist.exceptions.PrivacyWarning`.
    random_state, scheduler, on_nonfinite
        As for :class:`~dpdist.SecondMoment` (rows holding NaN or inf become zero rows by
        default).

    Attributes
    ----------
    second_moment_ : ndarray (d, d)
    privacy_ : ApproxDP or None
        (2 epsilon, 4 e^epsilon delta); None for a NOT PRIVATE (unsafe) run.
    q_tilde_ : float
        The noisy agreement score (released by the TLap step).
    release_ : Release
        ``values["second_moment"]`` and ``parameters["q_tilde"]`` (the noisy agreement).

    Notes
    -----
    **Guarantee.** (2 epsilon, 4 e^epsilon delta)-DP under replace-one neighbours, n public
    (MS25 Lemma A.4: TLap on Q, whose sensitivity is 2/k because one replaced row changes one
    group, composed with Ashtiani-Liaw's Lemma 3.6 for the masked output), **provided**
    n >= 800 m max{sqrt(2d(d + 1/eta_b^2)/eps), 8d sqrt(ln(2/delta))/eps,
    8 ln(2/delta)/eps, 12 sqrt(d ln(2/delta))/(eps eta_b)}, which is checked. Sensitivity
    comes from k = floor(n/m) only; no clipping is needed. Not zCDP, and an (epsilon, delta)
    step cannot be turned into zCDP: a pipeline that mixes it with zCDP steps converts those to
    (epsilon, delta) and states its guarantee there. Caveats: the internal conditions of
    Ashtiani-Liaw Lemma 3.6 were not retrieved; only MS25's explicit n-condition is enforced. The
    condition is enormous (n >~ 5e7 m at d = 4), so experiments use ``unsafe_no_privacy``.
    Float-safe release: Q~ is a lattice value and every entry of the masked output is rounded
    exactly (:mod:`dpdist.privacy.mechanisms.subsample_aggregate` states what the proof does not cover).

    **Decisions.** Groups: a keyed pseudorandom partition (without replacement, as Algorithm 3
    draws them; :mod:`dpdist.privacy.noise.partition` states its distribution), labelled per row block
    on the workers. Constants: MS25 leaves C_N open; C_N = 2 is valid (a d x d Gaussian matrix
    has norm at most 2 sqrt(d) + t with probability >= 1 - 2 e^(-t^2/2)), and eta_b = alpha /
    (48 C_N (sqrt(d) + sqrt(ln(4/xi)))) uses ln(4/xi) as Lemma A.4 and Theorem A.6 do, not the
    ln(4/beta) of Algorithm 3's line 19. TLap(Delta, eps, delta), which MS25 names without a
    density, is Laplace(Delta/eps) conditioned on |z| <= A = (Delta/eps) ln(1 + (e^eps - 1)/(2
    delta)) (Geng et al. 2020; A is MS25's threshold term). Pairwise distances cost O(k^2 d^3)
    in one task: feasible for k up to a few thousand groups.

    **Floats.** Line 3 counts a pair only when its distance is certified within the radius for
    the computed group matrices (:func:`certified_agreement`; a pair the floats cannot decide
    counts as disagreeing). Lines 7-8 are exact rationals (:func:`agreement_weights`,
    :func:`exact_weighted_average`), and line 11 applies the Cholesky factor of that exact
    Sigma_hat (same law as the symmetric root) to a real Gaussian N, each entry rounded exactly
    to 30 significant bits (:mod:`dpdist.privacy.noise.masking`).

    **The fit.** Parameters and MS25's n-condition are checked in :meth:`fit` before data are
    read (from the shape); when the condition fails, :meth:`fit` raises unless
    ``unsafe_no_privacy=True``. A rejection (Algorithm 3 returns bottom) raises
    ``NoPrivateResult``, whose ``.release`` has status "rejected" (the budget counts as spent).
    A failed fit changes nothing (:mod:`dpdist.algorithms._base`).
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

    _parameter_constraints = {
        "epsilon": Epsilon(),
        "delta": Delta(),
        "m": Custom(_m),
        "alpha": Custom(_alpha),
        "xi": Custom(_xi),
        "unsafe_no_privacy": Boolean(),
    }

    def _validate_together(self, params, n_samples, n_features):
        """The reported guarantee (refusing an (epsilon, delta) that gives none), and the groups,
        the masking scale and MS25's privacy condition at this size (a plan reports the
        condition; a fit refuses it unless ``unsafe_no_privacy``)."""
        n = check_int(n_samples, "n_samples", low=2)
        d = check_int(n_features, "n_features", low=2)
        guarantee = baseline_guarantee(params.epsilon, params.delta)
        sizes = group_sizes(n, d, params.m, params.epsilon, params.delta, params.alpha, params.xi)
        return params.replace(n_samples=n, n_features=d, guarantee=guarantee, sizes=sizes)

    def _release_validated(self, X, params, plan) -> Release:
        """Run Algorithm 3; raises :class:`NoPrivateResult` when it returns bottom."""
        return run_subsample_aggregate(X, params)

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
        p = self._validate_params(fit=False)
        return None if p.unsafe_no_privacy else baseline_guarantee(p.epsilon, p.delta)

    def plan(self, n_samples: int, n_features: int) -> "SubsampleAggregatePlan":
        """Groups, noise scales, MS25's sample-size conditions and the predicted error for a
        data size; reads no data (:class:`SubsampleAggregatePlan`). Unlike :meth:`fit`, a size
        below the privacy condition is reported (``privacy_precondition_holds``), not refused."""
        return self._plan_validated(self._validated_at(n_samples, n_features))

    def _plan_validated(self, params) -> "SubsampleAggregatePlan":
        n, d, m, alpha, xi, epsilon, delta = (params.n_samples, params.n_features, params.m, params.alpha, params.xi,
                                              params.epsilon, params.delta)
        sizes = params.sizes
        k = sizes.n_groups
        utility_n = utility_min_samples(m, epsilon, delta)
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
            privacy=params.guarantee if sizes.private else None,
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
            unsafe_no_privacy=params.unsafe_no_privacy,
        )

    def _check_fit(self, n_samples: int, n_features: int) -> None:
        """Every check before the data are read, MS25's n-condition included (a ledger reserves
        nothing for a fit that would be refused)."""
        refuse_unless_private(self._validate_together(self._validate_params(), n_samples, n_features))


subsample_aggregate_second_moment = functional_form(
    SubsampleAggregateSecondMoment, name="subsample_aggregate_second_moment", positional=("epsilon", "delta"),
    summary="Algorithm 3 of MS25: subsample-and-aggregate with a masked output.",
    returns="""
    Release
        ``values["second_moment"]`` and ``parameters["q_tilde"]`` (the noisy agreement). A size below
        MS25's privacy condition without ``unsafe_no_privacy`` raises ``ValidationError`` (checked
        before reading data); a noisy agreement below the threshold (Algorithm 3 returns bottom)
        raises ``NoPrivateResult`` (the budget counts as spent; ``exc.release`` has status
        "rejected").""",
)
