"""PrivCov (COLT 2026, Algorithm 1): per-row noisy top-k selection and Laplace release.

Three mechanisms. :class:`PrivCovGumbelMechanism` (``selection="gumbel"``, the default) selects
each row's top k by exact Gumbel keys (the peeling exponential mechanism) and releases the
values by one Gaussian mechanism, accounted in zCDP; :class:`PrivCovZCDPMechanism`
(``selection="laplace"``) keeps the Laplace selection with the same release.
:class:`PrivCovMechanism` (``selection="paper"``) is Algorithm 1 as the paper writes it, with
the calibration of :func:`dpdist.privacy.mechanisms.privcov.calibration.privcov_calibration`.

Guarantee of the paper's form: (epsilon, delta)-DP under replace-one neighbours; each row is
pure ``c Delta_Z / s``-DP (``c = 2k + k'``, a coupling that holds exactly on the integers of
the lattice), and the d rows compose. Sensitivity: computed entries of neighbours differ by
at most ``Delta_fl = kappa(n) 2 R^2 / n``. Deviations (only more noise): k' = k + 1 released
values per row (the diagonal), b = max(paper's b, the coupling's), the float factor, the
lattice factor; the selection noise is lattice noise too, drawn by the lazy tree of
:mod:`dpdist.privacy.noise.lazy_selection`. Residuals: sampler exhaustion, below ``2**-1000``.

Proofs of all three: docs/privacy/privcov.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpdist.privacy.events import (
    BoundedRangeEvent,
    ComposedEvent,
    EpsilonDeltaEvent,
    Event,
    GaussianEvent,
    SelfComposedEvent,
)
from dpdist.privacy.mechanisms.privcov.calibration import (
    PrivCovCalibration,
    privcov_calibration,
    privcov_pure_coefficient,
)
from dpdist.privacy.mechanisms.privcov.zcdp_calibration import (
    PrivCovGumbelCalibration,
    PrivCovZCDPCalibration,
    privcov_gumbel_calibration,
    privcov_zcdp_calibration,
)
from dpdist.privacy.noise.gumbel import EXHAUSTION_DELTA_PER_COMPARISON, SCORE_BITS, GumbelTopK
from dpdist.privacy.noise.lattice import LatticeField, LatticeNoise
from dpdist.privacy.noise.lazy_selection import LazySelectionNoise
from dpdist.privacy.mechanisms.privcov.calibration import privcov_score_bound
from dpdist.privacy.mechanisms.base import Mechanism, lattice_law
from dpdist.privacy.mechanisms.expmech import safe_gumbel_weight
from dpdist.privacy.noise.streams import NoiseSeed

__all__ = [
    "PURPOSE_GUMBEL_RELEASE",
    "PURPOSE_GUMBEL_SELECT",
    "PURPOSE_RELEASE",
    "PURPOSE_SELECT",
    "PURPOSE_ZCDP_RELEASE",
    "PURPOSE_ZCDP_SELECT",
    "PrivCovGumbelMechanism",
    "PrivCovMechanism",
    "PrivCovRelease",
    "PrivCovZCDPMechanism",
    "privcov_gumbel_mechanism",
    "privcov_mechanism",
    "privcov_zcdp_mechanism",
]

#: Purpose of the selection noise (line 6).
PURPOSE_SELECT = "privcov/select"
#: Purpose of the release noise (lines 8 and 11).
PURPOSE_RELEASE = "privcov/release"
#: Purpose of the selection noise with the zCDP analysis (``selection="laplace"``).
PURPOSE_ZCDP_SELECT = "privcov-zcdp/select"
#: Purpose of the Gaussian release noise with the zCDP analysis.
PURPOSE_ZCDP_RELEASE = "privcov-zcdp/release"
#: Purpose of the Gumbel keys of ``selection="gumbel"`` (entry (i, j): position j of stream i).
PURPOSE_GUMBEL_SELECT = "privcov-gumbel/select"
#: Purpose of the Gaussian release noise of ``selection="gumbel"``.
PURPOSE_GUMBEL_RELEASE = "privcov-gumbel/release"


@dataclass(frozen=True)
class PrivCovRelease:
    """``(rows, cols, raw) -> released values``: the float-safe Laplace release of scattered
    entries (address (i, j) of purpose :data:`PURPOSE_RELEASE`); empty slots (column -1) give
    NaN (they are never released)."""

    field: LatticeField

    def __call__(self, rows, cols, raw) -> np.ndarray:
        rows, cols, raw = np.broadcast_arrays(np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64),
                                              np.asarray(raw, dtype=np.float64))
        out = np.full(rows.shape, np.nan)
        ok = cols >= 0
        if ok.any():
            out[ok] = self.field.at(rows[ok], cols[ok], raw[ok])
        return out


@dataclass(frozen=True)
class PrivCovMechanism(Mechanism):
    """PrivCov's per-row selection and release (docs/privacy/privcov.md), built from a calibration.

    Attributes
    ----------
    calibration : PrivCovCalibration
    noise : LatticeNoise
        The rounded Laplace law on the lattice (selection and release share it).
    sensitivity_units : float
        ``Delta_Z``, the entry sensitivity of the rounded second moment.
    score_bound : float
        Public C >= |Sigma_hat_ij| of the computed second moment (data units).
    """

    NAME = "PrivCov per-row selection and release (COLT 2026, Algorithm 1)"

    calibration: PrivCovCalibration
    noise: LatticeNoise
    sensitivity_units: float
    score_bound: float

    @classmethod
    def from_calibration(cls, cal: PrivCovCalibration) -> "PrivCovMechanism":
        sens = cal.sensitivity * cal.float_factor  # Delta_fl: the computed entries' sensitivity
        bound = privcov_score_bound(cal.clip, cal.n_samples)
        floor_exp = math.frexp(bound)[1] - 51  # C / gamma <= 2**51
        noise, dz = lattice_law("laplace", sens, cal.laplace_scale / sens, min_exponent=floor_exp)
        return cls(cal, noise, dz, bound)

    @property
    def row_epsilon(self) -> float:
        """Pure epsilon of one row: ``c Delta_Z / s`` (at most the calibration's eps_row)."""
        c = privcov_pure_coefficient(self.calibration.k, self.calibration.n_features)
        return c * self.sensitivity_units / self.noise.scale

    def event(self) -> Event:
        return SelfComposedEvent(EpsilonDeltaEvent(self.row_epsilon), self.calibration.n_features)

    def laws(self) -> dict[str, LatticeNoise]:
        return {"select": self.noise, "release": self.noise}

    def purposes(self) -> dict[str, str]:
        return {"select": PURPOSE_SELECT, "release": PURPOSE_RELEASE}

    def selection(self, seed: NoiseSeed) -> LazySelectionNoise:
        """The selection noise (a lazy sampler the engine's top-k calls on each tile)."""
        return LazySelectionNoise(seed, PURPOSE_SELECT, self.noise, self.calibration.n_features,
                                  score_bound=self.score_bound)

    def release(self, seed: NoiseSeed) -> PrivCovRelease:
        """The release of the selected values and the diagonal (called at each row block's root)."""
        return PrivCovRelease(self.field("release", seed))


def privcov_mechanism(epsilon: float, delta: float, n_samples: int, n_features: int, k: int,
                      clip: float) -> PrivCovMechanism:
    """:class:`PrivCovMechanism` of :func:`~dpdist.privacy.mechanisms.privcov.calibration.privcov_calibration`."""
    return PrivCovMechanism.from_calibration(privcov_calibration(epsilon, delta, n_samples, n_features, k, clip))


def _gaussian_release_set_up(cal) -> tuple[float, float, int, LatticeNoise, float]:
    """What both zCDP mechanisms compute from their calibration: ``Delta_fl`` (float factor
    included), the public score bound C, the lattices' smallest exponent (``C / gamma <= 2**51``)
    and the release's rounded Gaussian law with its L2 sensitivity ``Delta_Z2`` in lattice units."""
    sens = cal.sensitivity * cal.float_factor
    bound = privcov_score_bound(cal.clip, cal.n_samples)
    floor_exp = math.frexp(bound)[1] - 51
    release, dz2 = lattice_law("gaussian", cal.release_sensitivity, cal.gaussian_sigma / cal.release_sensitivity,
                               norm="l2", coordinates=cal.release_coordinates, min_exponent=floor_exp)
    return sens, bound, floor_exp, release, dz2


class _GaussianRelease:
    """The Gaussian release both zCDP mechanisms share (fields ``release_noise`` and
    ``release_sensitivity_units``)."""

    @property
    def release_multiplier(self) -> float:
        """The release's Gaussian noise multiplier on the lattice: ``s_r / Delta_Z2``."""
        return self.release_noise.scale / self.release_sensitivity_units

    def release(self, seed: NoiseSeed) -> PrivCovRelease:
        """The Gaussian release of the selected values and the diagonal (at each row block's root)."""
        return PrivCovRelease(self.field("release", seed))


@dataclass(frozen=True)
class PrivCovZCDPMechanism(_GaussianRelease, Mechanism):
    """PrivCov with the zCDP analysis (``selection="laplace"``): each row's top-k selection by
    lattice Laplace noise, then all selected values and the diagonal by one lattice Gaussian
    mechanism. The proof is docs/privacy/privcov.md; in short:

    * **Selection of row i** (the same lazy exact sampler and the same integer scores
      ``|m_ij + w_ij|`` as :class:`PrivCovMechanism`, scale ``s`` units, entry sensitivity
      ``Delta_Z``): pure ``2 k Delta_Z / s``-DP, by the coupling of this module's docstring
      restricted to the selection (shift ``w_j`` by ``2 Delta_Z sgn(y_j)`` for j in S: at most
      ``2 k Delta_Z`` in L1); no cost when k = d. So ``(2 k Delta_Z / s)^2 / 2``-zCDP
      (Bun-Steinke 2016, Prop. 1.4); the d rows compose to ``d`` times that.
    * **Release**, given the selected sets: the values at the released addresses P (``(i, j)``
      for j in ``S_i``, and ``(i, i)``; at most ``d k'`` addresses, ``k' = min(k + 1, d)``) of
      the computed clipped second moment move by at most ``sqrt(d k') Delta_fl`` in L2
      between neighbours (each entry by at most ``Delta_fl``, the float-safe entry
      sensitivity). On the lattice (its own, ``gamma_r``), the rounded values move by at most
      ``Delta_Z2 = sqrt(d k') Delta_fl / gamma_r + sqrt(d k')``, and the released ``(m +
      K) gamma_r`` with ``K = round(s_r N)`` i.i.d. is post-processing of the Gaussian
      mechanism with multiplier ``s_r / Delta_Z2``: ``Delta_Z2^2 / (2 s_r^2)``-zCDP. The noise
      field is keyed by address and independent of the selection noise, so this is an
      adaptive composition step.
    * **Row clip** (``row_clip`` C finite): the engine also scales each entry-clipped row to L2
      norm at most C (provably in the computed floats). A row y with ``|y_j| <= R``, ``||y|| <=
      C`` has ``||(y y^T)_P||_F^2 = sum_i y_i^2 sum_{j in P_i} y_j^2 <= C^2 min(k' R^2, C^2)``, so
      the released vector moves by at most ``kappa(n) 2 C min(R sqrt(k'), C) / n`` in L2
      (float factor as in Lemma 1); the release's sensitivity is the smaller of that and
      ``sqrt(d k') Delta_fl`` (:func:`~dpdist.privacy.mechanisms.privcov.calibration.privcov_release_sensitivity`)
      and ``Delta_Z2`` is computed from it. Scaling only shrinks entries: the selection's entry
      sensitivity ``Delta_fl`` is unchanged. Proof: docs/privacy/privcov.md, Lemma 3a.
    * **Total**: the event ``d`` pure steps and one Gaussian step; the accountant's zCDP route
      adds the rho's and converts by CKS20, which the calibration inverted, so the charged
      (epsilon, delta) is certified (``release_guarantee``).

    Attributes
    ----------
    calibration : PrivCovZCDPCalibration
    noise : LatticeNoise
        The selection's rounded Laplace law.
    release_noise : LatticeNoise
        The release's rounded Gaussian law.
    sensitivity_units : float
        ``Delta_Z``, the entry sensitivity of the rounded second moment on the selection's lattice.
    release_sensitivity_units : float
        ``Delta_Z2``, the L2 sensitivity of the rounded released values on the release's lattice.
    score_bound : float
        Public C >= |Sigma_hat_ij| of the computed second moment (data units).
    """

    NAME = "PrivCov with zCDP accounting: per-row lattice Laplace top-k selection, lattice Gaussian release"

    calibration: PrivCovZCDPCalibration
    noise: LatticeNoise
    release_noise: LatticeNoise
    sensitivity_units: float
    release_sensitivity_units: float
    score_bound: float

    @classmethod
    def from_calibration(cls, cal: PrivCovZCDPCalibration) -> "PrivCovZCDPMechanism":
        sens, bound, floor_exp, release, dz2 = _gaussian_release_set_up(cal)
        noise, dz = lattice_law("laplace", sens, cal.laplace_scale / sens, min_exponent=floor_exp)
        return cls(cal, noise, release, dz, dz2, bound)

    @property
    def row_epsilon(self) -> float:
        """Pure epsilon of one row's selection: ``2 k Delta_Z / s`` (0 when k = d)."""
        return self.calibration.selection_coefficient * self.sensitivity_units / self.noise.scale

    def event(self) -> Event:
        parts: list[Event] = []
        if self.calibration.selection_coefficient:
            parts.append(SelfComposedEvent(EpsilonDeltaEvent(self.row_epsilon), self.calibration.n_features))
        parts.append(GaussianEvent(self.release_multiplier))
        return ComposedEvent(tuple(parts))

    def laws(self) -> dict[str, LatticeNoise]:
        return {"select": self.noise, "release": self.release_noise}

    def purposes(self) -> dict[str, str]:
        return {"select": PURPOSE_ZCDP_SELECT, "release": PURPOSE_ZCDP_RELEASE}

    def selection(self, seed: NoiseSeed) -> LazySelectionNoise:
        """The selection noise (a lazy sampler the engine's top-k calls on each tile)."""
        return LazySelectionNoise(seed, PURPOSE_ZCDP_SELECT, self.noise, self.calibration.n_features,
                                  score_bound=self.score_bound)


def privcov_zcdp_mechanism(epsilon: float, delta: float, n_samples: int, n_features: int, k: int, clip: float,
                           beta: float = 0.1, *, row_clip: float = math.inf) -> PrivCovZCDPMechanism:
    """:class:`PrivCovZCDPMechanism` of :func:`~dpdist.privacy.mechanisms.privcov.zcdp_calibration.privcov_zcdp_calibration`."""
    return PrivCovZCDPMechanism.from_calibration(
        privcov_zcdp_calibration(epsilon, delta, n_samples, n_features, k, clip, beta, row_clip=row_clip))


@dataclass(frozen=True)
class PrivCovGumbelMechanism(_GaussianRelease, Mechanism):
    """PrivCov with Gumbel top-k selection (``selection="gumbel"``): each row's k columns of
    largest exact Gumbel keys on lattice scores, then all selected values and the diagonal by
    one lattice Gaussian mechanism, accounted in zCDP. The proof is docs/privacy/privcov.md
    (section "Gumbel selection"); in short:

    * **Scores.** ``q_ij = rint(w |S_ij| 2**30) 2**-30`` (:class:`~dpdist.privacy.noise.gumbel.GumbelTopK`),
      S the computed clipped second moment, w the Gumbel weight (keys in Gumbel units). The
      computed entries of neighbours differ by at most ``Delta_fl`` (float factor included),
      so ``| |S_ij| - |S'_ij| | <= Delta_fl``, the product ``w |S_ij|`` is rounded once (at most
      ``2**-53 w C``, C the public score bound) and the lattice twice: ``|q_ij - q'_ij| <= u = w
      (Delta_fl + 2**-52 C) + 2**-30`` for every entry.
    * **Selection of row i.** The k largest of ``q_ij + G_ij``, G exact i.i.d. standard Gumbel
      (certified intervals, exact refinement: no float decides a comparison), in order, have
      the law of k peeling steps of the exponential mechanism with weights ``exp(q_ij)``
      (Durfee and Rogers 2019, Gumbel-max trick); the set is post-processing of that ordered
      output. At each step the privacy loss of choosing j is ``(q_ij - q'_ij) - log(Z / Z')``:
      its values over j lie in an interval of width ``2 u`` (the normaliser is common to all
      candidates), so the step is ``2u``-bounded range, hence ``(2u)^2 / 8``-zCDP (Cesar and
      Rogers 2021). The weight is ``(eps_step - 2**-29) / (2 (Delta_fl + 2**-52 C))``, so ``2u =
      eps_step``. No cost when k = d (every column is selected whatever the noise).
    * **With a row clip** (rows scaled to L2 norm at most C after the entry clip), row i's bound
      ``u_i`` depends on how much of the changed row lies in coordinate i: with ``delta_i =
      max_j |S_ij - S'_ij|``, ``sqrt(sum_i delta_i^2) <= kappa(n) 2 C min(R, C) / n`` (the
      calibration's ``selection_sensitivity`` times ``sqrt(d)``), so the d k steps are
      ``(k / 2) sum_i u_i^2 <= d k (eps_step / 2)^2 / 2``-zCDP with the weight above computed
      from ``selection_sensitivity`` instead of ``Delta_fl`` (docs/privacy/privcov.md, Lemma
      4a). ``eps_step`` is then the steps' root-mean-square range; the recorded event (d k steps
      of ``eps_step``) is exact in zCDP (sums of squares) and an upper bound in basic
      composition (``sum_i eps_i <= sqrt(d) ||eps||_2``, Cauchy-Schwarz).
    * **Release**, given the sets: as :class:`PrivCovZCDPMechanism`'s (one Gaussian of L2
      sensitivity ``Delta_Z2`` over the at most ``d k'`` addresses, on its lattice), including
      its row clip.
    * **Total**: ``d k`` bounded-range steps and one Gaussian step, composed in zCDP (BS16
      Lemma 2.3, adaptive), converted by CKS20: the event this object records, which
      ``release_guarantee`` checks against the charged budget.

    Residual, stated and not added to delta: an exact comparison still undecided after 64
    refinements of both cells (probability below ``2**-1000`` each) goes to the smaller column.

    Attributes
    ----------
    calibration : PrivCovGumbelCalibration
    weight : float
        Gumbel units per unit of score (``1 / weight`` is the Gumbel scale in data units).
    score_bound : float
        Public C >= |S_ij| of the computed second moment (data units).
    release_noise : LatticeNoise
        The release's rounded Gaussian law.
    release_sensitivity_units : float
        ``Delta_Z2``, the L2 sensitivity of the rounded released values on the release's lattice.
    """

    NAME = ("PrivCov with zCDP accounting: per-row exact Gumbel top-k selection (peeling exponential mechanism), "
            "lattice Gaussian release")

    calibration: PrivCovGumbelCalibration
    weight: float
    score_bound: float
    release_noise: LatticeNoise
    release_sensitivity_units: float

    @classmethod
    def from_calibration(cls, cal: PrivCovGumbelCalibration) -> "PrivCovGumbelMechanism":
        _, bound, _, release, dz2 = _gaussian_release_set_up(cal)
        if cal.selection_steps:
            weight = safe_gumbel_weight(cal.selection_step_epsilon, cal.selection_sensitivity, bound,
                                        what="PrivCov's Gumbel selection")
        else:  # k = d: the selection is a constant, the weight changes nothing
            weight = 1.0 / cal.gumbel_scale
        return cls(cal, weight, bound, release, dz2)

    @property
    def step_epsilon(self) -> float:
        """Bounded range of one selection step, root-mean-square over the rows: ``2 (w (Delta_sel
        + 2**-52 C) + 2**-30)``, ``Delta_sel`` the calibration's ``selection_sensitivity``
        (``Delta_fl`` without a row clip: then every step's range is at most this); 0 when k = d."""
        cal = self.calibration
        if not cal.selection_steps:
            return 0.0
        return 2.0 * (self.weight * (cal.selection_sensitivity + 2.0**-52 * self.score_bound) + 2.0**-SCORE_BITS)

    @property
    def gumbel_scale(self) -> float:
        """``1 / w``: the Gumbel noise in data units."""
        return 1.0 / self.weight

    def event(self) -> Event:
        cal = self.calibration
        parts: list[Event] = []
        if cal.selection_steps:
            parts.append(SelfComposedEvent(BoundedRangeEvent(self.step_epsilon), cal.n_features * cal.selection_steps))
        parts.append(GaussianEvent(self.release_multiplier))
        return ComposedEvent(tuple(parts))

    def laws(self) -> dict[str, LatticeNoise]:
        return {"release": self.release_noise}

    def purposes(self) -> dict[str, str]:
        return {"select": PURPOSE_GUMBEL_SELECT, "release": PURPOSE_GUMBEL_RELEASE}

    def noise_scales(self) -> dict[str, float]:
        return {"select": self.gumbel_scale, **super().noise_scales()}

    def describe(self) -> dict:
        return {**super().describe(), "selection": {"gumbel_weight": self.weight, "score_lattice_bits": SCORE_BITS,
                                                   "score_bound": self.score_bound,
                                                   "sampler": "exact Gumbel top-k per row"}}

    def selection_residual_note(self) -> str:
        """The selection's exhaustion residual, in words (stated, not added to delta)."""
        return (f"exact Gumbel keys on the score lattice 2**-{SCORE_BITS}; a comparison undecided after refinement "
                f"(probability below {EXHAUSTION_DELTA_PER_COMPARISON:.3g} each) goes to the smaller column "
                "(not added to delta)")

    def selection(self, seed: NoiseSeed) -> GumbelTopK:
        """The exact Gumbel top-k sampler the engine's tiles and merges call."""
        return GumbelTopK(seed, PURPOSE_GUMBEL_SELECT, self.weight)


def privcov_gumbel_mechanism(epsilon: float, delta: float, n_samples: int, n_features: int, k: int, clip: float,
                             beta: float = 0.1, *, row_clip: float = math.inf) -> PrivCovGumbelMechanism:
    """:class:`PrivCovGumbelMechanism` of :func:`~dpdist.privacy.mechanisms.privcov.zcdp_calibration.privcov_gumbel_calibration`."""
    return PrivCovGumbelMechanism.from_calibration(
        privcov_gumbel_calibration(epsilon, delta, n_samples, n_features, k, clip, beta, row_clip=row_clip))
