"""The accountant that turns typed privacy events (:mod:`dpdist.privacy.events`) into budgets.

Rules (all under replace-one neighbours; each is a theorem, cited)
------------------------------------------------------------------
- Laplace, noise multiplier ``m``: ``1/m``-DP (Dwork-McSherry-Nissim-Smith 2006).
- Discrete Laplace on Z, scale ``t``, integer sensitivity ``Delta``: ``Delta/t``-DP (CKS20
  Section 2; Ghosh-Roughgarden-Sundararajan 2012).
- Gaussian, noise multiplier ``m``: ``1/(2 m^2)``-zCDP (Bun-Steinke 2016, Prop. 1.6).
- Discrete Gaussian on Z^n, ``sigma``, L2 sensitivity ``Delta``: ``Delta^2/(2 sigma^2)``-zCDP,
  the continuous Gaussian's bound (CKS20 Theorem 4 in one dimension, Section 5 for vectors).
- epsilon-DP implies ``epsilon^2/2``-zCDP (BS16 Prop. 1.4); rho's add under composition (BS16
  Lemma 2.3); rho-zCDP to (epsilon, delta): BS16 Prop. 1.3 or the tight CKS20 Prop. 12
  (:mod:`dpdist.privacy.zcdp`).
- Basic composition: epsilons and deltas add (DR14 Thm 3.16). Advanced composition of ``k``
  (epsilon_0, delta_0)-DP steps with slack ``delta'``: ``sqrt(2k ln(1/delta')) epsilon_0 +
  k epsilon_0 (e^epsilon_0 - 1)``, ``k delta_0 + delta'`` (DR14 Thm 3.20).
- Gaussian differential privacy (Dong, Roth & Su 2019): a Gaussian mechanism with noise
  multiplier ``m`` is exactly ``mu = 1/m``-GDP; the adaptive composition of ``mu_i``-GDP steps
  is ``sqrt(sum mu_i^2)``-GDP (DRS19 Corollary 3.3, exact: no loss); ``mu``-GDP is
  ``(epsilon, delta(epsilon))``-DP for every epsilon with ``delta(epsilon) = Phi(-epsilon/mu +
  mu/2) - e^epsilon Phi(-epsilon/mu - mu/2)`` (DRS19 Corollary 2.13; Balle-Wang 2018 Theorem 8),
  which is the exact privacy profile of the Gaussian mechanism (:func:`gaussian_epsilon`).
- Mixed composition (:func:`mixed_composition`): the pure and (epsilon, delta) parts compose
  by basic composition with the Gaussian parts taken together as one GDP mechanism (or with
  the Gaussian and zCDP parts together as one zCDP mechanism), converted at the delta left
  over by the (epsilon, delta) parts (DR14 Thm 3.16 applied to the three groups).
- Privacy loss distributions (PLD) and Renyi DP (RDP) of Laplace, Gaussian and zCDP parts:
  ``dp_accounting`` (Google's maintained library; imported lazily, it takes 1 to 10 s to
  import).

The :class:`Accountant` composes events and reports ``(epsilon, delta)`` by the tightest
method that applies (each method gives a valid guarantee, so their minimum is one too), and
rho when every part is zCDP.

Which rules a release uses (:func:`release_guarantee`): our own (pure, zCDP, GDP, basic,
mixed), never dp_accounting. For the parts dpdist's mechanisms produce they are exact or
tighter than dp_accounting's: a composition of Gaussian mechanisms is exactly a Gaussian
mechanism (GDP), whose profile PLD only approximates from above; a zCDP part is a zCDP
bound, which the CKS20 conversion turns into epsilon more tightly than RDP's conversion;
and importing dp_accounting would cost every fit (every CLI process) 1 to 10 s.
dp_accounting stays available through :class:`Accountant` (``external=True``) to re-account
releases, for example Laplace-heavy compositions across jobs, where its PLD is tighter.

The ledger composes the charges of a dataset with this accountant too (our own rules), over
the events its committed releases recorded (:mod:`dpdist.ops.composition`).
"""

