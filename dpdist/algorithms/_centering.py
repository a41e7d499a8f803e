"""How the covariance and PCA estimators centre the data (``assume_centered``, ``mean``).

A covariance is ``E[(x - mu)(x - mu)^T]``. Following scikit-learn's
``EmpiricalCovariance(assume_centered=False)``, every covariance and PCA estimator centres by
default:

- ``assume_centered=True``: the data are taken as mean-zero and the second moment
  ``(1/n) sum x x^T`` is estimated (the whole budget goes to it);
- ``mean=`` a public vector: the data are centred at it (recorded as public; it costs nothing
  and is taken as the true mean in the error bound);
- otherwise the mean is released privately first by the clipped-mean Gaussian mechanism
  (:mod:`dpdist.privacy.mechanisms.mean`) with the share ``mean_fraction`` of the budget
  and rows scaled to L2 norm ``mean_clip``; the second stage runs with the rest of the budget.

Why the second stage's guarantee is unchanged: once released, ``mu_hat`` is public (a
post-processing of a DP output); the second stage applies the fixed per-row map ``x -> x -
mu_hat`` before its own clipping, and a per-row map keeps replace-one neighbours neighbours, so
the second stage's sensitivity analysis (clip, float factor, lattice) holds verbatim for the
centred rows. How the two stages compose (``composition``, chosen by the estimator from what
its second stage is):

- ``"basic"`` (DR14 Thm 3.16): the mean gets ``(f epsilon, f delta)``, the second stage the
  rest; each stage's events are certified by the accountant within its share, and the shares
  add up to the budget charged.
- ``"gdp"`` (the second stage is one Gaussian mechanism): both stages are Gaussian
  mechanisms, and Gaussian mechanisms compose exactly (Dong, Roth and Su 2019, Corollary 3.3:
  ``mu_1``- and ``mu_2``-GDP compose to ``sqrt(mu_1^2 + mu_2^2)``-GDP, and ``mu``-GDP is exactly
  the analytic Gaussian mechanism's (epsilon, delta) profile). With ``mu`` the largest GDP
  parameter within (epsilon, delta), the mean gets ``mu_1 = mu sqrt(f)`` and the second stage
  ``mu_2 = mu sqrt(1 - f)``: the share f is a share of ``mu^2``, i.e. of rho.
- ``"zcdp"`` (the second stage is accounted in zCDP): rho from (epsilon, delta) by the exact
  conversion of Canonne, Kamath and Steinke 2020; the mean gets ``f rho``, the second stage
  ``(1 - f) rho`` (zCDP composes by adding rho, Bun-Steinke 2016 Lemma 2.3).

With ``"gdp"`` and ``"zcdp"`` each stage is calibrated at its stand-alone ``(epsilon_i, delta)``,
the (epsilon, delta) profile of its share at the full delta (for a Gaussian share this gives back
its multiplier exactly, up to an upward nudge of 1e-9); these epsilon_i do not add up to
epsilon: the accountant re-derives the whole (epsilon, delta) from both stages' events
together, and the release is refused if it is above the budget charged. Where a share is so
small that it is (0, delta)-DP alone (epsilon of the order of delta), no stand-alone epsilon
describes it and the split falls back to ``"basic"`` (:meth:`Centering.split`), whose shares
add up and are checked as such.
What the clip must now cover is ``x - mu_hat`` (the centred rows), and ``mean_clip`` the norms
``||x||`` of the raw rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import dask
import numpy as np

from dpdist._validation import check_bool, check_positive, check_probability
from dpdist.algorithms._constraints import Boolean, Custom, Real
from dpdist.engine.mean import clipped_row_sum
from dpdist.engine.runtime import compute
from dpdist.exceptions import ValidationError
from dpdist.privacy.accounting import gaussian_epsilon, release_guarantee
from dpdist.privacy.budget import ApproxDP
from dpdist.privacy.gaussian_calibration import gaussian_mu
from dpdist.privacy.mechanisms.base import residual_note
from dpdist.privacy.mechanisms.mean import ClippedMeanMechanism
from dpdist.privacy.zcdp import cks20_epsilon, cks20_rho

__all__ = [
    "CENTERING_CONSTRAINTS", "COMPOSITIONS", "DEFAULT_MEAN_FRACTION", "Centering", "centering_of", "centre",
    "centre_data", "centring_error", "check_centering", "check_mean", "compose_stages", "mean_mechanism", "mean_notes", "mean_offset_bounds", "release_mean",
    "stage_guarantee",
]

#: Default share of the budget spent on the private mean.
DEFAULT_MEAN_FRACTION = 0.1
#: How the mean and the second stage compose (module docstring).
COMPOSITIONS = ("basic", "gdp", "zcdp")


@dataclass(frozen=True)
class Centering:
    """Validated centring parameters.

    ``mode`` is ``"assume-centered"``, ``"public-mean"`` or ``"private-mean"``."""

    mode: str
    mean: np.ndarray | None = None
    mean_fraction: float | None = None
    mean_clip: float | None = None

    @property
    def private(self) -> bool:
        return self.mode == "private-mean"

    def split(self, epsilon: float, delta: float, composition: str = "basic") -> tuple[ApproxDP | None, ApproxDP]:
        """(the mean's share, the second stage's share) of (epsilon, delta); the mean's is None
        unless it is released privately. ``composition`` (module docstring): ``"basic"`` (the
        shares add up to (epsilon, delta)), ``"gdp"`` or ``"zcdp"`` (each share is that stage's
        stand-alone (epsilon_i, delta))."""
        if not self.private:
            return None, ApproxDP(epsilon, delta)
        alone = self._alone(epsilon, delta, composition)
        if alone is None:
            f = self.mean_fraction
            return ApproxDP(epsilon * f, delta * f), ApproxDP(epsilon * (1.0 - f), delta * (1.0 - f))
        return ApproxDP(alone[0], delta), ApproxDP(alone[1], delta)

    def composition(self, epsilon: float, delta: float, composition: str) -> str:
        """The composition :meth:`split` uses: ``composition``, or ``"basic"`` where a composed
        share would be (0, delta)-DP alone (an epsilon of the order of delta)."""
        return composition if self._alone(epsilon, delta, composition) is not None else "basic"

    def _alone(self, epsilon: float, delta: float, composition: str) -> tuple[float, float] | None:
        """The stand-alone epsilons of the mean's and the second stage's shares at the full
        delta, or None for ``"basic"`` and where one would be 0 (no stand-alone epsilon
        describes such a share; the (epsilon, delta) split does)."""
        if composition not in COMPOSITIONS:
            raise ValidationError(f"composition must be one of {COMPOSITIONS}, got {composition!r}")
        if composition == "basic" or not self.private:
            return None
        f = self.mean_fraction
        if composition == "gdp":
            mu = gaussian_mu(epsilon, delta)
            alone = gaussian_epsilon(mu * math.sqrt(f), delta), gaussian_epsilon(mu * math.sqrt(1.0 - f), delta)
        else:
            rho = cks20_rho(epsilon, delta)
            alone = gaussian_epsilon(math.sqrt(2.0 * f * rho), delta), cks20_epsilon((1.0 - f) * rho, delta)
        return alone if min(alone) > 0.0 else None

    def mean_clip_for(self, n_features: int, clip: float | None, radius: float | None = None) -> float:
        """The mean's L2 radius: ``mean_clip``; when not given, the second stage's L2 bound
        ``radius`` on the rows, or ``clip * sqrt(d)`` (rows inside its box ``[-clip, clip]^d``)."""
        if self.mean_clip is not None:
            return self.mean_clip
        if radius is not None:
            return float(radius)
        if clip is None:
            raise ValidationError("the private mean needs mean_clip (an L2 bound on the rows' norms) or clip")
        return float(clip) * math.sqrt(int(n_features))

    def record(self, mech: ClippedMeanMechanism | None = None, composition: str | None = None) -> dict:
        """What a release records under ``parameters["centering"]``: public values only (a
        public mean, the private mean's share, clip and noise scale; the released mean itself is
        a value, ``values["mean"]``)."""
        if self.mode == "assume-centered":
            return {"mode": self.mode, "estimate": "second moment (1/n) sum x x^T, data taken as mean-zero"}
        out = {"mode": self.mode, "estimate": "covariance (1/n) sum (x - mean)(x - mean)^T"}
        if self.mode == "public-mean":
            out["mean"] = [float(v) for v in self.mean]
            out["mean_source"] = "public: given by the user, costs no budget"
        else:
            out["mean_source"] = "released privately (clipped-mean Gaussian mechanism)"
            out["mean_fraction"] = self.mean_fraction
            if composition is not None:
                out["composition"] = composition
            if mech is not None:
                out["mean_clip"] = mech.clip
                out["mean_budget"] = {"epsilon": mech.epsilon, "delta": mech.delta}
                out["mean_noise_scale"] = mech.noise_scales()["gaussian"]
        return out


def check_mean(mean: Any, name: str = "mean") -> np.ndarray | None:
    """A public ``mean``: None, or a non-empty vector of finite numbers (a float64 copy)."""
    if mean is None:
        return None
    try:
        arr = np.asarray(mean, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValidationError(f"{name} must be a vector of numbers, got {mean!r}") from None
    if arr.ndim != 1 or arr.size == 0 or not np.isfinite(arr).all():
        raise ValidationError(f"{name} must be a non-empty vector of finite numbers, got shape {arr.shape}")
    return arr.copy()


#: The centring parameters' rules, in the order they are checked (a constraints table's entries).
CENTERING_CONSTRAINTS = {
    "assume_centered": Boolean(),
    "mean_clip": Real(low=0.0, allow_none=True),
    "mean_fraction": Real(low=0.0, high=1.0),
    "mean": Custom(check_mean),
}


def centering_of(params: Any, n_features: int | None = None) -> Centering:
    """The :class:`Centering` of validated centring parameters (``params`` has the entries of
    :data:`CENTERING_CONSTRAINTS`, checked), with the rules between them and the data's width."""
    if params.assume_centered:
        if params.mean is not None:
            raise ValidationError("give either assume_centered=True or mean=, not both")
        return Centering("assume-centered")
    if params.mean is not None:
        if n_features is not None and params.mean.size != int(n_features):
            raise ValidationError(f"mean has {params.mean.size} entries but the data have {n_features} features")
        return Centering("public-mean", mean=params.mean)
    # an estimator without a private mean (a NOT PRIVATE one) has no mean_fraction / mean_clip
    return Centering("private-mean", mean_fraction=getattr(params, "mean_fraction", DEFAULT_MEAN_FRACTION),
                     mean_clip=getattr(params, "mean_clip", None))


