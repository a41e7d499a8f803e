"""Audit adapters: dpdist's mechanisms on adversarial neighbouring inputs, vectorised over trials.

Each factory below returns an :class:`AuditCase`: a tiny (d <= 8) instance of one mechanism
(or one *component* of it) that

* calls the package's own calibration function for the noise scale and the claim,
* draws the noise through the package's own noise path (the mechanism objects of
  :mod:`dpdist.privacy.mechanisms` and their releases, through the engine kernels
  :func:`~dpdist.engine.topk.chunk_row_topk` / :func:`~dpdist.engine.topk.finalize_row_topk`,
  :func:`~dpdist.engine.threshold.chunk_threshold`, :func:`~dpdist.engine.gumbel_max.chunk_exact_gumbel_max`
  and :mod:`dpdist.privacy.topk_sampler`; the ``primitives/...`` cases audit the noise
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

import contextlib
import math
import warnings
from typing import Any, Callable

import numpy as np

from dpdist.testing.audit import AuditResult
from dpdist.testing.cases import TWINS, AuditCase

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

Mechanism = Callable[[Any, int, int], np.ndarray]


def _seed(seed: int):
    from dpdist.privacy.noise import NoiseSeed

    return NoiseSeed(int(seed) & ((1 << 128) - 1), seeded=True)


def _own(source, mech):
    """The noise source the trials run: ``source``, or the package's own ``mech``."""
    return mech if source is None else source


@contextlib.contextmanager
def _seeded_fits_are_expected():
    """Silence the PrivacyWarning of the seeded fits these audits run on purpose (one per
    trial otherwise)."""
    from dpdist.exceptions import PrivacyWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        yield


def _scale_for(target: float, unit: float) -> float:
    """Linear rescaling helper: the epsilon that makes a component claim equal ``target``."""
    return target / unit


# ---------------------------------------------------------------------------------------
# raw primitives: Laplace, Gaussian, bounded Laplace
# ---------------------------------------------------------------------------------------


def laplace_case(source: Any = None) -> AuditCase:
    """The Laplace sampler :func:`~dpdist.privacy.noise.laplace_from_uniform` at scale
    b = Delta / epsilon, on values 0 and Delta: epsilon-DP (epsilon = 1). ``source``: the
    scale drawn with (default b)."""
    from dpdist.privacy.noise import laplace_from_uniform

    eps, sens = 1.0, 1.0
    b = sens / eps
    run = _own(source, b)

    def mech(value: float, n: int, seed: int) -> np.ndarray:
        u = _seed(seed).uniforms("audit/laplace", 0, 0, n)
        return value + laplace_from_uniform(u, run)

    return AuditCase(
        name="primitives/laplace",
        family="primitives",
        component="Laplace(Delta/epsilon) on a value of sensitivity Delta: epsilon-DP",
        notion="approx-dp",
        claimed_epsilon=eps,
        claimed_delta=0.0,
        claimed_mu=None,
        claimed_rho=None,
        mechanism=mech,
        neighbours=(sens, 0.0),
        source=run,
        parameters={"scale": b, "sensitivity": sens},
    )


def gaussian_case(source: Any = None, *, epsilon: float = 2.0, delta: float = 1e-3) -> AuditCase:
    """The Gaussian sampler with :func:`~dpdist.privacy.calibration.gaussian_sigma` at
    (epsilon, delta) (default (2, 1e-3): the analytic Gaussian mechanism): exactly
    Delta/sigma-GDP. ``source``: the standard deviation drawn with (default sigma)."""
    from dpdist.privacy.calibration import gaussian_sigma
    from dpdist.privacy.noise import gaussian_from_uniform

    eps, sens = float(epsilon), 1.0
    sigma, rule = gaussian_sigma(sens, eps, delta)
    name = "primitives/gaussian" if eps >= 1 else "primitives/gaussian-small-epsilon"
    run = _own(source, sigma)

    def mech(value: float, n: int, seed: int) -> np.ndarray:
        u = _seed(seed).uniforms("audit/gaussian", 0, 0, n)
        return value + gaussian_from_uniform(u, run)

    return AuditCase(
        name=name,
        family="primitives",
        component=f"Gaussian mechanism, gaussian_sigma at (epsilon, delta) = ({eps}, {delta}) [{rule}]: "
        "mu = Delta/sigma-GDP, (epsilon, delta)-DP",
        notion="gdp",
        claimed_epsilon=eps,
        claimed_delta=delta,
        claimed_mu=sens / sigma,
        claimed_rho=None,
        mechanism=mech,
        neighbours=(sens, 0.0),
        default_trials=10_000 if eps >= 1 else 20_000,
        source=run,
        parameters={"sigma": sigma, "sensitivity": sens},
    )


def gaussian_small_epsilon_case(source: Any = None) -> AuditCase:
    """:func:`gaussian_case` at (epsilon, delta) = (0.9, 0.05): the analytic Gaussian mechanism
    of :func:`~dpdist.privacy.calibration.gaussian_sigma` below epsilon = 1 (where it is
    smaller than the classic formula of DR14 Theorem A.1)."""
    return gaussian_case(source, epsilon=0.9, delta=0.05)


def bounded_laplace_case(source: Any = None) -> AuditCase:
    """The bounded Laplace sampler with :func:`~dpdist.privacy.pca_calibration.bounded_laplace_test`
    at (epsilon, delta) = (1, 1e-3). ``source``: the ``(scale, bound)`` drawn with (default
    the calibration's)."""
    from dpdist.privacy.noise import bounded_laplace_from_uniform
    from dpdist.privacy.pca_calibration import bounded_laplace_test

    eps, delta, sens = 1.0, 1e-3, 1.0
    run = _own(source, bounded_laplace_test(sens, eps, delta))
    scale, bound = run

    def mech(value: float, n: int, seed: int) -> np.ndarray:
        u = _seed(seed).uniforms("audit/bounded-laplace", 0, 0, n)
        return value + bounded_laplace_from_uniform(u, scale, bound)

    return AuditCase(
        name="primitives/bounded-laplace",
        family="primitives",
        component=f"bounded Laplace (Fact 3, bounded_laplace_test) at (epsilon, delta) = ({eps}, {delta})",
        notion="approx-dp",
        claimed_epsilon=eps,
        claimed_delta=delta,
        claimed_mu=None,
        claimed_rho=None,
        mechanism=mech,
        neighbours=(sens, 0.0),
        source=run,
        parameters={"scale": scale, "bound": bound, "sensitivity": sens},
    )


# ---------------------------------------------------------------------------------------
# PrivCov (Algorithm 1): per-row noisy top-k and Laplace value release
# ---------------------------------------------------------------------------------------

