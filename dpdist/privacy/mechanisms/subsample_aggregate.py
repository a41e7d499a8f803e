"""Subsample-and-aggregate (MS25 Appendix A, Algorithm 3): the agreement test and the masking.

The mechanism of :func:`dpdist.algorithms.baselines.subsample_aggregate.subsample_aggregate_second_moment`,
with its calibration, noise callables and events.

Guarantee: (2 epsilon, 4 e^epsilon delta)-DP under replace-one neighbours (MS25 Lemma A.4),
provided MS25's sample-size condition holds (otherwise the release is labelled NOT PRIVATE).
Sensitivity: a replaced row changes one group, so the agreement fraction Q moves by at most
``2/k`` (``2/k + 2**-52`` as computed); ``Q~`` is a truncated Laplace (Geng-Ding-Guo-Kumar
2020) on the lattice, and the masked output is Ashtiani-Liaw's Lemma 3.6 on the exact
weighted average, rounded to a 30-bit grid with every rounding decided exactly.
Deviations: the internal conditions of Lemma 3.6 could not be checked, so only MS25's explicit
sample-size condition is enforced. Residuals: the samplers' exhaustion, and run time.

Proofs and the float-safe release: docs/privacy/subsample_aggregate.md.

Calibration (MS25 Algorithm 3 and Appendix A), pure functions of public values: masking
scale, truncated-Laplace support, rejection threshold, the sample-size precondition of Lemma
A.4, the baseline's guarantee and the budget at which it matches the recursive estimator's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpdist.exceptions import DpdistError, ValidationError
from dpdist.privacy.budget import ApproxDP, check_delta, check_epsilon
from dpdist.privacy.events import EpsilonDeltaEvent, Event
from dpdist.privacy.noise.lattice import LatticeField, LatticeNoise
from dpdist.privacy.noise.masking import GRID_BITS, masked_gram
from dpdist.privacy.mechanisms.base import Mechanism, lattice_law
from dpdist.privacy.noise.streams import NoiseSeed
from dpdist.privacy.mechanisms.second_moment import check_alpha, check_m, check_xi
from dpdist.privacy.zcdp import bun_steinke_epsilon, cks20_epsilon

__all__ = [
    "AgreementTest",
    "BASELINE_CN",
    "PURPOSE_MASK",
    "PURPOSE_TLAP",
    "SubsampleAggregateMechanism",
    "agreement_sensitivity",
    "baseline_guarantee",
    "baseline_masking_scale",
    "baseline_max_pass_probability",
    "baseline_privacy_min_samples",
    "baseline_threshold",
    "equal_privacy_baseline_budget",
    "subsample_aggregate_mechanism",
    "tlap_support",
]


#: Constant C_N of the baseline's masking scale (unspecified in the paper): ||N|| <= 2(sqrt(d) + sqrt(ln(4/xi)))
#: with probability >= 1 - xi/2 for a d x d standard Gaussian matrix (Davidson-Szarek).
BASELINE_CN = 2.0


def tlap_support(sensitivity: float, epsilon: float, delta: float) -> float:
    """Support bound A = (Delta/eps) ln(1 + (e^eps - 1) / (2 delta)) of TLap(Delta, eps, delta)
    (Geng-Ding-Guo-Kumar 2020; MS25 writes only TLap(2/T, eps, delta), and this support
    matches its threshold term)."""
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    ratio = math.expm1(epsilon) / (2.0 * delta) if epsilon <= 700.0 else math.inf
    if math.isinf(ratio):  # beyond float64: the same logarithm, with ln(e^eps - 1) = eps + ln(1 - e^-eps)
        return float(sensitivity) / epsilon * float(np.logaddexp(0.0, epsilon + math.log1p(-math.exp(-epsilon))
                                                                 - math.log(2.0 * delta)))
    return float(sensitivity) / epsilon * math.log1p(ratio)


def baseline_threshold(n_groups: int, epsilon: float, delta: float) -> float:
    """Algorithm 3 line 6: reject when Q_tilde < 0.8 + (2 / (k eps)) ln(1 + (e^eps-1)/(2 delta))."""
    return 0.8 + tlap_support(2.0 / int(n_groups), epsilon, delta)


def baseline_max_pass_probability(n_groups: int, epsilon: float, delta: float, agreement: float = 1.0) -> float:
    """Pr[Q + Z >= threshold] for Z ~ TLap(2/k, eps, delta) when the exact agreement is Q.

    With Delta = 2/k, A the support and t = 0.8 + A - Q: for 0 < t <= A,
    Pr[Z >= t] = (e^{-t eps/Delta} - e^{-A eps/Delta}) / (2 (1 - e^{-A eps/Delta})).
    Note: a threshold >= 1 does *not* make bottom certain: Q = 1 passes when
    Z >= A - 0.2, which has probability ~ delta e^{0.1 k eps} / (e^eps - 1) (about 0.47 at
    k = 136, eps = 1, delta = 1e-6); bottom is near-certain only for k well below
    (10/eps) ln(1 + (e^eps - 1)/(2 delta)).
    """
    k = int(n_groups)
    sens = 2.0 / k
    A = tlap_support(sens, epsilon, delta)
    t = 0.8 + A - float(agreement)
    if t <= 0:
        return 1.0 if -t >= A else 0.5 + 0.5 * (1 - math.exp(t * epsilon / sens)) / (1 - math.exp(-A * epsilon / sens))
    if t > A:
        return 0.0
    r = epsilon / sens
    return (math.exp(-t * r) - math.exp(-A * r)) / (2.0 * -math.expm1(-A * r))


def baseline_masking_scale(alpha: float, n_features: int, xi: float) -> float:
    """eta_b = alpha / (48 C_N (sqrt(d) + sqrt(ln(4/xi)))) (Algorithm 3 line 19; C_N
    is unspecified in the paper, 2 here, and the tail term is ln(4/xi), the masking event's
    probability, not the printed ln(4/beta))."""
    alpha = check_alpha(alpha)
    xi = check_xi(xi)
    return alpha / (48.0 * BASELINE_CN * (math.sqrt(int(n_features)) + math.sqrt(math.log(4.0 / xi))))


def baseline_privacy_min_samples(m: int, n_features: int, epsilon: float, delta: float, eta_b: float) -> float:
    """MS25's n-condition for the baseline's (2 eps, 4 e^eps delta)-DP (Lemma A.4 / Thm A.6):
    n >= 800 m max{sqrt(2d(d + 1/eta_b^2)/eps), 8d sqrt(ln(2/delta))/eps, 8 ln(2/delta)/eps,
    12 sqrt(d ln(2/delta)) / (eps eta_b)}."""
    m = check_m(m)
    d = int(n_features)
    eps = check_epsilon(epsilon)
    delta = check_delta(delta)
    l2 = math.log(2.0 / delta)
    terms = (
        math.sqrt(2.0 * d * (d + 1.0 / eta_b**2) / eps),
        8.0 * d * math.sqrt(l2) / eps,
        8.0 * l2 / eps,
        12.0 * math.sqrt(d * l2) / (eps * eta_b),
    )
    return 800.0 * m * max(terms)


def baseline_guarantee(epsilon: float, delta: float) -> ApproxDP:
    """Algorithm 3 run with (eps, delta) is (2 eps, 4 e^eps delta)-DP (Lemma A.4)."""
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    largest = -math.log(4.0 * delta)  # 4 e^eps delta < 1  <=>  eps < ln(1 / (4 delta))
    if not epsilon < largest:
        raise ValidationError(
            f"epsilon={epsilon:g} is too large for delta={delta!r}: the baseline's guarantee 4 e^epsilon delta "
            f"must be < 1, so epsilon must be < ln(1/(4 delta)) = {largest:.6g} (or choose a smaller delta)"
        )
    total_delta = 4.0 * math.exp(epsilon) * delta
    return ApproxDP(2.0 * epsilon, total_delta)


def equal_privacy_baseline_budget(rho: float, delta_star: float, *, method: str = "bun-steinke") -> tuple[float, float]:
    """Equal-privacy comparison: convert rho-zCDP to (eps*, delta*), then run the baseline with
    eps = eps*/2 and delta = delta*/(4 e^{eps*/2}) so its guarantee is (eps*, delta*)."""
    if method == "bun-steinke":
        eps_star = bun_steinke_epsilon(rho, delta_star)
    elif method == "cks20":
        eps_star = cks20_epsilon(rho, delta_star)
    else:
        raise ValidationError(f"method must be 'bun-steinke' or 'cks20', got {method!r}")
    return eps_star / 2.0, float(delta_star) / (4.0 * math.exp(eps_star / 2.0))


#: Purpose of the truncated-Laplace noise of the agreement test.
PURPOSE_TLAP = "second-moment-baseline/tlap"
#: Purpose of the masking matrix N.
PURPOSE_MASK = "second-moment-baseline/mask"


def agreement_sensitivity(n_groups: int) -> float:
    """``2/k + 2**-52``: the sensitivity of the computed agreement Q (docs/privacy/subsample_aggregate.md)."""
    return 2.0 / int(n_groups) + 2.0**-52


@dataclass(frozen=True)
class AgreementTest:
    """``Q -> Q~``: the float-safe truncated-Laplace release of the agreement (a lattice point)."""

    field: LatticeField

    def __call__(self, agreement: float) -> float:
        return float(self.field(np.asarray([agreement], dtype=np.float64), 0)[0])


@dataclass(frozen=True)
class SubsampleAggregateMechanism(Mechanism):
    """Algorithm 3's private steps (docs/privacy/subsample_aggregate.md).

    Attributes
    ----------
    epsilon, delta : float
        The per-step budget (the release states (2 epsilon, 4 e^epsilon delta)).
    n_groups : int
        k.
    sensitivity : float
        Delta of the computed Q.
    support : float
        The calibration's TLap support A (data units).
    tlap : LatticeNoise
        The bounded rounded Laplace law of the test.
    sensitivity_units : float
        Delta_Z.
    eta_b : float
        The masking scale of the output.
    """

    NAME = "Subsample-and-aggregate second moment (MS25 Appendix A, Algorithm 3)"

    epsilon: float
    delta: float
    n_groups: int
    sensitivity: float
    support: float
    tlap: LatticeNoise
    sensitivity_units: float
    eta_b: float

    @property
    def test_epsilon(self) -> float:
        """``Delta_Z / s`` of the lattice test (at most epsilon)."""
        return self.sensitivity_units / self.tlap.scale

    def event(self) -> Event:
        """MS25 Lemma A.4's (2 epsilon, 4 e^epsilon delta): the test's (epsilon, delta)
        composed with the masked output's (epsilon, 3 e^epsilon delta)."""
        return EpsilonDeltaEvent(2.0 * self.epsilon, 4.0 * math.exp(self.epsilon) * self.delta)

    def laws(self) -> dict[str, LatticeNoise]:
        return {"tlap": self.tlap}  # the mask is a real Gaussian matrix, not a lattice law

    def purposes(self) -> dict[str, str]:
        return {"tlap": PURPOSE_TLAP, "mask": PURPOSE_MASK}

    def test(self, seed: NoiseSeed) -> AgreementTest:
        """The agreement test's release (called in the aggregation task, on a worker)."""
        return AgreementTest(LatticeField(seed, PURPOSE_TLAP, self.tlap))

    def describe(self) -> dict:
        out = super().describe()
        out["mask"] = {"law": "real standard Gaussian d x d matrix (Box-Muller over exact keyed uniforms)",
                       "eta_b": self.eta_b, "output": f"each entry rounded exactly to {GRID_BITS} significant bits"}
        return out

    def masked_output(self, seed: NoiseSeed, factor: np.ndarray) -> np.ndarray:
        """``grid_round(A (I + eta_b N)(I + eta_b N)^T A^T)`` with A A^T = ``factor`` when it is an
        :class:`~dpdist.privacy.noise.masking.ExactGram` (the algorithm's case), else A = ``factor``
        (called in the aggregation task; :func:`dpdist.privacy.noise.masking.masked_gram`)."""
        return masked_gram(factor, self.eta_b, seed, PURPOSE_MASK)


def subsample_aggregate_mechanism(epsilon: float, delta: float, n_groups: int, support: float, *,
                                  eta_b: float) -> SubsampleAggregateMechanism:
    """The mechanism of Algorithm 3 with k groups, per-step (epsilon, delta), the calibration's
    TLap support ``support`` (:func:`~dpdist.privacy.mechanisms.subsample_aggregate.tlap_support`
    at sensitivity 2/k) and masking scale ``eta_b``
    (:func:`~dpdist.privacy.mechanisms.subsample_aggregate.baseline_masking_scale`)."""
    k = int(n_groups)
    eps, delta = float(epsilon), float(delta)
    sens = agreement_sensitivity(k)
    ratio = math.log1p(math.expm1(eps) / (2.0 * delta))  # A / b of the calibration: support over scale
    tlap, dz = lattice_law("bounded-laplace", sens, 1.0 / eps, bound_ratio=ratio)
    if not dz / tlap.scale <= eps:  # pragma: no cover - lattice_law rounds the scale up
        raise DpdistError("internal error: the lattice test is below its calibration")
    return SubsampleAggregateMechanism(eps, delta, k, sens, float(support), tlap, dz, float(eta_b))
