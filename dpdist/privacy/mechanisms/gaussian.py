"""The Gaussian mechanism on a symmetric matrix, float-safe: Wang-Xu and Analyze Gauss.

:class:`SymmetricGaussianMechanism` releases the upper triangle (diagonal included) of a
symmetric d x d statistic with i.i.d. Gaussian noise and mirrors it: the noise of the two dense
Gaussian baselines (Wang-Xu 2021, Analyze Gauss) and, through
:mod:`dpdist.privacy.mechanisms.second_moment`, of every RecDPSME level and the one-shot.

Guarantee: if the computed statistics of neighbours differ by at most ``Delta`` in L2 over the
``d (d + 1) / 2`` upper-triangle coordinates, the release is at least as private as the
Gaussian mechanism with multiplier ``sigma / Delta`` (``Delta^2 / (2 sigma^2)``-zCDP, and its
exact (epsilon, delta) profile); the event recorded is the calibration's.
Sensitivities: Wang-Xu ``2 R^2 d / n`` (entries clipped to R), Analyze Gauss ``2 L^2 / n``
(rows scaled to norm L), each times the float factor ``kappa(n)``.
Deviation (only more noise): values on the lattice, ``Delta_Z = Delta / gamma + sqrt(T)``,
a factor of at most ``1 + sqrt(T) 2**-28 sigma / Delta``. Residual: sampler exhaustion.

Proofs and where the noise is drawn: docs/privacy/gaussian.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpdist.privacy.events import Event, GaussianEvent
from dpdist.privacy.lattice import LatticeField, LatticeNoise
from dpdist.privacy.mechanisms.base import Mechanism, lattice_law
from dpdist.privacy.noise import NoiseSeed

__all__ = [
    "PURPOSE_ANALYZE_GAUSS",
    "PURPOSE_WANG_XU",
    "SymmetricGaussianMechanism",
    "TileRelease",
    "analyze_gauss_mechanism",
    "wang_xu_mechanism",
]

#: Purpose of the Wang-Xu baseline's noise.
PURPOSE_WANG_XU = "wang-xu/gaussian"
#: Purpose of Analyze Gauss's noise.
PURPOSE_ANALYZE_GAUSS = "analyze-gauss/gaussian"


@dataclass(frozen=True)
class TileRelease:
    """``(tile_values, (row0, col0)) -> released tile``: the float-safe release of a tile of the
    symmetric statistic (the callable a task calls on a tile, inside the graph)."""

    field: LatticeField

    def __call__(self, tile_values, tile_index=(0, 0)) -> np.ndarray:
        return self.field(tile_values, tile_index)


@dataclass(frozen=True)
class SymmetricGaussianMechanism(Mechanism):
    """Gaussian noise on the upper triangle of a symmetric d x d statistic, mirrored (module
    docstring), float-safe.

    Attributes
    ----------
    purpose : str
        Keys the noise streams.
    n_features : int
        d; the release has ``d (d + 1) / 2`` free coordinates.
    sensitivity : float
        ``Delta``: L2 sensitivity of the computed upper triangle (float factor included).
    sigma : float
        The calibration's noise standard deviation (data units).
    noise : LatticeNoise
        The rounded Gaussian law on the lattice (scale ``s`` units).
    sensitivity_units : float
        ``Delta_Z``.
    name : str
        What ran, for the release's description.
    """

    NAME = "Gaussian mechanism on a symmetric matrix (upper triangle, mirrored)"

    purpose: str
    n_features: int
    sensitivity: float
    sigma: float
    noise: LatticeNoise
    sensitivity_units: float
    name: str = NAME

    @classmethod
    def calibrate(cls, purpose: str, n_features: int, sensitivity: float, sigma: float,
                  name: str = NAME) -> "SymmetricGaussianMechanism":
        """The float-safe form of a calibration ``(Delta, sigma)`` (docs/privacy/gaussian.md)."""
        d = int(n_features)
        noise, dz = lattice_law("gaussian", sensitivity, float(sigma) / float(sensitivity), norm="l2",
                                coordinates=d * (d + 1) // 2)
        return cls(str(purpose), d, float(sensitivity), float(sigma), noise, dz, str(name))

    @property
    def lattice_multiplier(self) -> float:
        """``s / Delta_Z``: the noise multiplier of the Gaussian mechanism that runs on the
        lattice, at least the calibration's ``sigma / Delta`` (checked by lattice_law)."""
        return self.noise.scale / self.sensitivity_units

    def event(self) -> Event:
        """The calibration's event ``GaussianEvent(sigma / Delta)``: what ran on the lattice
        (``s / Delta_Z``, at least as large) is at least as private."""
        return GaussianEvent(self.sigma / self.sensitivity)

    def laws(self) -> dict[str, LatticeNoise]:
        return {"gaussian": self.noise}

    def purposes(self) -> dict[str, str]:
        return {"gaussian": self.purpose}

    def describe(self) -> dict:
        return {**super().describe(), "mechanism": self.name}

    def field(self, role: str, seed: NoiseSeed) -> LatticeField:
        """The keyed noise field of ``role`` ("gaussian"): symmetric, entries (i, j) and (j, i)
        share the address (min, max)."""
        return LatticeField(seed, self.purposes()[role], self.laws()[role], symmetric=True)

    def release(self, seed: NoiseSeed) -> TileRelease:
        """``(tile, (row0, col0)) -> released tile`` (the whole matrix is the tile at (0, 0))."""
        return TileRelease(self.field("gaussian", seed))


def wang_xu_mechanism(calibration: dict, n_features: int) -> SymmetricGaussianMechanism:
    """The Wang-Xu baseline's mechanism from :func:`~dpdist.privacy.gaussian_calibration.wang_xu_calibration`."""
    sens = calibration["sensitivity"] * calibration["float_factor"]
    return SymmetricGaussianMechanism.calibrate(
        PURPOSE_WANG_XU, n_features, sens, calibration["gaussian_sigma"],
        name="Wang-Xu Gaussian covariance (symmetric Gaussian noise on the clipped second moment)")


def analyze_gauss_mechanism(calibration: dict, n_features: int) -> SymmetricGaussianMechanism:
    """Analyze Gauss's mechanism from :func:`~dpdist.privacy.expmech_calibration.analyze_gauss_calibration`."""
    sens = calibration["sensitivity"] * calibration["float_factor"]
    return SymmetricGaussianMechanism.calibrate(
        PURPOSE_ANALYZE_GAUSS, n_features, sens, calibration["gaussian_sigma"],
        name="Analyze Gauss (DTTZ 2014): Gaussian noise on the second moment of norm-clipped rows")
