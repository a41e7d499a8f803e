"""PrivCov (COLT 2026, Algorithm 1): per-row noisy top-k selection and Laplace release.

Three mechanisms. :class:`PrivCovGumbelMechanism` (``selection="gumbel"``, the default) selects
each row's top k by exact Gumbel keys (the peeling exponential mechanism) and releases the
values by one Gaussian mechanism, accounted in zCDP; :class:`PrivCovZCDPMechanism`
(``selection="laplace"``) keeps the Laplace selection below with the same release. Their proofs
are docs/privacy/privcov.md (summarised in the class docstrings). :class:`PrivCovMechanism`
(``selection="paper"``) is Algorithm 1 as the paper writes it; the rest of this docstring is
its argument.

The mechanism of :func:`dpdist.algorithms.sparse_covariance.private_sparse_covariance`. Its
calibration (the Laplace scale b, the per-row epsilon, the composition) is
:func:`dpdist.privacy.calibration.privcov_calibration`; this module makes it float-safe and
states the guarantee for the values actually computed.

Guarantee
---------
(epsilon, delta)-DP under replace-one neighbours (same n, one row replaced), for any input:
each row i is pure ``eps_i``-DP with ``eps_i = c Delta_Z / s <= eps_row`` (below), and the d
rows compose (:func:`~dpdist.privacy.accounting.release_guarantee` of the event
``SelfComposedEvent(EpsilonDeltaEvent(eps_i), d)``: the smallest of basic composition and the
zCDP route, ``eps_i^2 / 2`` per row (BS16 Prop. 1.4) converted at delta by CKS20) to at most
the requested epsilon at delta (the calibration checks the requested budget with advanced
composition, DR14 Thm 3.20, at slack delta/2, which both routes beat).

What is released, on the lattice ``gamma Z``
--------------------------------------------
``gamma`` is :func:`~dpdist.privacy.mechanisms.base.lattice_law`'s for the scale b (b is
2**28 to 2**29 lattice units), or coarser so that the public score bound C
(:func:`~dpdist.privacy.lazy_selection.privcov_score_bound`, in units) stays below 2**51: every
score and every release below is an integer of at most 2**53, computed exactly.

* ``m_ij = rint(Sigma_hat_ij / gamma)``: the computed clipped second moment, rounded. The
  computed entries of neighbours differ by at most ``Delta_fl = kappa(n) 2 R^2 / n``
  (:func:`~dpdist.privacy.calibration.gram_rounding_factor`, issue 9's float factor), so the
  integers differ by at most ``Delta_Z = floor(Delta_fl / gamma) + 1``.
* Selection (line 6): ``S_i`` = the k columns of largest ``|m_ij + w_ij|``, ties to the
  smaller column, with ``w_ij`` i.i.d. from the rounded Laplace law ``K`` of scale ``s``
  (lattice units; :mod:`dpdist.privacy.lattice`), drawn exactly by the lazy tree of
  :mod:`dpdist.privacy.lazy_selection` (purpose :data:`PURPOSE_SELECT`). Only ``S_i`` leaves.
* Release (lines 8, 11): ``(m_ij + z_ij) gamma`` for j in ``S_i`` and j = i, ``z_ij`` i.i.d.
  from the same law (purpose :data:`PURPOSE_RELEASE`, address (i, j)).

The scale is ``s = (b / Delta_fl) Delta_Z`` (rounded up): the calibration's noise multiplier
``b / Delta_fl`` on the lattice's sensitivity, so the released noise is ``s gamma <= b (1 +
gamma / Delta_fl)``, larger than b by at most ``2**-28 b / Delta_fl`` relative.

**Claim (one row is pure ``c Delta_Z / s``-DP, c = 2k + k', or k' when k = d).** This is the
coupling of :func:`~dpdist.privacy.calibration.privcov_calibration`, now on integers, where it
holds exactly. Fix row i and an output set S; ``a_j = m'_ij - m_ij`` (integers, ``|a_j| <=
Delta_Z``), ``y_j = m_ij + w_j``. Map ``w'_j = w_j + 2 Delta_Z sgn(y_j)`` for j in S (with
``sgn(0) = +1``), ``w'_j = w_j`` otherwise, and ``z'_j = z_j - a_j`` on ``S u {i}``. Under the
neighbour, for j in S, ``y'_j = y_j + a_j + 2 Delta_Z sgn(y_j)`` keeps the sign ``sgn(y_j)``
and ``|y'_j| >= |y_j| + Delta_Z``; for l not in S, ``|y'_l| <= |y_l| + Delta_Z``. Every
unselected l had ``|y_l| < |y_j|``, or ``|y_l| = |y_j|`` with ``l > j`` (the tie rule); the
same holds after the map (equality of ``|y'_l|`` and ``|y'_j|`` forces ``|y_l| = |y_j|``), so
S is selected again, with the same released values. The map is injective (``sgn(y'_j) =
sgn(y_j)`` is read off ``w'``) and, for the rounded Laplace law, ``P(K = k) <= e^{|t|/s}
P(K = k + t)`` for all integers k, t (it is ``round(L)`` with L Laplace(s): ``P(K = k) =
e^{-|k|/s} sinh(1/(2s))`` for k != 0 and ``1 - e^{-1/(2s)}`` at 0, and ``1 - e^{-x} <= x <=
sinh x``). The total shift is at most ``2 Delta_Z k + Delta_Z k'``, so ``P_D(S, v) <=
e^{c Delta_Z / s} P_D'(S, v)`` for every output, and summing over outputs gives the claim.
When ``k = d`` every column is selected whatever the noise: no shift of w, ``c = k'``. As
``s >= (b / Delta_fl) Delta_Z`` and ``b >= c Delta_fl / eps_row``, ``c Delta_Z / s <=
eps_row``. The selection itself needs no continuity: ties (now of positive probability) are
handled by the tie rule above.

Why the selection noise is lattice noise too (issue 10, item 2)
---------------------------------------------------------------
``S_i`` is only an index set, but it is decided by comparisons of noisy scores. With
floating-point noise (53-bit uniforms, a float inverse CDF) the coupling fails: the noise is
bounded (sets needing a row maximum above ``b (ln d + 37.4)`` are impossible, total mass
``d e^{-37.4}`` per fit, 6e-12 at d = 1e5, far above issue 10's 1e-15), and its law is a grid
that a data shift does not map to itself. On the lattice the scores are integers, the law is
the exact rounded Laplace law (unbounded: every set has positive probability under every
dataset), and the claim above holds verbatim. tests/privacy/test_mechanisms.py and tests/privacy/test_lazy_selection.py check
that every selection the sampler makes is the exact top-k of integer scores and that the
released values are lattice points (the support test).

Deviations (only more noise): k' = k + 1 released values per row (the diagonal); b =
max(paper's b, the coupling's ``c Delta_fl / eps_row``); the float factor kappa(n); the
lattice factor ``Delta_Z gamma / Delta_fl``. Residual: the lattice sampler's exhaustion,
below ``2**-1000`` per entry (:data:`~dpdist.privacy.lattice.EXHAUSTION_DELTA_PER_ENTRY`,
:data:`~dpdist.privacy.lazy_selection.EXHAUSTION_DELTA_PER_LEAF`), stated, not added to delta.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpdist.privacy.accounting import (
    BoundedRangeEvent,
    ComposedEvent,
    EpsilonDeltaEvent,
    Event,
    GaussianEvent,
    SelfComposedEvent,
)
from dpdist.privacy.calibration import (
    PrivCovCalibration,
    PrivCovGumbelCalibration,
    PrivCovZCDPCalibration,
    privcov_calibration,
    privcov_gumbel_calibration,
    privcov_pure_coefficient,
    privcov_zcdp_calibration,
)
from dpdist.privacy.gumbel import EXHAUSTION_DELTA_PER_COMPARISON, SCORE_BITS, GumbelTopK
from dpdist.privacy.lattice import LatticeField, LatticeNoise
from dpdist.privacy.lazy_selection import LazySelectionNoise, privcov_score_bound
from dpdist.privacy.mechanisms.base import Mechanism, lattice_law
from dpdist.privacy.mechanisms.expmech import safe_gumbel_weight
from dpdist.privacy.noise import NoiseSeed

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
    """PrivCov's per-row selection and release (module docstring), built from a calibration.

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
    """:class:`PrivCovMechanism` of :func:`~dpdist.privacy.calibration.privcov_calibration`."""
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
      ``sqrt(d k') Delta_fl`` (:func:`~dpdist.privacy.calibration.privcov_release_sensitivity`)
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
    """:class:`PrivCovZCDPMechanism` of :func:`~dpdist.privacy.calibration.privcov_zcdp_calibration`."""
    return PrivCovZCDPMechanism.from_calibration(
        privcov_zcdp_calibration(epsilon, delta, n_samples, n_features, k, clip, beta, row_clip=row_clip))


@dataclass(frozen=True)
class PrivCovGumbelMechanism(_GaussianRelease, Mechanism):
    """PrivCov with Gumbel top-k selection (``selection="gumbel"``): each row's k columns of
    largest exact Gumbel keys on lattice scores, then all selected values and the diagonal by
    one lattice Gaussian mechanism, accounted in zCDP. The proof is docs/privacy/privcov.md
    (section "Gumbel selection"); in short:

    * **Scores.** ``q_ij = rint(w |S_ij| 2**30) 2**-30`` (:class:`~dpdist.privacy.gumbel.GumbelTopK`),
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
    """:class:`PrivCovGumbelMechanism` of :func:`~dpdist.privacy.calibration.privcov_gumbel_calibration`."""
    return PrivCovGumbelMechanism.from_calibration(
        privcov_gumbel_calibration(epsilon, delta, n_samples, n_features, k, clip, beta, row_clip=row_clip))
