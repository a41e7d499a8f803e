"""RecDPSME (MS25) levels, its private initialisation and the one-shot second moment, float-safe.

The mechanisms of :func:`dpdist.algorithms.second_moment.second_moment` and
:func:`~dpdist.algorithms.second_moment.one_shot_second_moment` (Mahpud & Sheffet, NeurIPS
2025, Algorithms 1-2; SECOND_MOMENT.md sections 3.2 and 4). Their calibrations (the level
schedule, the histogram sigma, the budget split) are
:mod:`dpdist.privacy.second_moment_calibration`'s; this module makes them float-safe and
states the guarantee for the values actually computed.

Guarantee
---------
rho-zCDP under replace-one neighbours (same n, public; one row replaced), for any input. The
release records one event per step and its ``privacy`` is their zCDP composition (BS16 Lemma
2.3, :func:`~dpdist.privacy.accounting.release_guarantee`): every step below is a Gaussian
mechanism on the lattice at least as noisy as its calibration, and records the calibration's
event, whose rho is its share; the shares sum to the requested rho (checked to 1e-12).

The steps and their sensitivities
---------------------------------
* **Level k of the recursion** (:func:`level_mechanisms`): the computed level matrix
  ``(1/n) sym(Y_k^T Y_k)`` of rows of norm ``<= R_k`` (the engine clips each row to ``R_k``
  as computed, GAP 5 at level 0, ``S`` after). Replacing one row moves the exact upper
  triangle by at most ``sqrt(2) R_k^2 / n`` in L2 (``||x x^T - x' x'^T||_F``); MS25 uses
  ``4 R_k^2 / n`` (``sensitivity="paper"``, the default; ``"tight"`` is GAP 6). The computed
  matrix moves by at most ``kappa(n)`` times that (issue 9's float factor,
  :func:`~dpdist.privacy.calibration.gram_rounding_factor`): ``Delta_k = kappa(n) a R_k^2 /
  n``. The schedule's ``sigma_k = Delta_k sqrt(L) / sqrt(2 rho_main)`` (GAP 3: L = K* + 1
  draws, not the paper's real T) makes each level ``rho_main / L``-zCDP (BS16 Prop. 1.6).
  Level k+1's rows depend on level k only through the *released* matrix (the subspace V is
  computed from it: post-processing), and the map ``x -> S(sqrt(8/7) Pi_k x)`` is per row, so
  neighbours stay neighbours at every level (MS25 section 3, privacy holds for any bounded
  input). The L levels compose adaptively.
* **Private radius** (section 3.2, GAP 8): a histogram of the row norms over a public
  geometric grid; a replaced row moves one count down and another up: L2 sensitivity
  ``sqrt(2)`` (counts are exact integers, no float factor). ``sigma = 1 / sqrt(rho_R)``:
  ``rho_R``-zCDP. The radius rule reads only the noisy counts (post-processing).
* **Private lambda_min** (section 3.2, Algorithm 4 with a Gaussian histogram, GAP 9): the
  rows are split by a data-independent keyed partition into groups; a replaced row changes one
  group, hence one group's eigenvalue bucket: sensitivity ``sqrt(2)``, ``sigma = 1 /
  sqrt(rho_lambda)``. The bucket choice is post-processing.
* **One-shot** (the section 7.3 comparator): rows clipped to the public radius R, ``Delta =
  kappa(n) a R^2 / n``, ``sigma = Delta / sqrt(2 rho)``.

Float-safe releases (issue 10, item 2)
--------------------------------------
Every released value is a lattice point drawn by the exact rounded Gaussian law of
:mod:`dpdist.privacy.lattice` (the ``"gaussian"`` law: ``round(s N)``, the zCDP of the
continuous Gaussian mechanism by post-processing, as CKS20 Theorem 4 gives the discrete
Gaussian):

* a level / the one-shot matrix is the :class:`~dpdist.privacy.mechanisms.gaussian.SymmetricGaussianMechanism`
  on its ``T = d (d + 1) / 2`` upper-triangle coordinates: ``gamma = 2**(floor(log2
  sigma_k) - 28)``, ``Delta_Z = Delta_k / gamma + sqrt(T)`` (rounding covered), ``s =
  (sigma_k / Delta_k) Delta_Z`` units: rho ``Delta_Z^2 / (2 s^2)`` at most ``Delta_k^2 / (2
  sigma_k^2) = rho_main / L``, the calibration's ``GaussianEvent(sigma_k / Delta_k)`` that
  the mechanism records;
* a histogram is the same law on its bins (``T`` = the number of bins that can change, 2):
  integer counts are lattice points already (``gamma < 1``), the ``sqrt(2)`` extra units are
  kept as a harmless over-estimate.

The noise actually added exceeds the calibration by the factor ``Delta_Z gamma / Delta <= 1 +
sqrt(T) 2**-28 sigma / Delta``: at most ``1 + 1.6e-8 sqrt(T L / rho_main)`` for a level
(``sigma_k / Delta_k = sqrt(L / (2 rho_main))``), e.g. ``1 + 1e-6`` at d = 100, L = 10,
rho = 0.1. Outputs impossible under a neighbour: none (the law has full support on the
lattice; tests/privacy/test_mechanism_support.py counts them). Residual: the sampler's
exhaustion, below ``2**-1000`` per entry, stated, not added to delta (there is no delta in
zCDP; it is far below anything a conversion to (epsilon, delta) would notice).

What stays floating point (documented, not a support failure): the *unwinding* of the levels
(``(7/8) Pi^-1 Sigma Pi^-1``), the final scaling by ``(1 - alpha) lambda_hat`` and the PSD
projection are post-processing of released lattice values and public values: a fixed
function of what was released, so they cannot make an output impossible under a neighbour.

Where the noise is drawn
------------------------
Level k: purpose ``"second-moment/level/k"``; one-shot ``"second-moment/one-shot"``;
histograms ``"second-moment/init-radius"`` and ``"second-moment/init-lambda"`` (positions =
bins). The value of every entry is a pure function of ``(root seed, purpose, address)``: the
same ``random_state`` gives the same release on any scheduler and chunking, and a recomputed
task reproduces the same noise.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpdist.privacy.accounting import Event, GaussianEvent
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
    """A level's (or the one-shot's) Gaussian mechanism on the second moment (module docstring).

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
    """The Gaussian histogram of the private initialisation (module docstring).

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

    NAME = "Gaussian histogram (MS25 initialisation, SECOND_MOMENT.md section 3.2)"

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