from __future__ import annotations

import math
from typing import Iterable

from dpdist.exceptions import ValidationError
from dpdist.privacy.budget import ApproxDP, check_delta
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
)
from dpdist.privacy.zcdp import bun_steinke_epsilon, cks20_epsilon

__all__ = [
    "Accountant",
    "UnsupportedEventError",
    "advanced_composition",
    "advanced_composition_epsilon",
    "basic_composition",
    "gaussian_epsilon",
    "gaussian_profile_delta",
    "gdp_mu",
    "mixed_composition",
    "pure_dp_rho",
    "pure_epsilon",
    "release_guarantee",
    "to_dp_accounting",
    "zcdp_rho",
]

METHODS = ("auto", "pure", "zcdp-cks20", "zcdp-bun-steinke", "gdp", "basic", "mixed", "pld", "rdp")


class UnsupportedEventError(ValidationError):
    """An event that an accounting rule does not cover (the message names the event)."""


# --------------------------------------------------------------------------------------
# our own proven rules
# --------------------------------------------------------------------------------------


def _leaves(event: Event, times: int = 1) -> Iterable[tuple[Event, int]]:
    """``(leaf, multiplicity)`` pairs of a composition tree."""
    if isinstance(event, ComposedEvent):
        for e in event.events:
            yield from _leaves(e, times)
    elif isinstance(event, SelfComposedEvent):
        yield from _leaves(event.event, times * event.count)
    else:
        yield event, times


def pure_epsilon(event: Event) -> float | None:
    """The pure-DP epsilon by basic composition, or None when some part is not pure DP."""
    total = []
    for leaf, k in _leaves(event):
        if isinstance(leaf, NoOpEvent):
            continue
        if isinstance(leaf, LaplaceEvent):
            total.append(k / leaf.noise_multiplier)
        elif isinstance(leaf, DiscreteLaplaceEvent):
            total.append(k * leaf.sensitivity / leaf.scale)
        elif isinstance(leaf, EpsilonDeltaEvent) and leaf.delta == 0:
            total.append(k * leaf.epsilon)
        elif isinstance(leaf, BoundedRangeEvent):
            total.append(k * leaf.epsilon)
        else:
            return None
    return math.fsum(total)


def pure_dp_rho(epsilon):
    """The rho of an epsilon-DP step: ``epsilon^2 / 2`` (BS16 Prop. 1.4). Exact for a
    :class:`~decimal.Decimal` epsilon (the ledger's budget arithmetic), rounded for a float."""
    return epsilon**2 / 2


def zcdp_rho(event: Event) -> float | None:
    """rho by zCDP composition (BS16), or None when some part has no zCDP bound."""
    total = []
    for leaf, k in _leaves(event):
        if isinstance(leaf, NoOpEvent):
            continue
        if isinstance(leaf, GaussianEvent):
            total.append(k / (2.0 * leaf.noise_multiplier**2))
        elif isinstance(leaf, DiscreteGaussianEvent):
            total.append(k * leaf.sensitivity**2 / (2.0 * leaf.sigma**2))
        elif isinstance(leaf, ZCDPEvent):
            total.append(k * leaf.rho)
        elif isinstance(leaf, BoundedRangeEvent):
            total.append(k * leaf.epsilon**2 / 8.0)  # Cesar-Rogers 2021
        else:
            eps = pure_epsilon(leaf)
            if eps is None:
                return None
            total.append(k * pure_dp_rho(eps))
    return math.fsum(total)


def basic_composition(event: Event) -> ApproxDP:
    """(sum of epsilons, sum of deltas) over pure and (epsilon, delta) parts (DR14 Thm 3.16)."""
    eps, dlt = [], []
    for leaf, k in _leaves(event):
        if isinstance(leaf, EpsilonDeltaEvent):
            eps.append(k * leaf.epsilon)
            dlt.append(k * leaf.delta)
            continue
        e = pure_epsilon(leaf)
        if e is None:
            raise UnsupportedEventError(f"basic composition needs (epsilon, delta) parts, got {leaf!r}")
        eps.append(k * e)
    return _approx(math.fsum(eps), math.fsum(dlt))


