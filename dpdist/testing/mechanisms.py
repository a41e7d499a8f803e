"""Audit adapters: dpdist's mechanisms on adversarial neighbouring inputs, vectorised over trials.

This module is the registry (:data:`CASES`) and the runner (:func:`run_audits`,
:func:`audit_table`). The case factories live by family in
:mod:`~dpdist.testing.cases_gaussian` (the raw primitives, Wang-Xu, Analyze Gauss, the clipped
mean), :mod:`~dpdist.testing.cases_privcov`, :mod:`~dpdist.testing.cases_pca` (PrivNorm,
PrivPCA, ExpMechPCA), :mod:`~dpdist.testing.cases_second_moment` (with subsample-and-aggregate)
and :mod:`~dpdist.testing.estimator_audits` (end to end). Each factory returns an
:class:`~dpdist.testing.cases.AuditCase`: a tiny (d <= 8) instance of one mechanism (or one
*component* of it) that

* calls the package's own calibration function for the noise scale and the claim,
* draws the noise through the package's own noise path (the mechanism objects of
  :mod:`dpdist.privacy.mechanisms` and their releases, through the engine kernels
  :func:`~dpdist.engine.topk.chunk_row_topk` / :func:`~dpdist.engine.topk.finalize_row_topk`,
  :func:`~dpdist.engine.threshold.chunk_threshold`, :func:`~dpdist.engine.gumbel_max.chunk_exact_gumbel_max`
  and :mod:`dpdist.privacy.noise.topk_sampler`; the ``primitives/...`` cases audit the noise
  primitives themselves), keyed by the mechanism's own noise purpose, with independent noise
  per trial,
* on the two datasets of an adversarial neighbouring pair (same n, one row replaced) or, for
  a *release-level* case, on two exact statistics that differ by exactly the sensitivity the
  calibration claims,
* and reports the most powerful statistic we know for it (the released value of the affected
  coordinate or a sum of affected coordinates for a Laplace/Gaussian release: the likelihood
  ratio is monotone in it; the indicator of the targeted item for a selection).

Which guarantee is audited
--------------------------
A mechanism's *total* claim (for PrivCov, the composition of d per-row releases) is far above
what any single-coordinate attack can reach, so a halved noise scale would not be flagged
against it. Each case therefore audits the guarantee that *its component* claims, computed
from the package's calibration (never from the adapter's own arithmetic), and says so in
``component``. Each factory takes an optional ``source``, the noise source its trials run
(default: the package's own); a *variant* of a case
(:func:`~dpdist.testing.cases.variant`) runs the same trials against the same claim with
another source. The package ships no variant: the deliberately mis-calibrated ones that a
sound audit must flag (noise of half the scale) are registered from the test side
(:func:`~dpdist.testing.cases.register_twins`). Where a case's claim has slack on its pair,
``notes`` says so.

Gaussian releases are audited in Gaussian DP: a Gaussian release of L2 sensitivity Delta with
noise N(0, sigma^2) is exactly mu = Delta/sigma-GDP, so ``claimed_mu = Delta / sigma`` with both
from the package's calibration, and ``claimed_epsilon, claimed_delta`` are the (epsilon, delta)
the calibration was asked for (also checked: the epsilon lower bound at that delta). Where the
rule that turns (epsilon, delta) into sigma is loose (Fact 2's formula, kept by the paper's rules),
noise of half the calibrated scale may still satisfy the (epsilon, delta) claim; the GDP
audit then flags the noise path (the released noise is not the calibrated sigma), which is
the bug it exists to catch. Whether each calibrated sigma implies its (epsilon, delta) is checked exactly (no
sampling) by comparing ``claimed_mu`` with
:func:`~dpdist.testing.audit.gdp_mu_for_approx_dp` (tests/testing/test_audit.py).

Parameter points are chosen so that each audited component's claim is of order 1 (an epsilon
near 1, a GDP mu near 1, a rho near 1/2), where a few thousand trials resolve a factor of 2.
The calibration functions are closed-form in these parameters, so an error of a constant
factor in them shows at any parameter point.

Not covered
-----------
* Regime-dependent calibration errors away from the audited parameter points (for example
  at the small delta of a real release, where the per-component claims are far too small to
  resolve by sampling). Composition totals (PrivCov's advanced composition over rows, the
  budget splits of Theorem 3 and of the zCDP initialisation) are not audited empirically.
* A sensitivity *bound* that is wrong is caught only by the data-level cases (PrivCov
  release, selection and estimator; Analyze Gauss data and estimator; the zCDP level with
  the tight sensitivity and the histogram): release-level cases shift the exact statistic by
  the claimed sensitivity and therefore audit the noise path, not the sensitivity analysis.
* PrivNorm/PrivPCA end to end (the FriendlyCore front end, whose sensitivities hold given
  that both runs pass the tests, Lemma 9); ExpMechPCA's selection on data (a row change moves
  the PSD scores by at most half the claimed score sensitivity, so a data pair reaches
  epsilon/4 at most); the subsample-and-aggregate masked output (its exact rounding and its law
  are tested in tests/privacy/test_masking.py); floating-point attacks on
  the samplers (Mironov 2012).
* Whole-estimator runs here exist for PrivCov and Analyze Gauss (``slow``: long form); the
  end-to-end audits of every public estimator on hostile pairs, with OS entropy, are in
  :mod:`dpdist.testing.estimator_audits` (registered below, also ``slow``).
"""