#: PrivCov audit instance: d = 4 features, clip R = 1, n = 40 rows, delta = 0.1.
PRIVCOV_D, PRIVCOV_N, PRIVCOV_CLIP, PRIVCOV_DELTA = 4, 40, 1.0, 0.1


def _exact_second_moment(X: np.ndarray, clip: float, row_clip: float | None = None) -> np.ndarray:
    """The clipped second moment (1/n) Y^T Y through the engine (computed once per dataset);
    with ``row_clip``, the rows scaled to that L2 norm after the entry clip."""
    import dask.array as da

    from dpdist.engine.gram import clipped_second_moment

    return np.asarray(clipped_second_moment(da.from_array(np.asarray(X, float)), clip, row_clip=row_clip)
                      .compute(scheduler="synchronous"))


def _privcov_cal(k: int, component_epsilon: float):
    """privcov_calibration at the epsilon that makes ``Delta / b`` equal ``component_epsilon``.

    All of b's dependence on epsilon is through eps_row, linear in epsilon, so one call at
    epsilon = 1 gives the scale factor.
    """
    from dpdist.privacy.calibration import privcov_calibration

    unit = privcov_calibration(1.0, PRIVCOV_DELTA, PRIVCOV_N, PRIVCOV_D, k, PRIVCOV_CLIP)
    eps = _scale_for(component_epsilon, unit.sensitivity / unit.laplace_scale)
    return privcov_calibration(eps, PRIVCOV_DELTA, PRIVCOV_N, PRIVCOV_D, k, PRIVCOV_CLIP)


def _privcov_mech(k: int, source=None):
    """(the mechanism at the audited point, the mechanism the trials run: ``source`` when
    given)."""
    from dpdist.privacy.mechanisms.privcov import PrivCovMechanism

    mech = PrivCovMechanism.from_calibration(_privcov_cal(k, 1.0))
    return mech, _own(source, mech)


def _privcov_row0(S: np.ndarray, mech, n_trials: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n_trials`` independent runs of row 0 of Algorithm 1 through the mechanism's own noise
    callables and the engine kernels PrivCov runs.

    The trials are the rows of one tile (each a copy of row 0 of the exact second moment): the
    mechanism's selection sampler and release field give row r its own streams, so trial t
    draws independent selection and release noise, exactly as row 0 of one run would. The
    tile's columns are split in two column tiles (per-row-block ``prepare_rows``, then
    :func:`chunk_row_topk` per tile) merged by :func:`combine_row_topk` (the engine's tree
    step) and released by :func:`finalize_row_topk`. Returns (selected columns (T, k),
    released values (T, k)).
    """
    from dpdist.engine.topk import chunk_row_topk, combine_row_topk, finalize_row_topk

    ns = _seed(seed)
    select, release = mech.selection(ns), mech.release(ns)
    d = S.shape[1]
    tile = np.ascontiguousarray(np.broadcast_to(S[0], (n_trials, d)))
    k = mech.calibration.k
    state = select.prepare_rows(np.arange(n_trials), k)
    h = d // 2
    parts = [chunk_row_topk(tile[:, :h], 0, 0, k, select, state), chunk_row_topk(tile[:, h:], 0, h, k, select, state)]
    rel = finalize_row_topk(combine_row_topk(parts, k, select), release)
    return rel.cols, rel.values


def _entry_epsilon(mech) -> float:
    """The pure epsilon of one released entry on the lattice: ``Delta_Z / s``."""
    return mech.sensitivity_units / mech.noise.scale


def privcov_release_case(source: Any = None) -> AuditCase:
    """PrivCov's Laplace release of one entry, data-level.

    Pair: background rows (1, 1, 0, 0) x 10; the replaced row is (1, 1, 0, 0) in D and
    (1, -1, 0, 0) in D'. Sigma_hat_01 moves by exactly 2 R^2 / n = Delta; with k = d every
    entry of row 0 is released. Statistic: the released value of entry (0, 1). Claim: the
    lattice Laplace release of one entry is ``Delta_Z / s``-DP (the mechanism's
    :class:`~dpdist.privacy.mechanisms.privcov.PrivCovMechanism`; the package's per-row claim
    is far above this).
    """
    k = PRIVCOV_D
    mech, run = _privcov_mech(k, source)
    base = np.zeros((PRIVCOV_N, PRIVCOV_D))
    base[1:11, :2] = 1.0
    D, Dp = base.copy(), base.copy()
    D[0, :2] = (1.0, 1.0)
    Dp[0, :2] = (1.0, -1.0)
    S = {0: _exact_second_moment(D, PRIVCOV_CLIP), 1: _exact_second_moment(Dp, PRIVCOV_CLIP)}

    def mech_fn(which: int, n: int, seed: int) -> np.ndarray:
        cols, vals = _privcov_row0(S[which], run, n, seed)
        hit = cols == 1
        return np.where(hit.any(axis=1), (vals * hit).sum(axis=1), -1e6)

    return AuditCase(
        name="privcov/value-release",
        family="privcov",
        component="lattice Laplace value release of one entry of row i (Algorithm 1 line 8): Delta_Z/s-DP "
        "(PrivCovMechanism)",
        notion="approx-dp",
        claimed_epsilon=_entry_epsilon(mech),
        claimed_delta=0.0,
        claimed_mu=None,
        claimed_rho=None,
        mechanism=mech_fn,
        neighbours=(0, 1),
        default_trials=8_000,
        source=run,
        parameters={"calibration": mech.calibration.to_dict(), "k": k, "mechanism": mech.describe()},
    )


def _privcov_selection_moments(row_clip: float | None = None) -> dict:
    """The clipped second moments of the selection pair (see :func:`privcov_selection_case`),
    through the engine's row scaling when ``row_clip`` is given."""
    base = np.zeros((PRIVCOV_N, PRIVCOV_D))
    base[1:21, :2] = 1.0
    base[21:23, 0] = 1.0
    D, Dp = base.copy(), base.copy()
    D[0, :2] = (1.0, 1.0)
    Dp[0, :2] = (1.0, -1.0)
    return {0: _exact_second_moment(D, PRIVCOV_CLIP, row_clip), 1: _exact_second_moment(Dp, PRIVCOV_CLIP, row_clip)}


