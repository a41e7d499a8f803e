"""ExpMechPCA (COLT 2026, Algorithm 4): exact exponential-mechanism selection and the block release.

The mechanism of :func:`dpdist.algorithms.expmech_pca.expmech_pca`. Its calibration (score and
block sensitivities with the float factor, the budget split, sigma_priv) is
:func:`~dpdist.privacy.expmech_calibration.expmech_calibration`'s; this module makes both steps
float-safe and states the guarantee for the values actually computed.

Guarantee
---------
(epsilon, delta)-DP under replace-one neighbours (rows), for every input (Lemma 29): the
selection is ``epsilon_sel``-DP (pure) and ``epsilon_sel``-bounded-range (the privacy loss of
the exponential mechanism, ``w (q_S - q'_S) - log(Z / Z')``, ranges over an interval of width
``2 w max_S |q_S - q'_S| <= epsilon_sel``; Durfee-Rogers 2019), hence ``epsilon_sel^2 /
8``-zCDP (Cesar-Rogers 2021); the block release is a Gaussian mechanism. They compose as the
calibration chose (:func:`~dpdist.privacy.expmech_calibration.expmech_split`: basic
composition with the release at ``(epsilon - epsilon_sel, delta)``, or in zCDP converted by
CKS20); the release records both events and states the requested budget after the accountant
re-derived it from them.

Selection: the exponential mechanism, sampled exactly
-----------------------------------------------------
Every k-subset S is scored by the computed ``s_S = lambda_1(Sigma_hat_S)`` of the clipped
second moment. The calibration bounds the computed scores of neighbours: ``|s_S - s'_S| <=
Delta_q`` (``score_sensitivity_fl``: ``kappa(n) 2 k tau^2 / n`` plus the eigenvalue kernel's
error, Weyl), and ``|s_S| <= S_max = k tau^2 (1 + 1e-6)`` (a block of entries in ``[-tau^2,
tau^2]``, plus that error). The key of S is ``q_S + G_S`` with

* ``x_S = fl(w s_S)``: ``|fl(w s) - w s| <= 2**-53 w S_max``, so ``|x_S - x'_S| <= w (Delta_q +
  2**-52 S_max)``;
* ``q_S = rint(x_S 2**30) 2**-30`` (:data:`~dpdist.privacy.gumbel.SCORE_BITS`): ``|q_S - q'_S|
  <= w (Delta_q + 2**-52 S_max) + 2**-30``;
* ``G_S`` an exact standard Gumbel keyed by S's rank, and the arg max decided exactly
  (:class:`~dpdist.privacy.gumbel.GumbelMax`: certified float intervals, mpmath refinement of
  the uniforms when they overlap).

The arg max of ``q + G`` over exact Gumbels has exactly the law ``P(S) ~ exp(q_S)`` (the
Gumbel-max trick), so the selection is ``2 max_S |q_S - q'_S|``-DP (McSherry-Talwar 2007). With

    ``w = (epsilon_sel - 2**-29) / (2 (Delta_q + 2**-52 S_max))``

that is at most ``epsilon_sel``: the lattice and the product's rounding are paid for inside
epsilon, not added to it (the weight is smaller than the calibration's ``epsilon_sel / (2
Delta_q)`` by the factor ``(1 - 2**-29 / epsilon_sel) / (1 + 2**-52 S_max / Delta_q)``,
i.e. ``1 - 2**-29 / epsilon_sel - 2**-53 n (1 + 1e-6) / kappa(n)``: negligible unless
epsilon < 1e-7 or n > 1e12).

Why not a float Gumbel-max: ``weight * score - log(-log(u))`` with a
53-bit ``u`` compared as floats fails in two ways. Its Gumbel noise is bounded (the grid of ``u`` gives finite
keys within ``[-3.62, 36.04]`` of the weighted score; ``u`` rounding to 1 gives ``+inf``), so
a subset whose weighted score trails the best by more than 39.7 can never win under one
dataset while it can under its neighbour (scores move by up to epsilon_sel / 2): impossible
outputs of total mass up to ``C(d, k) e^-40`` (about 4e-9 at C(d, k) = 1e9), far above the
1e-15 dpdist allows; and near-ties are decided by float rounding (quantised probabilities). Details in
:mod:`dpdist.privacy.gumbel`. The exact sampler has unbounded noise: every subset has positive
probability under every dataset, so no output is impossible under a neighbour.

Block release: Gaussian on the lattice
--------------------------------------
The chosen ``k x k`` block ``Sigma_hat_S`` (entries released independently, not symmetrised:
line 12 adds ``G_S`` of a d x d i.i.d. matrix) has Frobenius sensitivity ``Delta_b = kappa(n) 2
k tau^2 / n`` as computed. :func:`~dpdist.privacy.mechanisms.base.lattice_law` with the
Gaussian law, ``norm="l2"``, ``k^2`` coordinates: ``gamma = 2**(floor(log2 sigma) - 28)``,
``Delta_Z = Delta_b / gamma + k``, ``s = (sigma / Delta_b) Delta_Z``; entry (i, j) of the block
(global indices) is released as ``(rint(v / gamma) + K_ij) gamma`` with ``K_ij`` the exact
rounded Gaussian at address (i, j) of :data:`BLOCK_PURPOSE`. Post-processing of the Gaussian
mechanism on the integers with multiplier ``s / Delta_Z >= sigma / Delta_b``: at least as
private as the calibration's ``GaussianEvent(sigma / Delta_b)``, which is recorded.

Residuals (quantified)
----------------------
* Exhaustion of the exact comparisons: below ``2**-1000`` per comparison
  (:data:`~dpdist.privacy.gumbel.EXHAUSTION_DELTA_PER_COMPARISON`; at most ``C(d, k)``
  comparisons: ``2**-938`` at C(d, k) = 2**62), and of the block's lattice sampler (``2**-1000``
  per entry): stated, not added to delta.
* ``numpy.log`` / ``numpy.log1p`` trusted to ``2**-46`` relative error in the certified
  intervals (measured below 1 ulp): beyond it, a near-tie could be decided by float keys, a
  change of law of the order of the float error, never an impossible output.
* ChaCha20 as a pseudo-random function.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpdist.exceptions import ValidationError
from dpdist.privacy.accounting import ComposedEvent, EpsilonDeltaEvent, Event, GaussianEvent, ZCDPEvent
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
    """``w = (epsilon_sel - 2**-(SCORE_BITS-1)) / (2 (Delta_q + 2**-52 S_max))`` (module docstring).
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
    """ExpMechPCA's selection and block release (module docstring), built from a calibration.

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

