"""FriendlyCore's private tests and the PrivNorm / PrivPCA releases (COLT 2026, Algorithms 2, 3).

The mechanisms of :mod:`dpdist.algorithms.sparse_pca` (``SpectralNorm``, ``SparsePCA``). The
calibrations (scales, bounds, sensitivities, the float factors of deviation 4) are those of
:mod:`dpdist.privacy.pca_calibration`; this module makes the tests and both releases
float-safe and states the guarantee for the values actually computed.

Guarantee
---------
One *stage* (PrivNorm, or PrivPCA) at budget ``(epsilon, delta)`` is (epsilon, delta)-DP under
replace-one neighbours (one row replaced, so at most one batch statistic changes): the count
test, the friend-weight test and the release are each ``(epsilon/3, delta/3)``-DP (Lemma 8,
Facts 2 and 3), and they compose by basic composition (DR14 Thm 3.16). The release's
sensitivity (``20 k tau`` for PrivNorm, Lemma 20; Lemma 10's Frobenius sensitivity for PrivPCA)
holds only on runs where both tests passed, which a passing test certifies deterministically
(``|C| >= 0.8 m`` and ``Z >= 0.8 m``, Lemma 9), so the thresholds below keep that certificate.
Theorem 3 composes the two stages (basic composition of the split budget).

The tests (:class:`FriendlyTestMechanism`): bounded Laplace on the lattice, one bit out
--------------------------------------------------------------------------------------
``|C|`` (sensitivity 1) and ``Z = sum p_i`` (sensitivity 7, eq. (12)) are each released on the
lattice of :func:`~dpdist.privacy.mechanisms.base.lattice_law` as ``m + K`` with ``m =
rint(stat / gamma)`` and ``K`` the bounded rounded Laplace law of :mod:`dpdist.privacy.lattice`
(scale ``s = (b / Delta) Delta_Z`` units, support ``|K| <= A = ceil((B / b) s)``, b and B the
calibration's scale and bound). ``m + K = round(m + L)`` with L the continuous Laplace(s)
conditioned on ``|L| < A + 1/2``: post-processing of the truncated Laplace mechanism at integer
sensitivity ``Delta_Z``, whose coupling argument (:func:`~dpdist.privacy.pca_calibration.
bounded_laplace_test`) gives ``(eps', delta')`` with ``eps' = Delta_Z / s <= epsilon/3`` and
``delta' = e^eps' q / (1 - q)``, ``q = e^{-(A + 1/2)/s} <= e^{-B/b}``, so ``delta' <= delta/3``:
every ratio is at least the calibration's. The event records ``(eps', delta')``.

Only the outcome leaves: the test passes iff ``m + K >= T`` with ``T =
ceil(0.8 m_b / gamma) + A + 1`` (m_b batches). As ``K <= A``, a pass certifies ``m gamma >=
0.8 m_b + gamma``, so ``stat >= 0.8 m_b`` (``|stat - m gamma| <= gamma / 2``): Lemma 9's
certificate holds for the computed statistic. The threshold is the paper's ``0.8 m + B`` up to
``2 gamma + (A gamma - B)``, about ``B 2**-28``: the tests pass as often as the paper's.

PrivNorm's release (:class:`PrivNormMechanism`): the rounded Gaussian on the lattice
----------------------------------------------------------------------------------
``||T_5tau(Sigma_bar)||_op`` (sensitivity Delta = ``20 k tau`` plus the float terms of
:func:`~dpdist.privacy.pca_calibration.privnorm_calibration`) is released as ``(m + K) gamma``,
K the rounded Gaussian of scale ``s = (sigma / Delta) Delta_Z`` units (``Delta_Z = floor(Delta /
gamma) + 1``): post-processing of the Gaussian mechanism on the integer m with noise multiplier
``s / Delta_Z >= sigma / Delta``, so at least as private as the calibration's release (its event is that
Gaussian mechanism, :class:`~dpdist.privacy.accounting.GaussianEvent`, whose exact profile
(Balle-Wang 2018) is within ``(epsilon/3, delta/3)``).

PrivPCA's release (:class:`PrivPCAMechanism`): the rounded Gaussian projector on the lattice
------------------------------------------------------------------------------------------
``top_{k^2}(u u^T + G)`` is released by :func:`~dpdist.privacy.topk_sampler.lattice_top_k2`:
exactly the mechanism that rounds ``fl(u_a u_b)`` to the lattice, adds the rounded Gaussian of
scale ``s`` units to every one of the d^2 cells, and keeps the k^2 largest by magnitude (ties
by independent uniform keys); the proof that the order-statistics sampler has exactly that
law is in its module. Sensitivity: Lemma 10's Frobenius bound ``Delta`` (with deviations 1 and
4, :func:`~dpdist.privacy.pca_calibration.privpca_calibration`) plus ``2**-51`` for the float
product, on the lattice ``Delta_Z = (Delta + 2**-51) / gamma + d`` (the rounding of up to d^2
entries, :meth:`~dpdist.privacy.lattice.Lattice.sensitivity_units`). The lattice is
``Lattice.for_scale(sigma)``, made finer where ``d gamma`` would exceed ``2**-10 Delta`` (the
rounding term then costs at most 0.1% more noise; never finer than ``s <= 2**39`` units, never
coarser than ``2**-50``, so that every value is an exact float integer). The scale ``s =
(sigma / Delta) Delta_Z`` keeps the calibration's noise multiplier, so its event is the
Gaussian mechanism with multiplier ``sigma / Delta`` (the analytic Gaussian mechanism at
``(epsilon/3, delta/3)``).
Residuals: the signal cells' lattice exhaustion and the order-statistics sampler's refinement
exhaustion (:mod:`dpdist.privacy.topk_sampler`), each far below 1e-15.

Deviations (only more noise): the lattice factors ``Delta_Z gamma / Delta`` on every scale and
the raised thresholds above; the calibrations' own deviations
(:mod:`dpdist.privacy.pca_calibration`). Residuals: the lattice sampler's exhaustion (stated by
:func:`~dpdist.privacy.mechanisms.base.residual_note`, below ``2**-1000`` an entry for the
unbounded law and ``q**32`` for the bounded one), and the projector sampler's refinement
exhaustion.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpdist.privacy.accounting import ComposedEvent, EpsilonDeltaEvent, Event, GaussianEvent
from dpdist.privacy.lattice import LatticeNoise
from dpdist.privacy.mechanisms.base import Mechanism, lattice_law
from dpdist.privacy.noise import NoiseSeed
from dpdist.privacy.pca_calibration import FriendlyTestCalibration, GaussianReleaseCalibration

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
    """``(Delta_Z / s, e^eps q / (1 - q))`` of the truncated Laplace on the lattice (module docstring)."""
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
        """``T = ceil(0.8 m_b / gamma) + A + 1`` (module docstring), in lattice units."""
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
        :func:`~dpdist.privacy.pca_calibration.privnorm_calibration`'s.
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


#: Frobenius bound of ``fl(u u^T) - u u^T`` for a unit u, per neighbour, doubled (module docstring).
PRODUCT_ERROR = 2.0**-51
#: The rounding of the d^2 projector entries costs at most this fraction of the sensitivity.
ROUNDING_SHARE = 2.0**-10


@dataclass(frozen=True)
class PrivPCAMechanism(Mechanism):
    """PrivPCA's release of ``top_{k^2}(u u^T + G)`` (Algorithm 2, Lines 19-21) on the lattice.

    Attributes
    ----------
    calibration : GaussianReleaseCalibration
        :func:`~dpdist.privacy.pca_calibration.privpca_calibration`'s.
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
        from dpdist.privacy.topk_sampler import lattice_top_k2

        if int(n_features) != self.n_features:
            raise ValueError(f"this mechanism is calibrated for d = {self.n_features}, got {n_features!r}")
        return lattice_top_k2(support, u_support, n_features, k, self.noise, seed, self.purposes()["projector"])
