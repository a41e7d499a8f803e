"""Same-seed neighbour tests on hostile data, for every public estimator and baseline.

Two neighbouring datasets (same n, one row replaced) are fitted with the same ``random_state``,
so both releases carry the same noise. The parts released under both must then differ by at
most the mechanism's sensitivity, in the norm its noise is calibrated for, times (1 + 1e-9),
and no release may hold a NaN or an infinity. The replaced row is hostile: float32's largest
value, a 9.97e36 fill value, +-1e300, rows of 1e154 (their squared norm overflows), subnormal
rows, a row of NaN, +-inf; and a dataset where every row is huge.

Sensitivities come from each release's own record (``kappa * Delta`` of the calibration, or
``sigma sqrt(2 rho_step)`` for the zCDP Gaussian releases), never from this file: a calibration
that under-states its sensitivity fails here as soon as the data reach it. For mechanisms that
select (top-k, exponential mechanism, FriendlyCore tests) only the parts released under both
runs are compared (the same selected columns, the same support, the same test outcomes).

The NOT PRIVATE baselines (ThresholdedCovariance, ThresholdedPCA, subsample-and-aggregate with
``unsafe_no_privacy``) have no noise and no sensitivity: for them only the absence of NaN and
inf is checked (a second moment that overflows is refused, not released).

The twins of :mod:`tests.audit_twins` (the cancelling SecondMoment kernel, the unbounded
PrivNorm) carry the two reproduced bugs: the same comparison flags both.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import dpdist
from dpdist.algorithms.baselines.subsample_aggregate import release as sa
from dpdist.algorithms.second_moment.release import one_shot_second_moment
from dpdist.baselines import (
    AnalyzeGauss,
    GaussianCovariance,
    GaussianPCA,
    SubsampleAggregateSecondMoment,
    ThresholdedCovariance,
    ThresholdedPCA,
)
from dpdist.exceptions import NoPrivateResult, ValidationError
from dpdist.testing.estimator_audits import spike_rows
from tests.audit_twins import cancelling_second_moment_kernel, unbounded_privnorm
from tests.estimator_zoo import gauss, spike

TOL = 1.0 + 1e-9
REPLACED = 7  # the index of the replaced row

#: The hostile replacements of one row (functions of the row they replace).
HOSTILE = {
    "float32-max": lambda r: np.full_like(r, float(np.finfo(np.float32).max)),
    "fill-9.97e36": lambda r: np.r_[9.97e36, r[1:]],
    "+1e300": lambda r: np.full_like(r, 1e300),
    "-1e300": lambda r: np.r_[-1e300, np.full(r.size - 1, 1e300)],
    "1e154": lambda r: np.full_like(r, 1e154),
    "subnormal": lambda r: np.full_like(r, 5e-324),
    "nan": lambda r: np.full_like(r, np.nan),
    "+inf": lambda r: np.r_[np.inf, r[1:]],
    "-inf": lambda r: np.r_[r[:-1], -np.inf],
}
#: Every row huge: all rows 1e154 in D (with alternating signs), one row ordinary in D'.
ALL_HUGE = "all-rows-1e154"
PAIRS = [*HOSTILE, ALL_HUGE]


def neighbours(X: np.ndarray, how: str) -> tuple[np.ndarray, np.ndarray]:
    X = np.array(X, dtype=np.float64)
    if how == ALL_HUGE:
        huge = np.where(np.arange(X.shape[1]) % 2 == 0, 1e154, -1e154) * np.where(np.arange(len(X)) % 2, 1.0, -1.0)[:, None]
        Xp = huge.copy()
        Xp[REPLACED] = X[REPLACED]
        return huge, Xp
    Xp = X.copy()
    Xp[REPLACED] = HOSTILE[how](X[REPLACED])
    return X, Xp


def assert_finite(release) -> None:
    """No NaN or inf in any released value (arrays, sparse matrices, scalars, dicts)."""
    import scipy.sparse as sp

    def walk(v):
        if sp.issparse(v):
            assert np.isfinite(v.data).all()
        elif isinstance(v, dict):
            for w in v.values():
                walk(w)
        elif isinstance(v, (list, tuple)):
            for w in v:
                walk(w)
        elif isinstance(v, (np.ndarray, float, int, np.floating)) and not isinstance(v, bool):
            arr = np.asarray(v)
            if arr.dtype.kind == "f":
                assert np.isfinite(arr).all(), release.mechanism

    walk(release.values)


def upper(M) -> np.ndarray:
    M = M.toarray() if hasattr(M, "toarray") else np.asarray(M)
    return M[np.triu_indices(M.shape[0])]


# ---------------------------------------------------------------------------------------
# one comparison per mechanism: returns max over compared parts of diff / bound
# ---------------------------------------------------------------------------------------


def privcov_ratio(a, b) -> float:
    cal = a.parameters["calibration"]
    bound = cal["sensitivity"] * cal["float_factor"]
    ratios = [np.abs(a.values["diagonal"] - b.values["diagonal"]).max() / bound]
    same = np.all(np.sort(a.values["selected"], axis=1) == np.sort(b.values["selected"], axis=1), axis=1)
    for i in np.flatnonzero(same):
        oa, ob = np.argsort(a.values["selected"][i]), np.argsort(b.values["selected"][i])
        diff = a.values["selected_values"][i][oa] - b.values["selected_values"][i][ob]
        ratios.append(np.abs(diff).max() / bound)
    assert same.sum() >= 1  # some rows are compared, not only the diagonal
    return max(ratios)


def common_entries_ratio(Ma, Mb, bound) -> float:
    """L2 distance of the upper-triangle entries released under both (thresholding and top-k
    are post-processing of the noisy matrix: on the entries kept by both, the noise cancels)."""
    A, B = Ma.toarray() if hasattr(Ma, "toarray") else Ma, Mb.toarray() if hasattr(Mb, "toarray") else Mb
    iu = np.triu_indices(A.shape[0])
    both = (A[iu] != 0) & (B[iu] != 0)
    assert both.sum() >= A.shape[0]  # at least the diagonal
    return float(np.linalg.norm(A[iu][both] - B[iu][both]) / bound)


def gauss_ratio(a, b) -> float:
    p = a.parameters
    return common_entries_ratio(a.values["covariance"], b.values["covariance"], p["sensitivity"] * p["float_factor"])


def expmech_ratio(a, b) -> float:
    if not np.array_equal(a.values["support"], b.values["support"]):
        pytest.fail("the exponential mechanism chose different supports on this pair")
    cal = a.parameters["calibration"]
    bound = cal["block_sensitivity"] * cal["float_factor"]
    return float(np.linalg.norm(a.values["noisy_block"] - b.values["noisy_block"]) / bound)


def second_moment_ratio(a, b) -> float:
    """Level k's released matrix is compared while the public maps of levels < k agree (the
    projections are post-processing of the earlier levels' noise: once they differ, the
    levels' inputs differ and nothing more is released under both)."""
    p = a.parameters
    L = p["n_levels"]
    rho_level = p["budget_split"]["main"] / L
    ratios = []
    for k in range(L):
        if k > 0 and not np.array_equal(a.values["projections"][k - 1], b.values["projections"][k - 1]):
            break
        bound = a.noise_scales["level_sigmas"][k] * math.sqrt(2 * rho_level)  # kappa Delta_k
        diff = upper(a.values["level_matrices"][k]) - upper(b.values["level_matrices"][k])
        ratios.append(float(np.linalg.norm(diff) / bound))
    if L == 1:  # the release itself is the one level's matrix, rescaled by (1 - alpha) lambda
        scale = (1 - p["alpha"]) * p["lambda_min"]
        np.testing.assert_allclose(a.values["second_moment"], scale * a.values["level_matrices"][0], rtol=1e-12)
    return max(ratios)


