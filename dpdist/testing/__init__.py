"""Testing utilities shipped with dpdist (no dependency on pytest).

:mod:`dpdist.testing.audit` turns runs of a mechanism on two neighbouring datasets into
statistically valid lower bounds on its privacy loss; :mod:`dpdist.testing.mechanisms` holds
the adapters that audit dpdist's own mechanisms (and their deliberately mis-calibrated twins);
:mod:`dpdist.testing.estimator_audits` audits every public estimator's ``fit()`` end to end on
hostile neighbouring pairs; :mod:`dpdist.testing.twins` keeps the unsafe computations found in
issue 9 (never used by an estimator) so that the tests can show they catch them.
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

__all__ = [
    "NOTIONS",
    "AuditResult",
    "audit",
    "audit_samples",
    "clopper_pearson",
    "epsilon_lower_bound",
    "gdp_mu_for_approx_dp",
    "mu_lower_bound",
    "renyi_bernoulli",
    "rho_lower_bound",
]
