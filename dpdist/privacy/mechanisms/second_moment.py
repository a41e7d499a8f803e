"""RecDPSME (MS25) levels, its private initialisation and the one-shot second moment, float-safe.

The mechanisms of :func:`dpdist.algorithms.second_moment.second_moment` and
:func:`~dpdist.algorithms.second_moment.one_shot_second_moment` (Mahpud & Sheffet, NeurIPS
2025, Algorithms 1-2), with their calibrations (below), noise callables and events.

Guarantee: rho-zCDP under replace-one neighbours (n public), for any input; each step is a
Gaussian mechanism on the lattice at least as noisy as its calibration and records the
calibration's event; the shares compose to the requested rho.
Sensitivities: a level of rows clipped to ``R_k`` moves by ``kappa(n) a R_k^2 / n`` (a = 4,
the paper's, or sqrt(2), the exact L2 bound); each histogram by ``sqrt(2)`` (one count down,
one up). Later levels see earlier ones only through released matrices (post-processing).
Deviations: L = K* + 1 draws in every sigma, rows clipped at level 0, zCDP histograms for the
radius and lambda_min, the float factor kappa(n); the full list with reasons, the lattice
release and the noise purposes are in docs/privacy/second_moment.md.

Calibration
-----------
Pure functions of public values; nothing in them sees data. Every decision where dpdist completes
or departs from the paper is stated where it is applied; docs/privacy/second_moment.md lists
them all with their reasons.

Recursive estimator (Algorithms 1-2, RecDPSME), all in *normalised units*: the data divided
by sqrt(lambda_hat), so that I <= Sigma and every row has norm <= ``radius``.

- Constants of Algorithm 1: eta = 1/2, psi = 1/(10m), c = 1/(80m), C = 640m.
- kappa_0 = R^2 / (1 - alpha); kappa_k = (3/7)^k kappa_0; R_k = sqrt(kappa_k).
- *Number of draws*: K* = min{k >= 0 : kappa_k <= C} and the recursion draws noise
  L = K* + 1 times; the budget is split over L, not the paper's real-valued T (which makes
  ceil(T) + 1 draws and would overspend), so the total is exactly rho.
- Per-level sigma_k = Delta_k sqrt(L) / sqrt(2 rho), with Delta_k = 4 R_k^2 / n (MS25,
  ``sensitivity="paper"``) or sqrt(2) R_k^2 / n (``sensitivity="tight"``, the exact
  L2 sensitivity of the released upper triangle). Each level is then rho/L-zCDP (BS16
  Prop. 1.6) and the L levels compose to rho (BS16 Lemma 2.3).
- *Floating point* (a deviation that only adds noise): every sigma is computed for
  ``kappa(n) * Delta`` (:func:`~dpdist.privacy.float_rounding.gram_rounding_factor`), the
  sensitivity of the level's Gram matrix *as computed*: the engine scales each row so that its
  norm as computed is at most R_k (terms ``y y^T`` of Frobenius norm ``<= R_k^2``), multiplies
  only after scaling, and sums in the bounded-depth order that the factor assumes.
- *Constants*: the paper's Omega(.) constants are not given; they are replaced by an explicit
  derivation (docs/privacy/second_moment.md, "The predicted gamma"), with g(d, p) a bound on
  ||N|| / sigma for N ~ GUE(sigma^2). That prediction is utility only and lives beside the
  estimator, in :mod:`dpdist.algorithms.second_moment.plan`.

The subsample-and-aggregate baseline (Algorithm 3) is calibrated in
:mod:`dpdist.privacy.mechanisms.subsample_aggregate`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from dpdist._validation import check_choice, check_int, check_positive, check_probability, check_real
from dpdist.exceptions import ValidationError
from dpdist.privacy.events import Event, GaussianEvent
from dpdist.privacy.float_rounding import float_sensitivity
from dpdist.privacy.noise.lattice import LatticeField, LatticeNoise
from dpdist.privacy.mechanisms.base import Mechanism, lattice_law
from dpdist.privacy.mechanisms.gaussian import SymmetricGaussianMechanism
from dpdist.privacy.noise.streams import NoiseSeed
from dpdist.privacy.zcdp import ZCDP, check_rho

__all__ = [
    "ETA",
    "GROWTH",
    "GaussianHistogramMechanism",
    "HISTOGRAM_SENSITIVITY",
    "HistogramRelease",
    "LevelSchedule",
    "MomentRelease",
    "PURPOSE_LAMBDA",
    "PURPOSE_LEVEL",
    "PURPOSE_ONE_SHOT",
    "PURPOSE_RADIUS",
    "SENSITIVITIES",
    "SHRINK",
    "check_alpha",
    "check_m",
    "check_xi",
    "histogram_mechanism",
    "histogram_sigma",
    "lemma_3_8_beta_bound",
    "level_mechanisms",
    "level_purpose",
    "level_schedule",
    "level_sigma",
    "matrix_bernstein_m",
    "moment_mechanism",
    "moment_release",
    "n_levels",
    "one_shot_mechanism",
    "one_shot_sigma",
    "recursion_constants",
    "sensitivity_coefficient",
    "split_second_moment_rho",
]


#: eta of Algorithm 1: the factor that shrinks the large-eigenvalue subspace.
ETA = 0.5
#: kappa and R^2 shrink by this factor per level (Lemma 3.4 / Corollary 3.5).
SHRINK = 3.0 / 7.0
#: Rows are multiplied by sqrt(GROWTH) after the projection (Algorithm 2, line 7).
GROWTH = 8.0 / 7.0
#: Sensitivity options: "paper" 4 R^2 / n, "tight" sqrt(2) R^2 / n.
SENSITIVITIES = ("paper", "tight")


# ---------------------------------------------------------------------------------------
# parameter checks shared by the estimator, the baseline and the planner
# ---------------------------------------------------------------------------------------


def check_alpha(alpha: float) -> float:
    """alpha of (m, alpha, beta)-subsamplability; the analysis needs 0 < alpha <= 1/2 (MS25)."""
    return check_real(alpha, "alpha", low=0.0, high=0.5, closed="right")


def check_m(m: int) -> int:
    """m of (m, alpha, beta)-subsamplability (the subsamplability size): an integer >= 1."""
    return check_int(m, "m", low=1)


def check_xi(xi: float) -> float:
    """xi, the failure probability of the analysis: in (0, 1)."""
    return check_probability(xi, "xi")


def _check_positive(value: float, name: str) -> float:
    return check_positive(value, name)


def _check_sensitivity(sensitivity: str) -> str:
    return check_choice(sensitivity, "sensitivity", SENSITIVITIES)


# ---------------------------------------------------------------------------------------
# the recursion
# ---------------------------------------------------------------------------------------


def recursion_constants(m: int) -> dict:
    """Constants of Algorithm 1, line 1: eta = 1/2, psi = 1/(10m), c = 1/(80m), C = 640m."""
    m = check_m(m)
    return {"eta": ETA, "psi": 1.0 / (10 * m), "c": 1.0 / (80 * m), "stop": 640.0 * m}


def sensitivity_coefficient(sensitivity: str) -> float:
    """The a of Delta = a R^2 / n: 4 for MS25 ("paper"), sqrt(2) for the tight L2 bound."""
    return 4.0 if _check_sensitivity(sensitivity) == "paper" else math.sqrt(2.0)


def n_levels(radius: float, alpha: float, m: int) -> tuple[int, tuple[float, ...]]:
    """Number of noise draws L = K* + 1 and the kappa schedule (L, not the paper's real-valued T, draws).

    ``radius`` is the norm bound in normalised units (Sigma >= I). kappa_0 = R^2/(1-alpha),
    kappa_k = (3/7)^k kappa_0, and K* = min{k >= 0 : kappa_k <= 640 m}
    = max(0, ceil(log_{7/3}(kappa_0 / C))). Public values only: the schedule never depends on
    the data.
    """
    radius = _check_positive(radius, "radius")
    alpha = check_alpha(alpha)
    stop = recursion_constants(m)["stop"]
    kappa0 = radius**2 / (1.0 - alpha)
    kappas = [kappa0]
    while kappas[-1] > stop:
        if len(kappas) > 10_000:  # pragma: no cover - radius is finite
            raise ValidationError("radius is too large: the recursion would not terminate")
        kappas.append(kappa0 * SHRINK ** len(kappas))
    return len(kappas), tuple(kappas)


@dataclass(frozen=True)
class LevelSchedule:
    """Public schedule of one run of RecDPSME, level by level (k = 0 .. L-1).

    All values are in normalised units (rows of the data divided by sqrt(lambda_hat) and
    multiplied by sqrt(1/(1-alpha)) at level 0).

    Attributes
    ----------
    n_levels : int
        L = K* + 1 noise draws.
    kappas, radii : tuple of float
        kappa_k and R_k = sqrt(kappa_k).
    sensitivities : tuple of float
        Delta_k = a R_k^2 / n (a = 4 or sqrt(2)), in exact arithmetic.
    float_factor : float
        kappa(n): the computed level matrix moves by at most ``float_factor * Delta_k``.
    sigmas : tuple of float
        sigma_k = kappa Delta_k sqrt(L) / sqrt(2 rho): the GUE entry standard deviation at level k.
    rhos : tuple of float
        rho_k = (kappa Delta_k)^2 / (2 sigma_k^2) = rho / L.
    thresholds : tuple of float
        psi kappa_k: eigenvalues of the noisy level-k matrix at or above it span V.
    """

    n_samples: int
    n_features: int
    rho: float
    alpha: float
    m: int
    radius: float
    sensitivity: str
    n_levels: int
    kappas: tuple
    radii: tuple
    sensitivities: tuple
    float_factor: float
    sigmas: tuple
    rhos: tuple
    thresholds: tuple
    eta: float
    psi: float
    stop: float

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def privacy(self) -> ZCDP:
        """The main recursion's cost, one labelled share per level."""
        return ZCDP(self.rho, breakdown=tuple((f"level {k}", r) for k, r in enumerate(self.rhos)))


def level_sigma(radius_k: float, n_samples: int, n_levels: int, rho: float, sensitivity: str = "paper") -> float:
    """sigma_k = a R_k^2 sqrt(L) / (n sqrt(2 rho)) (Algorithm 2 line 1 with T -> L, the number of draws made).

    a = 4 (MS25, ``"paper"``) or sqrt(2) (``"tight"``). Example:
    R_k = 2, n = 1000, L = 5, rho = 0.5 gives 0.0357770876...
    """
    a = sensitivity_coefficient(sensitivity)
    return a * float(radius_k) ** 2 * math.sqrt(int(n_levels)) / (int(n_samples) * math.sqrt(2.0 * check_rho(rho)))


def level_schedule(
    n_samples: int,
    n_features: int,
    rho: float,
    *,
    m: int,
    alpha: float = 0.5,
    radius: float,
    sensitivity: str = "paper",
) -> LevelSchedule:
    """Per-level noise of RecDPSME (Algorithm 2, line 1, with T -> L and the sensitivity option).

    ``sigma_k = a R_k^2 sqrt(L) / (n sqrt(2 rho))`` with a = 4 (MS25) or sqrt(2) (tight).
    By the Gaussian mechanism in zCDP (BS16 Prop. 1.6) level k is
    ``Delta_k^2 / (2 sigma_k^2) = rho / L``-zCDP; levels compose to rho (BS16 Lemma 2.3).
    The upper triangle (diagonal included) of (1/n) sum x x^T has L2 sensitivity at most
    sqrt(2) R_k^2 / n <= 4 R_k^2 / n under replace-one when every row has norm <= R_k.
    """
    n = check_int(n_samples, "n_samples", low=2)
    d = check_int(n_features, "n_features", low=1)
    rho = check_rho(rho)
    alpha = check_alpha(alpha)
    m = check_m(m)
    radius = _check_positive(radius, "radius")
    a = sensitivity_coefficient(sensitivity)
    consts = recursion_constants(m)
    L, kappas = n_levels(radius, alpha, m)
    radii = tuple(math.sqrt(k) for k in kappas)
    sens = tuple(a * k / n for k in kappas)
    float_sensitivity(max(sens), n)  # range check of the largest
    _, kappa = float_sensitivity(min(sens), n)
    sigmas = tuple(kappa * level_sigma(r, n, L, rho, sensitivity) for r in radii)
    rhos = tuple((kappa * s) ** 2 / (2.0 * sg**2) for s, sg in zip(sens, sigmas))
    return LevelSchedule(
        n_samples=n,
        n_features=d,
        rho=rho,
        alpha=alpha,
        m=m,
        radius=radius,
        sensitivity=sensitivity,
        n_levels=L,
        kappas=kappas,
        radii=radii,
        sensitivities=sens,
        float_factor=kappa,
        sigmas=sigmas,
        rhos=rhos,
        thresholds=tuple(consts["psi"] * k for k in kappas),
        eta=consts["eta"],
        psi=consts["psi"],
        stop=consts["stop"],
    )


def one_shot_sigma(n_samples: int, rho: float, radius: float, sensitivity: str = "paper") -> float:
    """GUE entry scale of the one-shot Gaussian mechanism on (1/n) sum x x^T, ||x|| <= R:
    sigma = kappa(n) a R^2 / (n sqrt(2 rho)) (BS16 Prop. 1.6, with the float factor of
    :func:`~dpdist.privacy.float_rounding.gram_rounding_factor`); a one-level comparator."""
    rho = check_rho(rho)
    n = int(n_samples)
    sens, _ = float_sensitivity(sensitivity_coefficient(sensitivity) * _check_positive(radius, "radius") ** 2 / n, n)
    return sens / math.sqrt(2.0 * rho)


#: L2 sensitivity of a histogram under replace-one: one count goes down by 1, another up by 1.
HISTOGRAM_SENSITIVITY = math.sqrt(2.0)


def histogram_sigma(rho_step: float) -> float:
    """Noise scale of the Gaussian histograms of the private initialisation:
    sigma = Delta / sqrt(2 rho) with Delta = sqrt(2), i.e. sigma = 1 / sqrt(rho_step), added to
    *every* bin (BS16 Prop. 1.6: rho_step-zCDP)."""
    return HISTOGRAM_SENSITIVITY / math.sqrt(2.0 * check_rho(rho_step, "rho_step"))


def split_second_moment_rho(rho: float, init_fraction: float, *, private_radius: bool, private_lambda: bool) -> dict:
    """Budget split (the paper gives none): each private initialisation step gets rho *
    init_fraction / 2, the recursion the rest. Public radius / lambda_min cost 0 (and leave
    their share to the recursion). Default init_fraction = 0.1 gives 5% / 5% / 90%."""
    rho = check_rho(rho)
    f = check_probability(init_fraction, "init_fraction")
    share = rho * f / 2.0
    rho_r = share if private_radius else 0.0
    rho_l = share if private_lambda else 0.0
    return {"radius": rho_r, "lambda_min": rho_l, "main": rho - rho_r - rho_l}


# ---------------------------------------------------------------------------------------
# analysis helpers (MS25 Lemma 3.8, Claim 4.2): used by tests and benchmarks, never in noise scales
# ---------------------------------------------------------------------------------------


def lemma_3_8_beta_bound(radius: float, alpha: float, m: int) -> float:
    """beta <= alpha / (4 (1+alpha) log2(R^2 / ((1+alpha) m))) (Lemma 3.8; log base 2, which the proof's doubling buckets imply).

    ``radius`` in normalised units. Returns inf when the log is <= 0 (no constraint)."""
    alpha = check_alpha(alpha)
    arg = _check_positive(radius, "radius") ** 2 / ((1 + alpha) * check_m(m))
    if arg <= 1.0:
        return math.inf
    return alpha / (4.0 * (1.0 + alpha) * math.log2(arg))


def matrix_bernstein_m(m1: float, m2: float, alpha: float, beta: float, n_features: int) -> float:
    """Claim 4.2: m(alpha, beta) = max{2 M2 / alpha^2, 2 (1 + M1^2) / (3 alpha)} ln(4 d / beta)."""
    return max(2.0 * m2 / alpha**2, 2.0 * (1.0 + m1**2) / (3.0 * alpha)) * math.log(4.0 * n_features / beta)


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
