"""Subsample-and-aggregate baseline (MS25 Algorithm 3): precondition, labelling, bottom, accuracy."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.linalg

from dpdist import NoPrivateResult, SecondMoment, ValidationError
from dpdist.algorithms.baselines import subsample_aggregate as sa
from dpdist.algorithms.second_moment import random_groups
from dpdist.baselines import SubsampleAggregateSecondMoment
from dpdist.data.second_moment_generators import anisotropic_gaussian, outlier_mixture
from dpdist.privacy.budget import ApproxDP
from dpdist.privacy.noise import resolve_random_state
from dpdist.privacy.second_moment_calibration import (
    baseline_max_pass_probability,
    baseline_threshold,
    equal_privacy_baseline_budget,
    tlap_support,
)
from dpdist.privacy.second_moment_noise import truncated_laplace

SCALES = (1.0, 10.0, 100.0, 1000.0)


@pytest.fixture(scope="module")
def clean():
    X = anisotropic_gaussian(100_000, SCALES, random_state=21).X.compute(scheduler="synchronous")
    S = X.T @ X / len(X)
    w, v = np.linalg.eigh(S)
    return X, S, (v / np.sqrt(w)) @ v.T


def _unsafe(**kw):
    kw = {"m": 200, "unsafe_no_privacy": True, "random_state": 0, "scheduler": "synchronous", **kw}
    return SubsampleAggregateSecondMoment(1.0, 1e-6, **kw)


def test_precondition_failure_raises_before_computing(clean):
    X = clean[0]
    est = SubsampleAggregateSecondMoment(1.0, 1e-6, m=200, random_state=0, scheduler="synchronous")
    with pytest.raises(ValidationError, match="unsafe_no_privacy"):
        est.fit(X)
    assert not hasattr(est, "second_moment_")


def test_unsafe_result_is_labelled_not_private(clean):
    est = _unsafe().fit(clean[0])
    meta = est.release_.metadata()
    assert meta["private"] is False and meta["privacy"] is None and est.privacy_ is None
    assert meta["notes"][0].startswith("NOT PRIVATE")
    assert meta["parameters"]["privacy_precondition_holds"] is False
    assert meta["parameters"]["n_groups"] == 500


def test_reported_guarantee_when_the_precondition_holds(clean, monkeypatch):
    # force the precondition (the real one needs n >~ 5e7 m): the labelling and the
    # (2 eps, 4 e^eps delta) guarantee of Lemma A.4 must follow
    monkeypatch.setattr(sa, "baseline_privacy_min_samples", lambda *a: 0.0)
    eps, delta = equal_privacy_baseline_budget(1.0, 1e-6)
    est = SubsampleAggregateSecondMoment(eps, delta, m=200, scheduler="synchronous").fit(clean[0])  # OS entropy
    assert est.release_.private is True
    assert est.privacy_ == ApproxDP(2 * eps, 4 * math.exp(eps) * delta)
    assert est.privacy_.epsilon == pytest.approx(1.0 + 2 * math.sqrt(math.log(1e6)))
    assert est.privacy_.delta == pytest.approx(1e-6)


def test_clean_data_is_within_the_2_alpha_guarantee(clean):
    X, S, S_ih = clean
    est = _unsafe().fit(X)
    rel = np.linalg.eigvalsh(S_ih @ est.second_moment_ @ S_ih)
    assert np.abs(rel - 1).max() <= 2 * 0.5  # Theorem A.6: dist <= 2 alpha
    assert est.q_tilde_ > baseline_threshold(500, 1.0, 1e-6)
    assert np.linalg.eigvalsh(est.second_moment_)[0] > 0  # PSD by construction


def test_too_few_groups_returns_bottom(clean):
    # eps = 1, delta = 1e-6: k = 40 groups, far below 137: the threshold is 0.8 + A with
    # A ~ 0.68, and even Q = 1 passes with probability <= 3.2e-5 (section 5; see the erratum in
    # baseline_max_pass_probability: near k = 136 bottom is NOT certain)
    X = clean[0][: 40 * 100]
    assert baseline_threshold(40, 1.0, 1e-6) > 1.4
    assert baseline_max_pass_probability(40, 1.0, 1e-6) < 4e-5
    with pytest.raises(NoPrivateResult) as info:
        _unsafe(m=100).fit(X)
    assert info.value.stage == "aggregate" and info.value.release.status == "rejected"
    assert "second_moment" not in info.value.release.values


def test_violating_outliers_make_the_baseline_fail_while_recdpsme_keeps_the_lower_bound():
    data = outlier_mixture(50_000, SCALES, eta=0.02, f=50.0, random_state=4, chunk_rows=50_000)
    X = data.X.compute(scheduler="synchronous")
    m = 100
    # exact agreement Q with the same partition the baseline uses (not private; test oracle)
    gids, k = random_groups(resolve_random_state(0), len(X), m, purpose=sa.PURPOSE_PARTITION)
    grams = np.stack([X[gids == t].T @ X[gids == t] / m for t in range(k)])
    Q = sa.group_agreement(grams, 0.5).mean()
    assert Q < 0.8  # eta m = 2 outliers per group on average: groups disagree (prototype: Q = 0.69)
    assert baseline_max_pass_probability(k, 1.0, 1e-6, Q) < 1e-6
    with pytest.raises(NoPrivateResult):
        _unsafe(m=m).fit(X)
    R = float(np.linalg.norm(X, axis=1).max())
    out = SecondMoment(1.0, m=5, radius=R, lambda_min=0.5, random_state=1, scheduler="synchronous").fit(X).second_moment_
    Sd_ih = np.diag(1 / np.sqrt(np.diag(data.info["clean_second_moment"])))
    assert np.linalg.eigvalsh(Sd_ih @ out @ Sd_ih)[0] >= 0.9


def test_distance_matches_generalised_eigenvalues(rng):
    A = [np.cov(rng.standard_normal((4, 50))) for _ in range(5)]
    A.append(np.diag([1.0, 1.0, 1.0, 0.0]))  # singular
    D = sa.psd_distance_matrix(np.stack(A))
    for i in range(5):
        assert D[i, i] == pytest.approx(0.0, abs=1e-10)
        for j in range(5):
            lam = scipy.linalg.eigh(A[j], A[i], eigvals_only=True)
            expected = max(np.abs(lam - 1).max(), np.abs(1 / lam - 1).max())
            assert D[i, j] == pytest.approx(expected, rel=1e-9)
    assert np.all(np.isinf(D[5])) and np.all(np.isinf(D[:, 5]))
    np.testing.assert_array_equal(D, D.T)


def test_truncated_laplace_stays_in_its_support():
    seed = resolve_random_state(1)
    A = tlap_support(0.02, 1.0, 1e-6)
    z = np.array([truncated_laplace(seed, "test/tlap", i, 0.02, 1.0, A) for i in range(2000)])
    assert np.all(np.abs(z) <= A)
    # Laplace(0.02) conditioned on |z| <= A ~ 0.28: mean |z| ~ 0.02 (truncation is negligible)
    assert abs(np.abs(z).mean() - 0.02) < 5 * 0.02 / math.sqrt(2000)


def test_same_seed_same_output_and_m_at_least_d(clean):
    X = clean[0][:40_000]
    a = _unsafe().fit(X).second_moment_
    b = _unsafe(scheduler="threads").fit(X).second_moment_
    np.testing.assert_allclose(a, b, rtol=1e-10)
    with pytest.raises(ValidationError, match="m must be >= n_features"):
        _unsafe(m=3).fit(X)


def test_the_masked_output_is_released_on_the_exact_grid(clean):
    """The fit releases the mechanism's exact masked output (dpdist.privacy.masking): every entry
    a grid value, the matrix symmetric, the mask's law and eta_b in the release's metadata."""
    from dpdist.privacy.masking import grid_round

    est = _unsafe().fit(clean[0][:40_000])
    m = est.second_moment_
    assert np.array_equal(grid_round(m), m) and np.array_equal(m, m.T)
    meta = est.release_.metadata()
    (mech,) = meta["mechanisms"]
    assert mech["mask"]["eta_b"] == meta["parameters"]["eta_b"] > 0
    assert "mask" in mech["purposes"] and "mask" not in mech["noise"]
    assert any(note.startswith("float-safe masked output") for note in meta["notes"])
