"""The ``Release``: what a mechanism released, what it cost, and how its noise was made.

Modelled on dp_accounting's frozen ``DpEvent``: a mechanism returns its event with its
output. A release is created once, after the noised values reached the client; nothing
mutates it afterwards.

What a release may carry (issue 9): public parameters (given or derived from public values),
noise scales, noised values and post-processing of them. Nothing that depends on the data
without noise: no timings (they go to the ``logging`` logger ``"dpdist"`` at DEBUG), no counts
of affected rows, no test statistics beyond their pass/fail bits. ``created`` is the UTC
*date* only: a finer time would reveal how long the run took, which depends on the data.
A release whose noise was seeded from a user ``random_state`` is not private (anyone with the
seed regenerates and subtracts the noise): ``private`` is then False and
``not_private_reasons`` says why, whatever the mechanism.
"""

from __future__ import annotations

import datetime as _dt
import json
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpdist._version import __version__
from dpdist.exceptions import PrivacyWarning
from dpdist.privacy.accounting import Accountant, Event

__all__ = ["Release", "SEEDED_REASON", "to_jsonable", "warn_if_unsafe"]

#: Why a seeded release is not private.
SEEDED_REASON = (
    "noise seeded from a user random_state: anyone with the seed can regenerate and subtract "
    "the noise (tests and reproduction only)"
)


def to_jsonable(obj: Any) -> Any:
    """Convert numpy scalars/arrays and dataclass-likes into JSON-compatible values."""
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    if hasattr(obj, "to_dict"):
        return to_jsonable(obj.to_dict())
    if isinstance(obj, float) and not np.isfinite(obj):
        return str(obj)
    return obj


@dataclass(frozen=True)
class Release:
    """A released result and its privacy record.

    Attributes
    ----------
    mechanism : str
        Name of the mechanism (e.g. ``"PrivCov (COLT 2026, Algorithm 1)"``).
    privacy : object
        The guarantee spent, e.g. :class:`~dpdist.privacy.budget.ApproxDP`; ``None`` for a
        non-private result (then ``private`` is False and the metadata says so).
    parameters : dict
        Public parameters of the run (n, d, k, clip, ...).
    noise_scales : dict
        Every noise scale used, by name.
    values : dict
        The released values (arrays, sparse matrices). Not part of :meth:`metadata`.
    seeding : dict
        How the noise was seeded (``mode`` is ``"os-entropy"`` or ``"seeded"``) and by
        which generator.
    notes : tuple of str
        Caveats and deviations from the paper, in words.
    status : str
        ``"released"``, or ``"rejected"`` when a private test returned bottom (the budget
        still counts as spent).
    private : bool
        False for baselines run without privacy, for ``unsafe_no_privacy`` runs whose
        precondition failed, and for every seeded release (set here from ``seeding``).
        ``privacy`` still records the budget the mechanism spends.
    not_private_reasons : tuple of str
        Why ``private`` is False (empty for a private release).
    created : str
        The UTC date of the release (no time of day: see the module docstring).
    events : tuple of (str, Event)
        What ran, one labelled privacy event per mechanism step
        (:mod:`dpdist.privacy.accounting`), in order. ``privacy`` is the budget the fit was
        charged, certified by :func:`~dpdist.privacy.accounting.release_guarantee` to cover
        the events' composition; the events may account to less, and a release can be
        re-accounted or composed across jobs with another accountant (:meth:`accountant`).
    mechanisms : tuple of dict
        The public description of every mechanism object that drew noise for this release
        (name, lattice, noise laws and scales, purposes, event):
        :meth:`dpdist.privacy.mechanisms.Mechanism.describe`.
    """

    mechanism: str
    privacy: Any
    parameters: dict
    noise_scales: dict
    values: dict = field(default_factory=dict, compare=False)
    seeding: dict = field(default_factory=dict)
    notes: tuple = ()
    status: str = "released"
    private: bool = True
    not_private_reasons: tuple = ()
    version: str = __version__
    events: tuple = ()
    mechanisms: tuple = ()
    created: str = field(
        default_factory=lambda: _dt.datetime.now(_dt.timezone.utc).date().isoformat(),
        compare=False,
    )

    def __post_init__(self) -> None:
        reasons = tuple(self.not_private_reasons)
        if self.seeding.get("mode") == "seeded" and SEEDED_REASON not in reasons:
            reasons += (SEEDED_REASON,)
        if not self.private and not reasons:
            reasons = ("NOT PRIVATE: no differential-privacy guarantee",)
        object.__setattr__(self, "not_private_reasons", reasons)
        object.__setattr__(self, "private", bool(self.private) and not reasons)
        events = tuple(self.events)
        for item in events:
            if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], Event)):
                raise TypeError(f"Release.events holds (label, Event) pairs, got {item!r}")
        object.__setattr__(self, "events", events)
        object.__setattr__(self, "mechanisms", tuple(self.mechanisms))

    def accountant(self) -> Accountant:
        """An :class:`~dpdist.privacy.accounting.Accountant` holding this release's events."""
        acc = Accountant()
        for _, event in self.events:
            acc.compose(event)
        return acc

    def metadata(self) -> dict:
        """JSON-compatible description of the release (everything but ``values``)."""
        return to_jsonable(
            {
                "mechanism": self.mechanism,
                "private": self.private,
                "not_private_reasons": list(self.not_private_reasons),
                "privacy": self.privacy.to_dict() if self.privacy is not None else None,
                "parameters": self.parameters,
                "noise_scales": self.noise_scales,
                "seeding": self.seeding,
                "notes": list(self.notes),
                "events": [{"step": label, **event.to_dict()} for label, event in self.events],
                "mechanisms": list(self.mechanisms),
                "status": self.status,
                "library": "dpdist",
                "version": self.version,
                "created": self.created,
            }
        )

    def to_json(self, **kwargs) -> str:
        return json.dumps(self.metadata(), **kwargs)


def warn_if_unsafe(release: Release, *, extra: tuple[str, ...] = (), stacklevel: int = 3) -> Release:
    """Emit one :class:`~dpdist.exceptions.PrivacyWarning` when ``release`` is not private or
    ``extra`` names an unsafe mode in use; return the release. Called once per fit by every
    public entry point (never by a function another entry point calls)."""
    reasons = tuple(release.not_private_reasons) + tuple(r for r in extra if r not in release.not_private_reasons)
    if reasons:
        head = "NOT PRIVATE" if not release.private else "unsafe mode"
        body = "; ".join(r.removeprefix("NOT PRIVATE: ") for r in reasons)
        warnings.warn(PrivacyWarning(f"{release.mechanism}: {head}: {body}"), stacklevel=stacklevel)
    return release