def _row0_selection_case(name: str, family: str, mech, run, claimed_epsilon: float, k: int,
                         component: str, row_clip: float | None = None) -> AuditCase:
    """A PrivCov selection audited on the pair of :func:`_privcov_selection_moments` (one score
    of row 0 moves by exactly Delta), through the engine kernels ``run``; statistic 1 if
    S_0 = {1}. The selections (paper, laplace, gumbel, gumbel with a row clip) differ only in
    their mechanism, claim and row clip."""
    S = _privcov_selection_moments(row_clip)

    def mech_fn(which: int, n: int, seed: int) -> np.ndarray:
        cols, _ = _privcov_row0(S[which], run, n, seed)
        return (cols[:, 0] == 1).astype(np.float64)

    return AuditCase(
        name=name,
        family=family,
        component=component,
        notion="approx-dp",
        claimed_epsilon=claimed_epsilon,
        claimed_delta=0.0,
        claimed_mu=None,
        claimed_rho=None,
        mechanism=mech_fn,
        neighbours=(0, 1),
        default_trials=10_000,
        source=run,
        parameters={"calibration": mech.calibration.to_dict(), "k": k, "mechanism": mech.describe()},
    )


def privcov_selection_case(source: Any = None) -> AuditCase:
    """PrivCov's noisy top-k selection of one entry, data-level, drawn by the mechanism's lazy
    selection sampler (:mod:`dpdist.privacy.lazy_selection`) through the engine kernels.

    Pair (k = 1, d = 4, R = 1): background rows (1, 1, 0, 0) x 20 and (1, 0, 0, 0) x 2; the
    replaced row is (1, 1, 0, 0) in D and (1, -1, 0, 0) in D'. In row 0 only entry (0, 1)
    moves: Sigma_hat_01 = 21/n in D and 19/n in D', so its score moves by exactly Delta = 2/n
    while staying far from 0 (a score near 0 would blunt the shift through the absolute
    value); the diagonal, 23/n in both, stays one Delta above it in D, so that choosing entry 1
    is a tail event of the noise, where the Laplace likelihood ratio is largest. Statistic: 1
    if S_0 = {1}. For a pair that moves a single score of row i, the selection S_i is
    ``Delta_Z / s``-DP (shifting that score's noise by Delta_Z maps one run to the other), the
    component claim audited here.
    """
    k = 1
    mech, run = _privcov_mech(k, source)
    return _row0_selection_case(
        "privcov/selection", "privcov", mech, run, _entry_epsilon(mech), k,
        "noisy top-k selection S_i (Algorithm 1 line 6, the lazy lattice sampler) under a pair moving "
        "one score of row i by Delta: Delta_Z/s-DP (PrivCovMechanism)")


def privcov_row_case(source: Any = None) -> AuditCase:
    """PrivCov's whole row i (selection and release), held to the per-row pure epsilon.

    Pair (k = d = 4): background rows (1, 1, 1, 1) x 10; the replaced row is (1, 1, 1, 1) in
    D and (1, -1, -1, -1) in D': all d - 1 off-diagonal entries of row 0 move by Delta.
    Statistic: the sum of the released off-diagonal values of row 0 (the Laplace likelihood
    ratio is monotone in each). The per-row claim is the mechanism's pure ``c Delta_Z / s``
    (:attr:`~dpdist.privacy.mechanisms.privcov.PrivCovMechanism.row_epsilon`; b is the
    paper's term here), which carries a factor of about ``2 sqrt(k' log(d/delta_row)) / (d -
    1)`` over the ``(d - 1) Delta / b`` any row change can reach: noise of half the scale still
    meets it.
    """
    k = PRIVCOV_D
    mech, run = _privcov_mech(k, source)
    base = np.zeros((PRIVCOV_N, PRIVCOV_D))
    base[1:11, :] = 1.0
    D, Dp = base.copy(), base.copy()
    D[0] = 1.0
    Dp[0] = (1.0, -1.0, -1.0, -1.0)
    S = {0: _exact_second_moment(D, PRIVCOV_CLIP), 1: _exact_second_moment(Dp, PRIVCOV_CLIP)}

    def mech_fn(which: int, n: int, seed: int) -> np.ndarray:
        cols, vals = _privcov_row0(S[which], run, n, seed)
        return np.where(cols > 0, vals, 0.0).sum(axis=1)

    return AuditCase(
        name="privcov/row",
        family="privcov",
        component="one row of Algorithm 1 (top-k selection and k+1 value releases): "
        "pure c Delta_Z / s-DP (PrivCovMechanism.row_epsilon)",
        notion="approx-dp",
        claimed_epsilon=mech.row_epsilon,
        claimed_delta=0.0,
        claimed_mu=None,
        claimed_rho=None,
        mechanism=mech_fn,
        neighbours=(0, 1),
        default_trials=4_000,
        source=run,
        notes="per-row claim has slack about 2 sqrt(k' log(d/delta_row)) / (d - 1) >= 2 over the best row change",
        parameters={"calibration": mech.calibration.to_dict(), "k": k, "mechanism": mech.describe()},
    )


def privcov_estimator_case(source: Any = None) -> AuditCase:
    """The full estimator :func:`~dpdist.algorithms.sparse_covariance.private_sparse_covariance`
    with ``selection="paper"`` run once per trial (dask, synchronous scheduler, 2 x 2 tiles of the second moment) on the
    pair of :func:`privcov_release_case`; statistic: the released value of entry (0, 1).

    ``source`` is the builder ``calibration -> mechanism`` the estimator calls (default
    ``PrivCovMechanism.from_calibration``): the name ``PrivCovMechanism`` inside
    :mod:`dpdist.algorithms.sparse_covariance` is replaced, for the duration of the trials, by
    a stand-in whose ``from_calibration`` is ``source``; the estimator itself is not edited.
    """
    from unittest import mock

    import dpdist.algorithms.sparse_covariance as module
    from dpdist.privacy.mechanisms.privcov import PrivCovMechanism

    k = PRIVCOV_D
    mech, _ = _privcov_mech(k)
    cal = mech.calibration
    base = np.zeros((PRIVCOV_N, PRIVCOV_D))
    base[1:11, :2] = 1.0
    D, Dp = base.copy(), base.copy()
    D[0, :2] = (1.0, 1.0)
    Dp[0, :2] = (1.0, -1.0)
    data = {0: D, 1: Dp}

    run = _own(source, PrivCovMechanism.from_calibration)

    class _StandIn:
        @staticmethod
        def from_calibration(c):
            return run(c)

    def mech_fn(which: int, n: int, seed: int) -> np.ndarray:
        out = np.empty(n)
        with mock.patch.object(module, "PrivCovMechanism", _StandIn), _seeded_fits_are_expected():
            for t in range(n):
                rel = module.private_sparse_covariance(
                    data[which], k, cal.epsilon, cal.delta, clip=PRIVCOV_CLIP, random_state=int(seed) * 1_000_003 + t,
                    scheduler="synchronous", progress=False, tile_size=2, assume_centered=True, selection="paper",
                )
                cols, vals = rel.values["selected"][0], rel.values["selected_values"][0]
                out[t] = vals[cols == 1][0] if np.any(cols == 1) else -1e6
        return out

    return AuditCase(
        name="privcov/estimator",
        family="privcov",
        component="private_sparse_covariance end to end, released entry (0, 1): Delta_Z/s-DP (PrivCovMechanism)",
        notion="approx-dp",
        claimed_epsilon=_entry_epsilon(mech),
        claimed_delta=0.0,
        claimed_mu=None,
        claimed_rho=None,
        mechanism=mech_fn,
        neighbours=(0, 1),
        default_trials=1_500,
        source=run,
        slow=True,
        parameters={"calibration": cal.to_dict(), "k": k, "mechanism": mech.describe()},
    )


