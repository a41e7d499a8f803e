"""Testing utilities shipped with dpdist (no dependency on pytest).

:mod:`dpdist.testing.audit` turns runs of a mechanism on two neighbouring datasets into
statistically valid lower bounds on its privacy loss; :mod:`dpdist.testing.mechanisms` holds
the adapters that audit dpdist's own mechanisms (and their deliberately mis-calibrated twins);
:mod:`dpdist.testing.estimator_audits` audits every public estimator's ``fit()`` end to end on
hostile neighbouring pairs; :mod:`dpdist.testing.twins` keeps the unsafe computations found in
issue 9 (never used by an estimator) so that the tests can show they catch them;
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
from dpdist.testing.diagnostics import second_moment_diagnostics

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
    "second_moment_diagnostics",
]
