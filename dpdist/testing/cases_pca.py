"""Audit cases of PrivNorm / PrivPCA (Algorithms 2-3) and ExpMechPCA (Algorithm 4)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpdist.testing._case_helpers import _own, _seed
from dpdist.testing.cases import AuditCase


# ---------------------------------------------------------------------------------------
# PrivNorm / PrivPCA (Algorithms 2-3): bounded-Laplace tests and Gaussian releases
# ---------------------------------------------------------------------------------------

#: PrivNorm/PrivPCA audit instance: (epsilon, delta) = (3, 3e-3), so each of the three private
#: steps of a run is held to (1, 1e-3); m = 20 batches.
FRIENDLY_EPS, FRIENDLY_DELTA, FRIENDLY_M = 3.0, 3e-3, 20


def _friendly_test_case(which: str, source) -> AuditCase:
    """The test's own mechanism (:class:`~dpdist.privacy.mechanisms.privpca.mechanism.FriendlyTestMechanism`,
    its lattice field under its purpose; ``source`` replaces it). The claim is the mechanism's
    event for this test."""
    from dpdist.privacy.mechanisms.privpca.mechanism import FriendlyTestMechanism
    from dpdist.privacy.mechanisms.privpca.calibration import friendly_test_calibration

    cal = friendly_test_calibration(FRIENDLY_EPS, FRIENDLY_DELTA, FRIENDLY_M)
    real = FriendlyTestMechanism.from_calibration(cal, "norm")
    run = _own(source, real)
    sens = cal.count_sensitivity if which == "count" else cal.weight_sensitivity
    claim = real.event().events[0 if which == "count" else 1]
    stat = 16.0 if which == "count" else 15.0

    def mech(value: float, n: int, seed: int) -> np.ndarray:
        return run.field(which, _seed(seed))(np.full(n, float(value)), 0)

    label = "|C| (sensitivity 1)" if which == "count" else "Z = sum p_i (sensitivity 7, eq. (12))"
    return AuditCase(
        name=f"privnorm-privpca/{which}-test",
        family="privnorm-privpca",
        component=f"bounded-Laplace test on {label} on the lattice, release-level: the event of "
        "FriendlyTestMechanism (at most (epsilon/3, delta/3), Lemma 8)",
        notion="approx-dp",
        claimed_epsilon=claim.epsilon,
        claimed_delta=claim.delta,
        claimed_mu=None,
        claimed_rho=None,
        mechanism=mech,
        neighbours=(stat + sens, stat),
        source=run,
        notes="the same calibration serves PrivNorm and PrivPCA; the audit observes the noisy statistic "
        "(the algorithm releases only the bit, post-processing of it)",
        parameters={**cal.to_dict(), "mechanism": real.describe()},
    )


def friendly_count_test_case(source: Any = None) -> AuditCase:
    """The bounded-Laplace test on |C| (Lines 3-4), statistics c + 1 vs c."""
    return _friendly_test_case("count", source)


def friendly_weight_test_case(source: Any = None) -> AuditCase:
    """The bounded-Laplace test on Z (Lines 12-13), statistics z + 7 vs z."""
    return _friendly_test_case("weight", source)


#: PrivNorm / PrivPCA Gaussian release: (epsilon, delta) = (9, 0.3): each run's release at
#: (3, 0.1), where the calibrated mu is of order 1.
RELEASE_EPS, RELEASE_DELTA = 9.0, 0.3


def privnorm_release_case(source: Any = None) -> AuditCase:
    """PrivNorm's Gaussian release of the norm (Algorithm 3 Line 17), release-level: norms
    differing by the claimed sensitivity 20 k tau (k = 1, tau = 0.05)."""
    from dpdist.privacy.mechanisms.privpca.mechanism import PrivNormMechanism
    from dpdist.privacy.mechanisms.privpca.calibration import privnorm_calibration

    cal = privnorm_calibration(RELEASE_EPS, RELEASE_DELTA, 1, 0.05)
    real = PrivNormMechanism.from_calibration(cal)
    run = _own(source, real)

    def mech(value: float, n: int, seed: int) -> np.ndarray:
        return run.field("release", _seed(seed))(np.full(n, float(value)), 0)

    return AuditCase(
        name="privnorm-privpca/norm-release",
        family="privnorm-privpca",
        component="Gaussian release of ||T_5tau(Sigma_bar)||_op at sensitivity 20 k tau on the lattice "
        f"(PrivNormMechanism; privnorm_calibration, {cal.rule})",
        notion="gdp",
        claimed_epsilon=RELEASE_EPS / 3,
        claimed_delta=RELEASE_DELTA / 3,
        claimed_mu=1.0 / real.event().noise_multiplier,
        claimed_rho=None,
        mechanism=mech,
        neighbours=(1.0 + cal.sensitivity, 1.0),
        default_trials=10_000,
        source=run,
        parameters={**cal.to_dict(), "mechanism": real.describe()},
    )


def privpca_release_case(source: Any = None) -> AuditCase:
    """PrivPCA's Gaussian release of the projector (Algorithm 2 Lines 19-21) through the exact
    top-k^2 sampler :func:`~dpdist.privacy.noise.topk_sampler.lattice_top_k2` (the mechanism's
    :meth:`~dpdist.privacy.mechanisms.privpca.mechanism.PrivPCAMechanism.projector`).

    Two unit vectors u = e_0 and u' = e_1 (d = 2, k = 2, so all k^2 = d^2 entries are
    released): ``||u u^T - u' u'^T||_F = sqrt(2)``. The public (tau, gap, lambda_hat) are
    chosen so that the claimed Frobenius sensitivity (Lemma 10 with deviation 1) equals
    sqrt(2) exactly: the pair reaches the claim. Statistic: released P_00 - P_11.
    """
    from dpdist.privacy.mechanisms.privpca.mechanism import PrivPCAMechanism
    from dpdist.privacy.mechanisms.privpca.calibration import privpca_calibration, privpca_sensitivity

    k, tau, gap, d = 2, 0.05, 0.25, 2
    lam = privpca_sensitivity(k, tau, gap, 1.0) / math.sqrt(2.0)  # Delta(lambda_hat) = sqrt(2)
    cal = privpca_calibration(RELEASE_EPS, RELEASE_DELTA, k, tau, gap, lam)
    real = PrivPCAMechanism.from_calibration(cal, d)
    run = _own(source, real)

    def mech(which: int, n: int, seed: int) -> np.ndarray:
        from dpdist.privacy.noise.streams import NoiseSeed

        base = _seed(seed).entropy
        support, u = np.array([which]), np.array([1.0])
        out = np.empty(n)
        for t in range(n):
            r, c, v = run.projector(support, u, d, k, NoiseSeed(base * 1_000_003 + t, True))
            P = np.zeros((d, d))
            P[r, c] = v
            out[t] = P[0, 0] - P[1, 1]
        return out

    return AuditCase(
        name="privnorm-privpca/projector-release",
        family="privnorm-privpca",
        component="Gaussian release of u u^T at the claimed Frobenius sensitivity (PrivPCAMechanism; "
        f"privpca_calibration, {cal.rule})",
        notion="gdp",
        claimed_epsilon=RELEASE_EPS / 3,
        claimed_delta=RELEASE_DELTA / 3,
        claimed_mu=1.0 / real.event().noise_multiplier,
        claimed_rho=None,
        mechanism=mech,
        neighbours=(0, 1),
        default_trials=3_000,
        source=run,
        parameters={**cal.to_dict(), "lambda_hat": lam, "tau": tau, "gap": gap, "k": k, "mechanism": real.describe()},
    )


# ---------------------------------------------------------------------------------------
# ExpMechPCA (Algorithm 4): Gumbel-max exponential mechanism and the Gaussian block
# ---------------------------------------------------------------------------------------

#: ExpMechPCA audit instance: epsilon = 2 (selection epsilon/2 = 1), d = 8 candidate
#: supports of size k = 1, tau = 1, n = 40.
EXPMECH_EPS, EXPMECH_DELTA, EXPMECH_D, EXPMECH_N = 2.0, 1e-3, 8, 40


def expmech_selection_case(source: Any = None) -> AuditCase:
    """ExpMechPCA's support selection, at the level of the exponential mechanism (Lemma 28).

    Scores (k = 1, so the score of {j} is M_jj and the engine's
    :func:`~dpdist.engine.gumbel_max.chunk_exact_gumbel_max` reads them from the diagonal): D has
    ``q = (Delta_q, 0, ..., 0)``, D' has ``q' = (0, Delta_q, ..., Delta_q)``, with the score
    sensitivity Delta_q = 2 k tau^2 / n of expmech_calibration; ``||q - q'||_inf = Delta_q``.
    Statistic: the indicator that support {0} is chosen, drawn by the mechanism's own exact
    sampler (:meth:`~dpdist.privacy.mechanisms.expmech.ExpMechMechanism.selection`, through the
    engine's :func:`~dpdist.engine.gumbel_max.chunk_exact_gumbel_max`) at the mechanism's
    weight (``source``: the weight to draw with). Claim: epsilon/2-DP.

    A real row change moves each score by at most k tau^2 / n, half of Delta_q (a score is the
    top eigenvalue of a PSD block, and replacing a row swaps one PSD rank-one term of norm
    <= k tau^2 / n for another), so a data-level pair reaches at most epsilon/4, half the
    selection's claim, and noise of half the scale would stay within it: the claim audited is the
    exponential mechanism's own, on score vectors that reach its stated sensitivity.
    """
    from dpdist.engine.gumbel_max import chunk_exact_gumbel_max
    from dpdist.privacy.mechanisms.expmech import expmech_calibration
    from dpdist.privacy.noise.gumbel import GumbelMax
    from dpdist.privacy.mechanisms.expmech import SELECT_PURPOSE, ExpMechMechanism

    cal = expmech_calibration(EXPMECH_EPS, EXPMECH_DELTA, EXPMECH_N, EXPMECH_D, 1, 1.0)
    weight = _own(source, ExpMechMechanism.from_calibration(cal).weight)
    q = cal.score_sensitivity
    M = {0: np.diag([q] + [0.0] * (EXPMECH_D - 1)), 1: np.diag([0.0] + [q] * (EXPMECH_D - 1))}

    def mech(which: int, n: int, seed: int) -> np.ndarray:
        from dpdist.privacy.noise.streams import NoiseSeed

        base = _seed(seed).entropy
        out = np.empty(n)
        for t in range(n):
            ns = NoiseSeed(base * 1_000_003 + t, True)
            out[t] = chunk_exact_gumbel_max(M[which], 1, 0, EXPMECH_D, GumbelMax(ns, SELECT_PURPOSE, weight)).rank == 0
        return out

    return AuditCase(
        name="expmech/selection",
        family="expmech",
        component="exponential mechanism over supports by Gumbel-max at weight epsilon n / (8 k tau^2): "
        "(epsilon/2)-DP for score vectors within the claimed score sensitivity (Lemma 28)",
        notion="approx-dp",
        claimed_epsilon=cal.selection_epsilon,
        claimed_delta=0.0,
        claimed_mu=None,
        claimed_rho=None,
        mechanism=mech,
        neighbours=(0, 1),
        default_trials=8_000,
        source=weight,
        parameters=cal.to_dict(),
    )


#: ExpMechPCA block release instance: (epsilon, delta) = (6, 0.3), where the printed sigma_priv
#: (line 11, used here: it exceeds the analytic Gaussian requirement) gives mu of order 1.
BLOCK_EPS, BLOCK_DELTA = 6.0, 0.3


def expmech_block_case(source: Any = None) -> AuditCase:
    """ExpMechPCA's Gaussian release of the chosen block (Algorithm 4 line 11-12), release-level:
    blocks differing by the claimed Frobenius sensitivity 2 k tau^2 / n in one entry, released by
    the mechanism's own :meth:`~dpdist.privacy.mechanisms.expmech.ExpMechMechanism.release`."""
    from dpdist.privacy.mechanisms.expmech import expmech_calibration
    from dpdist.privacy.mechanisms.expmech import ExpMechMechanism

    cal = expmech_calibration(BLOCK_EPS, BLOCK_DELTA, EXPMECH_N, EXPMECH_D, 1, 1.0)
    sens = cal.block_sensitivity
    real = ExpMechMechanism.from_calibration(cal)
    mech_obj = _own(source, real)

    def mech(value: float, n: int, seed: int) -> np.ndarray:
        # trial t releases the 1 x 1 block of support {t}: entry (t, t), all trials in one call
        # of the release's own field (BlockRelease releases the block's entries through .at)
        t = np.arange(n)
        return mech_obj.release(_seed(seed)).field.at(t, t, np.full(n, float(value)))

    return AuditCase(
        name="expmech/block-release",
        family="expmech",
        component=f"Gaussian release of the chosen k x k block at Frobenius sensitivity 2 k tau^2/n "
        f"(expmech_calibration, {cal.gaussian_rule}): (epsilon/2, delta)",
        notion="gdp",
        claimed_epsilon=cal.release_epsilon,
        claimed_delta=cal.release_delta,
        claimed_mu=sens / cal.gaussian_sigma,
        claimed_rho=None,
        mechanism=mech,
        neighbours=(sens, 0.0),
        default_trials=10_000,
        source=mech_obj,
        parameters=cal.to_dict(),
    )