# ---------------------------------------------------------------------------------------
# PrivCov with the zCDP analysis (selection="laplace"): Laplace selection, Gaussian release
# ---------------------------------------------------------------------------------------


def _privcov_laplace_mech(k: int, claim, source=None):
    """(the :class:`~dpdist.privacy.mechanisms.privcov.PrivCovZCDPMechanism` at the epsilon
    that makes ``claim(mechanism)`` equal 1, the mechanism the trials run). The calibration
    is not linear in epsilon (the CKS20 inversion), so the epsilon is found by a root search
    on the package's own mechanism."""
    from scipy import optimize

    from dpdist.privacy.mechanisms.privcov import privcov_zcdp_mechanism

    def build(eps: float):
        return privcov_zcdp_mechanism(eps, PRIVCOV_DELTA, PRIVCOV_N, PRIVCOV_D, k, PRIVCOV_CLIP)

    eps = optimize.brentq(lambda e: claim(build(e)) - 1.0, 0.05, 500.0, xtol=1e-6)
    mech = build(eps)
    return mech, _own(source, mech)


def _selection_claim(mech) -> float:
    """Pure epsilon of a selection under a pair moving one score by Delta: ``Delta_Z / s``."""
    return mech.sensitivity_units / mech.noise.scale


def _release_entry_mu(mech) -> float:
    """GDP mu of one released coordinate moved by ``Delta_fl``: ``Delta_Z1 / s_r``, with
    ``Delta_Z1`` the per-coordinate sensitivity on the release's lattice."""
    cal = mech.calibration
    units = mech.release_noise.lattice.sensitivity_units(cal.sensitivity * cal.float_factor)
    return units / mech.release_noise.scale


def privcov_laplace_selection_case(source: Any = None) -> AuditCase:
    """``selection="laplace"``: the per-row noisy top-k selection (lattice Laplace, the lazy
    sampler through the engine kernels) on the pair of :func:`privcov_selection_case` (k = 1,
    one score of row 0 moves by exactly Delta). Claim: ``Delta_Z / s``-DP for a pair moving one
    score (shift that score's noise by Delta_Z), with s the zCDP calibration's selection scale
    (:class:`~dpdist.privacy.mechanisms.privcov.PrivCovZCDPMechanism`). Statistic: 1 if S_0 = {1}."""
    k = 1
    mech, run = _privcov_laplace_mech(k, _selection_claim, source)
    return _row0_selection_case(
        "privcov-laplace/selection", "privcov-laplace", mech, run, _selection_claim(mech), k,
        "noisy top-k selection S_i of selection='laplace' (lazy lattice Laplace sampler, zCDP calibration) "
        "under a pair moving one score of row i by Delta: Delta_Z/s-DP (PrivCovZCDPMechanism)")


#: Row-norm level of the row-clipped release audit: ``C = sqrt(2) R``, so ``C min(R sqrt(k'), C)
#: = 2 R^2`` and the release's L2 sensitivity is ``2 Delta`` (against ``sqrt(d k') Delta = 4 Delta``
#: without the row clip, at d = k' = 4).
PRIVCOV_ROW_CLIP = math.sqrt(2.0) * PRIVCOV_CLIP


def _gumbel_entry_u(mech) -> float:
    """Most a single score moves in Gumbel units when one entry of the moment moves by
    ``Delta_fl``: ``w (Delta_fl + 2**-52 C) + 2**-30`` (``step_epsilon / 2`` without a row clip;
    with one, step_epsilon is the rows' root-mean-square range and this is larger)."""
    from dpdist.privacy.gumbel import SCORE_BITS

    cal = mech.calibration
    return mech.weight * (cal.sensitivity * cal.float_factor + 2.0**-52 * mech.score_bound) + 2.0**-SCORE_BITS


def _privcov_gumbel_mech(k: int, source=None, row_clip: float = math.inf):
    """(the :class:`~dpdist.privacy.mechanisms.privcov.PrivCovGumbelMechanism` at the epsilon
    whose selection moves a single score by exactly one Gumbel unit when one entry moves by
    Delta, ``u = 1``, the mechanism the trials run), by a root search on the package's own
    mechanism (the calibration is not linear in epsilon)."""
    from scipy import optimize

    from dpdist.privacy.mechanisms.privcov import privcov_gumbel_mechanism

    def build(eps: float):
        return privcov_gumbel_mechanism(eps, PRIVCOV_DELTA, PRIVCOV_N, PRIVCOV_D, k, PRIVCOV_CLIP, row_clip=row_clip)

    eps = optimize.brentq(lambda e: _gumbel_entry_u(build(e)) - 1.0, 0.05, 500.0, xtol=1e-6)
    mech = build(eps)
    return mech, _own(source, mech)


def privcov_gumbel_selection_case(source: Any = None) -> AuditCase:
    """``selection="gumbel"``: the per-row exact Gumbel top-k selection (the sampler through the
    engine kernels, two column tiles merged exactly) on the pair of
    :func:`privcov_selection_case` (k = 1, one score of row 0 moves by exactly Delta). Claim:
    ``u``-DP with ``u = step_epsilon / 2`` the most a score moves in Gumbel units: one
    exponential-mechanism step whose scores move by at most u is 2u-bounded range, and when a
    single score moves (by a) every output's probability changes by a factor within
    ``[e^-|a|, e^|a|]`` (the chosen one by ``e^a Z'/Z``, the others by ``Z'/Z``). Statistic: 1 if
    S_0 = {1}."""
    k = 1
    mech, run = _privcov_gumbel_mech(k, source)
    return _row0_selection_case(
        "privcov-gumbel/selection", "privcov-gumbel", mech, run, _gumbel_entry_u(mech), k,
        "exact Gumbel top-k selection S_i of selection='gumbel' (peeling exponential mechanism, zCDP "
        "calibration) under a pair moving one score of row i by Delta: u-DP, u = step_epsilon/2 "
        "(PrivCovGumbelMechanism)")


