"""Audit cases of the zCDP second moment (MS25) and of the subsample-and-aggregate baseline."""

from __future__ import annotations

from typing import Any

import numpy as np

from dpdist.testing._case_helpers import _own, _seed
from dpdist.testing.cases import AuditCase


# ---------------------------------------------------------------------------------------
# zCDP second moment (MS25): GUE per level, Gaussian histograms; subsample-and-aggregate
# ---------------------------------------------------------------------------------------

#: zCDP audit instance: n = 40, d = 2, m = 2, alpha = 0.5, normalised radius 2 (one level).
SM_N, SM_D, SM_M, SM_RADIUS, SM_RHO, SM_DELTA = 40, 2, 2, 2.0, 0.5, 1e-3


def _second_moment_level_case(sensitivity: str, source) -> AuditCase:
    from dpdist.privacy.mechanisms.second_moment import level_mechanisms, moment_release
    from dpdist.privacy.mechanisms.second_moment import level_schedule
    from dpdist.privacy.zcdp import cks20_epsilon

    sch = level_schedule(SM_N, SM_D, SM_RHO, m=SM_M, radius=SM_RADIUS, sensitivity=sensitivity)
    R0 = sch.radii[0]
    level = _own(source, level_mechanisms(sch)[0])
    grams = {}
    for w in (0, 1):
        X = np.zeros((SM_N, SM_D))
        X[0, w] = R0  # a row of norm R_0, the level's bound: e_0 in D, e_1 in D'
        grams[w] = X.T @ X

    def mech(which: int, n: int, seed: int) -> np.ndarray:
        ns = _seed(seed)
        out = np.empty(n)
        for t in range(n):  # an independent root seed per trial, the level's own release
            M = moment_release(level, _seed(ns.entropy * 1_000_003 + t), SM_N)(grams[which])
            out[t] = M[0, 0] - M[1, 1]
        return out

    rho0 = sch.rhos[0]
    slack = "" if sensitivity == "tight" else "; MS25's 4R^2/n has slack 2 sqrt(2) over the exact sqrt(2) R^2/n"
    return AuditCase(
        name=f"second-moment/level-{sensitivity}",
        family="second-moment",
        component=f"one level of RecDPSME: GUE noise on (1/n) sum x x^T, rows of norm <= R_k, "
        f"sensitivity={sensitivity!r}: rho/L-zCDP (level_schedule, level_mechanisms: lattice Gaussian)",
        notion="zcdp",
        claimed_epsilon=cks20_epsilon(rho0, SM_DELTA),
        claimed_delta=SM_DELTA,
        claimed_mu=None,
        claimed_rho=rho0,
        mechanism=mech,
        neighbours=(0, 1),
        default_trials=6_000,
        source=level,
        notes="data-level pair x = R_k e_0 vs R_k e_1 (L2 move sqrt(2) R_k^2/n)" + slack,
        parameters={**sch.to_dict(), "mechanism": level.describe()},
    )


def second_moment_level_tight_case(source: Any = None) -> AuditCase:
    """A level of the zCDP recursion with ``sensitivity="tight"`` (sqrt(2) R^2/n, reached)."""
    return _second_moment_level_case("tight", source)


def second_moment_level_paper_case(source: Any = None) -> AuditCase:
    """A level of the zCDP recursion with MS25's ``sensitivity="paper"`` (4 R^2/n)."""
    return _second_moment_level_case("paper", source)


def second_moment_one_shot_case(source: Any = None) -> AuditCase:
    """The one-shot Gaussian mechanism :func:`~dpdist.algorithms.second_moment.one_shot_second_moment`
    (``sensitivity="tight"``): GUE(sigma^2) with :func:`one_shot_sigma` on the second moment of
    rows clipped to the public radius R by the engine's :func:`chunk_clip_rows`. Pair: the
    replaced row is 3 e_0 in D and 3 e_1 in D' (clipped to R = 2); statistic: released (0,0)
    minus released (1,1). Claim: rho-zCDP."""
    from dpdist.engine.second_moment_kernels import chunk_clip_rows
    from dpdist.privacy.float_rounding import float_sensitivity
    from dpdist.privacy.mechanisms.second_moment import moment_release, one_shot_mechanism
    from dpdist.privacy.mechanisms.second_moment import one_shot_sigma, sensitivity_coefficient
    from dpdist.privacy.zcdp import cks20_epsilon

    sigma = one_shot_sigma(SM_N, SM_RHO, SM_RADIUS, "tight")
    sens, _ = float_sensitivity(sensitivity_coefficient("tight") * SM_RADIUS**2 / SM_N, SM_N)  # as the algorithm
    shot = _own(source, one_shot_mechanism(SM_D, sens, sigma))
    grams = {}
    for w in (0, 1):
        X = np.zeros((SM_N, SM_D))
        X[0, w] = 3.0
        Y = chunk_clip_rows(X, SM_RADIUS)
        grams[w] = Y.T @ Y

    def mech(which: int, n: int, seed: int) -> np.ndarray:
        ns = _seed(seed)
        out = np.empty(n)
        for t in range(n):
            M = moment_release(shot, _seed(ns.entropy * 1_000_003 + t), SM_N)(grams[which])
            out[t] = M[0, 0] - M[1, 1]
        return out

    return AuditCase(
        name="second-moment/one-shot",
        family="second-moment",
        component="one-shot Gaussian mechanism on the clipped second moment, sensitivity='tight': rho-zCDP "
        "(one_shot_sigma, one_shot_mechanism: lattice Gaussian)",
        notion="zcdp",
        claimed_epsilon=cks20_epsilon(SM_RHO, SM_DELTA),
        claimed_delta=SM_DELTA,
        claimed_mu=None,
        claimed_rho=SM_RHO,
        mechanism=mech,
        neighbours=(0, 1),
        default_trials=6_000,
        source=shot,
        notes="data-level pair, rows clipped to the public radius (L2 move sqrt(2) R^2/n, the tight sensitivity)",
        parameters={"sigma": sigma, "radius": SM_RADIUS, "rho": SM_RHO, "mechanism": shot.describe()},
    )


