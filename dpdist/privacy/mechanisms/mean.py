"""The clipped-mean Gaussian mechanism on the lattice: a private mean to centre the data with.

When the mean is not public, the covariance and PCA estimators spend a stated share of their
budget here first, release ``mu_hat`` and compute their second moment around it
(:mod:`dpdist.algorithms._centering`). Rows are scaled to norm at most ``C`` (``clip``),
rounded to the lattice, kept when ``||m||_2^2 <= T`` (an exact integer test), summed exactly,
and ``mu_hat = (S + K) gamma / n`` with ``K`` the rounded Gaussian law.

Guarantee: (epsilon, delta)-DP and ``Delta^2 / (2 sigma^2)``-zCDP under replace-one
neighbours, with ``sigma`` the analytic Gaussian calibration at ``Delta = 2 C / n``.
Sensitivity: ``||S - S'||_2 <= 2 sqrt(T) = Delta_Z`` for the integers actually summed, with no
float error term. Deviations (only more noise): the lattice adds at most a factor
``1 + (sqrt(d) + 2) gamma / (2 C)``; sizes whose sums could leave exact integers are refused.
Residual: sampler exhaustion, below ``2**-1000`` a coordinate. Rows above the clip bias
``mu_hat`` toward 0 but never break the guarantee.

Proof: docs/privacy/mean.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpdist._validation import check_int, check_positive
from dpdist.exceptions import ValidationError
from dpdist.privacy.events import Event, GaussianEvent
from dpdist.privacy.budget import check_delta, check_epsilon
from dpdist.privacy.mechanisms.gaussian import gaussian_sigma
from dpdist.privacy.noise.lattice import Lattice, LatticeField, LatticeNoise
from dpdist.privacy.mechanisms.base import Mechanism
from dpdist.privacy.noise.streams import NoiseSeed

__all__ = ["PURPOSE_MEAN", "ClippedMeanMechanism", "MeanRelease"]

#: Purpose of the mean's noise.
PURPOSE_MEAN = "mean/gaussian"
#: Bits of the lattice below the noise scale (gamma = 2**(floor(log2 scale) - MEAN_LATTICE_BITS)).
MEAN_LATTICE_BITS = 20


@dataclass(frozen=True)
class MeanRelease:
    """``S -> mu_hat``: the float-safe release of the integer row sum ``S`` (shape (d,), or
    (T, d) for T independent releases: row t draws from stream t, a real fit is row 0).

    Returns ``(S + K) gamma / n``, with ``K`` the mechanism's lattice noise."""

    field: LatticeField
    n_samples: int

    def __call__(self, sums) -> np.ndarray:
        S = np.asarray(sums, dtype=np.int64)
        S2 = np.atleast_2d(S)
        K = self.field.units(np.arange(S2.shape[0]), np.arange(S2.shape[1]))
        units = S2.astype(np.float64) + K  # both integers below 2**53: exact
        out = self.field.noise.lattice.from_units(units) / self.n_samples
        return out.reshape(S.shape)


