"""Typed events as the ledger stores them: every event type round-trips exactly through JSON,
alone, nested and as a release's labelled list; anything else is refused by name."""

from __future__ import annotations

import json

import pytest

from dpdist.exceptions import ValidationError
from dpdist.privacy import events as ev
from dpdist.privacy.events import (
    BoundedRangeEvent,
    ComposedEvent,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    EpsilonDeltaEvent,
    Event,
    GaussianEvent,
    LaplaceEvent,
    NoOpEvent,
    NonPrivateEvent,
    SelfComposedEvent,
    ZCDPEvent,
    labelled_events_from_list,
    labelled_events_to_list,
)

# one instance of every event type, with floats that a decimal JSON text would round (1/3,
# 0.1, a subnormal-free tiny and a large value)
ONE_OF_EACH = [
    NoOpEvent(),
    NonPrivateEvent(),
    LaplaceEvent(1 / 3),
    GaussianEvent(154.74004560435844),
    DiscreteLaplaceEvent(0.1, 3),
    DiscreteGaussianEvent(7.3e12, 1e-300),
    ZCDPEvent(0.0),
    EpsilonDeltaEvent(0.5, 1e-9),
    BoundedRangeEvent(0.010324292632649884),
    ComposedEvent((GaussianEvent(2.0), ComposedEvent(()))),
    SelfComposedEvent(ComposedEvent((BoundedRangeEvent(0.25), LaplaceEvent(5.0))), 12),
]


def test_every_event_type_is_covered_here():
    assert {type(e).TYPE for e in ONE_OF_EACH} == set(ev._REGISTRY)


@pytest.mark.parametrize("event", ONE_OF_EACH, ids=lambda e: type(e).__name__)
def test_each_event_type_round_trips_exactly_through_json_text(event):
    text = json.dumps(event.to_dict())
    back = Event.from_dict(json.loads(text))
    assert back == event and type(back) is type(event) and hash(back) == hash(event)
    assert type(event).from_dict(text) == event  # the subclass reads its own type
    assert json.dumps(back.to_dict()) == text  # and writes the same text again


def test_a_subclass_reads_only_its_own_type():
    with pytest.raises(ValidationError, match="is a LaplaceEvent, not a GaussianEvent"):
        GaussianEvent.from_dict(LaplaceEvent(2.0).to_dict())


@pytest.mark.parametrize("bad", [
    {"type": "gaussian"},  # its field is missing
    {"type": "mystery"},
    {"type": "composed", "events": {"type": "no-op"}},
    "not json",
    [1, 2],
])
def test_what_is_not_an_event_is_refused_by_name(bad):
    with pytest.raises(ValidationError, match="not a privacy event"):
        Event.from_dict(bad)


def test_a_release_list_round_trips_with_its_labels():
    pairs = tuple((f"step {i}", e) for i, e in enumerate(ONE_OF_EACH))
    stored = json.loads(json.dumps(labelled_events_to_list(pairs)))
    assert stored[3] == {"step": "step 3", "type": "gaussian", "noise_multiplier": 154.74004560435844}
    assert labelled_events_from_list(stored) == pairs


@pytest.mark.parametrize("bad", [[GaussianEvent(1.0)], [("a", "gaussian")], [("a", GaussianEvent(1.0), 3)]])
def test_only_labelled_events_are_written(bad):
    with pytest.raises(ValidationError, match="must be \\(label, Event\\) pairs"):
        labelled_events_to_list(bad)


@pytest.mark.parametrize("bad", [{"step": "a"}, [{"type": "gaussian", "noise_multiplier": 1.0}],
                                 [{"step": 1, "type": "no-op"}], [{"kind": "laplace", "scale": 0.5}]])
def test_only_labelled_events_are_read(bad):
    with pytest.raises(ValidationError):
        labelled_events_from_list(bad)
