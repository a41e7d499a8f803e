"""The ledger's composition rule: may one more charge join a dataset's committed charges?

A dataset's total budget is ``(epsilon, delta)`` or ``rho`` (zCDP), set by its owner. Each
charge against it has a stated guarantee (its cost: ``ApproxDP`` or ``ZCDP``) and, once a
release committed it, the release's typed events (what ran: :mod:`dpdist.privacy.events`).
Two bounds are computed, both valid (replace-one neighbours); a set is admissible when either
lies within the total, and the smaller one is reported:

- **Stated.** Every charge counts by its cost. (epsilon, delta) costs add (basic
  composition, Dwork & Roth 2014 Theorem 3.16); zCDP costs add (Bun & Steinke 2016 Lemma
  2.3) and their sum is converted once, at the delta the (epsilon, delta) costs leave
  (Canonne, Kamath & Steinke 2020 Proposition 12), then added to the epsilons (basic
  composition of the two groups). Against a rho total an (epsilon, 0) cost counts as
  ``epsilon^2 / 2`` (BS16 Proposition 1.4); an (epsilon, delta > 0) cost is refused.
- **Events.** Charges without events count as above. The events of the others, with the
  zCDP costs of the event-less charges, form one adaptive composition that the release
  accountant bounds (:meth:`dpdist.privacy.accounting.Accountant.epsilons`, our own rules:
  its smallest epsilon, e.g. Gaussian parts composed exactly as GDP, Dong, Roth & Su 2019
  Corollary 3.3), at the delta the event-less (epsilon, delta) costs leave; that group then
  adds to their epsilons (DR14 Theorem 3.16, which holds for interleaved groups too). Against
  a rho total the events' rho (:func:`~dpdist.privacy.accounting.zcdp_rho`) adds to the
  others' rho. A charge's stated guarantee and its events bound the same mechanism, so a
  charge without events (an open reservation, a charge spent without a release, an entry
  written before events were stored) only ever counts by its cost.

The proof that this check is sound and monotone (adding a charge never lowers what a set
needs, so re-checking the whole set at every reservation is enough) is in
``docs/privacy/ledger_composition.md``.

Arithmetic: the budget check is exact :class:`decimal.Decimal` arithmetic over the decimals
the owner and the jobs wrote (floats read through their shortest ``repr``: three charges of
0.1 fit 0.3). Every value computed in floats (a conversion, the accountant's epsilon) is
rounded up, and a delta handed to a float computation is rounded down.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Iterable

from dpdist.exceptions import ValidationError
from dpdist.privacy.accounting import Accountant, UnsupportedEventError, pure_dp_rho, pure_epsilon
from dpdist.privacy.budget import ApproxDP
from dpdist.privacy.events import Event, ZCDPEvent
from dpdist.privacy.zcdp import ZCDP, Guarantee, cks20_epsilon

__all__ = [
    "Charge",
    "Spent",
    "cost_from_dict",
    "cost_to_dict",
    "decimal_of",
    "epsilon_at",
    "spent",
    "within",
]

_ZERO = Decimal(0)


def decimal_of(x: float | int | str | Decimal) -> Decimal:
    """The decimal a user wrote: floats through their shortest repr (0.1 -> Decimal('0.1'))."""
    if isinstance(x, Decimal):
        return x
    if isinstance(x, bool):
        raise ValidationError(f"a privacy amount must be a number, got {x!r}")
    if isinstance(x, float):
        if not math.isfinite(x):
            raise ValidationError(f"a privacy amount must be finite, got {x!r}")
        return Decimal(repr(x))
    return Decimal(x)


def _up(x: float) -> Decimal:
    """A float result as a decimal no smaller than it, one float step above."""
    return decimal_of(math.nextafter(x, math.inf))


def _float_up(d: Decimal) -> float:
    """The smallest float no smaller than ``d``."""
    f = float(d)
    return f if Decimal(f) >= d else math.nextafter(f, math.inf)


def _float_down(d: Decimal) -> float:
    """The largest float no larger than ``d``."""
    f = float(d)
    return f if Decimal(f) <= d else math.nextafter(f, -math.inf)


def cost_to_dict(cost: Guarantee) -> dict:
    """JSON form stored by the ledger (amounts as decimal strings: exact round trip)."""
    if isinstance(cost, ApproxDP):
        return {"type": "approx-dp", "epsilon": str(decimal_of(cost.epsilon)), "delta": str(decimal_of(cost.delta))}
    if isinstance(cost, ZCDP):
        return {"type": "zcdp", "rho": str(decimal_of(cost.rho))}
    raise ValidationError(f"a privacy cost must be ApproxDP or ZCDP, got {cost!r}")


def cost_from_dict(d: dict) -> Guarantee:
    """Inverse of :func:`cost_to_dict` (also accepts float amounts)."""
    kind = d.get("type")
    if kind == "approx-dp":
        return ApproxDP(float(d["epsilon"]), float(d["delta"]))
    if kind == "zcdp":
        return ZCDP(float(d["rho"]))
    raise ValidationError(f"unknown privacy cost type {kind!r} (expected 'approx-dp' or 'zcdp')")


def within(privacy: Guarantee | None, cost: Guarantee) -> bool:
    """Whether ``privacy`` (a release's stated guarantee) is of ``cost``'s kind and no larger."""
    if isinstance(cost, ApproxDP) and isinstance(privacy, ApproxDP):
        return privacy.epsilon <= cost.epsilon and privacy.delta <= cost.delta
    if isinstance(cost, ZCDP) and isinstance(privacy, ZCDP):
        return privacy.rho <= cost.rho
    return False


def epsilon_at(cost: Guarantee, delta: float) -> float:
    """The epsilon of ``cost`` at ``delta`` (a zCDP cost by the CKS20 conversion, rounded up)."""
    if isinstance(cost, ApproxDP):
        return cost.epsilon
    return cks20_epsilon(cost.rho, delta) if cost.rho > 0 else 0.0


@dataclass(frozen=True)
class Charge:
    """One charge: its stated guarantee and, when a release committed it, the release's
    ``(label, Event)`` pairs (empty: the charge counts by its stated guarantee alone)."""

    cost: Guarantee
    events: tuple = ()


@dataclass(frozen=True)
class Spent:
    """What a set of charges spends of a total, under the rule of this module.

    ``fits`` says whether the set is admissible. For an (epsilon, delta) total, ``epsilon``
    is the composed epsilon and ``delta`` the delta sum of the (epsilon, delta) charges that
    count by their stated guarantee (the rest of the delta is what the zCDP part, converted
    at ``delta_for_zcdp``, or the events' composition, accounted at ``delta_for_events``,
    uses); for a rho total, ``rho`` is the composed rho. ``accounted_by`` names the
    accountant's rule when the events gave the smaller bound (empty: the stated one).
    """

    total: Guarantee
    fits: bool
    epsilon: Decimal | None = None
    delta: Decimal | None = None
    rho: Decimal | None = None
    zcdp_rho: Decimal = _ZERO
    delta_for_zcdp: Decimal | None = None
    reason: str = ""
    accounted_by: str = ""
    delta_for_events: Decimal | None = None

    def remaining(self) -> dict:
        """The budget left, as decimal strings (never negative)."""
        if isinstance(self.total, ApproxDP):
            eps_left = max(_ZERO, decimal_of(self.total.epsilon) - (self.epsilon or _ZERO))
            delta_left = max(_ZERO, decimal_of(self.total.delta) - (self.delta or _ZERO))
            return {"type": "approx-dp", "epsilon": str(eps_left), "delta": str(delta_left)}
        return {"type": "zcdp", "rho": str(max(_ZERO, decimal_of(self.total.rho) - (self.rho or _ZERO)))}

    def to_dict(self) -> dict:
        out: dict = {"fits": self.fits, "total": cost_to_dict(self.total)}
        if isinstance(self.total, ApproxDP):
            out["spent"] = {"type": "approx-dp", "epsilon": str(self.epsilon), "delta": str(self.delta)}
            if self.zcdp_rho:
                out["spent"]["zcdp_rho"] = str(self.zcdp_rho)
                out["spent"]["zcdp_converted_at_delta"] = str(self.delta_for_zcdp)
        else:
            out["spent"] = {"type": "zcdp", "rho": str(self.rho)}
        if self.accounted_by:
            out["spent"]["events_accounted_by"] = self.accounted_by
            if self.delta_for_events is not None:
                out["spent"]["events_accounted_at_delta"] = str(self.delta_for_events)
        out["remaining"] = self.remaining()
        if self.reason:
            out["reason"] = self.reason
        return out


def _charges(charges: Iterable[Guarantee | Charge]) -> list[Charge]:
    return [c if isinstance(c, Charge) else Charge(c) for c in charges]


def spent(total: Guarantee, charges: Iterable[Guarantee | Charge]) -> Spent:
    """Compose ``charges`` (costs, or :class:`Charge` with events) against ``total`` (see the
    module docstring for the rule): the smaller of the stated and the events' bound.

    Raises
    ------
    ValidationError
        An (epsilon, delta > 0) charge against a rho total (it has no zCDP form).
    """
    charges = _charges(charges)
    stated = _stated(total, [c.cost for c in charges])
    if not any(c.events for c in charges):
        return stated
    by_events = _by_events(total, charges)
    if by_events is None:
        return stated
    if by_events.fits != stated.fits:  # the set is admissible when either valid bound is within the total
        return by_events if by_events.fits else stated
    if not stated.fits and not stated.reason.startswith(("epsilon", "rho")):
        return stated  # refused for its delta: its epsilon leaves out the zCDP part, not comparable
    return by_events if _amount(by_events) < _amount(stated) else stated


def _amount(s: Spent) -> Decimal:
    return s.rho if isinstance(s.total, ZCDP) else s.epsilon


def _stated(total: Guarantee, costs: list[Guarantee]) -> Spent:
    """Every charge by its stated guarantee."""
    if isinstance(total, ZCDP):
        rho = _ZERO
        for c in costs:
            if isinstance(c, ZCDP):
                rho += decimal_of(c.rho)
            elif c.delta == 0:
                rho += pure_dp_rho(decimal_of(c.epsilon))
            else:
                raise ValidationError(
                    f"an (epsilon, delta) charge with delta > 0 ({c.epsilon:g}, {c.delta:g}) cannot be "
                    "charged against a zCDP (rho) budget; set the dataset's budget as (epsilon, delta)"
                )
        limit = decimal_of(total.rho)
        fits = rho <= limit
        return Spent(total, fits, rho=rho, reason="" if fits else f"rho {rho} > budget rho {limit}")

    eps = sum((decimal_of(c.epsilon) for c in costs if isinstance(c, ApproxDP)), _ZERO)
    dlt = sum((decimal_of(c.delta) for c in costs if isinstance(c, ApproxDP)), _ZERO)
    rho = sum((decimal_of(c.rho) for c in costs if isinstance(c, ZCDP)), _ZERO)
    e_total, d_total = decimal_of(total.epsilon), decimal_of(total.delta)
    delta_z = d_total - dlt
    if dlt > d_total:
        return Spent(total, False, epsilon=eps, delta=dlt, zcdp_rho=rho,
                     reason=f"delta {dlt} > budget delta {d_total}")
    if rho > 0:
        if delta_z <= 0:
            return Spent(total, False, epsilon=eps, delta=dlt, zcdp_rho=rho, delta_for_zcdp=delta_z,
                         reason="no delta left to convert the zCDP charges at")
        eps += _up(cks20_epsilon(_float_up(rho), _float_down(delta_z)))  # rho up, delta down: never less
    fits = eps <= e_total
    return Spent(
        total, fits, epsilon=eps, delta=dlt, zcdp_rho=rho, delta_for_zcdp=delta_z if rho > 0 else None,
        reason="" if fits else f"epsilon {eps} > budget epsilon {e_total}",
    )


def _by_events(total: Guarantee, charges: list[Charge]) -> Spent | None:
    """The events' bound, or None when the accountant covers no rule for the events (then
    the stated bound alone decides)."""
    plain = [c.cost for c in charges if not c.events]
    events: list[Event] = [e for c in charges for _, e in c.events]
    if isinstance(total, ZCDP):
        rho_events = _accountant(events).rho()
        if rho_events is None or not math.isfinite(rho_events):
            return None
        rho = _stated(total, plain).rho + _up(rho_events)
        limit = decimal_of(total.rho)
        fits = rho <= limit
        return Spent(total, fits, rho=rho, accounted_by="zcdp",
                     reason="" if fits else f"rho {rho} > budget rho {limit}")

    eps = sum((decimal_of(c.epsilon) for c in plain if isinstance(c, ApproxDP)), _ZERO)
    dlt = sum((decimal_of(c.delta) for c in plain if isinstance(c, ApproxDP)), _ZERO)
    rho = sum((decimal_of(c.rho) for c in plain if isinstance(c, ZCDP)), _ZERO)
    e_total, d_total = decimal_of(total.epsilon), decimal_of(total.delta)
    rest = d_total - dlt
    if rest < 0:
        return None
    group = events + ([ZCDPEvent(_float_up(rho))] if rho > 0 else [])
    found = _event_epsilons(group, rest)
    if not found:
        return None
    method, eps_group = min(found.items(), key=lambda kv: kv[1])
    eps += _up(eps_group)
    fits = eps <= e_total
    return Spent(total, fits, epsilon=eps, delta=dlt, accounted_by=method, delta_for_events=rest,
                 reason="" if fits else f"epsilon {eps} > budget epsilon {e_total}")


def _accountant(events: list[Event]) -> Accountant:
    acc = Accountant()
    for e in events:
        acc.compose(e)
    return acc


def _event_epsilons(group: list[Event], delta: Decimal) -> dict[str, float]:
    """The accountant's epsilons of ``group`` at ``delta`` (rounded down to a float), by each
    of its own rules that applies; at ``delta = 0`` only pure composition applies."""
    acc = _accountant(group)
    if delta == 0:
        eps = pure_epsilon(acc.event)
        return {} if eps is None else {"pure": eps}
    try:
        found = acc.epsilons(_float_down(delta), external=False)
    except (UnsupportedEventError, ValidationError):
        return {}
    return {k: v for k, v in found.items() if math.isfinite(v)}
