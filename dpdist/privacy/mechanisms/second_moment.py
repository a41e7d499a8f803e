"""RecDPSME (MS25) levels, its private initialisation and the one-shot second moment, float-safe.

The mechanisms of :func:`dpdist.algorithms.second_moment.second_moment` and
:func:`~dpdist.algorithms.second_moment.one_shot_second_moment` (Mahpud & Sheffet, NeurIPS
2025, Algorithms 1-2); their calibrations are :mod:`dpdist.privacy.second_moment_calibration`'s.

Guarantee: rho-zCDP under replace-one neighbours (n public), for any input; each step is a
Gaussian mechanism on the lattice at least as noisy as its calibration and records the
calibration's event; the shares compose to the requested rho.
Sensitivities: a level of rows clipped to ``R_k`` moves by ``kappa(n) a R_k^2 / n`` (a = 4,
the paper's, or sqrt(2), the exact L2 bound); each histogram by ``sqrt(2)`` (one count down,
one up). Later levels see earlier ones only through released matrices (post-processing).
Deviations: L = K* + 1 draws in every sigma, rows clipped at level 0, zCDP histograms for the
radius and lambda_min, the float factor kappa(n); the full list with reasons, the lattice
release and the noise purposes are in docs/privacy/second_moment.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpdist.privacy.events import Event, GaussianEvent
from dpdist.privacy.lattice import LatticeField, LatticeNoise
from dpdist.privacy.mechanisms.base import Mechanism, lattice_law
from dpdist.privacy.mechanisms.gaussian import SymmetricGaussianMechanism
from dpdist.privacy.noise import NoiseSeed
from dpdist.privacy.second_moment_calibration import HISTOGRAM_SENSITIVITY, LevelSchedule, histogram_sigma

__all__ = [
    "GaussianHistogramMechanism",
    "HistogramRelease",
    "MomentRelease",
    "PURPOSE_LAMBDA",
    "PURPOSE_LEVEL",
    "PURPOSE_ONE_SHOT",
    "PURPOSE_RADIUS",
    "histogram_mechanism",
    "level_mechanisms",
    "level_purpose",
    "moment_mechanism",
    "moment_release",
    "one_shot_mechanism",
]

#: Level k's noise is keyed by ``level_purpose(k)`` = PURPOSE_LEVEL + "/k".
PURPOSE_LEVEL = "second-moment/level"
#: The one-shot second moment's noise.
PURPOSE_ONE_SHOT = "second-moment/one-shot"
#: The private radius histogram's noise.
PURPOSE_RADIUS = "second-moment/init-radius"
#: The private lambda_min histogram's noise.
PURPOSE_LAMBDA = "second-moment/init-lambda"


def level_purpose(level: int) -> str:
    """The purpose keying level ``level``'s noise."""
    return f"{PURPOSE_LEVEL}/{int(level)}"


@dataclass(frozen=True)
class MomentRelease:
    """``gram -> released (gram + gram^T) / (2 n)`` on the lattice: the level's statistic, noised
    where it was reduced (a worker), by the level's mechanism."""

    field: LatticeField
    n_samples: int

    def __call__(self, gram) -> np.ndarray:
        gram = np.asarray(gram, dtype=np.float64)
        mean = (gram + gram.T) / (2.0 * self.n_samples)  # exactly symmetric (a + b == b + a)
        return self.field(mean, (0, 0))


def moment_mechanism(purpose: str, n_features: int, sensitivity: float, sigma: float) -> SymmetricGaussianMechanism:
    """A level's (or the one-shot's) Gaussian mechanism on the second moment (docs/privacy/second_moment.md).

    ``sensitivity`` is ``Delta`` of the computed matrix (float factor included), ``sigma`` the
    calibration's standard deviation."""
    return SymmetricGaussianMechanism.calibrate(
        purpose, n_features, sensitivity, sigma,
        name="Gaussian mechanism on (1/n) sum x x^T (GUE noise, MS25 normalisation)")


def moment_release(mech: SymmetricGaussianMechanism, seed: NoiseSeed, n_samples: int) -> MomentRelease:
    """The callable the engine applies to the reduced Gram matrix of a level."""
    return MomentRelease(mech.field("gaussian", seed), int(n_samples))


def level_mechanisms(schedule: LevelSchedule) -> tuple[SymmetricGaussianMechanism, ...]:
    """The L level mechanisms of a RecDPSME schedule: level k has ``Delta_k = kappa(n) a R_k^2
    / n`` and ``sigma_k`` (normalised units), purpose :func:`level_purpose` (k)."""
    return tuple(
        moment_mechanism(level_purpose(k), schedule.n_features, schedule.float_factor * sens, sigma)
        for k, (sens, sigma) in enumerate(zip(schedule.sensitivities, schedule.sigmas))
    )


@dataclass(frozen=True)
class HistogramRelease:
    """``counts -> counts + noise`` on *every* bin (empty ones included), on the lattice."""

    field: LatticeField

    def __call__(self, counts) -> np.ndarray:
        return self.field(np.asarray(counts, dtype=np.float64).ravel(), 0)


@dataclass(frozen=True)
class GaussianHistogramMechanism(Mechanism):
    """The Gaussian histogram of the private initialisation (docs/privacy/second_moment.md).

    Attributes
    ----------
    purpose : str
    rho : float
        The step's share of rho (``sigma = 1 / sqrt(rho)``).
    sigma : float
    noise : LatticeNoise
    sensitivity_units : float
        ``Delta_Z`` of the counts (L2; ``sqrt(2) / gamma + sqrt(2)``).
    """

    NAME = "Gaussian histogram (zCDP initialisation of MS25's radius and lambda_min)"

    purpose: str
    rho: float
    sigma: float
    noise: LatticeNoise
    sensitivity_units: float

    @classmethod
    def calibrate(cls, purpose: str, rho: float) -> "GaussianHistogramMechanism":
        sigma = histogram_sigma(rho)
        noise, dz = lattice_law("gaussian", HISTOGRAM_SENSITIVITY, sigma / HISTOGRAM_SENSITIVITY, norm="l2",
                                coordinates=2)
        return cls(str(purpose), float(rho), sigma, noise, dz)

    def event(self) -> Event:
        """The calibration's ``GaussianEvent(sigma / sqrt(2))`` (the lattice's ``s / Delta_Z`` is
        at least as large)."""
        return GaussianEvent(self.sigma / HISTOGRAM_SENSITIVITY)

    def laws(self) -> dict[str, LatticeNoise]:
        return {"gaussian": self.noise}

    def purposes(self) -> dict[str, str]:
        return {"gaussian": self.purpose}

    def release(self, seed: NoiseSeed) -> HistogramRelease:
        """The callable the engine applies to the reduced counts (positions = bins)."""
        return HistogramRelease(LatticeField(seed, self.purpose, self.noise))


def histogram_mechanism(step: str, rho: float) -> GaussianHistogramMechanism:
    """The histogram mechanism of ``step`` ("radius" or "lambda_min") at its share ``rho``."""
    purposes = {"radius": PURPOSE_RADIUS, "lambda_min": PURPOSE_LAMBDA}
    if step not in purposes:
        raise ValueError(f"step must be 'radius' or 'lambda_min', got {step!r}")
    return GaussianHistogramMechanism.calibrate(purposes[step], rho)


def one_shot_mechanism(n_features: int, sensitivity: float, sigma: float) -> SymmetricGaussianMechanism:
    """The one-shot Gaussian mechanism (purpose :data:`PURPOSE_ONE_SHOT`)."""
    return moment_mechanism(PURPOSE_ONE_SHOT, n_features, sensitivity, sigma)