def _approx(epsilon: float, delta: float) -> ApproxDP:
    """ApproxDP allowing epsilon = 0 (a pure delta residual) by flooring at the tiniest float."""
    return ApproxDP(max(epsilon, 5e-324), delta)


def advanced_composition(event: SelfComposedEvent, delta_slack: float) -> ApproxDP:
    """DR14 Theorem 3.20 for ``count`` repetitions of an (epsilon_0, delta_0) step.

    ``epsilon = sqrt(2 k ln(1/delta')) epsilon_0 + k epsilon_0 (e^{epsilon_0} - 1)``,
    ``delta = k delta_0 + delta'``. The inner event may be any pure or (epsilon, delta) event.
    """
    if not isinstance(event, SelfComposedEvent):
        raise UnsupportedEventError(f"advanced composition applies to SelfComposedEvent, got {event!r}")
    delta_slack = check_delta(delta_slack, "delta_slack")
    inner = basic_composition(event.event)
    k = event.count
    return _approx(advanced_composition_epsilon(inner.epsilon, k, delta_slack), k * inner.delta + delta_slack)


def gdp_mu(event: Event) -> float | None:
    """mu of the composition when every part is a Gaussian mechanism (or a no-op), else None.

    A Gaussian mechanism with noise multiplier m is exactly ``1/m``-GDP, and the adaptive
    composition of ``mu_i``-GDP steps is ``sqrt(sum mu_i^2)``-GDP (DRS19 Corollary 3.3).
    """
    total = []
    for leaf, k in _leaves(event):
        if isinstance(leaf, NoOpEvent):
            continue
        if not isinstance(leaf, GaussianEvent):
            return None
        total.append(k / leaf.noise_multiplier**2)
    return math.sqrt(math.fsum(total))


def gaussian_profile_delta(mu: float, epsilon: float, x: float, y: float) -> float:
    """``Phi(x) - e^eps Phi(y)``, the delta at ``epsilon`` of a Gaussian mechanism with
    ``mu = Delta / sigma``, where ``x = mu/2 - eps/mu`` and ``y = -mu/2 - eps/mu`` (Balle-Wang
    2018 Theorem 8; DRS19 Cor. 2.13), as the caller computed them.

    The direct form loses ``Phi(x) / delta`` in relative precision where the two terms nearly
    cancel, which happens for a small mu and a small epsilon (both terms near ``Phi(-eps/mu)``,
    delta far below it). For ``mu <= 1e-3`` and ``epsilon <= 1e-2`` it is therefore written
    ``(Phi(x) - Phi(y)) - (e^eps - 1) Phi(y)`` with ``Phi(x) - Phi(y)``, the integral of phi over
    ``[y, x]`` (width ``h = mu``, midpoint ``m = -eps/mu``), expanded at the midpoint:
    ``phi(m) (h + h^3 (m^2 - 1) / 24 + h^5 (m^4 - 6 m^2 + 3) / 1920)``; the terms left out are
    below ``1e-16`` of the sum there (``h^6``, ``h^6 m^6 = (mu eps)^6 / mu^0`` scaled by 1/322560).
    Each part is then accurate to a few ulps, and the difference loses at most their ratio to
    delta. Elsewhere the direct form is used unchanged.
    """
    from scipy import special

    if mu <= 1e-3 and epsilon <= 1e-2:
        m = -epsilon / mu
        h2, m2 = mu * mu, m * m
        phi = math.exp(-0.5 * m2) / math.sqrt(2.0 * math.pi)
        inner = mu * (1.0 + h2 * (m2 - 1.0) / 24.0 + h2 * h2 * (m2 * m2 - 6.0 * m2 + 3.0) / 1920.0)
        return phi * inner - math.expm1(epsilon) * float(special.ndtr(y))
    return float(special.ndtr(x) - math.exp(epsilon + special.log_ndtr(y)))