def privcov_gumbel_rowclip_selection_case(source: Any = None) -> AuditCase:
    """``selection="gumbel"`` with the L2 row clip (``C = sqrt(2) R``): the selection's weight is
    calibrated for the rows' root-mean-square sensitivity (``2 C min(R, C) / (n sqrt(d))``, here
    ``Delta / sqrt(2)``), so a pair that moves one score of one row by the full Delta moves it by
    ``u = w (Delta_fl + 2**-52 C) + 2**-30``, more than ``step_epsilon / 2``; such a pair moves
    no other row (its changed row is ``(1, +-1, 0, 0)``, of norm C). Data-level, through the
    engine's row scaling; the pair of :func:`privcov_selection_case`. Claim: u-DP for row 0's
    selection (the whole release is zCDP by Lemma 4a, which this pair does not exhaust).
    Statistic: 1 if S_0 = {1}."""
    k = 1
    mech, run = _privcov_gumbel_mech(k, source, row_clip=PRIVCOV_ROW_CLIP)
    return _row0_selection_case(
        "privcov-gumbel/row-clip-selection", "privcov-gumbel", mech, run, _gumbel_entry_u(mech), k,
        "exact Gumbel top-k selection S_i of selection='gumbel' with the L2 row clip (weight from the rows' "
        "root-mean-square sensitivity) under a pair moving one score of row i by Delta: u-DP, u = w (Delta_fl + "
        "2**-52 C) + 2**-30 (PrivCovGumbelMechanism)", row_clip=PRIVCOV_ROW_CLIP)


def privcov_laplace_release_case(source: Any = None) -> AuditCase:
    """``selection="laplace"``: the Gaussian release of the selected values, data-level, on the
    pair of :func:`privcov_release_case` (k = d, so every entry of row 0 is released; only
    Sigma_hat_01 moves, by exactly Delta). Statistic: the released value of entry (0, 1).
    Claim: that coordinate of the lattice Gaussian release is ``Delta_Z1 / s_r``-GDP (the
    release of :class:`~dpdist.privacy.mechanisms.privcov.PrivCovZCDPMechanism`, whose whole
    release is the Gaussian mechanism at L2 sensitivity ``sqrt(d k') Delta``); the claimed
    (epsilon, delta) is that mu's exact profile at delta = 0.1."""
    k = PRIVCOV_D
    mech, run = _privcov_laplace_mech(k, _release_entry_mu, source)
    return _entry01_release_case(
        "privcov-laplace/value-release", "privcov-laplace", mech, run, k,
        "lattice Gaussian value release of one entry of row i, selection='laplace': Delta_Z1/s_r-GDP "
        "(PrivCovZCDPMechanism)")


def _entry01_release_case(name: str, family: str, mech, run, k: int, component: str,
                          row_clip: float | None = None) -> AuditCase:
    """A PrivCov value release audited on the pair of :func:`privcov_laplace_release_case`
    (rows ``(1, 1, 0, 0)`` and ``(1, -1, 0, 0)``: only Sigma_hat_01 moves, by exactly Delta),
    through the engine's row scaling when ``row_clip`` is given; statistic: the released value
    of entry (0, 1); claim ``Delta_Z1 / s_r``-GDP. The zCDP mechanisms differ only in their
    mechanism and row clip."""
    from dpdist.privacy.accounting import gaussian_epsilon

    base = np.zeros((PRIVCOV_N, PRIVCOV_D))
    base[1:11, :2] = 1.0
    D, Dp = base.copy(), base.copy()
    D[0, :2] = (1.0, 1.0)
    Dp[0, :2] = (1.0, -1.0)
    S = {0: _exact_second_moment(D, PRIVCOV_CLIP, row_clip), 1: _exact_second_moment(Dp, PRIVCOV_CLIP, row_clip)}

    def mech_fn(which: int, n: int, seed: int) -> np.ndarray:
        cols, vals = _privcov_row0(S[which], run, n, seed)
        hit = cols == 1
        return np.where(hit.any(axis=1), (vals * hit).sum(axis=1), -1e6)

    mu = _release_entry_mu(mech)
    return AuditCase(
        name=name,
        family=family,
        component=component,
        notion="gdp",
        claimed_epsilon=gaussian_epsilon(mu, PRIVCOV_DELTA),
        claimed_delta=PRIVCOV_DELTA,
        claimed_mu=mu,
        claimed_rho=None,
        mechanism=mech_fn,
        neighbours=(0, 1),
        default_trials=10_000,
        source=run,
        parameters={"calibration": mech.calibration.to_dict(), "k": k, "mechanism": mech.describe()},
    )


def privcov_gumbel_release_case(source: Any = None) -> AuditCase:
    """``selection="gumbel"`` with the L2 row clip: the Gaussian release of the selected values,
    data-level, through the engine's row scaling (rows clipped to ``C = sqrt(2) R``). The pair
    of :func:`privcov_laplace_release_case` (rows ``(1, 1, 0, 0)`` and ``(1, -1, 0, 0)``, both of
    norm C: only Sigma_hat_01 moves, by exactly Delta); k = d. The release's sigma is calibrated
    for the row route's L2 sensitivity (half the entry route's here). Claim: the released value
    of entry (0, 1) is ``Delta_Z1 / s_r``-GDP (one coordinate moving by at most Delta_fl);
    statistic: that value."""
    from scipy import optimize

    from dpdist.privacy.mechanisms.privcov import privcov_gumbel_mechanism

    k = PRIVCOV_D

    def build(eps: float):
        return privcov_gumbel_mechanism(eps, PRIVCOV_DELTA, PRIVCOV_N, PRIVCOV_D, k, PRIVCOV_CLIP,
                                        row_clip=PRIVCOV_ROW_CLIP)

    eps = optimize.brentq(lambda e: _release_entry_mu(build(e)) - 1.0, 0.05, 500.0, xtol=1e-6)
    mech = build(eps)
    return _entry01_release_case(
        "privcov-gumbel/value-release", "privcov-gumbel", mech, _own(source, mech), k,
        "lattice Gaussian value release of one entry of row i, selection='gumbel' with the L2 row clip: "
        "Delta_Z1/s_r-GDP (PrivCovGumbelMechanism, release sensitivity 2 C min(R sqrt(k'), C) / n)",
        row_clip=PRIVCOV_ROW_CLIP)


# ---------------------------------------------------------------------------------------
# Gaussian releases of symmetric matrices (Wang-Xu, Analyze Gauss): the mechanism's own
# release through engine.threshold.chunk_threshold
# ---------------------------------------------------------------------------------------