def check_centering(assume_centered: Any, mean: Any, mean_fraction: Any, mean_clip: Any,
                    n_features: int | None = None) -> Centering:
    """Validate the centring parameters (and the mean's length when ``n_features`` is known)."""
    assume_centered = check_bool(assume_centered, "assume_centered")
    mean_clip = check_positive(mean_clip, "mean_clip", allow_none=True)
    f = check_probability(mean_fraction, "mean_fraction")
    if assume_centered:
        if mean is not None:
            raise ValidationError("give either assume_centered=True or mean=, not both")
        return Centering("assume-centered")
    if mean is not None:
        arr = check_mean(mean)
        if n_features is not None and arr.size != int(n_features):
            raise ValidationError(f"mean has {arr.size} entries but the data have {n_features} features")
        return Centering("public-mean", mean=arr)
    return Centering("private-mean", mean_fraction=f, mean_clip=mean_clip)


def mean_mechanism(centering: Centering, share: ApproxDP, n_samples: int, n_features: int,
                   clip: float | None, *, radius: float | None = None) -> ClippedMeanMechanism:
    """The private mean's mechanism at its share of the budget (``radius``: the second stage's
    L2 bound on the rows, the default ``mean_clip`` when it has one)."""
    return ClippedMeanMechanism.calibrate(share.epsilon, share.delta, n_samples, n_features,
                                          centering.mean_clip_for(n_features, clip, radius))


