"""The audit case: one mechanism (or component) on an adversarial pair, its claim, and its variants.

:class:`AuditCase` is what every audit of :mod:`dpdist.testing.mechanisms` and
:mod:`dpdist.testing.estimator_audits` returns. Each case factory takes one optional
argument, ``source``: the noise source its trials run (the mechanism object, a noise scale, a
mechanism builder or a context to fit in, depending on the case; ``None`` means the package's
own, built from the package's calibration). The case records the source it ran as
:attr:`AuditCase.source`.

A *variant* of a case runs the same trials on the same pair against the same claim with
another source (:func:`variant`). The package ships no variant: the audits' negative
controls (deliberately mis-calibrated or buggy sources that a sound audit must flag) are
written on the test side and handed to the registry with :func:`register_twins`;
``dpdist audit --include-twins`` imports the module that registers them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping

import numpy as np

from dpdist.testing.audit import AuditResult, audit

__all__ = ["EXPECTED", "TWINS", "AuditCase", "register_twins", "variant"]

#: The outcomes a case can be expected to have (see :attr:`AuditCase.expected`).
EXPECTED = ("pass", "flagged", "slack")

Trials = Callable[[Any, int, int], np.ndarray]


@dataclass(frozen=True)
class AuditCase:
    """One audit: a mechanism adapter, an adversarial pair, the claim and its notion.

    Attributes
    ----------
    name : str
        Registry name (``family/component``); a variant's name ends in ``[label]``.
    family : str
        The mechanism family (``privcov``, ``wang-xu``, ...).
    component : str
        What is audited and which guarantee of the package's calibration it is held to.
    notion : {"approx-dp", "gdp", "zcdp"}
    claimed_epsilon, claimed_delta, claimed_mu, claimed_rho
        The claim (see :func:`dpdist.testing.audit.audit_samples`).
    mechanism : callable ``(dataset, n_trials, seed) -> statistics``
        Runs ``n_trials`` independent trials on ``dataset`` and returns the test statistic
        of each (shape ``(n_trials,)``).
    neighbours : (D, D')
    default_trials : int
        Trials per dataset of the short (CI) form; the cost per trial differs by case.
    slow : bool
        True when one trial runs a whole estimator (milliseconds): left out of the default
        selection of :func:`~dpdist.testing.mechanisms.audit_cases` unless named.
    notes : str
    parameters : dict
        The public parameters of the instance (calibration output).
    source : object
        The noise source the trials ran (the case factory's ``source``).
    variant : str
        Empty for the package's own mechanism; the label of a variant (:func:`variant`).
    expected : {"pass", "flagged", "slack"}
        What a sound audit gives: ``"pass"`` for the package's own mechanism, ``"flagged"``
        for a variant that breaks the claim on this pair, ``"slack"`` for a variant whose
        true privacy loss on this pair still lies below the claim (either outcome is then
        correct).
    """

    name: str
    family: str
    component: str
    notion: str
    claimed_epsilon: float | None
    claimed_delta: float
    claimed_mu: float | None
    claimed_rho: float | None
    mechanism: Trials
    neighbours: tuple
    default_trials: int = 20_000
    slow: bool = False
    notes: str = ""
    parameters: dict = field(default_factory=dict)
    source: Any = None
    variant: str = ""
    expected: str = "pass"

    @property
    def is_twin(self) -> bool:
        """True for a variant (a source other than the package's own)."""
        return bool(self.variant)

    def run(self, n_trials: int | None = None, *, confidence: float = 0.95, seed: int = 0) -> AuditResult:
        """Audit this case: :func:`dpdist.testing.audit.audit` with the case's claim."""
        return audit(
            self.mechanism,
            self.neighbours,
            n_trials=int(n_trials or self.default_trials),
            confidence=confidence,
            claimed_epsilon=self.claimed_epsilon,
            claimed_delta=self.claimed_delta,
            claimed_mu=self.claimed_mu,
            claimed_rho=self.claimed_rho,
            notion=self.notion,
            seed=seed,
            name=self.name,
            claim=self.component,
            notes=self.notes,
        )


def variant(factory: Callable[..., AuditCase], source: Any, label: str, expected: str, **changes: Any) -> AuditCase:
    """The case of ``factory`` run with ``source`` in place of the package's noise source.

    Same pair, statistic and claim (computed by the factory from the package's calibration);
    ``label`` names the variant, ``expected`` is ``"flagged"`` or ``"slack"``, and
    ``changes`` override other fields (``default_trials``, ``notes``, ``parameters``)."""
    if expected not in EXPECTED[1:]:
        raise ValueError(f"a variant is expected to be 'flagged' or 'slack', got {expected!r}")
    if not label:
        raise ValueError("a variant needs a label")
    case = factory(source=source)
    return replace(case, name=f"{case.name} [{label}]", variant=label, expected=expected, **changes)


#: Registered variants: case name -> zero-argument factory of the variant (see
#: :func:`register_twins`).
TWINS: dict[str, Callable[[], AuditCase]] = {}


def register_twins(twins: Mapping[str, Callable[[], AuditCase]]) -> None:
    """Register the negative controls of the audits: ``case name -> factory()`` returning a
    :func:`variant` of that case. ``audit_cases(include_twins=True)`` runs each after its
    case. Registering a name again replaces its variant."""
    for name, make in twins.items():
        if not callable(make):
            raise TypeError(f"the variant of {name!r} must be a zero-argument factory, got {make!r}")
        TWINS[str(name)] = make
