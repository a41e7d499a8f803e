"""ExpMechPCA (COLT 2026, Algorithm 4): exact exponential-mechanism selection and the block release.

The mechanism of :func:`dpdist.algorithms.expmech_pca.expmech_pca`, with its calibration
(:func:`expmech_calibration`), its noise callables and the events it states.

Guarantee: (epsilon, delta)-DP under replace-one neighbours (Lemma 29): the selection is
``epsilon_sel``-DP and ``epsilon_sel``-bounded-range, the block release a Gaussian mechanism,
composed as the calibration chose; the release records both events.
Sensitivity: the computed scores ``lambda_1(Sigma_hat_S)`` of neighbours differ by at most
``Delta_q`` (``kappa(n) 2 k tau^2 / n`` plus the eigenvalue kernel's error); the block moves by
``Delta_b = kappa(n) 2 k tau^2 / n`` in Frobenius norm.
Deviations: the weight ``(epsilon_sel - 2**-29) / (2 (Delta_q + 2**-52 S_max))`` pays for the
score lattice and the product's rounding inside epsilon; the selection is an exact Gumbel-max
(:mod:`dpdist.privacy.noise.gumbel`), the block a rounded Gaussian on the lattice. Residuals:
comparison and sampler exhaustion (below ``2**-1000`` each), stated.

Proofs: docs/privacy/expmech.md.

Calibration (Algorithm 4 / Appendix F): pure functions of public parameters; nothing in it
sees data. Constants in sensitivities and noise scales are the paper's. The one place where a
printed noise scale may be replaced is marked *deviation*: it can only make the noise larger.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from functools import lru_cache

import numpy as np
from scipy import optimize

from dpdist._validation import check_int, check_positive, check_probability
from dpdist.exceptions import ValidationError
from dpdist.privacy.accounting import gaussian_epsilon
from dpdist.privacy.budget import check_delta, check_epsilon
from dpdist.privacy.events import ComposedEvent, EpsilonDeltaEvent, Event, GaussianEvent, ZCDPEvent
from dpdist.privacy.float_rounding import UNIT_ROUNDOFF, float_sensitivity
from dpdist.privacy.mechanisms.gaussian import analytic_gaussian_sigma, gaussian_sigma
from dpdist.privacy.noise.gumbel import GumbelMax, SCORE_BITS
from dpdist.privacy.noise.lattice import LatticeField, LatticeNoise
from dpdist.privacy.mechanisms.base import Mechanism, lattice_law
from dpdist.privacy.noise.streams import NoiseSeed
from dpdist.privacy.zcdp import cks20_rho

__all__ = [
    "BLOCK_PURPOSE",
    "BlockRelease",
    "ExpMechCalibration",
    "ExpMechMechanism",
    "SELECT_PURPOSE",
    "expmech_calibration",
    "expmech_clip",
    "expmech_split",
    "safe_gumbel_weight",
]


def _check_prob(beta: float, name: str = "beta") -> float:
    return check_probability(beta, name)


def expmech_clip(sigma: float, n_samples: int, n_features: int, beta: float) -> float:
    """Entry truncation level ``tau = 2 sigma sqrt(log(4 n d / beta))`` (Theorem 7).

    With this tau no entry of n samples of a sigma-sub-Gaussian distribution is clipped,
    except with probability beta/4. Utility only: privacy holds for any tau.
    """
    sigma = check_positive(sigma, "sigma")
    beta = _check_prob(beta)
    n = check_int(n_samples, "n_samples", low=1)
    d = check_int(n_features, "n_features", low=1)
    return 2.0 * sigma * math.sqrt(math.log(4.0 * n * d / beta))


@dataclass(frozen=True)
class ExpMechCalibration:
    """All constants of one run of Algorithm 4, from public values only.

    Attributes
    ----------
    clip : float
        tau, the entrywise truncation level.
    n_subsets : int
        ``C(d, k)``, the size of the exponential mechanism's range.
    composition : str
        How the selection and the release compose (:func:`expmech_split`): ``"basic"`` or
        ``"zcdp"``.
    selection_epsilon : float
        The support selection's epsilon: it is ``selection_epsilon``-DP (pure) and
        ``selection_epsilon``-bounded-range.
    release_epsilon, release_delta : float
        The Gaussian release's stand-alone guarantee (with ``"basic"``, its share
        ``(epsilon - selection_epsilon, delta)``).
    rho : float or None
        With ``"zcdp"``: the zCDP budget of (epsilon, delta) (CKS20 conversion), of which the
        selection takes ``selection_epsilon**2 / 8`` and the release the rest (after a
        private mean's share).
    mean_noise_multiplier : float or None
        With ``mean_fraction`` > 0: the private mean's Gaussian noise multiplier (sigma over
        its sensitivity), from the same budget (:func:`expmech_split`).
    score_sensitivity : float
        ``2 k tau^2 / n``: global sensitivity of ``q(D, S) = lambda_1(Sigma_hat_S)`` in exact
        arithmetic.
    float_factor : float
        kappa(n) (:func:`~dpdist.privacy.float_rounding.gram_rounding_factor`): the computed
        second moment's blocks move by at most ``float_factor * block_sensitivity``.
    score_sensitivity_fl : float
        Sensitivity of the score as computed: ``float_factor * score_sensitivity`` plus twice
        :data:`SCORE_EIGEN_ERROR` ``* k * u * k tau^2`` (the eigenvalue kernel's error).
    gumbel_weight : float
        ``selection_epsilon / (2 score_sensitivity_fl)`` (``epsilon n / (8 k tau^2)`` in exact
        arithmetic at the paper's ``selection_epsilon = epsilon / 2``): the key of subset S is
        ``gumbel_weight * q(D, S) + Gumbel(0, 1)``.
    gumbel_scale : float
        ``1 / gumbel_weight``: the same noise in score units.
    block_sensitivity : float
        ``2 k tau^2 / n``: Frobenius sensitivity of the ``k x k`` block ``Sigma_hat_S``.
    paper_sigma : float
        ``sigma_priv = (8 k tau^2 / (epsilon n)) sqrt(log(4 / delta))`` (line 11), times
        ``float_factor``.
    mechanism_sigma : float
        The Gaussian mechanism's requirement for ``float_factor * block_sensitivity`` at the
        release's share (:func:`expmech_split`).
    gaussian_sigma : float
        The scale used: ``mechanism_sigma`` (``paper_sigma`` is larger; kept for reference).
    gaussian_rule : str
        How ``gaussian_sigma`` was calibrated.
    """

    epsilon: float
    delta: float
    n_samples: int
    n_features: int
    k: int
    clip: float
    n_subsets: int
    composition: str
    selection_epsilon: float
    release_epsilon: float
    release_delta: float
    rho: float | None
    mean_noise_multiplier: float | None
    score_sensitivity: float
    float_factor: float
    score_sensitivity_fl: float
    gumbel_weight: float
    gumbel_scale: float
    block_sensitivity: float
    paper_sigma: float
    mechanism_sigma: float
    gaussian_sigma: float
    gaussian_rule: str

    def to_dict(self) -> dict:
        d = asdict(self)
        d["n_subsets"] = int(self.n_subsets)
        return d


#: Accuracy assumed of the engine's top-eigenvalue kernels on a k x k block A
#: (``dpdist.engine.subset_scores.block_top_eigenvalue``): ``|computed - lambda_1(A)| <=
#: SCORE_EIGEN_ERROR * k * u * ||A||_F``. LAPACK's ``eigvalsh`` is backward stable
#: (error ``p(k) u ||A||_2`` with p a modest polynomial); the closed forms used for k = 2 and
#: k = 3 (with the ``eigvalsh`` fallback near a double eigenvalue) are accurate to about
#: 1e-14 of the block's scale (tests/engine/test_subsets.py), below 64 * 3 * u = 2.1e-14.
SCORE_EIGEN_ERROR = 64.0


def _split_weights(log_range: float, k: int, beta: float) -> tuple[float, float]:
    """``(A, B)``: the parts of
    :func:`~dpdist.algorithms.expmech_pca.plan.expmech_error_bound`'s Rayleigh deficit that
    depend on the split, per unit of sensitivity: ``eta_select + 2 eta_noise = Delta (A /
    eps_sel + B m)`` (m the release's noise multiplier)."""
    a = 2.0 * (log_range + math.log(4.0 / beta))
    b = 2.0 * (2.0 * math.sqrt(k) + math.sqrt(2.0 * math.log(4.0 / beta)))
    return a, b


@lru_cache(maxsize=512)
def expmech_split(epsilon: float, delta: float, log_range: float, k: int, beta: float,
                  mean_fraction: float = 0.0) -> tuple:
    """How ExpMechPCA's selection and block release (and a private mean before them) share
    (epsilon, delta).

    Returns ``(composition, selection_epsilon, noise_multiplier, rho, mean_multiplier)``: the
    block's Gaussian noise is ``noise_multiplier`` times its sensitivity, the mean's
    ``mean_multiplier`` times its own (None without a mean). Two valid compositions are compared,
    each at the split that minimises the part of
    :func:`~dpdist.algorithms.expmech_pca.plan.expmech_error_bound`'s deficit that depends on
    it, ``A / eps_sel + B m`` (:func:`_split_weights`; ``log_range = log C(d, k)``), and the
    smaller is used:

    - ``"basic"`` (DR14 Thm 3.16): the selection is ``eps_sel``-DP (the exponential mechanism,
      McSherry-Talwar 2007) and the release the analytic Gaussian mechanism at ``(epsilon -
      eps_sel, delta)`` (Balle-Wang 2018), ``eps_sel`` minimising numerically;
    - ``"zcdp"``: ``rho`` from (epsilon, delta) by the exact conversion of Canonne, Kamath and
      Steinke 2020. The exponential mechanism with utility sensitivity Delta and weights
      ``exp(eps_sel q / (2 Delta))`` is ``eps_sel``-bounded-range (Durfee-Rogers 2019: the
      privacy loss ``eps_sel (q(S) - q'(S)) / (2 Delta) - log(Z / Z')`` ranges over an interval
      of width at most ``eps_sel``), hence ``eps_sel^2 / 8``-zCDP (Cesar-Rogers 2021,
      Lemma 3.2); the release with multiplier m is ``1 / (2 m^2)``-zCDP (Bun-Steinke 2016,
      Prop. 1.6); rho's add. With ``f`` the selection's share of rho, ``eps_sel = sqrt(8 f
      rho)``, ``m = 1 / sqrt(2 (1 - f) rho)``, and the minimum of ``C_1 / sqrt(f) + C_2 /
      sqrt(1 - f)`` is at ``f / (1 - f) = (C_1 / C_2)^(2/3)``.

    A private mean (``mean_fraction`` > 0, a Gaussian mechanism) joins the Gaussian part: with
    ``"basic"`` the mean and the block form one Gaussian mechanism in GDP (Dong-Roth-Su 2019,
    exact) at ``(epsilon - eps_sel, delta)``, the mean taking ``mean_fraction`` of its ``mu^2``;
    with ``"zcdp"`` the mean takes ``mean_fraction`` of rho and the selection and the block
    share the rest.

    At (1, 1e-6), d = 1,000, k = 3 basic composition wins (the zCDP conversion of a 2-step
    composition costs more than bounded range saves); zCDP wins at small epsilon, large delta
    or a small range (for example at (0.1, 1e-3) for every range). Public inputs only.
    """
    a, b = _split_weights(log_range, k, beta)
    mf = float(mean_fraction)
    block_share = 1.0 - mf  # of the Gaussian part's mu^2 (basic) or of rho (zcdp)

    def basic(f: float) -> float:
        return a / (f * epsilon) + b * analytic_gaussian_sigma(1.0, (1.0 - f) * epsilon, delta) / math.sqrt(block_share)

    res = optimize.minimize_scalar(basic, bounds=(1e-4, 1.0 - 1e-4), method="bounded",
                                   options={"xatol": 1e-7})
    f_basic = float(res.x)
    inv_mu = analytic_gaussian_sigma(1.0, (1.0 - f_basic) * epsilon, delta)  # 1 / mu of the Gaussian part
    best = (basic(f_basic), "basic", f_basic * epsilon, inv_mu / math.sqrt(block_share), None,
            inv_mu / math.sqrt(mf) if mf > 0 else None)
    rho = cks20_rho(epsilon, delta)
    rho_main = block_share * rho
    c1, c2 = a / math.sqrt(8.0 * rho_main), b / math.sqrt(2.0 * rho_main)
    ratio = (c1 / c2) ** (2.0 / 3.0)
    f = ratio / (1.0 + ratio)
    zcdp = (c1 / math.sqrt(f) + c2 / math.sqrt(1.0 - f), "zcdp", math.sqrt(8.0 * f * rho_main),
            1.0 / math.sqrt(2.0 * (1.0 - f) * rho_main), rho, 1.0 / math.sqrt(2.0 * mf * rho) if mf > 0 else None)
    return min(best, zcdp, key=lambda t: t[0])[1:]


def expmech_calibration(
    epsilon: float, delta: float, n_samples: int, n_features: int, k: int, clip: float, *, beta: float = 0.1,
    mean_fraction: float = 0.0,
) -> ExpMechCalibration:
    """Calibrate Algorithm 4 (ExpMechPCA), Appendix F of the COLT 2026 paper.

    Privacy (Lemma 29), replace-one neighbours: for every S, replacing one row moves
    ``Sigma_hat_S`` by ``(z z^T - z' z'^T)/n`` with ``||z||^2, ||z'||^2 <= k tau^2``, so the
    score ``lambda_1(Sigma_hat_S)`` moves by at most ``2 k tau^2 / n`` (Weyl) and the block
    by at most ``2 k tau^2 / n`` in Frobenius norm.

    - Selection: the exponential mechanism (Lemma 28) at ``eps_sel`` samples S with
      probability proportional to ``exp(eps_sel q / (2 Delta_q))`` (line 9 has ``eps_sel =
      epsilon/2``, ``exp(epsilon n q / (8 k tau^2))``): ``eps_sel``-DP and
      ``eps_sel``-bounded-range.
    - Block release: ``Sigma_hat_S + G_S`` with i.i.d. ``N(0, sigma^2)`` entries, a Gaussian
      mechanism of Frobenius sensitivity ``Delta_b`` (line 11 prints ``sigma_priv = (8 k tau^2 /
      (epsilon n)) sqrt(log(4/delta))``, Fact 2 at ``(epsilon/2, delta)``).
    - Composition (:func:`expmech_split`, *deviation*): the paper splits by basic composition
      at ``epsilon/2`` each; here the split, and whether the two steps compose by basic
      composition (with the analytic Gaussian mechanism for the release) or in zCDP (with the
      selection's bounded range), are chosen to minimise the error bound. Either is a proof
      of (epsilon, delta)-DP; the recorded events let the accountant re-derive it.

    *Floating point* (a deviation that only adds noise): entries are clipped to tau, so each
    row's term ``|y_S| |y_S|^T`` has Frobenius norm ``<= k tau^2 = B`` on every block, and the
    computed block moves by at most ``kappa(n) * 2 k tau^2 / n``
    (:func:`~dpdist.privacy.float_rounding.gram_rounding_factor`); Weyl carries that to the
    exact top eigenvalue of the computed block, and the kernel computing it errs by at most
    ``SCORE_EIGEN_ERROR k u k tau^2 (1 + 1e-6)`` on each side. The Gumbel weight and the block's
    Gaussian noise use these enlarged sensitivities.

    *Deviation* (less noise than printed, same guarantee): the block release is a Gaussian
    mechanism of Frobenius sensitivity ``Delta_b``, and the proof needs nothing else of it, so
    its scale is the exact requirement of its share (the analytic Gaussian mechanism, Balle &
    Wang 2018, or ``Delta_b / sqrt(2 rho_release)`` in zCDP), for every epsilon: 0.51 of the
    printed ``sigma_priv`` at (1, 1e-6), k = 3, d = 1,000, with a selection epsilon of 0.496
    instead of 0.5. ``paper_sigma`` records the printed value.
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    n = check_int(n_samples, "n_samples", low=1)
    d = check_int(n_features, "n_features", low=1)
    k = check_int(k, "k", low=1)
    if k > d:
        raise ValidationError(f"k must satisfy 1 <= k <= d = {d}, got k={k}")
    clip = check_positive(clip, "clip")
    sens = 2.0 * k * clip**2 / n
    sens_fl, kappa = float_sensitivity(sens, n)
    score_fl = sens_fl + 2.0 * SCORE_EIGEN_ERROR * k * UNIT_ROUNDOFF * k * clip**2 * (1.0 + 1e-6)
    beta = _check_prob(beta)
    log_range = math.lgamma(d + 1) - math.lgamma(k + 1) - math.lgamma(d - k + 1)
    mean_fraction = float(mean_fraction)
    if not 0.0 <= mean_fraction < 1.0:
        raise ValidationError(f"mean_fraction must lie in [0, 1), got {mean_fraction!r}")
    how, eps_sel, mult, rho, mean_mult = expmech_split(epsilon, delta, log_range, k, beta, mean_fraction)
    weight = eps_sel / (2.0 * score_fl)
    paper_sigma = kappa * 8.0 * k * clip**2 / (epsilon * n) * math.sqrt(math.log(4.0 / delta))
    if how == "basic" and mean_mult is None:
        eps_rel = epsilon - eps_sel
        mech_sigma, mech_rule = gaussian_sigma(sens_fl, eps_rel, delta)
        rule = (f"basic composition: selection at epsilon {eps_sel:.6g}, Gaussian mechanism at ({eps_rel:.6g}, "
                f"delta): {mech_rule}")
    elif how == "basic":
        mech_sigma = sens_fl * mult
        eps_rel = gaussian_epsilon(1.0 / mult, delta)
        rule = (f"basic composition: selection at epsilon {eps_sel:.6g}; the private mean and the block one Gaussian "
                f"mechanism (GDP) at ({epsilon - eps_sel:.6g}, delta), the block {1 - mean_fraction:g} of its mu^2")
    else:
        mech_sigma = sens_fl * mult
        eps_rel = gaussian_epsilon(1.0 / mult, delta)
        rule = (f"zCDP: rho {rho:.6g} from (epsilon, delta) (CKS20), selection {eps_sel:.6g}-bounded-range "
                f"({eps_sel**2 / 8:.6g}-zCDP), Gaussian release Delta / sqrt(2 rho_release)")
    sigma = mech_sigma
    return ExpMechCalibration(
        epsilon=epsilon,
        delta=delta,
        n_samples=n,
        n_features=d,
        k=k,
        clip=clip,
        n_subsets=math.comb(d, k),
        composition=how,
        selection_epsilon=eps_sel,
        release_epsilon=eps_rel,
        release_delta=delta,
        rho=rho,
        mean_noise_multiplier=mean_mult,
        score_sensitivity=sens,
        float_factor=kappa,
        score_sensitivity_fl=score_fl,
        gumbel_weight=weight,
        gumbel_scale=1.0 / weight,
        block_sensitivity=sens,
        paper_sigma=paper_sigma,
        mechanism_sigma=mech_sigma,
        gaussian_sigma=sigma,
        gaussian_rule=rule,
    )


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
