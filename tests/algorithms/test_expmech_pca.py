"""ExpMechSparsePCA (COLT 2026, Algorithm 4): exact sampling, privacy of the selection,
accuracy on Model-2 data, determinism, bad input."""

from __future__ import annotations

import json
import math

import dask.array as da
import numpy as np
import pytest
from scipy import stats

from dpdist import ExpMechSparsePCA
from dpdist.algorithms.expmech_pca import expmech_pca
from dpdist.data.model2 import make_model2
from dpdist.engine.gumbel_max import chunk_exact_gumbel_max
from dpdist.engine.subset_ranks import n_subsets, subsets_in_range
from dpdist.exceptions import ValidationError
from dpdist.privacy.mechanisms.expmech import expmech_calibration
from dpdist.privacy.mechanisms.expmech import ExpMechMechanism
from dpdist.privacy.noise.streams import NoiseSeed
from tests.conftest import LONG


def _clipped_moment(X: np.ndarray, tau: float) -> np.ndarray:
    Z = np.clip(X, -tau, tau)
    return Z.T @ Z / len(Z)


def _exact_probabilities(M: np.ndarray, k: int, weight: float, mech: ExpMechMechanism | None = None) -> np.ndarray:
    """pi(S) ~ exp(weight q(S)); with ``mech``, the law the mechanism samples: exp of the
    weighted scores rounded to its lattice (its sampler's own rounding, the same function)."""
    S = subsets_in_range(M.shape[0], k, 0, n_subsets(M.shape[0], k))
    q = np.linalg.eigvalsh(M[S[:, :, None], S[:, None, :]])[:, -1]
    logits = weight * q if mech is None else mech.selection(NoiseSeed(0, True)).lattice_scores(q)
    p = np.exp(logits - logits.max())
    return p / p.sum()


def _tiny_instance():
    rng = np.random.default_rng(7)
    X = rng.standard_normal((40, 5)) * np.array([1.5, 1.2, 1.0, 0.8, 0.6])
    return X, 1.5  # data, tau


@pytest.mark.statistical
def test_selection_matches_exact_exponential_mechanism_probabilities():
    """Chi-square goodness of fit of the Gumbel-max draws against pi(S) ~ exp(eps n q / (8 k tau^2)).

    Seeds 0..N-1 are fixed, so the test is deterministic; at the 1e-3 level a correct sampler
    fails with probability 1e-3 over the choice of seeds.
    """
    X, tau = _tiny_instance()
    n, d, k, eps = X.shape[0], X.shape[1], 2, 1.0
    mech = ExpMechMechanism.from_calibration(expmech_calibration(eps, 1e-6, n, d, k, tau))
    M = _clipped_moment(X, tau)
    p = _exact_probabilities(M, k, mech.weight, mech)
    assert p.min() > 0.01  # every cell has expected count >= 40 in the short form
    n_draws = 40_000 if LONG else 4_000
    counts = np.zeros(len(p))
    for s in range(n_draws):
        counts[chunk_exact_gumbel_max(M, k, 0, len(p), mech.selection(NoiseSeed(s, True))).rank] += 1
    assert stats.chisquare(counts, n_draws * p).pvalue > 1e-3


def test_estimator_draws_the_same_support_as_the_tested_sampler():
    X, tau = _tiny_instance()
    n, d, k, eps = X.shape[0], X.shape[1], 2, 1.0
    mech = ExpMechMechanism.from_calibration(expmech_calibration(eps, 1e-6, n, d, k, tau))
    M = _clipped_moment(X, tau)
    for s in range(6):
        rank = chunk_exact_gumbel_max(M, k, 0, n_subsets(d, k), mech.selection(NoiseSeed(s, True))).rank
        want = subsets_in_range(d, k, rank, rank + 1)[0]
        rel = expmech_pca(X, k, eps, 1e-6, clip=tau, random_state=s, scheduler="synchronous")
        np.testing.assert_array_equal(rel.values["support"], want)