def _gdp_delta(mu: float, epsilon: float) -> float:
    """delta(epsilon) of mu-GDP: Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2) (DRS19 Cor. 2.13)."""
    return gaussian_profile_delta(mu, epsilon, -epsilon / mu + mu / 2.0, -epsilon / mu - mu / 2.0)


def gaussian_epsilon(mu: float, delta: float) -> float:
    """Smallest epsilon at which a mu-GDP mechanism is (epsilon, delta)-DP (exact profile).

    ``delta(epsilon)`` decreases in epsilon; the root is bracketed by the Bun-Steinke conversion
    of ``rho = mu^2 / 2`` (a valid, looser epsilon) and nudged up by one part in 1e12 so that
    rounding never reports less than the exact value.
    """
    from scipy import optimize

    delta = check_delta(delta)
    mu = float(mu)
    if not (math.isfinite(mu) and mu >= 0):
        raise ValidationError(f"mu must be finite and >= 0, got {mu!r}")
    if mu == 0.0 or _gdp_delta(mu, 0.0) <= delta:
        return 0.0
    hi = bun_steinke_epsilon(mu * mu / 2.0, delta)
    while _gdp_delta(mu, hi) > delta:  # pragma: no cover - BS is an upper bound
        hi *= 2.0
    # relative tolerance only: epsilon may be far below 1e-15 for a tiny mu
    eps = optimize.brentq(lambda e: _gdp_delta(mu, e) - delta, 0.0, hi, xtol=1e-300, rtol=1e-14, maxiter=500)
    return min(hi, eps * (1.0 + 1e-12))


def mixed_composition(event: Event, delta: float) -> ApproxDP | None:
    """(epsilon, delta)-DP of a mixed composition by basic composition of three groups.

    The pure parts and the (epsilon_i, delta_i) parts add (DR14 Thm 3.16); the Gaussian parts
    form one GDP mechanism (:func:`gdp_mu`) and the zCDP parts (with the Gaussian parts, when
    there are zCDP parts) one zCDP mechanism; that group is converted at the delta left,
    ``delta - sum delta_i`` (:func:`gaussian_epsilon` or the CKS20 conversion, the smaller).
    Returns None when some part is covered by no rule or no delta is left for the group.
    """
    delta = check_delta(delta)
    eps, dlt, gauss, zparts = [], [], [], []
    for leaf, k in _leaves(event):
        if isinstance(leaf, NoOpEvent):
            continue
        if isinstance(leaf, EpsilonDeltaEvent):
            eps.append(k * leaf.epsilon)
            dlt.append(k * leaf.delta)
        elif isinstance(leaf, GaussianEvent):
            gauss.append(k / leaf.noise_multiplier**2)
        elif isinstance(leaf, (ZCDPEvent, DiscreteGaussianEvent, BoundedRangeEvent)):
            zparts.append(k * zcdp_rho(leaf))
        else:
            e = pure_epsilon(leaf)
            if e is None:
                return None
            eps.append(k * e)
    used = math.fsum(dlt)
    if gauss or zparts:
        rest = delta - used
        if not rest > 0:
            return None
        options = []
        if not zparts:
            options.append(gaussian_epsilon(math.sqrt(math.fsum(gauss)), rest))
        rho = math.fsum(zparts) + math.fsum(gauss) / 2.0
        options.append(cks20_epsilon(rho, rest) if rho > 0 else 0.0)
        eps.append(min(options))
    elif used > delta:
        return None
    return _approx(math.fsum(eps), delta)


# --------------------------------------------------------------------------------------
# dp_accounting (PLD, RDP)
# --------------------------------------------------------------------------------------