from __future__ import annotations

from typing import Callable

from dpdist.testing.audit import AuditResult
from dpdist.testing.cases import TWINS, AuditCase
from dpdist.testing.cases_gaussian import (
    analyze_gauss_data_case,
    analyze_gauss_estimator_case,
    analyze_gauss_release_case,
    bounded_laplace_case,
    gaussian_case,
    gaussian_small_epsilon_case,
    laplace_case,
    mean_data_case,
    wang_xu_data_case,
    wang_xu_release_case,
)
from dpdist.testing.cases_pca import (
    expmech_block_case,
    expmech_selection_case,
    friendly_count_test_case,
    friendly_weight_test_case,
    privnorm_release_case,
    privpca_release_case,
)
from dpdist.testing.cases_privcov import (
    privcov_estimator_case,
    privcov_gumbel_release_case,
    privcov_gumbel_rowclip_selection_case,
    privcov_gumbel_selection_case,
    privcov_laplace_release_case,
    privcov_laplace_selection_case,
    privcov_release_case,
    privcov_row_case,
    privcov_selection_case,
)
from dpdist.testing.cases_second_moment import (
    second_moment_histogram_case,
    second_moment_level_paper_case,
    second_moment_level_tight_case,
    second_moment_one_shot_case,
    subsample_aggregate_test_case,
)
from dpdist.testing.estimator_audits import E2E_CASES

__all__ = [
    "CASES",
    "SLOW_CASES",
    "AuditCase",
    "audit_cases",
    "audit_table",
    "expected_outcome",
    "format_audit_table",
    "run_audits",
]


# ---------------------------------------------------------------------------------------
# registry
# ---------------------------------------------------------------------------------------

#: Every audit, by name: ``name -> factory(source=None) -> AuditCase``.
CASES: dict[str, Callable[..., AuditCase]] = {
    "primitives/laplace": laplace_case,
    "primitives/gaussian": gaussian_case,
    "primitives/gaussian-small-epsilon": gaussian_small_epsilon_case,
    "primitives/bounded-laplace": bounded_laplace_case,
    "privcov/value-release": privcov_release_case,
    "privcov/selection": privcov_selection_case,
    "privcov/row": privcov_row_case,
    "privcov/estimator": privcov_estimator_case,
    "privcov-laplace/selection": privcov_laplace_selection_case,
    "privcov-laplace/value-release": privcov_laplace_release_case,
    "privcov-gumbel/selection": privcov_gumbel_selection_case,
    "privcov-gumbel/value-release": privcov_gumbel_release_case,
    "privcov-gumbel/row-clip-selection": privcov_gumbel_rowclip_selection_case,
    "wang-xu/release": wang_xu_release_case,
    "wang-xu/data": wang_xu_data_case,
    "analyze-gauss/release": analyze_gauss_release_case,
    "analyze-gauss/data": analyze_gauss_data_case,
    "analyze-gauss/estimator": analyze_gauss_estimator_case,
    "mean/data": mean_data_case,
    "privnorm-privpca/count-test": friendly_count_test_case,
    "privnorm-privpca/weight-test": friendly_weight_test_case,
    "privnorm-privpca/norm-release": privnorm_release_case,
    "privnorm-privpca/projector-release": privpca_release_case,
    "expmech/selection": expmech_selection_case,
    "expmech/block-release": expmech_block_case,
    "second-moment/level-tight": second_moment_level_tight_case,
    "second-moment/level-paper": second_moment_level_paper_case,
    "second-moment/one-shot": second_moment_one_shot_case,
    "second-moment/init-histogram": second_moment_histogram_case,
    "subsample-aggregate/agreement-test": subsample_aggregate_test_case,
}

# End-to-end audits of every public estimator's fit() with OS entropy, on hostile pairs:
# dpdist.testing.estimator_audits.
CASES.update(E2E_CASES)

#: Cases whose trials run a whole estimator (see :attr:`AuditCase.slow`).
SLOW_CASES = ("privcov/estimator", "analyze-gauss/estimator", *E2E_CASES)

