"""Subsample-and-aggregate (MS25 Appendix A, Algorithm 3): the agreement test and the masking.

The mechanism of :func:`dpdist.algorithms.baselines.subsample_aggregate.subsample_aggregate_second_moment`;
its calibration is :mod:`dpdist.privacy.subsample_calibration`'s.

Guarantee: (2 epsilon, 4 e^epsilon delta)-DP under replace-one neighbours (MS25 Lemma A.4),
provided MS25's sample-size condition holds (otherwise the release is labelled NOT PRIVATE).
Sensitivity: a replaced row changes one group, so the agreement fraction Q moves by at most
``2/k`` (``2/k + 2**-52`` as computed); ``Q~`` is a truncated Laplace (Geng-Ding-Guo-Kumar
2020) on the lattice, and the masked output is Ashtiani-Liaw's Lemma 3.6 on the exact
weighted average, rounded to a 30-bit grid with every rounding decided exactly.
Deviations: the internal conditions of Lemma 3.6 could not be checked, so only MS25's explicit
sample-size condition is enforced. Residuals: the samplers' exhaustion, and run time.

Proofs and the float-safe release: docs/privacy/subsample_aggregate.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpdist.exceptions import DpdistError
from dpdist.privacy.events import EpsilonDeltaEvent, Event
from dpdist.privacy.lattice import LatticeField, LatticeNoise
from dpdist.privacy.masking import GRID_BITS, masked_gram
from dpdist.privacy.mechanisms.base import Mechanism, lattice_law
from dpdist.privacy.noise import NoiseSeed

__all__ = [
    "AgreementTest",
    "PURPOSE_MASK",
    "PURPOSE_TLAP",
    "SubsampleAggregateMechanism",
    "agreement_sensitivity",
    "subsample_aggregate_mechanism",
]

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
        :class:`~dpdist.privacy.masking.ExactGram` (the algorithm's case), else A = ``factor``
        (called in the aggregation task; :func:`dpdist.privacy.masking.masked_gram`)."""
        return masked_gram(factor, self.eta_b, seed, PURPOSE_MASK)


def subsample_aggregate_mechanism(epsilon: float, delta: float, n_groups: int, support: float, *,
                                  eta_b: float) -> SubsampleAggregateMechanism:
    """The mechanism of Algorithm 3 with k groups, per-step (epsilon, delta), the calibration's
    TLap support ``support`` (:func:`~dpdist.privacy.subsample_calibration.tlap_support`
    at sensitivity 2/k) and masking scale ``eta_b``
    (:func:`~dpdist.privacy.subsample_calibration.baseline_masking_scale`)."""
    k = int(n_groups)
    eps, delta = float(epsilon), float(delta)
    sens = agreement_sensitivity(k)
    ratio = math.log1p(math.expm1(eps) / (2.0 * delta))  # A / b of the calibration: support over scale
    tlap, dz = lattice_law("bounded-laplace", sens, 1.0 / eps, bound_ratio=ratio)
    if not dz / tlap.scale <= eps:  # pragma: no cover - lattice_law rounds the scale up
        raise DpdistError("internal error: the lattice test is below its calibration")
    return SubsampleAggregateMechanism(eps, delta, k, sens, float(support), tlap, dz, float(eta_b))
