"""What every mechanism object shares: the lattice calibration and the description.

A *mechanism object* is a frozen, picklable value built by its calibration from validated
public parameters. It holds its noise laws (on their public lattices), its noise scales and
its purpose keys; it hands out the noise callables that tasks call inside the graph (each
keyed from the release's root :class:`~dpdist.privacy.noise.streams.NoiseSeed`, so the noise of an
entry is a pure function of ``(root, purpose, address)``); and it states what ran as a
typed privacy event (:mod:`dpdist.privacy.accounting`). The privacy argument of a mechanism
is written once, in its module; algorithms only wire the engine to it, releases record its
events and its :meth:`Mechanism.describe`, and the audits of :mod:`dpdist.testing` call it.

The lattice calibration (:func:`lattice_law`)
---------------------------------------------
A release of ``n`` coordinates ``v`` whose neighbours differ by at most ``Delta`` (in the
norm of the law: per coordinate for Laplace, L2 for the Gaussian), with the noise multiplier
``mult`` of its calibration (Laplace ``b = mult Delta``, Gaussian ``sigma = mult Delta``):

1. ``lattice = Lattice.for_scale(mult Delta)``: ``gamma = 2**(floor(log2(mult Delta)) -
   28)``, never finer than a mechanism's floor (``min_exponent``: the PrivCov scores and the
   ExpMech block keep their integers below 2**53);
2. ``Delta_Z = lattice.sensitivity_units(Delta, norm, coordinates)``: the sensitivity of the
   rounded values ``rint(v / gamma)`` (``floor(Delta/gamma) + 1`` per coordinate; ``Delta /
   gamma + sqrt(n)`` in L2), which covers the rounding (the sensitivity grows by one lattice unit);
3. the scale in lattice units is ``s = mult Delta_Z`` (rounded up), so the noise multiplier on
   the lattice, ``s / Delta_Z``, is at least ``mult``: the event, hence the budget, is the
   calibration's, and the noise actually added is larger by the factor ``Delta_Z gamma /
   Delta`` (at most ``1 + gamma/Delta``, resp. ``1 + sqrt(n) gamma / Delta``; about
   ``1 + mult 2**-28`` per coordinate).

The release of a coordinate is ``f(rint(v / gamma) + K)`` with ``K`` the exact integer law of
:mod:`dpdist.privacy.noise.lattice`: a fixed function of an integer, reachable from every
neighbour (unbounded laws) or from every neighbour within the bounded law's designed tail.
The only residual of the sampler is its exhaustion probability (below ``2**-1000`` per entry
for the unbounded laws), far below ``1e-15``, the most dpdist leaves out of a guarantee: it is stated,
not added to delta.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

from dpdist.exceptions import DpdistError
from dpdist.privacy.events import Event
from dpdist.privacy.noise.lattice import EXHAUSTION_DELTA_PER_ENTRY, Lattice, LatticeField, LatticeNoise
from dpdist.privacy.noise.streams import NoiseSeed

__all__ = ["Mechanism", "lattice_law", "residual_note"]


def lattice_law(
    law: str,
    sensitivity: float,
    multiplier: float,
    *,
    norm: str = "linf",
    coordinates: int = 1,
    bound_ratio: float | None = None,
    min_exponent: int | None = None,
    max_exponent: int | None = None,
) -> tuple[LatticeNoise, float]:
    """The float-safe law of a release (module docstring) and its sensitivity in lattice units.

    Parameters
    ----------
    law : {"laplace", "gaussian", "bounded-laplace"}
    sensitivity : float
        Delta (per coordinate for ``"linf"``, L1 or L2 over ``coordinates`` coordinates).
    multiplier : float
        The calibration's noise multiplier: scale / Delta (Laplace b / Delta, Gaussian
        sigma / Delta).
    bound_ratio : float, optional
        For ``"bounded-laplace"``: the calibration's support bound divided by its scale; the
        bound in lattice units is ``ceil(bound_ratio * s)``, so the support is never smaller
        relative to the scale than calibrated.
    min_exponent : int, optional
        The lattice exponent is at least this (a coarser lattice).
    max_exponent : int, optional
        The lattice exponent is at most this (a finer lattice; ``min_exponent`` wins).

    Returns
    -------
    (LatticeNoise, float)
        The law (scale ``s = multiplier * Delta_Z`` units, rounded up: ``s / Delta_Z >=
        multiplier`` is checked here, for every caller) and ``Delta_Z``.
    """
    sensitivity, multiplier = float(sensitivity), float(multiplier)
    if not (math.isfinite(sensitivity) and sensitivity > 0 and math.isfinite(multiplier) and multiplier > 0):
        raise ValueError(f"need a finite sensitivity > 0 and multiplier > 0, got {sensitivity!r}, {multiplier!r}")
    lat = Lattice.for_scale(multiplier * sensitivity)
    if max_exponent is not None and lat.exponent > int(max_exponent):
        lat = Lattice(int(max_exponent))
    if min_exponent is not None and lat.exponent < int(min_exponent):
        lat = Lattice(int(min_exponent))
    dz = lat.sensitivity_units(sensitivity, norm=norm, coordinates=coordinates)
    s = math.nextafter(multiplier * dz, math.inf)
    if not s / dz >= multiplier:  # pragma: no cover - s is rounded up past multiplier * dz
        raise DpdistError("internal error: the lattice noise is below its calibration")
    if law == "bounded-laplace":
        if bound_ratio is None or not bound_ratio > 0:
            raise ValueError("bounded-laplace needs bound_ratio > 0")
        return LatticeNoise(law, lat, s, float(math.ceil(bound_ratio * s))), dz
    return LatticeNoise(law, lat, s), dz


def residual_note(n_entries: int, noise: LatticeNoise) -> str:
    """The exhaustion residual of ``n_entries`` draws, in words (stated, never above 1e-15)."""
    bound = n_entries * noise.exhaustion_delta()
    if not bound <= 1e-15:  # pragma: no cover - the calibrations keep it astronomically small
        raise ValueError(f"the lattice sampler's exhaustion residual {bound:.3g} exceeds 1e-15")
    return (
        f"float-safe noise: {noise.law} law on the lattice 2**{noise.lattice.exponent}; sampler "
        f"exhaustion residual below {max(bound, EXHAUSTION_DELTA_PER_ENTRY):.3g} (not added to delta)"
    )


@dataclass(frozen=True)
class Mechanism:
    """Base of the mechanism objects of :mod:`dpdist.privacy.mechanisms`.

    Subclasses are frozen dataclasses. They define :attr:`NAME`, :meth:`event` (what ran,
    as a typed event), :meth:`laws` (role -> :class:`~dpdist.privacy.noise.lattice.LatticeNoise`),
    :meth:`purposes` (role -> the purpose string that keys the role's noise streams) and
    their noise callables (methods taking the release's ``NoiseSeed``; :meth:`field` is the
    lattice field of a role).
    """

    NAME: ClassVar[str] = "mechanism"

    def event(self) -> Event:  # pragma: no cover - abstract
        raise NotImplementedError

    def laws(self) -> dict[str, LatticeNoise]:
        """role -> the float-safe law of that role's noise."""
        return {}

    def purposes(self) -> dict[str, str]:  # pragma: no cover - abstract
        raise NotImplementedError

    def field(self, role: str, seed: NoiseSeed) -> LatticeField:
        """The noise callable of ``role``: a :class:`~dpdist.privacy.noise.lattice.LatticeField` of
        the role's law under the role's purpose, keyed from the release's root ``seed`` (what a
        task calls on a tile; the audits and the support test call the same object)."""
        return LatticeField(seed, self.purposes()[role], self.laws()[role])

    def noise_scales(self) -> dict[str, float]:
        """role -> the real noise scale (Laplace b, Gaussian sigma), lattice units times gamma."""
        return {role: law.scale * law.lattice.gamma for role, law in self.laws().items()}

    def describe(self) -> dict[str, Any]:
        """Public description for a release (no data: parameters, laws, purposes, event)."""
        return {
            "mechanism": self.NAME,
            "event": self.event().to_dict(),
            "noise": {role: law.to_dict() for role, law in self.laws().items()},
            "purposes": dict(self.purposes()),
        }
