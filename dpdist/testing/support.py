"""The support test: outputs drawn under D that D' cannot produce, counted exactly.

Take two neighbouring values ``value`` and ``neighbour_value`` that differ by the sensitivity,
draw ``n`` outputs of a noise primitive under ``value``, and decide *exactly* for each whether
the primitive can produce it under ``neighbour_value``. A float-safe primitive gives 0 outside
its documented tail; a floating-point inverse-CDF primitive (Mironov 2012) fails.

A sampler is any object with

- ``draw(value, n, random_state) -> ndarray`` of ``n`` outputs under ``value``, and
- ``attainable(outputs, value) -> bool ndarray``: whether each output can be produced under
  ``value`` (an exact decision, not a statistical one),

and optionally ``tail(outputs, value) -> bool ndarray`` marking outputs in the documented
tail (impossible under the neighbour by design, paid for by the mechanism's delta).

Samplers provided: :class:`LatticeSampler` (the float-safe primitives of
:mod:`dpdist.privacy.noise.lattice`) and :class:`MechanismSampler` (a released quantity of a
mechanism object of :mod:`dpdist.privacy.mechanisms`, drawn by the mechanism's own noise
callable under its own purpose).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpdist.privacy.noise.lattice import LatticeField, LatticeNoise
from dpdist.privacy.noise.streams import NoiseSeed

__all__ = ["LatticeSampler", "MechanismSampler", "SupportResult", "log_ratios_at_points", "support_test"]

_PURPOSE = "testing/support"


@dataclass(frozen=True)
class SupportResult:
    """Outcome of :func:`support_test`.

    Attributes
    ----------
    n : int
        Outputs drawn under ``value``.
    impossible : int
        Outputs that cannot be produced under ``neighbour_value``.
    outside_tail : int
        Impossible outputs that lie outside the sampler's documented tail (must be 0).
    """

    n: int
    impossible: int
    outside_tail: int

    @property
    def fraction(self) -> float:
        return self.impossible / self.n if self.n else 0.0


def support_test(sampler, value: float, neighbour_value: float, n: int, random_state: int = 0) -> SupportResult:
    """Count the outputs drawn under ``value`` that ``sampler`` cannot produce under
    ``neighbour_value`` (exactly), and those of them outside the documented tail."""
    out = np.asarray(sampler.draw(float(value), int(n), int(random_state)))
    ok = np.asarray(sampler.attainable(out, float(neighbour_value)), dtype=bool)
    bad = ~ok
    tail = getattr(sampler, "tail", None)
    in_tail = np.asarray(tail(out, float(neighbour_value)), dtype=bool) if tail else np.zeros_like(bad)
    return SupportResult(int(out.size), int(bad.sum()), int((bad & ~in_tail).sum()))


@dataclass(frozen=True)
class LatticeSampler:
    """``value`` released by :class:`~dpdist.privacy.noise.lattice.LatticeField` with ``noise``."""

    noise: LatticeNoise

    def draw(self, value: float, n: int, random_state: int) -> np.ndarray:
        field = LatticeField(NoiseSeed(random_state, seeded=True), _PURPOSE, self.noise)
        return field(np.full(n, value), (0,))

    def attainable(self, outputs, value: float) -> np.ndarray:
        """On the lattice (finite, not -0.0) and, for the bounded law, within ``A`` units of
        ``rint(value / gamma)``. Every integer is a possible unbounded noise value."""
        lat = self.noise.lattice
        out = np.asarray(outputs, dtype=np.float64)
        ok = lat.contains(out)
        if self.noise.law == "bounded-laplace":
            z = np.ldexp(np.where(ok, out, 0.0), -lat.exponent)
            ok &= np.abs(z - lat.to_units(value)) <= self.noise.bound
        return ok

    def tail(self, outputs, value: float) -> np.ndarray:
        """The bounded law's designed tail: on the lattice but beyond ``A`` units of ``value``."""
        if self.noise.law != "bounded-laplace":
            return np.zeros(np.shape(outputs), dtype=bool)
        lat = self.noise.lattice
        out = np.asarray(outputs, dtype=np.float64)
        on = lat.contains(out)
        z = np.ldexp(np.where(on, out, 0.0), -lat.exponent)
        return on & (np.abs(z - lat.to_units(value)) > self.noise.bound)


@dataclass(frozen=True)
class MechanismSampler(LatticeSampler):
    """Role ``role`` of a mechanism object: outputs drawn by ``mechanism.field(role, seed)``
    (the callable the algorithm's tasks call), attainability on the role's law and lattice.

    Build it with :meth:`of`; ``n`` draws are positions 0 .. n-1 of the role's stream 0
    (independent entries of the same law as the algorithm's released entries)."""

    mechanism: object = None
    role: str = ""

    @classmethod
    def of(cls, mechanism, role: str) -> "MechanismSampler":
        return cls(mechanism.laws()[role], mechanism, role)

    def draw(self, value: float, n: int, random_state: int) -> np.ndarray:
        field = self.mechanism.field(self.role, NoiseSeed(random_state, seeded=True))
        return field(np.full(n, value), (0,))


def log_ratios_at_points(a: np.ndarray, b: np.ndarray, min_count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Empirical privacy loss at the points both samples hit at least ``min_count`` times.

    Returns ``(points, log(count_a / count_b), standard_error)``, the standard error of a log
    ratio of two independent Poisson counts being ``sqrt(1/count_a + 1/count_b)``.
    """
    pa, ca = np.unique(np.asarray(a), return_counts=True)
    pb, cb = np.unique(np.asarray(b), return_counts=True)
    common, ia, ib = np.intersect1d(pa, pb, return_indices=True)
    keep = (ca[ia] >= min_count) & (cb[ib] >= min_count)
    na, nb = ca[ia][keep].astype(float), cb[ib][keep].astype(float)
    scale = len(a) / len(b)
    return common[keep], np.log(na / (nb * scale)), np.sqrt(1.0 / na + 1.0 / nb)
