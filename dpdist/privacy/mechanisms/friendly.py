"""FriendlyCore's private tests and the PrivNorm / PrivPCA releases (COLT 2026, Algorithms 2, 3).

The mechanisms of :mod:`dpdist.algorithms.sparse_pca` (``SpectralNorm``, ``SparsePCA``). The
calibrations (scales, bounds, sensitivities, the float factors of deviation 4) are those of
:mod:`dpdist.privacy.pca_calibration`; this module makes the tests and PrivNorm's release
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

Only the outcome leaves (issue 10, item 3): the test passes iff ``m + K >= T`` with ``T =
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
``s / Delta_Z >= sigma / Delta``, so at least as private as Fact 2's release (its event is that
Gaussian mechanism, :class:`~dpdist.privacy.accounting.GaussianEvent`, whose exact profile
(Balle-Wang 2018) is within ``(epsilon/3, delta/3)``).

PrivPCA's release (:class:`PrivPCAMechanism`): NOT yet float-safe
-----------------------------------------------------------------
``top_{k^2}(u u^T + G)`` is drawn by the order-statistics sampler of
:mod:`dpdist.privacy.topk_sampler` (pure-noise cells by Renyi's representation, in floating
point). Putting it on a lattice needs the certified rounding of order statistics that
:mod:`dpdist.privacy.lattice` ("Order statistics") describes and that is not built: the
signal cells alone cannot move to the lattice (their low bits would tell them from the
noise cells, revealing supp(u)). This mechanism object holds its calibration, its purpose and
its event (a Gaussian mechanism with multiplier ``sigma / Delta_F``, Lemma 10 with deviations
1 and 4), and its release states the floating-point caveat. Residual: the Mironov (2012)
exposure of the projector's values.

Deviations (only more noise): the lattice factors ``Delta_Z gamma / Delta`` on every scale and
the raised thresholds above; the calibrations' own deviations
(:mod:`dpdist.privacy.pca_calibration`). Residuals: the lattice sampler's exhaustion (stated by
:func:`~dpdist.privacy.mechanisms.base.residual_note`, below ``2**-1000`` an entry for the
unbounded law and ``q**32`` for the bounded one), and PrivPCA's floating-point projector.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

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


@dataclass(frozen=True)
class PrivPCAMechanism(Mechanism):
    """PrivPCA's release of ``top_{k^2}(u u^T + G)`` (Algorithm 2, Lines 19-21).

    Floating-point noise (module docstring): the order-statistics sampler of
    :mod:`dpdist.privacy.topk_sampler`, at ``sigma`` (the calibration's).

    Attributes
    ----------
    calibration : GaussianReleaseCalibration
        :func:`~dpdist.privacy.pca_calibration.privpca_calibration`'s.
    sigma : float
        The Gaussian standard deviation of G (a twin scales it).
    """

    NAME = "PrivPCA Gaussian projector release (COLT 2026, Algorithm 2, Lemma 10)"
    FLOAT_SAFE = False

    calibration: GaussianReleaseCalibration
    sigma: float

    @classmethod
    def from_calibration(cls, cal: GaussianReleaseCalibration) -> "PrivPCAMechanism":
        return cls(cal, float(cal.sigma))

    def event(self) -> Event:
        return GaussianEvent(self.sigma / self.calibration.sensitivity)

    def purposes(self) -> dict[str, str]:
        return {"projector": friendly_purpose("pca", "projector")}

    def noise_scales(self) -> dict[str, float]:
        return {"projector": self.sigma}

    def describe(self) -> dict:
        out = super().describe()
        out["noise"] = {"projector": {"law": "gaussian (floating point, not float-safe)", "scale": self.sigma}}
        return out

    def twin(self, noise_multiplier: float) -> "PrivPCAMechanism":
        return self._as_twin(replace(self, sigma=self.sigma * float(noise_multiplier)), noise_multiplier)

    def projector(self, support, u_support, n_features: int, k: int, seed: NoiseSeed):
        """``top_{k^2}(u u^T + G)`` as ``(rows, cols, values)``."""
        from dpdist.privacy.topk_sampler import top_k2_of_noisy_projector

        return top_k2_of_noisy_projector(support, u_support, n_features, k, self.sigma, seed,
                                         self.purposes()["projector"])
