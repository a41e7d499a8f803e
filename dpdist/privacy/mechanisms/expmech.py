"""ExpMechPCA (COLT 2026, Algorithm 4): exact exponential-mechanism selection and the block release.

The mechanism of :func:`dpdist.algorithms.expmech_pca.expmech_pca`; its calibration is
:func:`dpdist.privacy.expmech_calibration.expmech_calibration`'s.

Guarantee: (epsilon, delta)-DP under replace-one neighbours (Lemma 29): the selection is
``epsilon_sel``-DP and ``epsilon_sel``-bounded-range, the block release a Gaussian mechanism,
composed as the calibration chose; the release records both events.
Sensitivity: the computed scores ``lambda_1(Sigma_hat_S)`` of neighbours differ by at most
``Delta_q`` (``kappa(n) 2 k tau^2 / n`` plus the eigenvalue kernel's error); the block moves by
``Delta_b = kappa(n) 2 k tau^2 / n`` in Frobenius norm.
Deviations: the weight ``(epsilon_sel - 2**-29) / (2 (Delta_q + 2**-52 S_max))`` pays for the
score lattice and the product's rounding inside epsilon; the selection is an exact Gumbel-max
(:mod:`dpdist.privacy.gumbel`), the block a rounded Gaussian on the lattice. Residuals:
comparison and sampler exhaustion (below ``2**-1000`` each), stated.

Proofs: docs/privacy/expmech.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpdist.exceptions import ValidationError
from dpdist.privacy.events import ComposedEvent, EpsilonDeltaEvent, Event, GaussianEvent, ZCDPEvent
from dpdist.privacy.expmech_calibration import ExpMechCalibration
from dpdist.privacy.gumbel import SCORE_BITS, GumbelMax
from dpdist.privacy.lattice import LatticeField, LatticeNoise
from dpdist.privacy.mechanisms.base import Mechanism, lattice_law
from dpdist.privacy.noise import NoiseSeed

__all__ = ["BLOCK_PURPOSE", "BlockRelease", "ExpMechMechanism", "SELECT_PURPOSE", "safe_gumbel_weight"]

#: Purpose of the selection's Gumbel noise (rank r: position r of stream 0).
SELECT_PURPOSE = "expmech/select"
#: Purpose of the block's Gaussian noise (entry (i, j): address (i, j)).
BLOCK_PURPOSE = "expmech/block"
#: |computed score| <= k tau^2 (1 + SCORE_MARGIN) (block entries within [-tau^2, tau^2] plus the
#: eigenvalue kernel's error, 64 k u k tau^2 at most: far below).
SCORE_MARGIN = 1e-6


def safe_gumbel_weight(selection_epsilon: float, score_sensitivity: float, score_bound: float, *,
                       what: str = "ExpMechPCA") -> float:
    """``w = (epsilon_sel - 2**-(SCORE_BITS-1)) / (2 (Delta_q + 2**-52 S_max))`` (docs/privacy/expmech.md).
    ``what`` names the caller in the error."""
    lattice = 2.0 ** -(SCORE_BITS - 1)
    eps = float(selection_epsilon)
    if not eps > 2.0 * lattice:
        what_eps = "the selection's epsilon/2" if what == "ExpMechPCA" else "one selection step's epsilon"
        raise ValidationError(
            f"epsilon is too small for {what}: {what_eps} = {eps!r} must exceed twice the score "
            f"lattice's 2**-{SCORE_BITS - 1} (about 3.7e-9)")
    return (eps - lattice) / (2.0 * (float(score_sensitivity) + 2.0**-52 * float(score_bound)))


@dataclass(frozen=True)
class BlockRelease:
    """``(subset, block) -> released block``: the block's float-safe Gaussian release (entry
    (i, j) of the block, global indices, at address (i, j))."""

    field: LatticeField

    def __call__(self, subset, block) -> np.ndarray:
        subset = np.asarray(subset, dtype=np.int64)
        return self.field.at(subset[:, None], subset[None, :], np.asarray(block, dtype=np.float64))


@dataclass(frozen=True)
class ExpMechMechanism(Mechanism):
    """ExpMechPCA's selection and block release (docs/privacy/expmech.md), built from a calibration.

    Attributes
    ----------
    calibration : ExpMechCalibration
    weight : float
        The float-safe Gumbel weight ``w`` (Gumbel units per unit of score).
    score_bound : float
        ``S_max``.
    block_noise : LatticeNoise
        The rounded Gaussian law of the block.
    sensitivity_units : float
        ``Delta_Z`` of the block.
    """

    NAME = "ExpMechPCA (COLT 2026, Algorithm 4)"

    calibration: ExpMechCalibration
    weight: float
    score_bound: float
    block_noise: LatticeNoise
    sensitivity_units: float

    @classmethod
    def from_calibration(cls, cal: ExpMechCalibration) -> "ExpMechMechanism":
        bound = cal.k * cal.clip**2 * (1.0 + SCORE_MARGIN)
        weight = safe_gumbel_weight(cal.selection_epsilon, cal.score_sensitivity_fl, bound)
        sens = cal.block_sensitivity * cal.float_factor
        noise, dz = lattice_law("gaussian", sens, cal.gaussian_sigma / sens, norm="l2", coordinates=cal.k * cal.k)
        return cls(cal, weight, bound, noise, dz)

    @property
    def selection_epsilon(self) -> float:
        """The selection's pure epsilon bound: ``2 (w (Delta_q + 2**-52 S_max) + 2**-30)``."""
        return 2.0 * (self.weight * (self.calibration.score_sensitivity_fl + 2.0**-52 * self.score_bound)
                      + 2.0**-SCORE_BITS)

    def event(self) -> Event:
        """Selection then block (the calibration's Gaussian), composed. The selection is
        recorded as pure ``epsilon_sel``-DP under basic composition, and as its bounded-range
        zCDP bound ``epsilon_sel^2 / 8`` when the calibration composes in zCDP."""
        cal = self.calibration
        sens = cal.block_sensitivity * cal.float_factor
        # the weight makes the selection exactly epsilon_sel-DP and epsilon_sel-bounded-range
        # (selection_epsilon, up to rounding)
        if cal.composition == "zcdp":
            selection: Event = ZCDPEvent(cal.selection_epsilon**2 / 8.0)
        else:
            selection = EpsilonDeltaEvent(cal.selection_epsilon)
        return ComposedEvent((selection, GaussianEvent(cal.gaussian_sigma / sens)))

    def laws(self) -> dict[str, LatticeNoise]:
        return {"block": self.block_noise}

    def purposes(self) -> dict[str, str]:
        return {"select": SELECT_PURPOSE, "block": BLOCK_PURPOSE}

    def describe(self) -> dict:
        return {**super().describe(), "selection": {"gumbel_weight": self.weight, "score_lattice_bits": SCORE_BITS,
                                                   "score_bound": self.score_bound, "sampler": "exact Gumbel-max"}}

    def selection(self, seed: NoiseSeed) -> GumbelMax:
        """The exact sampler the enumeration's chunks and merges call."""
        return GumbelMax(seed, SELECT_PURPOSE, self.weight)

    def release(self, seed: NoiseSeed) -> BlockRelease:
        """The block's release (called in the release task, on a worker)."""
        return BlockRelease(LatticeField(seed, BLOCK_PURPOSE, self.block_noise))

    @property
    def gumbel_scale(self) -> float:
        """``1 / w``: the Gumbel noise in score units."""
        return 1.0 / self.weight