def _noised_mean(total, all_finite, release):
    """Inside the graph: the released mean, or None when a guard found a non-finite value."""
    if all_finite is not None and not bool(all_finite):
        return None
    return release(total)


def release_mean(Xg, all_finite, mech: ClippedMeanMechanism, seed, *, scheduler, progress, timeout) -> np.ndarray:
    """Compute the clipped row sum of ``Xg`` (the data after the non-finite policy) and release
    the mean once; only the noised mean leaves the graph. ``all_finite`` is the ``"raise"``
    guard (None for ``"zero"``): when False, nothing is released."""
    total = clipped_row_sum(Xg, mech.clip, mech.unit, mech.norm_bound_sq)
    out = dask.delayed(_noised_mean)(total, all_finite, mech.release(seed))
    (mu,) = compute(out, scheduler=scheduler, progress=progress, timeout=timeout)
    if mu is None:
        raise ValidationError(
            "X contains NaN or infinite values; nothing was released. Clean the data or pass "
            "on_nonfinite='zero' to replace such rows by zero rows"
        )
    return np.asarray(mu, dtype=np.float64)


def centre(Xg, mu: np.ndarray | None):
    """``Xg - mu`` lazily (``Xg`` unchanged when ``mu`` is None)."""
    if mu is None:
        return Xg
    return Xg - np.asarray(mu, dtype=np.float64)