def second_moment_histogram_case(source: Any = None) -> AuditCase:
    """The private initialisation's Gaussian histogram (radius and lambda_min steps):
    ``N(0, 1/rho_step)`` on every bin, L2 sensitivity sqrt(2) (a replaced row moves one count
    from one bin to another). Pair: counts (5, 3, 0) vs (4, 4, 0); statistic: noisy bin 0
    minus noisy bin 1. Claim rho_step = the radius share of split_second_moment_rho."""
    from dpdist.privacy.mechanisms.second_moment import histogram_mechanism
    from dpdist.privacy.mechanisms.second_moment import histogram_sigma, split_second_moment_rho
    from dpdist.privacy.zcdp import cks20_epsilon

    share = split_second_moment_rho(10.0, 0.1, private_radius=True, private_lambda=True)["radius"]  # 0.5
    hist = _own(source, histogram_mechanism("radius", share))  # what second_moment() uses for rho_R
    counts = {0: np.array([5.0, 3.0, 0.0]), 1: np.array([4.0, 4.0, 0.0])}

    def mech(which: int, n: int, seed: int) -> np.ndarray:
        ns = _seed(seed)
        out = np.empty(n)
        for t in range(n):
            h = hist.release(_seed(ns.entropy * 1_000_003 + t))(counts[which])
            out[t] = h[0] - h[1]
        return out

    return AuditCase(
        name="second-moment/init-histogram",
        family="second-moment",
        component="Gaussian histogram of the private radius / lambda_min step: sigma = 1/sqrt(rho_step), "
        "sensitivity sqrt(2): rho_step-zCDP (split_second_moment_rho, histogram_mechanism: lattice Gaussian)",
        notion="zcdp",
        claimed_epsilon=cks20_epsilon(share, SM_DELTA),
        claimed_delta=SM_DELTA,
        claimed_mu=None,
        claimed_rho=share,
        mechanism=mech,
        neighbours=(0, 1),
        default_trials=6_000,
        source=hist,
        notes="sigma from dpdist.privacy.mechanisms.second_moment.histogram_sigma, as in second_moment()",
        parameters={"rho_step": share, "sigma": histogram_sigma(share), "mechanism": hist.describe()},
    )


#: Subsample-and-aggregate audit instance: k = 10 groups, (epsilon, delta) = (1, 1e-3) per step.
SA_GROUPS, SA_EPS, SA_DELTA = 10, 1.0, 1e-3


def subsample_aggregate_test_case(source: Any = None) -> AuditCase:
    """The subsample-and-aggregate baseline's truncated-Laplace agreement test (Algorithm 3
    line 5): Q + TLap(2/k, epsilon, delta), release-level with Q vs Q - 2/k. Claim: (epsilon,
    delta) for this step (the baseline's total guarantee is (2 epsilon, 4 e^epsilon delta))."""
    from dpdist.privacy.mechanisms.subsample_aggregate import subsample_aggregate_mechanism
    from dpdist.privacy.mechanisms.subsample_aggregate import baseline_masking_scale, tlap_support

    sens = 2.0 / SA_GROUPS
    support = tlap_support(sens, SA_EPS, SA_DELTA)
    eta_b = baseline_masking_scale(0.5, 4, 0.1)  # the test does not use it (alpha 0.5, d 4, xi 0.1)
    agg = _own(source, subsample_aggregate_mechanism(SA_EPS, SA_DELTA, SA_GROUPS, support, eta_b=eta_b))

    def mech(value: float, n: int, seed: int) -> np.ndarray:
        # n independent tests in one call of the test's own field (positions 0 .. n-1)
        return agg.test(_seed(seed)).field(np.full(n, float(value)), 0)

    return AuditCase(
        name="subsample-aggregate/agreement-test",
        family="subsample-aggregate",
        component="TLap(2/k, epsilon, delta) on the agreement Q (subsample_aggregate_mechanism: bounded lattice "
        "Laplace): (epsilon, delta)-DP",
        notion="approx-dp",
        claimed_epsilon=SA_EPS,
        claimed_delta=SA_DELTA,
        claimed_mu=None,
        claimed_rho=None,
        mechanism=mech,
        neighbours=(0.9, 0.9 - sens),
        default_trials=10_000,
        source=agg,
        notes="the masked output (Ashtiani-Liaw Lemma 3.6) is not audited",
        parameters={"sensitivity": sens, "support": support, "mechanism": agg.describe()},
    )