def _symmetric_gaussian_trials(values: np.ndarray, mech, seed: int) -> np.ndarray:
    """Released copies of ``c`` entries, one row per trial: (T, c).

    One call of :func:`~dpdist.engine.threshold.chunk_threshold` (threshold 0: keep all) with
    the mechanism's own release (:meth:`SymmetricGaussianMechanism.release
    <dpdist.privacy.mechanisms.gaussian.SymmetricGaussianMechanism.release>`, as the
    estimator calls it) on a (T, c) tile placed at rows c, c+1, ... (strictly below the
    diagonal): entry (t, j) reads the symmetric field at address (j, c + t), so the T x c
    noise values are i.i.d., exactly the law of the noise on c distinct upper-triangle entries
    of one run.
    """
    from dpdist.engine.threshold import chunk_threshold

    tile = np.asarray(values, dtype=np.float64)
    c = tile.shape[1]
    rows, cols, vals = chunk_threshold(tile, c, 0, 0.0, release=mech.release(_seed(seed)))
    out = np.empty(tile.shape)
    out[rows - c, cols] = vals
    return out


def _gaussian_release_mech(values: dict, mech, weights: np.ndarray) -> Mechanism:
    def run(which: int, n: int, seed: int) -> np.ndarray:
        tile = np.broadcast_to(np.asarray(values[which], float), (n, len(weights)))
        return _symmetric_gaussian_trials(np.ascontiguousarray(tile), mech, seed) @ weights

    return run


def _symmetric_mechanism(family: str, cal: dict, source=None):
    """The estimator's mechanism of ``family`` at the audit's d (``source`` when given)."""
    from dpdist.privacy.mechanisms.gaussian import analyze_gauss_mechanism, wang_xu_mechanism

    build = {"wang-xu": wang_xu_mechanism, "analyze-gauss": analyze_gauss_mechanism}[family]
    return _own(source, build(cal, GAUSS_D))


#: Wang-Xu / Analyze Gauss audit instance.
GAUSS_D, GAUSS_N, GAUSS_CLIP, GAUSS_EPS, GAUSS_DELTA = 4, 40, 1.0, 2.0, 1e-3


def wang_xu_release_case(source: Any = None) -> AuditCase:
    """Wang-Xu's Gaussian release, release-level: two second moments whose released upper
    triangles differ by exactly the claimed L2 sensitivity 2 R^2 d / n in one entry.
    Claim: Delta/sigma-GDP and (epsilon, delta)-DP (wang_xu_calibration, analytic rule)."""
    from dpdist.privacy.calibration import wang_xu_calibration

    cal = wang_xu_calibration(GAUSS_EPS, GAUSS_DELTA, GAUSS_N, GAUSS_D, GAUSS_CLIP)
    return _gaussian_release_case(
        "wang-xu", cal, source,
        "symmetric Gaussian noise on the clipped second moment at its claimed L2 sensitivity "
        f"2R^2 d/n (wang_xu_calibration, {cal['rule']})",
    )


def _gaussian_release_case(family: str, cal: dict, source, component: str) -> AuditCase:
    """Release-level Gaussian case: one released entry moved by exactly the calibration's
    claimed L2 sensitivity; claim ``mu = sensitivity / sigma`` (GDP) and (GAUSS_EPS,
    GAUSS_DELTA)-DP. Released through the estimator's mechanism (:func:`_symmetric_mechanism`)."""
    sens, sigma = cal["sensitivity"], cal["gaussian_sigma"]
    sym = _symmetric_mechanism(family, cal, source)
    mech = _gaussian_release_mech({0: [sens], 1: [0.0]}, sym, np.ones(1))
    return AuditCase(
        name=f"{family}/release",
        family=family,
        component=component,
        notion="gdp",
        claimed_epsilon=GAUSS_EPS,
        claimed_delta=GAUSS_DELTA,
        claimed_mu=sens / sigma,
        claimed_rho=None,
        mechanism=mech,
        neighbours=(0, 1),
        default_trials=10_000,
        source=sym,
        parameters={**cal, "mechanism": sym.describe()},
    )


def wang_xu_data_case(source: Any = None) -> AuditCase:
    """Wang-Xu, data-level: the replaced row is (R, R, R, R) in D and (R, R, -R, -R) in D'
    (other rows 0), moving 4 upper-triangle entries by 2R^2/n each (L2 distance R^2 d / n,
    the largest a row change can reach for d = 4: half the claimed sensitivity). Statistic:
    the sum of the 4 released entries. The claim has slack 2 over this pair."""
    from dpdist.privacy.calibration import wang_xu_calibration

    cal = wang_xu_calibration(GAUSS_EPS, GAUSS_DELTA, GAUSS_N, GAUSS_D, GAUSS_CLIP)
    sens, sigma = cal["sensitivity"], cal["gaussian_sigma"]
    D = np.zeros((GAUSS_N, GAUSS_D))
    Dp = D.copy()
    D[0] = GAUSS_CLIP
    Dp[0] = GAUSS_CLIP * np.array([1.0, 1.0, -1.0, -1.0])
    idx = ([0, 0, 1, 1], [2, 3, 2, 3])
    vals = {0: _exact_second_moment(D, GAUSS_CLIP)[idx], 1: _exact_second_moment(Dp, GAUSS_CLIP)[idx]}
    sym = _symmetric_mechanism("wang-xu", cal, source)
    mech = _gaussian_release_mech(vals, sym, np.ones(4))
    return AuditCase(
        name="wang-xu/data",
        family="wang-xu",
        component="Wang-Xu end to end on the worst row change we know (L2 move R^2 d/n): "
        "Delta/sigma-GDP with the claimed Delta",
        notion="gdp",
        claimed_epsilon=GAUSS_EPS,
        claimed_delta=GAUSS_DELTA,
        claimed_mu=sens / sigma,
        claimed_rho=None,
        mechanism=mech,
        neighbours=(0, 1),
        default_trials=10_000,
        source=sym,
        notes="claimed sensitivity 2R^2 d/n is twice the L2 move of this pair",
        parameters={**cal, "mechanism": sym.describe()},
    )


def analyze_gauss_release_case(source: Any = None) -> AuditCase:
    """Analyze Gauss, release-level: one upper-triangle entry moved by the claimed 2 L^2 / n."""
    from dpdist.privacy.expmech_calibration import analyze_gauss_calibration

    cal = analyze_gauss_calibration(GAUSS_EPS, GAUSS_DELTA, GAUSS_N, 1.0)
    return _gaussian_release_case(
        "analyze-gauss", cal, source,
        f"symmetric Gaussian noise at the claimed L2 sensitivity 2L^2/n (analyze_gauss_calibration, {cal['rule']})",
    )