def one_shot_ratio(a, b) -> float:
    bound = a.noise_scales["sigma"] * math.sqrt(2 * a.parameters["rho"])
    return float(np.linalg.norm(upper(a.values["second_moment"]) - upper(b.values["second_moment"])) / bound)


def norm_ratio(a, b) -> float:
    if "norm" not in a.values or "norm" not in b.values:
        return 0.0  # a private test rejected in one run: only the test bits were released
    return abs(a.values["norm"] - b.values["norm"]) / a.noise_scales["norm/sensitivity"]


def pca_ratio(a, b) -> float:
    if "projector_top_k2" not in a.values or "projector_top_k2" not in b.values:
        return 0.0
    ra, ca, va = a.values["projector_top_k2"]
    rb, cb, vb = b.values["projector_top_k2"]
    A = {(int(r), int(c)): v for r, c, v in zip(ra, ca, va)}
    B = {(int(r), int(c)): v for r, c, v in zip(rb, cb, vb)}
    common = sorted(set(A) & set(B))
    assert common
    diff = np.array([A[key] - B[key] for key in common])
    return float(np.linalg.norm(diff) / a.noise_scales["pca/sensitivity"])


def subsample_ratio(a, b) -> float:
    k = a.parameters["n_groups"]
    return abs(a.parameters["q_tilde"] - b.parameters["q_tilde"]) / (2.0 / k)