def compose_stages(budget: ApproxDP, stages: list[tuple[list, ApproxDP]], composition: str = "basic") -> ApproxDP:
    """The guarantee of a two-stage release: each stage's events certified by the accountant
    within its share (:func:`~dpdist.privacy.accounting.release_guarantee`), and either the
    shares adding up to at most ``budget`` (``"basic"`` composition) or, for any other
    composition (``"gdp"``, ``"zcdp"``, ``"mixed"``), all the stages' events together certified
    within ``budget``. Returns ``budget``."""
    from dpdist.exceptions import DpdistError

    eps = dl = 0.0
    for events, share in stages:
        release_guarantee(events, budget=share)
        eps, dl = eps + share.epsilon, dl + share.delta
    within = eps <= budget.epsilon * (1 + 1e-12) and dl <= budget.delta * (1 + 1e-12)
    if composition != "basic" and not within:
        # the shares do not add up (each is a stage's stand-alone guarantee): the composition
        # is certified from all the stages' events together
        return release_guarantee([e for events, _ in stages for e in events], budget=budget)
    if not within:
        raise DpdistError(f"internal error: the stages' shares ({eps}, {dl}) exceed the budget {budget}")
    return budget


def mean_notes(mech: ClippedMeanMechanism) -> list[str]:
    """The notes a release with a private mean carries."""
    return [
        f"centred at a privately released mean (alone ({mech.epsilon:.6g}, {mech.delta:.6g})-DP; rows "
        f"scaled to L2 norm {mech.clip:.6g} for the mean); the second stage's clip covers x - mean",
        "mean: " + residual_note(mech.n_features, mech.noise),
    ]


