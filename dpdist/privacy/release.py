"""The ``Release``: what a mechanism released, what it cost, and how its noise was made.

Modelled on dp_accounting's frozen ``DpEvent``: a mechanism returns its event with its
output. A release is created once, after the noised values reached the client; nothing
mutates it afterwards.
"""

from __future__ import annotations

import datetime as _dt
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpdist._version import __version__

__all__ = ["Release", "to_jsonable"]


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
        False only for baselines run without privacy.
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
    version: str = __version__
    created: str = field(
        default_factory=lambda: _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        compare=False,
    )

    def metadata(self) -> dict:
        """JSON-compatible description of the release (everything but ``values``)."""
        return to_jsonable(
            {
                "mechanism": self.mechanism,
                "private": self.private,
                "privacy": self.privacy.to_dict() if self.privacy is not None else None,
                "parameters": self.parameters,
                "noise_scales": self.noise_scales,
                "seeding": self.seeding,
                "notes": list(self.notes),
                "status": self.status,
                "library": "dpdist",
                "version": self.version,
                "created": self.created,
            }
        )

    def to_json(self, **kwargs) -> str:
        return json.dumps(self.metadata(), **kwargs)
