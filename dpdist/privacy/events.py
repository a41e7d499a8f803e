"""Typed privacy events: what ran, not what it cost.

An *event* says what ran, not what it cost (the accountant, :mod:`dpdist.privacy.accounting`,
not the mechanism, sets the price; modelled on ``dp_accounting.dp_event``): a Laplace mechanism
with noise multiplier ``scale / Delta_1``, a Gaussian mechanism with ``sigma / Delta_2``, a
rho-zCDP step, an (epsilon, delta)-DP step, and their adaptive compositions. Events are frozen,
hashable, and round-trip through JSON (:meth:`Event.to_dict`, :func:`event_from_dict`), so a
release can record its events and be re-accounted later, or composed across jobs, with a better
accountant.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from dpdist.exceptions import ValidationError

__all__ = [
    "BoundedRangeEvent",
    "ComposedEvent",
    "DiscreteGaussianEvent",
    "DiscreteLaplaceEvent",
    "EpsilonDeltaEvent",
    "Event",
    "GaussianEvent",
    "LaplaceEvent",
    "NoOpEvent",
    "NonPrivateEvent",
    "SelfComposedEvent",
    "ZCDPEvent",
    "event_from_dict",
    "labelled_events_from_list",
    "labelled_events_to_list",
]


def _positive(value: Any, name: str, *, allow_zero: bool = False, allow_inf: bool = False) -> float:
    if isinstance(value, bool):
        raise ValidationError(f"{name} must be a number, got {value!r}")
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValidationError(f"{name} must be a number, got {value!r}") from None
    if math.isnan(v) or v < 0 or (v == 0 and not allow_zero) or (math.isinf(v) and not allow_inf):
        raise ValidationError(f"{name} must be {'>= 0' if allow_zero else '> 0'} and finite, got {value!r}")
    return v


_REGISTRY: dict[str, type] = {}


def _register(name: str):
    def deco(cls):
        cls.TYPE = name
        _REGISTRY[name] = cls
        return cls

    return deco


@dataclass(frozen=True)
class Event:
    """Base of all events: frozen, with a JSON form ``{"type": ..., fields...}``."""

    TYPE = "event"

    def to_dict(self) -> dict:
        d: dict = {"type": self.TYPE}
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if isinstance(value, Event):
                value = value.to_dict()
            elif isinstance(value, tuple):
                value = [v.to_dict() for v in value]
            d[name] = value
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, d: dict | str) -> "Event":
        """Inverse of :meth:`to_dict` (also accepts a JSON string); on a subclass, the event
        must be of that type."""
        event = event_from_dict(d)
        if not isinstance(event, cls):
            raise ValidationError(f"{d!r} is a {type(event).__name__}, not a {cls.__name__}")
        return event


def event_from_dict(d: dict | str) -> Event:
    """Inverse of :meth:`Event.to_dict` (also accepts a JSON string).

    Keys other than ``type`` and the event's fields are ignored (a release's metadata adds
    ``step``, the event's label). Raises :class:`~dpdist.exceptions.ValidationError` for
    anything that is not an event."""
    if isinstance(d, str):
        try:
            d = json.loads(d)
        except ValueError:
            raise ValidationError(f"not a privacy event: {d!r}") from None
    if not isinstance(d, dict) or d.get("type") not in _REGISTRY:
        raise ValidationError(f"not a privacy event: {d!r}")
    cls = _REGISTRY[d["type"]]
    kwargs = {}
    for name in cls.__dataclass_fields__:
        if name not in d:
            continue
        value = d[name]
        if name == "event":
            value = event_from_dict(value)
        elif name == "events":
            if not isinstance(value, list):
                raise ValidationError(f"not a privacy event: {d!r}")
            value = tuple(event_from_dict(v) for v in value)
        kwargs[name] = value
    try:
        return cls(**kwargs)
    except TypeError:  # a required field is missing
        raise ValidationError(f"not a privacy event: {d!r}") from None


def labelled_events_to_list(events) -> list[dict]:
    """A release's ``(label, Event)`` pairs as JSON objects ``{"step": label, "type": ..., fields...}``
    (the form of a release's metadata and of the ledger's ``events`` column)."""
    out = []
    for item in events:
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], Event)):
            raise ValidationError(f"events must be (label, Event) pairs, got {item!r}")
        out.append({"step": str(item[0]), **item[1].to_dict()})
    return out


def labelled_events_from_list(items) -> tuple:
    """Inverse of :func:`labelled_events_to_list`: ``(label, Event)`` pairs."""
    if not isinstance(items, list):
        raise ValidationError(f"events must be a list of labelled events, got {items!r}")
    out = []
    for d in items:
        if not isinstance(d, dict) or not isinstance(d.get("step"), str):
            raise ValidationError(f"not a labelled privacy event: {d!r}")
        out.append((d["step"], event_from_dict(d)))
    return tuple(out)


@_register("no-op")
@dataclass(frozen=True)
class NoOpEvent(Event):
    """A step that reads no private data (a public radius): costs nothing."""


@_register("non-private")
@dataclass(frozen=True)
class NonPrivateEvent(Event):
    """A step without a privacy guarantee (a non-private baseline): infinite cost."""


@_register("laplace")
@dataclass(frozen=True)
class LaplaceEvent(Event):
    """Laplace mechanism (or its rounding to a lattice) with ``noise_multiplier = scale / Delta_1``."""

    noise_multiplier: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "noise_multiplier", _positive(self.noise_multiplier, "noise_multiplier"))


@_register("gaussian")
@dataclass(frozen=True)
class GaussianEvent(Event):
    """Gaussian mechanism (or its rounding to a lattice) with ``noise_multiplier = sigma / Delta_2``."""

    noise_multiplier: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "noise_multiplier", _positive(self.noise_multiplier, "noise_multiplier"))


@_register("discrete-laplace")
@dataclass(frozen=True)
class DiscreteLaplaceEvent(Event):
    """Discrete Laplace on Z (P(k) proportional to exp(-|k|/scale)) at integer L1 sensitivity."""

    scale: float
    sensitivity: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "scale", _positive(self.scale, "scale"))
        if isinstance(self.sensitivity, bool) or int(self.sensitivity) != self.sensitivity or self.sensitivity < 1:
            raise ValidationError(f"sensitivity must be an integer >= 1, got {self.sensitivity!r}")
        object.__setattr__(self, "sensitivity", int(self.sensitivity))


@_register("discrete-gaussian")
@dataclass(frozen=True)
class DiscreteGaussianEvent(Event):
    """Discrete Gaussian on Z^n (CKS20) with parameter ``sigma`` at L2 sensitivity ``sensitivity``."""

    sigma: float
    sensitivity: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "sigma", _positive(self.sigma, "sigma"))
        object.__setattr__(self, "sensitivity", _positive(self.sensitivity, "sensitivity"))


@_register("zcdp")
@dataclass(frozen=True)
class ZCDPEvent(Event):
    """A rho-zCDP step."""

    rho: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "rho", _positive(self.rho, "rho", allow_zero=True))


@_register("epsilon-delta")
@dataclass(frozen=True)
class EpsilonDeltaEvent(Event):
    """An (epsilon, delta)-DP step (delta = 0: pure DP; epsilon = 0: a delta-only residual)."""

    epsilon: float
    delta: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", _positive(self.epsilon, "epsilon", allow_zero=True))
        d = _positive(self.delta, "delta", allow_zero=True)
        if d >= 1:
            raise ValidationError(f"delta must lie in [0, 1), got {self.delta!r}")
        object.__setattr__(self, "delta", d)


@_register("bounded-range")
@dataclass(frozen=True)
class BoundedRangeEvent(Event):
    """An epsilon-bounded-range step (Durfee and Rogers 2019): for all neighbours the privacy
    loss ``log(p(y) / p'(y))`` takes values in an interval of width epsilon, as for one
    exponential mechanism whose utilities move within an interval of width ``epsilon``
    (weights ``exp(u)``). It is pure epsilon-DP (the loss interval contains 0, since both laws
    sum to 1) and ``epsilon^2 / 8``-zCDP (Cesar and Rogers 2021, "Bounding, concentrating, and
    truncating: unifying privacy loss composition for data analytics", ALT)."""

    epsilon: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", _positive(self.epsilon, "epsilon", allow_zero=True))


@_register("composed")
@dataclass(frozen=True)
class ComposedEvent(Event):
    """Adaptive composition of ``events`` (in order)."""

    events: tuple = field(default_factory=tuple)

    def __post_init__(self) -> None:
        events = tuple(self.events)
        if not all(isinstance(e, Event) for e in events):
            raise ValidationError(f"ComposedEvent takes events, got {events!r}")
        object.__setattr__(self, "events", events)


@_register("self-composed")
@dataclass(frozen=True)
class SelfComposedEvent(Event):
    """``count`` adaptive repetitions of ``event``."""

    event: Event
    count: int

    def __post_init__(self) -> None:
        if not isinstance(self.event, Event):
            raise ValidationError(f"SelfComposedEvent takes an event, got {self.event!r}")
        if isinstance(self.count, bool) or int(self.count) != self.count or self.count < 0:
            raise ValidationError(f"count must be an integer >= 0, got {self.count!r}")
        object.__setattr__(self, "count", int(self.count))