def test_selection_probabilities_move_by_at_most_exp_half_epsilon_on_neighbours():
    """Lemma 29: q(., S) has sensitivity 2 k tau^2 / n, so pi_D / pi_D' <= exp(eps / 2)."""
    X, tau = _tiny_instance()
    n, d, k, eps = X.shape[0], X.shape[1], 2, 1.0
    cal = expmech_calibration(eps, 1e-6, n, d, k, tau)
    mech = ExpMechMechanism.from_calibration(cal)
    worst = worst_lattice = 0.0
    for extreme in (np.full(d, 1e6), np.array([1e6, -1e6, 1e6, -1e6, 1e6]), np.zeros(d)):
        for i in (0, 17):
            Y = X.copy()
            Y[i] = extreme
            M, Mp = _clipped_moment(X, tau), _clipped_moment(Y, tau)
            S = subsets_in_range(d, k, 0, n_subsets(d, k))
            q = np.linalg.eigvalsh(M[S[:, :, None], S[:, None, :]])[:, -1]
            qp = np.linalg.eigvalsh(Mp[S[:, :, None], S[:, None, :]])[:, -1]
            assert np.abs(q - qp).max() <= cal.score_sensitivity * (1 + 1e-12)
            ratio = np.abs(np.log(_exact_probabilities(M, k, cal.gumbel_weight)) - np.log(_exact_probabilities(Mp, k, cal.gumbel_weight)))
            worst = max(worst, ratio.max())
            # the law the float-safe sampler draws from (lattice scores, the mechanism's weight)
            lat = np.abs(np.log(_exact_probabilities(M, k, 0, mech)) - np.log(_exact_probabilities(Mp, k, 0, mech)))
            worst_lattice = max(worst_lattice, lat.max())
    assert worst <= eps / 2 * (1 + 1e-9)
    assert worst_lattice <= eps / 2 * (1 + 1e-9)


@pytest.mark.statistical
def test_accuracy_on_model2_meets_the_planned_bound_with_its_probability():
    """At n = min_samples(target), plan() promises sin^2 <= target w.p. >= 1 - beta = 0.9.

    Failures over N independent (data, noise) seeds are then at most Binomial(N, 0.1); we
    allow the 99% quantile of that law, so a correct implementation fails this test with
    probability <= 1% (in practice the bound is loose and no seed fails).
    """
    d, k, eps, delta, gap, lambda1, beta, target = 10, 2, 1.0, 1e-6, 0.5, 2.0, 0.1, 0.25
    est = ExpMechSparsePCA(k, eps, delta, sigma=math.sqrt(lambda1), beta=beta)
    n = est.min_samples(target, d, eigengap=gap * lambda1)
    assert est.plan(n, d, eigengap=gap * lambda1).error["sin2_bound"] <= target
    n_seeds = 30 if LONG else 5
    failures, errors = 0, []
    for s in range(n_seeds):
        m = make_model2(n, d, k, gap=gap, lambda1=lambda1, chunks=200_000, random_state=1000 + s)
        est = ExpMechSparsePCA(k, eps, delta, sigma=m.sigma, beta=beta, random_state=s, scheduler="threads")
        err = m.sin2_error(est.fit(m.X).components_)
        errors.append(err)
        failures += err > target
    allowed = stats.binom.ppf(0.99, n_seeds, beta)
    assert failures <= allowed, errors


def test_release_is_deterministic_across_schedulers_and_chunkings():
    m = make_model2(3000, 12, 3, gap=0.6, lambda1=3.0, chunks=1000, random_state=3)
    X = m.X.compute()
    runs = []
    for Xin, sched, subsets_per_task in [
        (X, "synchronous", 1 << 22),
        (da.from_array(X, chunks=(700, 5)), "threads", 17),
        (m.X, "threads", 100),
    ]:
        rel = expmech_pca(Xin, 3, 2.0, 1e-6, sigma=m.sigma, random_state=42, scheduler=sched, subsets_per_task=subsets_per_task)
        runs.append(rel)
    for rel in runs[1:]:
        np.testing.assert_array_equal(rel.values["support"], runs[0].values["support"])
        # the Gram sum order differs with the chunking: values agree to rounding
        np.testing.assert_allclose(rel.values["noisy_block"], runs[0].values["noisy_block"], rtol=0, atol=1e-12)
        np.testing.assert_allclose(rel.values["components"], runs[0].values["components"], rtol=0, atol=1e-10)
    other = expmech_pca(X, 3, 2.0, 1e-6, sigma=m.sigma, random_state=43, scheduler="synchronous")
    assert not np.allclose(other.values["noisy_block"], runs[0].values["noisy_block"])


