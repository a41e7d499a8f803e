"""Audit cases of the raw noise primitives and of the Gaussian releases: Wang-Xu, Analyze
Gauss and the clipped mean."""

from __future__ import annotations

from typing import Any

import numpy as np

from dpdist.testing._case_helpers import (
    Mechanism,
    _exact_second_moment,
    _own,
    _seed,
    _seeded_fits_are_expected,
)
from dpdist.testing.cases import AuditCase


# ---------------------------------------------------------------------------------------
# raw primitives: Laplace, Gaussian, bounded Laplace
# ---------------------------------------------------------------------------------------


def laplace_case(source: Any = None) -> AuditCase:
    """The Laplace sampler :func:`~dpdist.privacy.noise.streams.laplace_from_uniform` at scale
    b = Delta / epsilon, on values 0 and Delta: epsilon-DP (epsilon = 1). ``source``: the
    scale drawn with (default b)."""
    from dpdist.privacy.noise.streams import laplace_from_uniform

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
    """The Gaussian sampler with :func:`~dpdist.privacy.mechanisms.gaussian.gaussian_sigma` at
    (epsilon, delta) (default (2, 1e-3): the analytic Gaussian mechanism): exactly
    Delta/sigma-GDP. ``source``: the standard deviation drawn with (default sigma)."""
    from dpdist.privacy.mechanisms.gaussian import gaussian_sigma
    from dpdist.privacy.noise.streams import gaussian_from_uniform

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
    of :func:`~dpdist.privacy.mechanisms.gaussian.gaussian_sigma` below epsilon = 1 (where it is
    smaller than the classic formula of DR14 Theorem A.1)."""
    return gaussian_case(source, epsilon=0.9, delta=0.05)


def bounded_laplace_case(source: Any = None) -> AuditCase:
    """The bounded Laplace sampler with :func:`~dpdist.privacy.mechanisms.privpca.calibration.bounded_laplace_test`
    at (epsilon, delta) = (1, 1e-3). ``source``: the ``(scale, bound)`` drawn with (default
    the calibration's)."""
    from dpdist.privacy.noise.streams import bounded_laplace_from_uniform
    from dpdist.privacy.mechanisms.privpca.calibration import bounded_laplace_test

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
    from dpdist.privacy.mechanisms.gaussian import wang_xu_calibration

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
    from dpdist.privacy.mechanisms.gaussian import wang_xu_calibration

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
    from dpdist.privacy.mechanisms.gaussian import analyze_gauss_calibration

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
    from dpdist.privacy.mechanisms.gaussian import analyze_gauss_calibration

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
    from dpdist.privacy.mechanisms.gaussian import analyze_gauss_calibration
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
