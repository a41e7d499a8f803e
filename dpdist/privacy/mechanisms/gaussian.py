"""The Gaussian mechanism on a symmetric matrix, float-safe: Wang-Xu and Analyze Gauss.

One mechanism object, :class:`SymmetricGaussianMechanism`, releases the upper triangle
(diagonal included) of a symmetric d x d statistic with i.i.d. Gaussian noise and mirrors it.
It is the noise of the two dense Gaussian baselines (ALGORITHMS.md section 4) and, through
:mod:`dpdist.privacy.mechanisms.second_moment`, of every RecDPSME level (GUE(sigma^2) in
MS25's normalisation is exactly this noise) and of the one-shot second moment.

Guarantee
---------
Replace-one neighbours (same n, one row replaced). If the *computed* statistics of two
neighbours differ by at most ``Delta`` in L2 over the ``T = d (d + 1) / 2`` coordinates of
the upper triangle, the release is the Gaussian mechanism with noise multiplier ``s /
Delta_Z >= sigma / Delta`` (below), i.e. ``Delta_Z^2 / (2 s^2) <= Delta^2 / (2 sigma^2)``-zCDP
(Bun-Steinke 2016, Prop. 1.6), with at most the (epsilon, delta) profile of the Gaussian
mechanism with multiplier ``sigma / Delta`` (Balle-Wang 2018;
:func:`~dpdist.privacy.accounting.gaussian_epsilon`). The mechanism's event is the
calibration's, ``GaussianEvent(sigma / Delta)``: an upper bound on what ran.
The calibrations (``sigma``) are the algorithms': the analytic (Balle-Wang 2018) Gaussian
mechanism at the requested (epsilon, delta) for the baselines,
``Delta / sqrt(2 rho)`` for the zCDP second moments; the accounted event is never worse than
the calibration's, so the accountant reports at most the requested budget.

Sensitivities (each module that calibrates states its own; repeated here for the baselines):

* Wang-Xu: rows clipped entrywise to ``[-R, R]`` have ``||y y^T||_F <= R^2 d``; replacing
  one row moves ``(1/n) Y^T Y`` by at most ``2 R^2 d / n`` in Frobenius norm, hence its upper
  triangle by at most that in L2 (:func:`~dpdist.privacy.calibration.wang_xu_calibration`).
* Analyze Gauss (Dwork-Talwar-Thakurta-Zhang 2014): rows scaled to norm ``<= L``: ``2 L^2 /
  n`` (:func:`~dpdist.privacy.expmech_calibration.analyze_gauss_calibration`).
* Float factor: both kernels bound each row's term as computed and the calibrations multiply
  the sensitivity by ``kappa(n)`` (:func:`~dpdist.privacy.calibration.gram_rounding_factor`,
  issue 9), which bounds the difference of the *computed* matrices. ``Delta`` below is that
  product.

Float-safe release on the lattice (issue 10, item 2)
----------------------------------------------------
:func:`~dpdist.privacy.mechanisms.base.lattice_law` with the Gaussian law, ``norm="l2"`` and
``T`` coordinates: ``gamma = 2**(floor(log2 sigma) - 28)``; the rounded upper triangle
``m = rint(v / gamma)`` moves by at most ``Delta_Z = Delta / gamma + sqrt(T)`` (each rounding
moves by less than 1/2, so the difference of the rounding errors is below 1 per coordinate);
the noise is ``K = round(s N)`` per coordinate (the rounded Gaussian of
:mod:`dpdist.privacy.lattice`, sampled exactly) with ``s = (sigma / Delta) Delta_Z`` lattice
units, and the released entry ``(i, j)`` (``i <= j``) is ``(m_ij + K_ij) gamma``, mirrored.
``m + K = round(m + s N)`` is post-processing of the Gaussian mechanism on the integer vector
``m`` whose L2 sensitivity is ``Delta_Z``: hence the event above. Every released value is a
lattice point and every lattice point has positive probability under every dataset: no
output is impossible under a neighbour (tests/privacy/test_mechanism_support.py).

Deviations (only more noise): the noise actually added is ``s gamma = sigma (Delta_Z gamma /
Delta) <= sigma (1 + sqrt(T) gamma / Delta)``; ``gamma / Delta <= 2**-28 sigma / Delta``, so
the factor is ``1 + sqrt(T) 2**-28 sigma / Delta`` (1 + 1.4e-5 at d = 1000 and ``sigma /
Delta = 5``). Residual: the lattice sampler's exhaustion, below ``2**-1000`` per entry
(:data:`~dpdist.privacy.lattice.EXHAUSTION_DELTA_PER_ENTRY`), stated, not added to delta.

Where the noise is drawn: entry ``(i, j)``, ``i <= j``, is address ``(i, j)`` of the
mechanism's purpose (:class:`~dpdist.privacy.lattice.LatticeField` with ``symmetric=True``):
a pure function of ``(root seed, purpose, i, j)``, so tiles on any worker, any chunking and
any scheduler release the same values.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpdist.privacy.accounting import Event, GaussianEvent
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
        """The float-safe form of a calibration ``(Delta, sigma)`` (module docstring)."""
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
    """The Wang-Xu baseline's mechanism from :func:`~dpdist.privacy.calibration.wang_xu_calibration`."""
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