def test_release_is_identical_on_a_distributed_cluster(local_cluster):
    m = make_model2(2000, 10, 2, gap=0.6, lambda1=3.0, chunks=500, random_state=4)
    a = expmech_pca(m.X, 2, 1.0, 1e-6, sigma=m.sigma, random_state=9, scheduler="synchronous")
    b = expmech_pca(m.X, 2, 1.0, 1e-6, sigma=m.sigma, random_state=9, scheduler=local_cluster, subsets_per_task=7)
    np.testing.assert_array_equal(a.values["support"], b.values["support"])
    np.testing.assert_allclose(a.values["noisy_block"], b.values["noisy_block"], rtol=0, atol=1e-12)


def test_fit_sets_attributes_and_metadata():
    m = make_model2(5000, 8, 2, gap=0.5, lambda1=2.0, random_state=1)
    est = ExpMechSparsePCA(2, 1.0, 1e-6, sigma=m.sigma, random_state=0, scheduler="synchronous",
                           assume_centered=True).fit(m.X)
    c = est.components_
    assert c.shape == (1, 8)
    assert np.linalg.norm(c) == pytest.approx(1.0, abs=1e-12)
    assert set(np.flatnonzero(c[0])) <= set(est.support_.tolist()) and len(est.support_) == 2
    assert est.privacy_.epsilon == 1.0 and est.privacy_.delta == 1e-6
    cal = est.release_.parameters["calibration"]
    assert est.noise_scale_ == cal["gaussian_sigma"]
    assert est.selection_scale_ == pytest.approx(cal["gumbel_scale"])
    assert est.release_.values["noisy_block"].shape == (2, 2)
    meta = est.release_.metadata()
    json.dumps(meta)
    assert meta["seeding"]["mode"] == "seeded"
    # (1, 1e-6), C(8, 2) = 28 supports: basic composition, the split that minimises the bound
    split = meta["parameters"]["budget_split"]
    assert split["composition"] == "basic"
    assert split["selection"]["delta"] == 0.0 and split["block"]["delta"] == 1e-6
    assert split["selection"]["epsilon"] + split["block"]["epsilon"] == pytest.approx(1.0, rel=1e-12)
    assert 0.1 < split["selection"]["epsilon"] < 0.9
    assert est.clip_ == pytest.approx(2 * m.sigma * math.sqrt(math.log(4 * 5000 * 8 / 0.1)))


def test_plan_reads_no_data_and_reports_feasibility():
    est = ExpMechSparsePCA(3, 1.0, 1e-6, sigma=1.0, max_subsets=1000)
    p = est.plan(10_000, 500, eigengap=0.5)
    assert p.n_subsets == math.comb(500, 3) and p.feasible is False
    assert p.noise_scales["block_gaussian_sigma"] == p.calibration.gaussian_sigma == p.noise_scale
    assert 0 < p.error["sin2_bound"] <= 1 and p.error_bound == p.error["sin2_bound"] and p.error_scale == 1
    # an infeasible enumeration is an unmet condition of the plan: it is vacuous
    assert p.vacuous and "max_subsets" in p.vacuous_reason
    # with clip only, the error is computed at sigma = clip, and its scale is clip**2
    q = ExpMechSparsePCA(3, 1.0, 1e-6, clip=2.0).plan(100, 10)
    assert q.error_bound == q.error["rayleigh_deficit_bound"] and q.error_scale == 4.0


def _exploding(shape):
    def boom(block):
        raise AssertionError("data must not be read")

    return da.zeros(shape, chunks=shape).map_blocks(boom, dtype=float)