def analyze_gauss_data_case(source: Any = None) -> AuditCase:
    """Analyze Gauss, data-level: the replaced row is L e_0 in D and L e_1 in D' (L = 1, other
    rows 0): the diagonal entries (0,0) and (1,1) move by L^2/n each, an L2 move of
    sqrt(2) L^2/n (the largest possible; the claim 2 L^2/n has slack sqrt(2)). Statistic:
    released (0,0) minus released (1,1)."""
    from dpdist.algorithms.baselines.analyze_gauss import block_row_norm_clip
    from dpdist.privacy.expmech_calibration import analyze_gauss_calibration

    L = 1.0
    cal = analyze_gauss_calibration(GAUSS_EPS, GAUSS_DELTA, GAUSS_N, L)
    sens, sigma = cal["sensitivity"], cal["gaussian_sigma"]
    D = np.zeros((GAUSS_N, GAUSS_D))
    Dp = D.copy()
    D[0, 0] = 3.0  # clipped to norm L by the mechanism's own row-norm clip
    Dp[0, 1] = 3.0
    vals = {}
    for w, X in enumerate((D, Dp)):
        Y = block_row_norm_clip(X, L)
        S = Y.T @ Y / GAUSS_N
        vals[w] = [S[0, 0], S[1, 1]]
    sym = _symmetric_mechanism("analyze-gauss", cal, source)
    mech = _gaussian_release_mech(vals, sym, np.array([1.0, -1.0]))
    return AuditCase(
        name="analyze-gauss/data",
        family="analyze-gauss",
        component="Analyze Gauss end to end on the worst row change (L2 move sqrt(2) L^2/n): "
        "Delta/sigma-GDP with the claimed Delta = 2L^2/n",
        notion="gdp",
        claimed_epsilon=GAUSS_EPS,
        claimed_delta=GAUSS_DELTA,
        claimed_mu=sens / sigma,
        claimed_rho=None,
        mechanism=mech,
        neighbours=(0, 1),
        default_trials=10_000,
        source=sym,
        notes="the claimed sensitivity 2L^2/n has slack sqrt(2) over the best row change",
        parameters={**cal, "mechanism": sym.describe()},
    )


def analyze_gauss_estimator_case(source: Any = None) -> AuditCase:
    """The full :class:`~dpdist.algorithms.baselines.analyze_gauss.AnalyzeGauss` estimator,
    one fit per trial (dask, synchronous, 2 x 2 tiles), on the pair of
    :func:`analyze_gauss_data_case`; statistic: released (0,0) minus released (1,1).
    ``source`` is the builder the estimator calls in place of ``analyze_gauss_mechanism``
    (default that function): the name is patched inside the estimator's module for the
    duration of the trials."""
    from unittest import mock

    import dpdist.algorithms.baselines.analyze_gauss as module
    from dpdist.privacy.expmech_calibration import analyze_gauss_calibration
    from dpdist.privacy.mechanisms.gaussian import analyze_gauss_mechanism

    cal = analyze_gauss_calibration(GAUSS_EPS, GAUSS_DELTA, GAUSS_N, 1.0)
    D = np.zeros((GAUSS_N, GAUSS_D))
    Dp = D.copy()
    D[0, 0] = 3.0
    Dp[0, 1] = 3.0
    data = {0: D, 1: Dp}

    run = _own(source, analyze_gauss_mechanism)

    def mech(which: int, n: int, seed: int) -> np.ndarray:
        out = np.empty(n)
        with mock.patch.object(module, "analyze_gauss_mechanism", run), _seeded_fits_are_expected():
            for t in range(n):
                est = module.AnalyzeGauss(GAUSS_EPS, GAUSS_DELTA, row_norm=1.0, random_state=int(seed) * 1_000_003 + t,
                                          scheduler="synchronous", tile_size=2, assume_centered=True).fit(data[which])
                out[t] = est.covariance_[0, 0] - est.covariance_[1, 1]
        return out

    return AuditCase(
        name="analyze-gauss/estimator",
        family="analyze-gauss",
        component="AnalyzeGauss.fit end to end on the worst row change: Delta/sigma-GDP with the claimed "
        "Delta = 2L^2/n (analyze_gauss_calibration)",
        notion="gdp",
        claimed_epsilon=GAUSS_EPS,
        claimed_delta=GAUSS_DELTA,
        claimed_mu=cal["sensitivity"] / cal["gaussian_sigma"],
        claimed_rho=None,
        mechanism=mech,
        neighbours=(0, 1),
        default_trials=2_000,
        source=run,
        slow=True,
        parameters={**cal, "mechanism": analyze_gauss_mechanism(cal, GAUSS_D).describe()},
    )


# ---------------------------------------------------------------------------------------
# PrivNorm / PrivPCA (Algorithms 2-3): bounded-Laplace tests and Gaussian releases
# ---------------------------------------------------------------------------------------

#: PrivNorm/PrivPCA audit instance: (epsilon, delta) = (3, 3e-3), so each of the three private
#: steps of a run is held to (1, 1e-3); m = 20 batches.
FRIENDLY_EPS, FRIENDLY_DELTA, FRIENDLY_M = 3.0, 3e-3, 20


