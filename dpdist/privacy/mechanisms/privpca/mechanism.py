"""FriendlyCore's private tests and the PrivNorm / PrivPCA releases (COLT 2026, Algorithms 2, 3).

The mechanisms of :mod:`dpdist.algorithms.sparse_pca` (``SpectralNorm``, ``SparsePCA``); the
calibrations are :mod:`dpdist.privacy.mechanisms.privpca.calibration`'s.

Guarantee: one stage (PrivNorm or PrivPCA) at ``(epsilon, delta)`` is (epsilon, delta)-DP under
replace-one neighbours: the count test, the friend-weight test and the release are each
``(epsilon/3, delta/3)``-DP and compose by basic composition (Theorem 3 composes the stages).
Sensitivity: ``|C|`` 1, ``Z`` 7 (eq. (12)); the release's (``20 k tau`` for PrivNorm, Lemma 20;
Lemma 10's Frobenius bound for PrivPCA) holds on runs where both tests passed, which a pass
certifies (Lemma 9: ``|C| >= 0.8 m`` and ``Z >= 0.8 m``, kept for the computed statistics).
Deviations (only more noise): the tests are bounded Laplace on the lattice with thresholds
raised by about ``B 2**-28``; the releases are rounded Gaussians on the lattice (PrivPCA's by
the exact order-statistics sampler of :mod:`dpdist.privacy.noise.topk_sampler`). Residuals: the
samplers' exhaustion, far below 1e-15.

Proofs: docs/privacy/privpca.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpdist.privacy.events import ComposedEvent, EpsilonDeltaEvent, Event, GaussianEvent
from dpdist.privacy.noise.lattice import LatticeNoise
from dpdist.privacy.mechanisms.base import Mechanism, lattice_law
from dpdist.privacy.noise.streams import NoiseSeed
from dpdist.privacy.mechanisms.privpca.calibration import FriendlyTestCalibration, GaussianReleaseCalibration

__all__ = [
    "FriendlyTestMechanism",
    "PrivNormMechanism",
    "PrivPCAMechanism",
    "STAGES",
    "friendly_purpose",
]

#: The stages of Theorem 3 (PrivNorm, then PrivPCA): each has its own tests and noise.
STAGES = ("norm", "pca")


def friendly_purpose(stage: str, role: str) -> str:
    """The purpose keying a stage's noise: ``privpca/<stage>/<role>`` (role: count, weight,
    release, projector)."""
    if stage not in STAGES:
        raise ValueError(f"stage must be one of {STAGES}, got {stage!r}")
    return f"privpca/{stage}/{role}"


def _bounded_laplace_event(noise: LatticeNoise, units: float) -> EpsilonDeltaEvent:
    """``(Delta_Z / s, e^eps q / (1 - q))`` of the truncated Laplace on the lattice (docs/privacy/privpca.md)."""
    eps = units / noise.scale
    t = (noise.bound + 0.5) / noise.scale  # q = e^-t; in logs: e^eps overflows for huge epsilon
    return EpsilonDeltaEvent(eps, math.exp(eps - t - math.log(-math.expm1(-t))))


@dataclass(frozen=True)
class FriendlyTestMechanism(Mechanism):
    """FriendlyCore's two private tests of one stage (Lines 2-15), releasing only their bits.

    Attributes
    ----------
    calibration : FriendlyTestCalibration
    stage : {"norm", "pca"}
    count_noise, weight_noise : LatticeNoise
        The bounded rounded Laplace laws of the |C| and Z tests.
    count_units, weight_units : float
        ``Delta_Z`` of each statistic on its lattice.
    """

    NAME = "FriendlyCore tests on |C| and Z (COLT 2026, Algorithms 2-3, Lemma 8)"

    calibration: FriendlyTestCalibration
    stage: str
    count_noise: LatticeNoise
    count_units: float
    weight_noise: LatticeNoise
    weight_units: float

    @classmethod
    def from_calibration(cls, cal: FriendlyTestCalibration, stage: str) -> "FriendlyTestMechanism":
        friendly_purpose(stage, "count")  # validates the stage
        cn, cu = lattice_law("bounded-laplace", cal.count_sensitivity, cal.count_scale / cal.count_sensitivity,
                             bound_ratio=cal.count_bound / cal.count_scale)
        wn, wu = lattice_law("bounded-laplace", cal.weight_sensitivity, cal.weight_scale / cal.weight_sensitivity,
                             bound_ratio=cal.weight_bound / cal.weight_scale)
        return cls(cal, stage, cn, cu, wn, wu)

    def event(self) -> Event:
        return ComposedEvent((_bounded_laplace_event(self.count_noise, self.count_units),
                              _bounded_laplace_event(self.weight_noise, self.weight_units)))

    def laws(self) -> dict[str, LatticeNoise]:
        return {"count": self.count_noise, "weight": self.weight_noise}

    def purposes(self) -> dict[str, str]:
        return {role: friendly_purpose(self.stage, role) for role in ("count", "weight")}

    def threshold_units(self, role: str) -> float:
        """``T = ceil(0.8 m_b / gamma) + A + 1`` (docs/privacy/privpca.md), in lattice units."""
        noise = self.laws()[role]
        pass_at = self.calibration.pass_fraction * self.calibration.n_batches
        return float(math.ceil(noise.lattice.units(pass_at)) + noise.bound + 1)

    def passes(self, role: str, released) -> np.ndarray:
        """The outcome bit of released noisy statistics (post-processing)."""
        lat = self.laws()[role].lattice
        return lat.to_units(released) >= self.threshold_units(role)

    def test(self, role: str, statistic: float, seed: NoiseSeed) -> bool:
        """Run test ``role`` on ``statistic``: the bit ``m + K >= T``, nothing else."""
        # field(role, seed): the noisy statistic (m + K) gamma, which never leaves the worker
        return bool(self.passes(role, self.field(role, seed)(np.float64(statistic))))


@dataclass(frozen=True)
class PrivNormMechanism(Mechanism):
    """PrivNorm's release of ``||T_5tau(Sigma_bar)||_op`` (Algorithm 3, Line 17) on the lattice.

    Attributes
    ----------
    calibration : GaussianReleaseCalibration
        :func:`~dpdist.privacy.mechanisms.privpca.calibration.privnorm_calibration`'s.
    noise : LatticeNoise
        The rounded Gaussian law.
    sensitivity_units : float
        ``Delta_Z``.
    """

    NAME = "PrivNorm Gaussian release (COLT 2026, Algorithm 3, Fact 2)"

    calibration: GaussianReleaseCalibration
    noise: LatticeNoise
    sensitivity_units: float

    @classmethod
    def from_calibration(cls, cal: GaussianReleaseCalibration) -> "PrivNormMechanism":
        noise, dz = lattice_law("gaussian", cal.sensitivity, cal.sigma / cal.sensitivity)
        return cls(cal, noise, dz)

    def event(self) -> Event:
        return GaussianEvent(self.noise.scale / self.sensitivity_units)

    def laws(self) -> dict[str, LatticeNoise]:
        return {"release": self.noise}

    def purposes(self) -> dict[str, str]:
        return {"release": friendly_purpose("norm", "release")}

    def release(self, norm: float, seed: NoiseSeed) -> float:
        """The released norm ``(rint(norm / gamma) + K) gamma``."""
        return float(self.field("release", seed)(np.float64(norm)))


#: Frobenius bound of ``fl(u u^T) - u u^T`` for a unit u, per neighbour, doubled (docs/privacy/privpca.md).
PRODUCT_ERROR = 2.0**-51
#: The rounding of the d^2 projector entries costs at most this fraction of the sensitivity.
ROUNDING_SHARE = 2.0**-10


@dataclass(frozen=True)
class PrivPCAMechanism(Mechanism):
    """PrivPCA's release of ``top_{k^2}(u u^T + G)`` (Algorithm 2, Lines 19-21) on the lattice.

    Attributes
    ----------
    calibration : GaussianReleaseCalibration
        :func:`~dpdist.privacy.mechanisms.privpca.calibration.privpca_calibration`'s.
    n_features : int
        d (the rounding term of the sensitivity counts d^2 entries).
    noise : LatticeNoise
        The rounded Gaussian law of every cell.
    sensitivity_units : float
        ``Delta_Z``.
    """

    NAME = "PrivPCA Gaussian projector release (COLT 2026, Algorithm 2, Lemma 10)"

    calibration: GaussianReleaseCalibration
    n_features: int
    noise: LatticeNoise
    sensitivity_units: float

    @classmethod
    def from_calibration(cls, cal: GaussianReleaseCalibration, n_features: int) -> "PrivPCAMechanism":
        d = int(n_features)
        if d < 1 or d != n_features:
            raise ValueError(f"n_features must be a positive int, got {n_features!r}")
        sens = cal.sensitivity + PRODUCT_ERROR
        finest = math.frexp(cal.sigma)[1] - 1 - 38  # s <= 2**39 units
        fine_enough = math.frexp(ROUNDING_SHARE * sens / d)[1] - 1  # d gamma <= 2**-10 sens
        noise, dz = lattice_law("gaussian", sens, cal.sigma / cal.sensitivity, norm="l2", coordinates=d * d,
                                max_exponent=max(finest, fine_enough), min_exponent=-50)
        return cls(cal, d, noise, dz)

    def event(self) -> Event:
        return GaussianEvent(self.noise.scale / self.sensitivity_units)

    def laws(self) -> dict[str, LatticeNoise]:
        return {"projector": self.noise}

    def purposes(self) -> dict[str, str]:
        return {"projector": friendly_purpose("pca", "projector")}

    def projector(self, support, u_support, n_features: int, k: int, seed: NoiseSeed):
        """``top_{k^2}(u u^T + G)`` as ``(rows, cols, values)``, values on the lattice."""
        from dpdist.privacy.noise.topk_sampler import lattice_top_k2

        if int(n_features) != self.n_features:
            raise ValueError(f"this mechanism is calibrated for d = {self.n_features}, got {n_features!r}")
        return lattice_top_k2(support, u_support, n_features, k, self.noise, seed, self.purposes()["projector"])