def test_max_subsets_is_a_clear_error_before_reading_data():
    X = _exploding((100, 60))
    with pytest.raises(ValidationError, match=r"C\(60, 3\) = 34,220.*max_subsets = 1,000"):
        ExpMechSparsePCA(3, 1.0, 1e-6, clip=1.0, max_subsets=1000, scheduler="synchronous").fit(X)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(k=0), "k"),
        (dict(k=2.5), "k"),
        (dict(k=7), "k"),
        (dict(epsilon=0.0), "epsilon"),
        (dict(delta=1.0), "delta"),
        (dict(clip=None, sigma=None), "sigma"),
        (dict(clip=-1.0), "clip"),
        (dict(sigma=float("nan"), clip=None), "sigma"),
        (dict(max_subsets=0), "max_subsets"),
        (dict(random_state=-1), "random_state"),
        (dict(random_state=np.random.default_rng(0)), "random_state"),
        (dict(scheduler="nope"), "scheduler"),
    ],
)
def test_bad_parameters_are_refused_before_reading_data(kwargs, match):
    params = dict(k=2, epsilon=1.0, delta=1e-6, clip=1.0, sigma=None, random_state=0, scheduler="synchronous")
    params.update(kwargs)
    k, eps, delta = params.pop("k"), params.pop("epsilon"), params.pop("delta")
    with pytest.raises(ValidationError, match=match):
        ExpMechSparsePCA(k, eps, delta, **params).fit(_exploding((50, 6)))


def test_bad_data_is_refused():
    with pytest.raises(ValidationError, match="2-D"):
        ExpMechSparsePCA(1, 1.0, 1e-6, clip=1.0).fit(np.ones(5))
    X = np.random.default_rng(0).standard_normal((30, 5))
    X[3, 2] = np.nan
    with pytest.raises(ValidationError, match="NaN"):
        ExpMechSparsePCA(2, 1.0, 1e-6, clip=1.0, random_state=0, scheduler="synchronous", on_nonfinite="raise").fit(X)
    # the default: the row holding the NaN is a zero row (the same release as with that row zeroed)
    rel = expmech_pca(X, 2, 1.0, 1e-6, clip=1.0, random_state=0, scheduler="synchronous")
    X0 = X.copy()
    X0[3] = 0.0
    ref = expmech_pca(X0, 2, 1.0, 1e-6, clip=1.0, random_state=0, scheduler="synchronous")
    assert np.isfinite(rel.values["components"]).all()
    np.testing.assert_array_equal(rel.values["noisy_block"], ref.values["noisy_block"])


def test_data_are_read_once_per_release():
    X = np.random.default_rng(0).standard_normal((400, 7))
    calls = []

    def count(block):
        if block.size:  # map_blocks also calls it once on an empty array to infer the meta
            calls.append(block.shape)
        return block

    Xd = da.from_array(X, chunks=(100, 7)).map_blocks(count, dtype=float)
    expmech_pca(Xd, 2, 1.0, 1e-6, clip=2.0, random_state=0, scheduler="synchronous", subsets_per_task=5,
                assume_centered=True)
    # each row chunk read once: the Gram (shared by selection and block release) and the
    # finiteness check share the data's keys
    assert len(calls) == 4


def test_subsets_per_task_is_the_enumeration_task_size_and_chunk_size_is_gone():
    """ExpMechSparsePCA's enumeration task size is named for what it counts (candidate subsets,
    not rows): the same release for any value, and no ``chunk_size`` parameter."""
    import warnings

    X = np.random.default_rng(3).standard_normal((200, 6))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a seeded fit warns that it is not private
        a, b = (ExpMechSparsePCA(2, 1.0, 1e-6, sigma=1.0, random_state=4, scheduler="synchronous",
                                 subsets_per_task=n).fit(X) for n in (1, 1000))
    np.testing.assert_array_equal(a.components_, b.components_)
    assert a.get_params()["subsets_per_task"] == 1 and "chunk_size" not in a.get_params()
    with pytest.raises(TypeError, match="chunk_size"):
        ExpMechSparsePCA(2, 1.0, 1e-6, chunk_size=3)