def _friendly_test_case(which: str, source) -> AuditCase:
    """The test's own mechanism (:class:`~dpdist.privacy.mechanisms.friendly.FriendlyTestMechanism`,
    its lattice field under its purpose; ``source`` replaces it). The claim is the mechanism's
    event for this test."""
    from dpdist.privacy.mechanisms.friendly import FriendlyTestMechanism
    from dpdist.privacy.pca_calibration import friendly_test_calibration

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
    from dpdist.privacy.mechanisms.friendly import PrivNormMechanism
    from dpdist.privacy.pca_calibration import privnorm_calibration

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
    top-k^2 sampler :func:`~dpdist.privacy.topk_sampler.lattice_top_k2` (the mechanism's
    :meth:`~dpdist.privacy.mechanisms.friendly.PrivPCAMechanism.projector`).

    Two unit vectors u = e_0 and u' = e_1 (d = 2, k = 2, so all k^2 = d^2 entries are
    released): ``||u u^T - u' u'^T||_F = sqrt(2)``. The public (tau, gap, lambda_hat) are
    chosen so that the claimed Frobenius sensitivity (Lemma 10 with deviation 1) equals
    sqrt(2) exactly: the pair reaches the claim. Statistic: released P_00 - P_11.
    """
    from dpdist.privacy.mechanisms.friendly import PrivPCAMechanism
    from dpdist.privacy.pca_calibration import privpca_calibration, privpca_sensitivity

    k, tau, gap, d = 2, 0.05, 0.25, 2
    lam = privpca_sensitivity(k, tau, gap, 1.0) / math.sqrt(2.0)  # Delta(lambda_hat) = sqrt(2)
    cal = privpca_calibration(RELEASE_EPS, RELEASE_DELTA, k, tau, gap, lam)
    real = PrivPCAMechanism.from_calibration(cal, d)
    run = _own(source, real)

    def mech(which: int, n: int, seed: int) -> np.ndarray:
        from dpdist.privacy.noise import NoiseSeed

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
    from dpdist.privacy.expmech_calibration import expmech_calibration
    from dpdist.privacy.gumbel import GumbelMax
    from dpdist.privacy.mechanisms.expmech import SELECT_PURPOSE, ExpMechMechanism

    cal = expmech_calibration(EXPMECH_EPS, EXPMECH_DELTA, EXPMECH_N, EXPMECH_D, 1, 1.0)
    weight = _own(source, ExpMechMechanism.from_calibration(cal).weight)
    q = cal.score_sensitivity
    M = {0: np.diag([q] + [0.0] * (EXPMECH_D - 1)), 1: np.diag([0.0] + [q] * (EXPMECH_D - 1))}

    def mech(which: int, n: int, seed: int) -> np.ndarray:
        from dpdist.privacy.noise import NoiseSeed

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
    from dpdist.privacy.expmech_calibration import expmech_calibration
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


# ---------------------------------------------------------------------------------------
# zCDP second moment (MS25): GUE per level, Gaussian histograms; subsample-and-aggregate
# ---------------------------------------------------------------------------------------

#: zCDP audit instance: n = 40, d = 2, m = 2, alpha = 0.5, normalised radius 2 (one level).
SM_N, SM_D, SM_M, SM_RADIUS, SM_RHO, SM_DELTA = 40, 2, 2, 2.0, 0.5, 1e-3


def _second_moment_level_case(sensitivity: str, source) -> AuditCase:
    from dpdist.privacy.mechanisms.second_moment import level_mechanisms, moment_release
    from dpdist.privacy.second_moment_calibration import level_schedule
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
    from dpdist.engine.second_moment import chunk_clip_rows
    from dpdist.privacy.calibration import float_sensitivity
    from dpdist.privacy.mechanisms.second_moment import moment_release, one_shot_mechanism
    from dpdist.privacy.second_moment_calibration import one_shot_sigma, sensitivity_coefficient
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
    minus noisy bin 1. Claim rho_step = the radius share of split_budget."""
    from dpdist.privacy.mechanisms.second_moment import histogram_mechanism
    from dpdist.privacy.second_moment_calibration import histogram_sigma, split_budget
    from dpdist.privacy.zcdp import cks20_epsilon

    share = split_budget(10.0, 0.1, private_radius=True, private_lambda=True)["radius"]  # 0.5
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
        "sensitivity sqrt(2): rho_step-zCDP (split_budget, histogram_mechanism: lattice Gaussian)",
        notion="zcdp",
        claimed_epsilon=cks20_epsilon(share, SM_DELTA),
        claimed_delta=SM_DELTA,
        claimed_mu=None,
        claimed_rho=share,
        mechanism=mech,
        neighbours=(0, 1),
        default_trials=6_000,
        source=hist,
        notes="sigma from dpdist.privacy.second_moment_calibration.histogram_sigma, as in second_moment()",
        parameters={"rho_step": share, "sigma": histogram_sigma(share), "mechanism": hist.describe()},
    )


#: Subsample-and-aggregate audit instance: k = 10 groups, (epsilon, delta) = (1, 1e-3) per step.
SA_GROUPS, SA_EPS, SA_DELTA = 10, 1.0, 1e-3


def subsample_aggregate_test_case(source: Any = None) -> AuditCase:
    """The subsample-and-aggregate baseline's truncated-Laplace agreement test (Algorithm 3
    line 5): Q + TLap(2/k, epsilon, delta), release-level with Q vs Q - 2/k. Claim: (epsilon,
    delta) for this step (the baseline's total guarantee is (2 epsilon, 4 e^epsilon delta))."""
    from dpdist.privacy.mechanisms.subsample import subsample_aggregate_mechanism
    from dpdist.privacy.second_moment_calibration import baseline_masking_scale, tlap_support

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


# ---------------------------------------------------------------------------------------
# the private mean (clipped-mean Gaussian mechanism): the engine's integer row sum and the
# mechanism's own release
# ---------------------------------------------------------------------------------------

#: Private-mean audit instance: n rows, d coordinates, L2 clip C, budget.
MEAN_N, MEAN_D, MEAN_CLIP, MEAN_EPS, MEAN_DELTA = 20, 3, 1.0, 2.0, 1e-3


def mean_data_case(source: Any = None) -> AuditCase:
    """The clipped-mean Gaussian mechanism, data-level: the replaced row is ``3 C e_0`` in D and
    ``-3 C e_0`` in D' (scaled to norm C by the mechanism's clip; the other rows are fixed
    random rows), so the integer sums differ by about the claimed 2C in coordinate 0. Each
    trial sums the rows with :func:`~dpdist.engine.mean.block_clipped_row_sum` (the engine's
    kernel) and releases through :meth:`ClippedMeanMechanism.release
    <dpdist.privacy.mechanisms.mean.ClippedMeanMechanism.release>` (trial t reads noise
    stream t, i.i.d. across trials); statistic: released coordinate 0. Claim: ``Delta /
    sigma``-GDP with ``Delta = 2 C / n`` and (MEAN_EPS, MEAN_DELTA)-DP."""
    from dpdist.engine.mean import block_clipped_row_sum
    from dpdist.privacy.mechanisms.mean import ClippedMeanMechanism

    real = ClippedMeanMechanism.calibrate(MEAN_EPS, MEAN_DELTA, MEAN_N, MEAN_D, MEAN_CLIP)
    mech = _own(source, real)
    base = np.random.default_rng(5).uniform(-0.5, 0.5, (MEAN_N, MEAN_D))
    D, Dp = base.copy(), base.copy()
    D[0] = 0.0
    Dp[0] = 0.0
    D[0, 0], Dp[0, 0] = 3 * MEAN_CLIP, -3 * MEAN_CLIP
    sums = {w: block_clipped_row_sum(X, mech.clip, mech.unit, mech.norm_bound_sq)[0]
            for w, X in enumerate((D, Dp))}

    def run(which: int, n: int, seed: int) -> np.ndarray:
        S = np.broadcast_to(sums[which], (n, MEAN_D))
        return mech.release(_seed(seed))(S)[:, 0]

    return AuditCase(
        name="mean/data",
        family="mean",
        component="clipped-mean Gaussian mechanism on the worst row change (L2 move 2C/n): "
        "Delta/sigma-GDP with the claimed Delta = 2C/n",
        notion="gdp",
        claimed_epsilon=MEAN_EPS,
        claimed_delta=MEAN_DELTA,
        claimed_mu=real.sensitivity / real.sigma,
        claimed_rho=None,
        mechanism=run,
        neighbours=(0, 1),
        default_trials=10_000,
        source=mech,
        parameters={"sensitivity": real.sensitivity, "sigma": real.sigma, "mechanism": real.describe()},
    )


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
from dpdist.testing.estimator_audits import E2E_CASES  # noqa: E402

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