def audit_cases(
    names: list[str] | None = None, *, include_twins: bool = False, include_slow: bool = False
) -> list[AuditCase]:
    """Build the audit cases ``names``, each followed by its registered negative control
    (:func:`~dpdist.testing.cases.register_twins`) when ``include_twins``. A name may also be
    a family (``privcov``). Default: every case of :data:`CASES` except the slow ones
    (whole-estimator runs) unless ``include_slow``; a slow case named explicitly is always
    included. ``include_twins`` with no variant registered raises :class:`LookupError`."""
    if include_twins and not TWINS:
        raise LookupError("no audit twins are registered: import the module that registers them "
                          "(in a source checkout: tests.audit_twins) before asking for them")
    chosen: list[str] = []
    if not names:
        names = [c for c in CASES if include_slow or c not in SLOW_CASES]
    for name in names:
        if name in CASES:
            chosen.append(name)
        else:
            fam = [c for c in CASES if c.split("/")[0] == name]
            if not fam:
                raise KeyError(f"unknown mechanism {name!r}; known: {', '.join(CASES)}")
            chosen.extend(fam)
    out = []
    for name in dict.fromkeys(chosen):
        out.append(CASES[name]())
        if include_twins and name in TWINS:
            out.append(TWINS[name]())
    return out


def run_audits(
    names: list[str] | None = None,
    *,
    n_trials: int | None = None,
    trial_factor: float = 1.0,
    confidence: float = 0.95,
    seed: int = 0,
    include_twins: bool = False,
    include_slow: bool = False,
    long: bool = False,
) -> list[tuple[AuditCase, AuditResult]]:
    """Run :func:`audit_cases` and return ``(case, result)`` pairs.

    ``n_trials`` (per dataset) overrides every case's ``default_trials``; otherwise each case
    runs ``trial_factor * default_trials`` (slow cases: ``default_trials``, already sized to
    flag their twins, at several minutes a case). ``long``: the long form of the end-to-end
    cases (``parameters["long_trials"]`` trials per dataset).
    """
    out = []
    for case in audit_cases(names, include_twins=include_twins, include_slow=include_slow):
        factor = 1.0 if case.slow else trial_factor
        n = n_trials if n_trials is not None else max(4, int(round(factor * case.default_trials)))
        if long and n_trials is None and "long_trials" in case.parameters:
            n = int(case.parameters["long_trials"])
        out.append((case, case.run(n, confidence=confidence, seed=seed)))
    return out


def expected_outcome(case: AuditCase) -> str:
    """What a correct package gives for ``case``: ``"pass"`` for the package's own mechanism,
    ``"flagged"`` for a variant that must be caught, ``"slack"`` for a variant whose true
    privacy loss on the pair still lies below the claim (either outcome is then correct)."""
    return case.expected


def audit_table(pairs: list[tuple[AuditCase, AuditResult]]) -> list[dict]:
    """One plain-JSON row per ``(case, result)``: the claim, the lower bound, the trials, the
    confidence, the verdict, whether it is the expected one, and the full result."""
    rows = []
    for case, res in pairs:
        expected = expected_outcome(case)
        ok = res.passed if expected == "pass" else (not res.passed) if expected == "flagged" else True
        rows.append(
            {
                "mechanism": case.name,
                "family": case.family,
                "twin": case.is_twin,
                "variant": case.variant,
                "component": case.component,
                "notion": res.notion,
                "claimed": res.claimed,
                "lower_bound": res.lower_bound,
                "claimed_epsilon": res.claimed_epsilon,
                "claimed_delta": res.claimed_delta,
                "epsilon_lower_bound": res.epsilon_lower_bound,
                "trials": res.n_trials,
                "confidence": res.confidence,
                "passed": res.passed,
                "expected": expected,
                "as_expected": bool(ok),
                "audit": res.to_dict(),
            }
        )
    return rows


def format_audit_table(rows: list[dict]) -> str:
    """Fixed-width text of :func:`audit_table` rows (one line each).

    ``claimed`` and ``lower bound`` are in the claim's own notion (``claim in``). Rows whose
    claim is not an epsilon also show it as (epsilon, delta): the columns ``as eps`` and
    ``eps lower``, which appear only when such a row exists and are blank for epsilon claims
    (where they would repeat ``claimed`` and ``lower bound``)."""
    unit = {"approx-dp": "eps", "gdp": "mu/GDP", "zcdp": "rho/zCDP"}
    converted = any(r["notion"] != "approx-dp" for r in rows)
    head = f"{'mechanism':<46} {'claim in':<9} {'claimed':>9} {'lower bound':>11}"
    if converted:
        head += f" {'as eps':>9} {'eps lower':>9}"
    head += f" {'trials':>7} {'conf':>5}  verdict"
    lines = [head, "-" * len(head)]
    for r in rows:
        verdict = "pass" if r["passed"] else "FLAGGED"
        if r["expected"] == "slack":
            verdict += " (twin within slack)"
        elif not r["as_expected"]:
            verdict += "  <-- UNEXPECTED"
        line = f"{r['mechanism']:<46} {unit[r['notion']]:<9} {r['claimed']:>9.4g} {r['lower_bound']:>11.4g}"
        if converted:
            if r["notion"] == "approx-dp":
                line += f" {'':>9} {'':>9}"
            else:
                ce = "-" if r["claimed_epsilon"] is None else f"{r['claimed_epsilon']:.4g}"
                line += f" {ce:>9} {r['epsilon_lower_bound']:>9.4g}"
        lines.append(f"{line} {r['trials']:>7} {r['confidence']:>5.3g}  {verdict}")
    return "\n".join(lines)
