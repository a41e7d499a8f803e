"""The ledger's composition rule: may one more charge join a dataset's committed charges?

A dataset's total budget is either ``(epsilon, delta)`` or ``rho`` (zCDP), set by its owner.
The charges against it are the guarantees the jobs spent (or reserved): ``ApproxDP`` or
``ZCDP`` values. The rule, under replace-one neighbours for every charge:

- **(epsilon, delta) total.** The (epsilon, delta) charges compose by basic composition
  (Dwork & Roth 2014, Theorem 3.16: the epsilons and the deltas add). The zCDP charges
  compose first among themselves (Bun & Steinke 2016, Lemma 2.3: the rho's add) and their
  sum is converted *at the end*, once, at all the delta that the (epsilon, delta) charges
  leave: ``delta_z = delta - sum(delta_i)`` and ``epsilon_z`` the tight conversion of
  Canonne, Kamath & Steinke 2020 (Proposition 12; :func:`dpdist.privacy.zcdp.cks20_epsilon`,
  rounded up). The whole set is admissible when ``sum(epsilon_i) + epsilon_z <= epsilon``
  (and ``sum(delta_i) <= delta``; strictly below when a zCDP charge needs a positive
  ``delta_z``). The composed guarantee of all the jobs is then (epsilon, delta)-DP: basic
  composition of the (epsilon, delta) charges with the (epsilon_z, delta_z)-DP zCDP part.
- **rho total.** zCDP charges add; an (epsilon, 0) charge counts as epsilon^2 / 2 (BS16,
  Proposition 1.4); an (epsilon, delta) charge with delta > 0 cannot be expressed in zCDP
  and is refused as invalid for such a dataset.

Every new reservation re-checks the whole set (committed and reserved charges plus the new
one), so the rule only needs to be monotone, which it is: adding a charge never lowers the
epsilon or rho the set needs.

Arithmetic. Budgets and costs are the decimals the owner and the job wrote (floats are
read through their shortest ``repr``, so ``0.1`` is one tenth): sums are exact
:class:`decimal.Decimal` sums, and three charges of 0.1 fit a budget of 0.3. Only the zCDP
conversion is a float computation, and it is rounded up.

Basic composition is loose for many small charges; tighter accountants (privacy loss
distributions or Renyi DP over typed events) would need each charge's events, which is why
the ledger has an ``events`` column.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Iterable, Union

from dpdist.exceptions import ValidationError
from dpdist.privacy.budget import ApproxDP
from dpdist.privacy.zcdp import ZCDP, cks20_epsilon

__all__ = [
    "Cost",
    "Spent",
    "cost_from_dict",
    "cost_to_dict",
    "decimal_of",
    "epsilon_at",
    "spent",
    "within",
]

#: A charge or a total: an (epsilon, delta) guarantee or a zCDP rho.
Cost = Union[ApproxDP, ZCDP]

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


def cost_to_dict(cost: Cost) -> dict:
    """JSON form stored by the ledger (amounts as decimal strings: exact round trip)."""
    if isinstance(cost, ApproxDP):
        return {"type": "approx-dp", "epsilon": str(decimal_of(cost.epsilon)), "delta": str(decimal_of(cost.delta))}
    if isinstance(cost, ZCDP):
        return {"type": "zcdp", "rho": str(decimal_of(cost.rho))}
    raise ValidationError(f"a privacy cost must be ApproxDP or ZCDP, got {cost!r}")


def cost_from_dict(d: dict) -> Cost:
    """Inverse of :func:`cost_to_dict` (also accepts float amounts)."""
    kind = d.get("type")
    if kind == "approx-dp":
        return ApproxDP(float(d["epsilon"]), float(d["delta"]))
    if kind == "zcdp":
        return ZCDP(float(d["rho"]))
    raise ValidationError(f"unknown privacy cost type {kind!r} (expected 'approx-dp' or 'zcdp')")


def within(privacy: object, cost: Cost) -> bool:
    """Whether ``privacy`` (a release's stated guarantee) is of ``cost``'s kind and no larger."""
    if isinstance(cost, ApproxDP) and isinstance(privacy, ApproxDP):
        return privacy.epsilon <= cost.epsilon and privacy.delta <= cost.delta
    if isinstance(cost, ZCDP) and isinstance(privacy, ZCDP):
        return privacy.rho <= cost.rho
    return False


def epsilon_at(cost: Cost, delta: float) -> float:
    """The epsilon of ``cost`` at ``delta`` (a zCDP cost by the CKS20 conversion, rounded up)."""
    if isinstance(cost, ApproxDP):
        return cost.epsilon
    return cks20_epsilon(cost.rho, delta) if cost.rho > 0 else 0.0


@dataclass(frozen=True)
class Spent:
    """What a set of charges spends of a total, under the rule of this module.

    ``fits`` says whether the set is admissible. For an (epsilon, delta) total, ``epsilon``
    is the composed epsilon (the zCDP part converted at ``delta_for_zcdp``) and ``delta`` the
    (epsilon, delta) charges' delta sum; for a rho total, ``rho`` is the rho sum.
    """

    total: Cost
    fits: bool
    epsilon: Decimal | None = None
    delta: Decimal | None = None
    rho: Decimal | None = None
    zcdp_rho: Decimal = _ZERO
    delta_for_zcdp: Decimal | None = None
    reason: str = ""

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
        out["remaining"] = self.remaining()
        if self.reason:
            out["reason"] = self.reason
        return out


def spent(total: Cost, charges: Iterable[Cost]) -> Spent:
    """Compose ``charges`` against ``total`` (see the module docstring for the rule).

    Raises
    ------
    ValidationError
        An (epsilon, delta > 0) charge against a rho total (it has no zCDP form).
    """
    charges = list(charges)
    if isinstance(total, ZCDP):
        rho = _ZERO
        for c in charges:
            if isinstance(c, ZCDP):
                rho += decimal_of(c.rho)
            elif c.delta == 0:
                rho += decimal_of(c.epsilon) ** 2 / 2  # BS16 Prop. 1.4
            else:
                raise ValidationError(
                    f"an (epsilon, delta) charge with delta > 0 ({c.epsilon:g}, {c.delta:g}) cannot be "
                    "charged against a zCDP (rho) budget; set the dataset's budget as (epsilon, delta)"
                )
        limit = decimal_of(total.rho)
        fits = rho <= limit
        return Spent(total, fits, rho=rho, reason="" if fits else f"rho {rho} > budget rho {limit}")

    eps = sum((decimal_of(c.epsilon) for c in charges if isinstance(c, ApproxDP)), _ZERO)
    dlt = sum((decimal_of(c.delta) for c in charges if isinstance(c, ApproxDP)), _ZERO)
    rho = sum((decimal_of(c.rho) for c in charges if isinstance(c, ZCDP)), _ZERO)
    e_total, d_total = decimal_of(total.epsilon), decimal_of(total.delta)
    delta_z = d_total - dlt
    if dlt > d_total:
        return Spent(total, False, epsilon=eps, delta=dlt, zcdp_rho=rho,
                     reason=f"delta {dlt} > budget delta {d_total}")
    if rho > 0:
        if delta_z <= 0:
            return Spent(total, False, epsilon=eps, delta=dlt, zcdp_rho=rho, delta_for_zcdp=delta_z,
                         reason="no delta left to convert the zCDP charges at")
        eps_z = cks20_epsilon(float(rho), float(delta_z))
        eps += decimal_of(math.nextafter(eps_z, math.inf))  # rounded up
    fits = eps <= e_total
    return Spent(
        total, fits, epsilon=eps, delta=dlt, zcdp_rho=rho, delta_for_zcdp=delta_z if rho > 0 else None,
        reason="" if fits else f"epsilon {eps} > budget epsilon {e_total}",
    )