def to_dp_accounting(event: Event):
    """The equivalent ``dp_accounting`` event (discrete Gaussian parts become their zCDP bound).

    Raises :class:`UnsupportedEventError` for parts dp_accounting has no event for.
    """
    import dp_accounting as dpa

    if isinstance(event, NoOpEvent):
        return dpa.NoOpDpEvent()
    if isinstance(event, NonPrivateEvent):
        return dpa.NonPrivateDpEvent()
    if isinstance(event, LaplaceEvent):
        return dpa.LaplaceDpEvent(event.noise_multiplier)
    if isinstance(event, GaussianEvent):
        return dpa.GaussianDpEvent(event.noise_multiplier)
    if isinstance(event, ZCDPEvent):
        return dpa.ZCDpEvent(event.rho)
    if isinstance(event, DiscreteGaussianEvent):
        return dpa.ZCDpEvent(event.sensitivity**2 / (2.0 * event.sigma**2))
    if isinstance(event, BoundedRangeEvent):
        return dpa.ZCDpEvent(event.epsilon**2 / 8.0)
    if isinstance(event, ComposedEvent):
        return dpa.ComposedDpEvent([to_dp_accounting(e) for e in event.events])
    if isinstance(event, SelfComposedEvent):
        return dpa.SelfComposedDpEvent(to_dp_accounting(event.event), event.count)
    raise UnsupportedEventError(f"dp_accounting has no event for {event!r}")


def _dpa_epsilon(event: Event, delta: float, kind: str) -> float:
    from dp_accounting import pld, rdp

    acc = pld.PLDAccountant() if kind == "pld" else rdp.RdpAccountant()
    ev = to_dp_accounting(event)
    if not acc.supports(ev):
        raise UnsupportedEventError(f"the {kind.upper()} accountant does not support {event!r}")
    acc.compose(ev)
    return float(acc.get_epsilon(delta))


# --------------------------------------------------------------------------------------
# the accountant
# --------------------------------------------------------------------------------------


class Accountant:
    """Composes events; reports rho and (epsilon, delta) by the tightest applicable rule.

    Examples
    --------
    >>> acc = Accountant().compose(GaussianEvent(2.0)).compose(GaussianEvent(2.0))
    >>> acc.rho()
    0.25
    """

    def __init__(self) -> None:
        self._events: list[Event] = []

    @property
    def event(self) -> ComposedEvent:
        """Everything composed so far."""
        return ComposedEvent(tuple(self._events))

    def compose(self, event: Event, count: int = 1) -> "Accountant":
        if not isinstance(event, Event):
            raise ValidationError(f"compose() takes an Event, got {event!r}")
        self._events.append(event if count == 1 else SelfComposedEvent(event, count))
        return self

    def rho(self) -> float | None:
        """rho of the composition when every part is zCDP, else None."""
        return zcdp_rho(self.event)

    def _non_private(self) -> bool:
        return any(isinstance(leaf, NonPrivateEvent) for leaf, _ in _leaves(self.event))

    def epsilons(self, delta: float, *, external: bool = True) -> dict[str, float]:
        """epsilon at ``delta`` by every method that applies (method -> epsilon).

        ``external=False`` leaves out dp_accounting's PLD and RDP (see the module docstring)."""
        delta = check_delta(delta)
        ev = self.event
        if self._non_private():
            return {"non-private": math.inf}
        out: dict[str, float] = {}
        pure = pure_epsilon(ev)
        if pure is not None:
            out["pure"] = pure
        rho = zcdp_rho(ev)
        if rho is not None:
            out["zcdp-bun-steinke"] = bun_steinke_epsilon(rho, delta)
            out["zcdp-cks20"] = cks20_epsilon(rho, delta) if rho > 0 else 0.0
        mu = gdp_mu(ev)
        if mu is not None:
            out["gdp"] = gaussian_epsilon(mu, delta)
        mixed = mixed_composition(ev, delta)
        if mixed is not None:
            out["mixed"] = mixed.epsilon
        try:
            basic = basic_composition(ev)
            if basic.delta <= delta:
                out["basic"] = basic.epsilon
        except UnsupportedEventError:
            pass
        for kind in ("pld", "rdp") if external else ():
            try:
                out[kind] = _dpa_epsilon(ev, delta, kind)
            except UnsupportedEventError:
                pass
        return out

    def get_epsilon(self, delta: float, method: str = "auto", *, external: bool = True) -> float:
        """epsilon at ``delta``: the smallest over applicable methods (``auto``) or one method."""
        if method not in METHODS:
            raise ValidationError(f"method must be one of {METHODS}, got {method!r}")
        found = self.epsilons(delta, external=external or method in ("pld", "rdp"))
        if "non-private" in found:
            return math.inf
        if method == "auto":
            if not found:
                raise UnsupportedEventError(f"no accounting rule covers {self.event!r} at delta={delta}")
            return min(found.values())
        if method not in found:
            raise UnsupportedEventError(f"method {method!r} does not apply to {self.event!r}")
        return found[method]

    def approx_dp(self, delta: float, method: str = "auto", *, external: bool = True) -> ApproxDP:
        return _approx(self.get_epsilon(delta, method, external=external), check_delta(delta))


