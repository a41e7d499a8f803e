"""The ``Release``: what a mechanism released, what it cost, and how its noise was made.

Modelled on dp_accounting's frozen ``DpEvent``: a mechanism returns its event with its
output. A release is created once, after the noised values reached the client; nothing
mutates it afterwards.

What a release may carry: public parameters (given or derived from public values), noise
scales, noised values and post-processing of them. Nothing that depends on the data without
noise: no timings (they go to the ``logging`` logger ``"dpdist"`` at DEBUG), no counts of
affected rows, no test statistics beyond their pass/fail bits. The keys of ``parameters`` and
``noise_scales``, and the types of their values, are declared below
(:data:`PARAMETER_SCHEMA`, :data:`NOISE_SCALE_SCHEMA`); :class:`Release` refuses any other, so
a new entry is a decision taken here, where a privacy reviewer reads it, and not a side effect
of an algorithm. ``created`` is the UTC
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
from dpdist.exceptions import NotPrivateWarning, SeededReleaseWarning
from dpdist.privacy.accounting import Accountant
from dpdist.privacy.events import Event
from dpdist.privacy.zcdp import Guarantee

__all__ = [
    "NOISE_SCALE_SCHEMA",
    "PARAMETER_SCHEMA",
    "Release",
    "SEEDED_REASON",
    "check_schema",
    "to_jsonable",
    "warn_if_unsafe",
]

#: Why a seeded release is not private.
SEEDED_REASON = (
    "noise seeded from a user random_state: anyone with the seed can regenerate and subtract "
    "the noise (tests and reproduction only)"
)


_INT = (int,)
_REAL = (int, float)
_OPT_REAL = (int, float, type(None))
_STR = (str,)
_BOOL = (bool,)
_LIST = (list,)
#: A record of public values (a calibration, a budget split, the plan's utility verdict, ...).
_RECORD = (dict,)

#: Every key a release's ``parameters`` may hold, with the types its value may take (numpy
#: scalars count as the Python scalar, arrays and tuples as lists). Each is a parameter given
#: by the caller, derived from given parameters and the data's shape, or derived from values
#: released with noise (SecondMoment's private radius and lambda_min, FriendlyCore's test bits).
PARAMETER_SCHEMA: dict[str, tuple[type, ...]] = {
    # the data's shape and the run's policy
    "n_samples": _INT, "n_features": _INT, "on_nonfinite": _STR, "tile_size": _INT,
    # budgets and their split
    "epsilon": _REAL, "delta": _REAL, "rho": _REAL, "budget_split": _RECORD, "beta": _REAL,
    # model, clipping and calibration (public parameters and functions of them)
    "k": _INT, "selection": _STR, "sigma": _OPT_REAL, "clip": _REAL, "clip_rule": _STR, "clip_source": _STR,
    "row_clip": _REAL, "row_clip_rule": _STR,
    "calibration": _RECORD, "threshold": _REAL, "sensitivity": (int, float, str), "float_factor": _REAL,
    "gaussian_sigma": _REAL, "rule": _STR, "radius": _REAL, "max_subsets": _INT,
    "utility": _RECORD, "rejected_stage": _STR,
    # centring: how the rows were centred (assumed, a public mean, or a released one) and the
    # share of the budget the released mean took; the mean itself is a released value
    "centering": _RECORD,
    # SecondMoment (radius and lambda_min public, or released by its private initialisation)
    "m": _INT, "alpha": _REAL, "xi": _REAL, "init_fraction": _REAL, "psd": _BOOL, "radius_source": _STR,
    "lambda_source": _STR, "lambda_min": _REAL, "n_levels": _INT, "normalised_radius": _REAL,
    "kappas": _LIST, "level_radii": _LIST, "thresholds": _LIST, "subspace_dims": _LIST, "radius_grid": _LIST,
    "lambda_groups": _INT, "lambda_bucket_lower_edge": _REAL,
    # SpectralNorm / SparsePCA (FriendlyCore)
    "gap": _REAL, "n_batches": _INT, "batch_size_min": _INT, "batch_size_max": _INT, "batches": _STR,
    "tau": _REAL, "tau_rule": _STR, "threshold_sigma_bar": _REAL, "entry_clip": _REAL, "float_bounds": _RECORD,
    "stages": _RECORD,
    # subsample-and-aggregate (q_tilde is released with noise)
    "n_groups": _INT, "eta_b": _REAL, "C_N": _REAL, "q_tilde": _OPT_REAL, "privacy_min_samples": _REAL,
    "utility_min_samples": _REAL, "privacy_precondition_holds": _BOOL, "unsafe_no_privacy": _BOOL,
}

#: Every key a release's ``noise_scales`` may hold (``stage/name`` for staged mechanisms).
NOISE_SCALE_SCHEMA: dict[str, tuple[type, ...]] = {
    "laplace_select": _REAL, "laplace_release": _REAL, "gaussian_release": _REAL, "gaussian": _REAL, "sigma": _REAL,
    "gumbel_select": _REAL,
    "selection_gumbel_scale": _REAL, "block_gaussian_sigma": _REAL,
    "level_sigmas": _LIST, "level_sigmas_units": _STR, "radius_histogram_sigma": _REAL,
    "lambda_histogram_sigma": _REAL, "mean_gaussian": _REAL, "tlap_scale": _REAL, "tlap_support": _REAL, "masking_eta_b": _REAL,
    **{f"{stage}/{key}": _REAL for stage in ("norm", "pca") for key in (
        "count_test_scale", "count_test_bound", "weight_test_scale", "weight_test_bound", "sensitivity")},
    "norm/sigma": _REAL, "pca/sigma_priv": _REAL, "norm/rule": _STR, "pca/rule": _STR,
}


def _plain_type(value: Any) -> type:
    """The type :func:`check_schema` compares: numpy scalars as Python scalars, arrays and
    tuples as lists."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, (np.ndarray, tuple)):
        return list
    return type(value)


