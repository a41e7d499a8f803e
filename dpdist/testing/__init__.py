"""Testing utilities shipped with dpdist (no dependency on pytest).

:mod:`dpdist.testing.audit` turns runs of a mechanism on two neighbouring datasets into
statistically valid lower bounds on its privacy loss (the bounds: :mod:`dpdist.testing.bounds`); :mod:`dpdist.testing.cases` defines
the audit case and the hook that registers variants of it (:func:`register_twins`: the
negative controls, written on the test side, that a sound audit must flag);
:mod:`dpdist.testing.mechanisms` holds the cases that audit dpdist's own mechanisms;
:mod:`dpdist.testing.estimator_audits` audits every public estimator's ``fit()`` end to end on
hostile neighbouring pairs; :mod:`dpdist.testing.support` counts exactly the outputs a
noise primitive can produce under one value and not under its neighbour;
:mod:`dpdist.testing.diagnostics` holds NOT PRIVATE exact statistics of the data (such as
:func:`second_moment_diagnostics`) for tests and debugging, kept out of the algorithm modules.
"""

from __future__ import annotations

from dpdist.testing.audit import (
    NOTIONS,
    AuditResult,
    audit,
    audit_samples,
    clopper_pearson,
    epsilon_lower_bound,
    gdp_mu_for_approx_dp,
    mu_lower_bound,
    renyi_bernoulli,
    rho_lower_bound,
)
from dpdist.testing.cases import AuditCase, register_twins, variant
from dpdist.testing.diagnostics import second_moment_diagnostics

__all__ = [
    "NOTIONS",
    "AuditCase",
    "AuditResult",
    "audit",
    "audit_samples",
    "clopper_pearson",
    "epsilon_lower_bound",
    "gdp_mu_for_approx_dp",
    "mu_lower_bound",
    "register_twins",
    "renyi_bernoulli",
    "rho_lower_bound",
    "second_moment_diagnostics",
    "variant",
]