# ---------------------------------------------------------------------------------------
# instances (tiny data, the synchronous scheduler)
# ---------------------------------------------------------------------------------------


SYNC = dict(scheduler="synchronous")

PRIVATE = {
    "SparseCovariance": (
        # the second moment: with a private mean every centred row moves, not one
        lambda X, rs: dpdist.SparseCovariance(2, 1.0, 1e-5, clip=2.0, random_state=rs, tile_size=3,
                                              assume_centered=True, **SYNC).fit(X).release_,
        lambda: gauss(300, 6),
        privcov_ratio,
    ),
    "SparseCovariance-laplace": (
        lambda X, rs: dpdist.SparseCovariance(2, 1.0, 1e-5, clip=2.0, random_state=rs, tile_size=3,
                                              selection="laplace", assume_centered=True, **SYNC).fit(X).release_,
        lambda: gauss(300, 6),
        privcov_ratio,
    ),
    "SparseCovariance-paper": (
        lambda X, rs: dpdist.SparseCovariance(2, 1.0, 1e-5, clip=2.0, random_state=rs, tile_size=3, selection="paper",
                                              assume_centered=True, **SYNC).fit(X).release_,
        lambda: gauss(300, 6),
        privcov_ratio,
    ),
    "GaussianCovariance": (
        lambda X, rs: GaussianCovariance(1.0, 1e-5, clip=2.0, threshold=1e-12, random_state=rs, tile_size=3, **SYNC).fit(X).release_,
        lambda: gauss(300, 6),
        gauss_ratio,
    ),
    "GaussianPCA": (
        lambda X, rs: GaussianPCA(1.0, 1e-5, clip=2.0, threshold=1e-12, random_state=rs, tile_size=3, **SYNC).fit(X).release_,
        lambda: gauss(300, 6),
        gauss_ratio,
    ),
    "AnalyzeGauss": (
        lambda X, rs: AnalyzeGauss(1.0, 1e-5, row_norm=3.0, random_state=rs, tile_size=3, **SYNC).fit(X).release_,
        lambda: gauss(300, 6),
        gauss_ratio,
    ),
    "ExpMechSparsePCA": (
        lambda X, rs: dpdist.ExpMechSparsePCA(2, 4.0, 1e-5, clip=3.0, random_state=rs, **SYNC).fit(X).release_,
        lambda: spike_rows(400, noise=0.01),
        expmech_ratio,
    ),
    # one level (kappa_0 = 50 / 0.5 / 0.5 = 200 <= C = 640 m): the release is the level's matrix
    "SecondMoment": (
        lambda X, rs: dpdist.SecondMoment(1.0, m=5, radius=5.0, lambda_min=0.5, random_state=rs, **SYNC).fit(X).release_,
        lambda: gauss(500, 3, scales=[1.0, 1.5, 2.0]),
        second_moment_ratio,
    ),
    # three levels: the last level's matrix, rewound from the release through its projections
    "SecondMoment-3-levels": (
        lambda X, rs: dpdist.SecondMoment(1.0, m=1, radius=20.0, lambda_min=0.5, random_state=rs, **SYNC).fit(X).release_,
        lambda: gauss(500, 3, scales=[1.0, 3.0, 9.0]),
        second_moment_ratio,
    ),
    "one_shot_second_moment": (
        lambda X, rs: one_shot_second_moment(X, 1.0, radius=4.0, random_state=rs, **SYNC),
        lambda: gauss(300, 4),
        one_shot_ratio,
    ),
    "SpectralNorm": (
        lambda X, rs: dpdist.SpectralNorm(2, 50.0, 1e-3, gap=0.5, sigma=math.sqrt(5), n_batches=100, tau=0.02,
                                          random_state=rs, **SYNC).fit(X).release_,
        spike,
        norm_ratio,
    ),
    "SparsePCA": (
        lambda X, rs: dpdist.SparsePCA(2, 50.0, 1e-3, gap=0.5, sigma=math.sqrt(5), n_batches=100, tau=0.02,
                                       lambda_hat=5.0, random_state=rs, **SYNC).fit(X).release_,
        spike,
        pca_ratio,
    ),
}


def released(fit, X, random_state=12345):
    """The release of one fit, or the rejection's release (FriendlyCore's tests may reject:
    then only their bits are released)."""
    try:
        return fit(X, random_state)
    except NoPrivateResult as exc:
        return exc.release