def release_guarantee(events, *, delta: float | None = None, labels=None, budget=None):
    """The guarantee a release states, computed from its events by our own rules.

    Parameters
    ----------
    events : sequence of Event
        What ran (in order).
    delta : float, optional
        Given: an :class:`~dpdist.privacy.budget.ApproxDP` at this delta, epsilon the smallest
        over the rules of :meth:`Accountant.epsilons` with ``external=False``. None: a
        :class:`~dpdist.privacy.zcdp.ZCDP` (every event must have a zCDP bound), whose
        breakdown lists each event's rho under its label (``labels``, one per event).
    budget : ApproxDP or ZCDP, optional
        The budget the fit was charged (``Estimator.privacy_cost()``, reserved by a ledger
        before any data is read, so a function of the parameters alone). Given: the accountant's
        guarantee of ``events`` (at ``budget.delta`` for an ApproxDP) must lie within it, and
        ``budget`` is returned, the guarantee the release states (the events, recorded in the
        release, may certify less: :meth:`~dpdist.privacy.release.Release.accountant`
        re-accounts them). An accounted guarantee above the budget is an internal error
        (:class:`~dpdist.exceptions.DpdistError`, exit code 1): the calibration is wrong.
    """
    from dpdist.exceptions import DpdistError
    from dpdist.privacy.zcdp import ZCDP

    events = tuple(events)
    if budget is not None:
        if isinstance(budget, ZCDP):
            got = release_guarantee(events, labels=labels)
            within = got.rho <= budget.rho * (1 + 1e-12)
        else:
            got = release_guarantee(events, delta=budget.delta)
            within = got.epsilon <= budget.epsilon * (1 + 1e-12)
        if not within:
            raise DpdistError(f"internal error: the events {events!r} account to {got}, above the budget {budget}")
        return budget
    acc = Accountant()
    for e in events:
        acc.compose(e)
    if delta is not None:
        return acc.approx_dp(delta, external=False)
    parts = []
    for i, e in enumerate(events):
        r = zcdp_rho(e)
        if r is None:
            raise UnsupportedEventError(f"{e!r} has no zCDP bound: the release cannot state rho")
        parts.append((str(labels[i]) if labels is not None else f"step {i}", r))
    return ZCDP(math.fsum(r for _, r in parts), breakdown=tuple(parts))


def advanced_composition_epsilon(epsilon_step: float, n_steps: int, delta_slack: float) -> float:
    """Total epsilon of ``n_steps`` adaptive (epsilon_step, .)-DP steps (DR14, Theorem 3.20).

    ``eps' = sqrt(2 k ln(1/delta')) eps + k eps (e^eps - 1)``, with total delta
    ``k * delta_step + delta'``. Exact formula, valid for every eps > 0.
    """
    k = int(n_steps)
    if epsilon_step > 700.0:  # e^eps overflows float64: the bound is larger than any float
        return math.inf
    return math.sqrt(2 * k * math.log(1 / delta_slack)) * epsilon_step + k * epsilon_step * math.expm1(
        epsilon_step
    )