@dataclass(frozen=True)
class ClippedMeanMechanism(Mechanism):
    """The clipped-mean Gaussian mechanism on the lattice (docs/privacy/mean.md).

    Attributes
    ----------
    n_samples, n_features : int
    clip : float
        ``C``: the L2 radius rows are scaled to.
    epsilon, delta : float
        The budget the Gaussian calibration was asked for.
    sigma : float
        The calibration's standard deviation of the noise on the mean (data units).
    sensitivity : float
        ``Delta = 2 C / n``: L2 sensitivity of the exact clipped mean.
    rule : str
        Which Gaussian calibration was used.
    noise : LatticeNoise
        The rounded Gaussian law on the sum's lattice (scale ``s`` units).
    norm_bound_sq : int
        ``T``: the exact bound on a row's squared integer norm.
    sensitivity_units : float
        ``Delta_Z = 2 sqrt(T)``, rounded up.
    """

    NAME = "clipped-mean Gaussian mechanism (norm-clipped rows, integer sum on the lattice)"

    n_samples: int
    n_features: int
    clip: float
    epsilon: float
    delta: float
    sigma: float
    sensitivity: float
    rule: str
    noise: LatticeNoise
    norm_bound_sq: int
    sensitivity_units: float

    @classmethod
    def calibrate(cls, epsilon: float, delta: float, n_samples: int, n_features: int,
                  clip: float) -> "ClippedMeanMechanism":
        """The mechanism for a mean of ``n_samples`` rows of ``n_features`` coordinates,
        rows scaled to L2 norm ``clip``, at (epsilon, delta)."""
        epsilon, delta = check_epsilon(epsilon), check_delta(delta)
        n = check_int(n_samples, "n_samples", low=1)
        d = check_int(n_features, "n_features", low=1)
        C = check_positive(clip, "mean_clip")
        sens = 2.0 * C / n
        sigma, rule = gaussian_sigma(sens, epsilon, delta)
        mult = sigma / sens
        lat = Lattice.for_scale(mult * 2.0 * C, bits=MEAN_LATTICE_BITS)
        while not (d * (C / lat.gamma + 1.0) ** 2 < 2.0**62 and n * (C / lat.gamma + 1.0) < 2.0**52):
            lat = Lattice(lat.exponent + 1)
            if lat.gamma > C:
                raise ValidationError(
                    f"the private mean cannot be computed exactly for n_samples={n}, n_features={d}: "
                    "the integer row sums would overflow")
        T = math.ceil((C / lat.gamma + math.sqrt(d) / 2.0) ** 2)
        dz = math.nextafter(2.0 * math.sqrt(T), math.inf)
        s = math.nextafter(mult * dz, math.inf)
        if not s / dz >= mult:  # pragma: no cover - s is rounded up past mult * dz
            raise ValidationError("internal error: the lattice noise is below its calibration")
        return cls(n, d, float(C), epsilon, delta, float(sigma), sens, rule, LatticeNoise("gaussian", lat, s),
                   int(T), dz)

    @property
    def unit(self) -> float:
        """``gamma``: the lattice the rows are rounded to (data units)."""
        return self.noise.lattice.gamma

    @property
    def lattice_multiplier(self) -> float:
        """``s / Delta_Z``, at least the calibration's ``sigma / Delta``."""
        return self.noise.scale / self.sensitivity_units

    def event(self) -> Event:
        """The calibration's event ``GaussianEvent(sigma / Delta)`` (what ran is at least as
        private)."""
        return GaussianEvent(self.sigma / self.sensitivity)

    def laws(self) -> dict[str, LatticeNoise]:
        return {"gaussian": self.noise}

    def purposes(self) -> dict[str, str]:
        return {"gaussian": PURPOSE_MEAN}

    def noise_scales(self) -> dict[str, float]:
        """The noise standard deviation on the released mean (data units)."""
        return {"gaussian": self.noise.scale * self.unit / self.n_samples}

    def release(self, seed: NoiseSeed) -> MeanRelease:
        """The release ``S -> mu_hat`` (called inside the graph on the engine's sum)."""
        return MeanRelease(self.field("gaussian", seed), self.n_samples)

    def describe(self) -> dict:
        return {**super().describe(), "clip": self.clip, "epsilon": self.epsilon, "delta": self.delta,
                "rule": self.rule, "norm_bound_sq": self.norm_bound_sq}

    def error_bound(self, beta: float) -> float:
        """A bound on ``||mu_hat - mean of the clipped rows||_inf`` holding with probability
        >= 1 - beta: ``sd sqrt(2 log(2 d / beta))`` for the noise (Gaussian tail, union over the
        d coordinates) plus ``gamma / 2`` for the rounding (each row's coordinate moves by at
        most ``gamma / 2``, so their mean does too)."""
        sd = self.noise_scales()["gaussian"]
        return sd * math.sqrt(2.0 * math.log(2.0 * self.n_features / beta)) + self.unit / 2.0