@pytest.fixture
def forced_subsample_precondition(monkeypatch):
    """The baseline's privacy precondition needs n >~ 5e7 m: force it (its TLap step's
    guarantee does not depend on it) so that the private code path runs on tiny data."""
    monkeypatch.setattr(sa, "baseline_privacy_min_samples", lambda *a: 0.0)


@pytest.mark.parametrize("how", PAIRS)
@pytest.mark.parametrize("name", list(PRIVATE))
def test_same_seed_neighbours_differ_by_at_most_the_sensitivity(name, how):
    fit, data, ratio = PRIVATE[name]
    X, Xp = neighbours(data(), how)
    a, b = released(fit, X), released(fit, Xp)
    assert_finite(a)
    assert_finite(b)
    assert ratio(a, b) <= TOL, (name, how, ratio(a, b))


@pytest.mark.parametrize("how", PAIRS)
def test_subsample_aggregate_neighbours(how, forced_subsample_precondition):
    X, Xp = neighbours(gauss(400, 2, seed=5), how)
    fit = SubsampleAggregateSecondMoment(2.0, 1e-3, m=4, random_state=99, **SYNC).fit
    out = []
    for data in (X, Xp):
        try:
            est = fit(data)
            assert_finite(est.release_)
            out.append(est.release_)
        except NoPrivateResult as exc:  # bottom: the noisy agreement is still released
            assert_finite(exc.release)
            out.append(exc.release)
    assert subsample_ratio(*out) <= TOL
    assert out[0].privacy is not None  # the private code path ran (precondition forced)


# ---------------------------------------------------------------------------------------
# NOT PRIVATE baselines: no neighbour bound applies (no noise, no clipping); no NaN/inf
# ---------------------------------------------------------------------------------------

NOT_PRIVATE = {
    "ThresholdedCovariance": lambda X: ThresholdedCovariance(threshold=0.1, tile_size=3, **SYNC).fit(X).release_,
    "ThresholdedPCA": lambda X: ThresholdedPCA(threshold=0.1, tile_size=3, **SYNC).fit(X).release_,
    "SubsampleAggregate-unsafe": lambda X: SubsampleAggregateSecondMoment(
        2.0, 1e-3, m=4, unsafe_no_privacy=True, **SYNC).fit(X).release_,
}


@pytest.mark.parametrize("how", PAIRS)
@pytest.mark.parametrize("name", list(NOT_PRIVATE))
def test_not_private_baselines_release_no_nan_or_inf(name, how):
    """These have no sensitivity to hold them to: they are checked for finite output only (an
    overflowing second moment is refused with a ValidationError instead of released)."""
    _, Xp = neighbours(gauss(200, 4, seed=2), how)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", dpdist.PrivacyWarning)
        try:
            rel = NOT_PRIVATE[name](Xp)
        except NoPrivateResult as exc:
            rel = exc.release
        except ValidationError as exc:
            assert "overflows" in str(exc)  # refused: nothing released
            return
    assert [w.category for w in caught] == [dpdist.exceptions.NotPrivateWarning]
    assert not rel.private
    assert_finite(rel)


# ---------------------------------------------------------------------------------------
# the twins carry the reproduced bugs: the same comparison flags them
# ---------------------------------------------------------------------------------------


def test_the_cancelling_second_moment_kernel_is_caught():
    fit, data, ratio = PRIVATE["SecondMoment"]
    X, Xp = neighbours(data(), "fill-9.97e36")
    assert ratio(fit(X, 1), fit(Xp, 1)) <= TOL
    with cancelling_second_moment_kernel():
        a, b = fit(X, 1), fit(Xp, 1)
    assert ratio(a, b) > 2  # the fill value cancels every other row of its batch (measured: 4.9)


def test_the_unbounded_privnorm_is_caught():
    """What the entry clip prevents: rows 1e10 e_1 and a neighbour that zeroes one row. The exact
    statistics are equal (the changed batch gets weight 0 in both), but without the entry clip
    the rounding of Sigma_bar (about 1e20) dwarfs the sensitivity."""
    X = np.zeros((100 * 30, 6))
    X[:, 0] = 1e10
    Xp = X.copy()
    Xp[REPLACED] = 0.0

    def fit(data):
        return dpdist.SpectralNorm(1, 50.0, 1e-3, gap=0.5, sigma=1.0, n_batches=100, tau=0.05, random_state=3, assume_centered=True,
                                   **SYNC).fit(data).release_

    a, b = fit(X), fit(Xp)
    assert "norm" in a.values and "norm" in b.values and norm_ratio(a, b) <= TOL
    with unbounded_privnorm():
        a, b = fit(X), fit(Xp)
    assert norm_ratio(a, b) > 1000  # measured: about 6e5 times the sensitivity