def check_schema(part: str, record: dict, schema: dict[str, tuple[type, ...]]) -> None:
    """Refuse (``TypeError``) a key of ``record`` not in ``schema``, or a value of a type the
    schema does not list for its key. ``part`` names the record in the message."""
    if not isinstance(record, dict):
        raise TypeError(f"Release.{part} must be a dict, got {type(record).__name__}")
    for key, value in record.items():
        allowed = schema.get(key)
        if allowed is None:
            raise TypeError(
                f"Release.{part} key {key!r} is not declared in dpdist.privacy.release "
                f"({'PARAMETER_SCHEMA' if part == 'parameters' else 'NOISE_SCALE_SCHEMA'})"
            )
        kind = _plain_type(value)
        if kind not in allowed:
            names = ", ".join("None" if t is type(None) else t.__name__ for t in allowed)
            raise TypeError(f"Release.{part}[{key!r}] must be of type {names}, got {kind.__name__}")


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
    privacy : Guarantee or None
        The guarantee spent (:data:`~dpdist.privacy.zcdp.Guarantee`); ``None`` for a
        non-private result (then ``private`` is False and the metadata says so).
    parameters : dict
        Public parameters of the run (n, d, k, clip, ...); every key and value type on
        :data:`PARAMETER_SCHEMA` (checked here).
    noise_scales : dict
        Every noise scale used, by name; every key and value type on
        :data:`NOISE_SCALE_SCHEMA` (checked here).
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
    privacy: Guarantee | None
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
        check_schema("parameters", self.parameters, PARAMETER_SCHEMA)
        check_schema("noise_scales", self.noise_scales, NOISE_SCALE_SCHEMA)
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
        category = SeededReleaseWarning if SEEDED_REASON in reasons else NotPrivateWarning
        warnings.warn(category(f"{release.mechanism}: {head}: {body}"), stacklevel=stacklevel)
    return release