def centring_error(centering: Centering, mech: ClippedMeanMechanism | None, sigma: float, n_samples: int,
                   n_features: int, beta: float) -> float:
    """Bound on the largest entry of ``S(mu_hat) - S(mu)``, ``S(c) = (1/n) sum (x - c)(x - c)^T``,
    with probability >= 1 - beta, when no row is clipped in the mean's stage.

    ``S(mu_hat) - S(mu) = b b^T - a a^T`` with ``a = x_bar - mu`` (sampling) and ``b = mu_hat -
    x_bar`` (the mechanism's noise and rounding), so its largest entry is at most ``max(||b||_inf^2,
    ||a||_inf^2)``; ``||b||_inf`` is bounded by the mechanism (:meth:`ClippedMeanMechanism.error_bound`
    at beta/2) and ``||a||_inf <= sigma sqrt(2 log(4 d / beta) / n)`` for sigma-sub-Gaussian rows
    (at beta/2). Zero when the data are taken as centred or centred at a public mean (taken as
    the true mean)."""
    if not centering.private or mech is None:
        return 0.0
    b = mech.error_bound(beta / 2.0)
    a = float(sigma) * math.sqrt(2.0 * math.log(4.0 * n_features / beta) / n_samples)
    return max(b * b, a * a)


def mean_offset_bounds(centering: Centering, mech: ClippedMeanMechanism | None, sigma: float, n_samples: int,
                       n_features: int, beta: float) -> tuple[float, float]:
    """Bounds ``(||w||_inf, ||w||_2)`` on the offset ``w = mu - mu_hat`` between the population
    mean and the mean the data were centred at, together with probability >= 1 - beta, when no
    row is clipped in the mean's stage.

    ``w = (mu - x_bar) + (x_bar - mu_hat)``. The sampling part: ``||x_bar - mu||_inf <= sigma
    sqrt(2 log(4 d / beta) / n)`` for sigma-sub-Gaussian rows (at beta/2, as in
    :func:`centring_error`), and ``||.||_2 <= sqrt(d) ||.||_inf``. The mechanism's part is its
    Gaussian noise of standard deviation ``sd`` per coordinate, plus the rounding to the
    lattice ``gamma`` (at most ``gamma / 2`` per coordinate for the rows' mean and ``gamma /
    (2 n)`` for the noise): coordinatewise :meth:`ClippedMeanMechanism.error_bound` at beta/4,
    and in L2 norm ``sd (sqrt(d) + sqrt(2 log(4 / beta)))`` at beta/4 (Gaussian concentration of
    the 1-Lipschitz norm, whose mean is at most ``sqrt(d)``). Both zero when the data are taken
    as centred or centred at a public mean (taken as the true mean)."""
    if not centering.private or mech is None:
        return 0.0, 0.0
    d, n = int(n_features), int(n_samples)
    sampling = float(sigma) * math.sqrt(2.0 * math.log(4.0 * d / beta) / n)
    rounding = mech.unit * (0.5 + 0.5 / n)
    sd = mech.noise_scales()["gaussian"]
    w_inf = mech.error_bound(beta / 4.0) + mech.unit * 0.5 / n + sampling
    w_2 = sd * (math.sqrt(d) + math.sqrt(2.0 * math.log(4.0 / beta))) + math.sqrt(d) * (rounding + sampling)
    return w_inf, min(w_2, math.sqrt(d) * w_inf)


def centre_data(Xg, all_finite, centering: Centering, mean_mech: ClippedMeanMechanism | None, seed, *,
                scheduler, progress=None, timeout) -> tuple[Any, np.ndarray | None]:
    """The rows the second stage reads, ``Xg - mean``, and the mean: the public one, or the
    private one released here (first stage) when ``mean_mech`` is given; ``Xg`` unchanged with
    ``assume_centered``."""
    mu = centering.mean
    if mean_mech is not None:
        mu = release_mean(Xg, all_finite, mean_mech, seed, scheduler=scheduler, progress=progress, timeout=timeout)
    return centre(Xg, mu), mu


def stage_guarantee(budget: ApproxDP, main_events: list, main_share: ApproxDP,
                    mean_mech: ClippedMeanMechanism | None, mean_share: ApproxDP | None,
                    composition: str = "basic") -> ApproxDP:
    """The release's guarantee: the main stage's events certified within the budget, or, with a
    private mean, the stages composed as ``composition`` says (:func:`compose_stages`)."""
    if mean_mech is None:
        return release_guarantee(main_events, budget=budget)
    return compose_stages(budget, [([mean_mech.event()], mean_share), (main_events, main_share)], composition)
