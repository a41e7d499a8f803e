"""Budget and seeding records, unsafe-mode warnings, and non-finite rows (the
library's side; the command line's is in tests/cli).

* Every ``NoPrivateResult`` carries the Release with the budget already spent.
* A seeded release is not private (``private`` False, the reason in the metadata), and
  ``format_release`` prints that; an OS-entropy release is private.
* A ``NoiseSeed`` object cannot drive two fits.
* A seeded fit, a NOT PRIVATE baseline and ``unsafe_no_privacy=True`` each emit exactly one
  ``dpdist.PrivacyWarning`` per fit (the global test filter ignores it; ``pytest.warns`` and
  ``warnings.catch_warnings`` record it); a private fit emits none.
* ``on_nonfinite="zero"`` (the default) replaces a row holding NaN or inf by a zero row before
  any statistic, on every scheduler: the release equals, bit for bit, the release of the same
  data with that row set to zero (same seed).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import dpdist
from dpdist.algorithms.baselines.subsample_aggregate import release as sa
from dpdist.baselines import SubsampleAggregateSecondMoment
from dpdist.exceptions import NoPrivateResult, PrivacyWarning, ValidationError
from dpdist.privacy.noise.streams import NoiseSeed, resolve_random_state
from dpdist.privacy.release import SEEDED_REASON
from dpdist.privacy.zcdp import ZCDP
from dpdist.report.text import format_release
from tests.estimator_zoo import FITS, NOT_PRIVATE, gauss, release_of


def _fit(name, X, rs, scheduler="synchronous"):
    fit, _ = FITS[name]
    try:
        return release_of(fit(X, rs, scheduler))
    except NoPrivateResult as exc:
        return exc.release


def _same_values(a, b):
    assert type(a) is type(b) or (np.isscalar(a) and np.isscalar(b))
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _same_values(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same_values(x, y)
    elif sp.issparse(a):
        assert (a != b).nnz == 0
    else:
        np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------------------------------
# item 5: non-finite rows are zero rows before any statistic, on every scheduler
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module", params=["synchronous", "threads", "distributed"])
def scheduler(request):
    if request.param != "distributed":
        yield request.param
        return
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with Client(cluster, set_as_default=False) as client:
            yield client


@pytest.mark.slow
@pytest.mark.parametrize("name", list(FITS))
def test_nonfinite_rows_are_zero_rows_before_any_statistic(name, scheduler):
    X = FITS[name][1]()
    bad, zero = np.array(X, dtype=np.float64), np.array(X, dtype=np.float64)
    bad[5] = np.nan
    bad[11, 0] = np.inf
    bad[12, -1] = -np.inf
    zero[[5, 11, 12]] = 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        a, b = _fit(name, bad, 17, scheduler), _fit(name, zero, 17, scheduler)
    _same_values(a.values, b.values)
    ma, mb = a.metadata(), b.metadata()
    assert ma["parameters"] == mb["parameters"] and ma["notes"] == mb["notes"]  # nothing counts the rows
    assert any("zero rows" in n for n in ma["notes"])


@pytest.mark.parametrize("name", ["SparseCovariance", "SecondMoment", "SpectralNorm", "SubsampleAggregateSecondMoment"])
def test_raise_mode_refuses_before_anything_and_says_it_reveals_a_bit(name):
    X = FITS[name][1]()
    X[3, 1] = np.nan
    est = {
        "SparseCovariance": lambda: dpdist.SparseCovariance(2, 1.0, 1e-5, clip=2.0, on_nonfinite="raise",
                                                            scheduler="synchronous"),
        "SecondMoment": lambda: dpdist.SecondMoment(1.0, m=1, radius=20.0, lambda_min=0.5, on_nonfinite="raise",
                                                    scheduler="synchronous"),
        "SpectralNorm": lambda: dpdist.SpectralNorm(2, 50.0, 1e-3, gap=0.5, sigma=math.sqrt(5), n_batches=100, tau=0.02,
                                                    on_nonfinite="raise", scheduler="synchronous"),
        "SubsampleAggregateSecondMoment": lambda: SubsampleAggregateSecondMoment(
            2.0, 1e-3, m=6, unsafe_no_privacy=True, on_nonfinite="raise", scheduler="synchronous"),
    }[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        with pytest.raises(ValidationError, match="NaN"):
            est().fit(X)
        X[3, 1] = 0.0
        try:
            rel = est().fit(X).release_
        except NoPrivateResult as exc:
            rel = exc.release
    assert any("reveals that bit" in n for n in rel.notes) and rel.parameters["on_nonfinite"] == "raise"


# ---------------------------------------------------------------------------------------
# item 7: budget and seeding records
# ---------------------------------------------------------------------------------------


def test_second_moment_early_rejection_carries_the_spent_budget():
    # rank-1 data: every group of m rows is singular, the lambda histogram's argmax is the
    # underflow bin, and SecondMoment stops after the radius and lambda_min steps
    X = np.outer(np.random.default_rng(0).standard_normal(2000), [1.0, 2.0, 3.0])
    with pytest.raises(NoPrivateResult) as info:
        dpdist.SecondMoment(8.0, m=20, radius=50.0, scheduler="synchronous").fit(X)
    rel = info.value.release
    assert info.value.stage == "init-lambda" and rel is not None and rel.status == "rejected"
    assert isinstance(rel.privacy, ZCDP) and rel.privacy.rho == pytest.approx(8.0 * 0.1 / 2)  # lambda's share only
    assert rel.private and rel.parameters["rejected_stage"] == "init-lambda"
    assert "rejected" in format_release(rel.metadata())


def test_every_no_private_result_carries_its_release(monkeypatch):
    """SparsePCA on data that fails its tests, and subsample-and-aggregate (private code path,
    precondition forced) returning bottom: the release with the budget spent."""
    X = np.random.default_rng(1).standard_normal((3000, 6)) * 10
    with pytest.raises(NoPrivateResult) as info:
        dpdist.SparsePCA(2, 1.0, 1e-3, gap=0.5, sigma=1.0, n_batches=100, tau=0.01, scheduler="synchronous").fit(X)
    rel = info.value.release
    # the private mean's share (0.1) and PrivNorm's half of the rest
    assert rel.status == "rejected" and rel.privacy.epsilon == pytest.approx(0.55)
    assert all(isinstance(v, bool) for t in rel.values["tests"].values() for k, v in t.items() if k.endswith("passed"))
    monkeypatch.setattr(sa, "baseline_privacy_min_samples", lambda *a: 0.0)
    Y = np.random.default_rng(2).standard_normal((60, 2)) * np.array([1.0, 1e-9])  # ill-conditioned groups
    with pytest.raises(NoPrivateResult) as info:
        SubsampleAggregateSecondMoment(0.01, 1e-9, m=2, scheduler="synchronous").fit(Y)
    rel = info.value.release
    assert rel.status == "rejected" and rel.privacy is not None and "q_tilde" in rel.parameters


def test_a_seeded_release_is_not_private_and_says_so():
    X = gauss()
    seeded = dpdist.SparseCovariance(2, 1.0, 1e-5, clip=2.0, random_state=3, scheduler="synchronous").fit(X).release_
    meta = seeded.metadata()
    assert seeded.private is False and meta["private"] is False and SEEDED_REASON in meta["not_private_reasons"]
    assert meta["privacy"] == {"type": "approx-dp", "epsilon": 1.0, "delta": 1e-5}  # the budget is still charged
    text = format_release(meta)
    assert "NOT PRIVATE" in text and "seed" in text and "SEEDED" in text
    fresh = dpdist.SparseCovariance(2, 1.0, 1e-5, clip=2.0, scheduler="synchronous").fit(X).release_
    assert fresh.private is True and fresh.metadata()["not_private_reasons"] == []
    assert "NOT PRIVATE" not in format_release(fresh.metadata())
    assert "(1, 1e-05)-DP spent" in format_release(fresh.metadata())


def test_a_noise_seed_object_cannot_drive_two_fits():
    X = gauss()
    seed = NoiseSeed(2**100 + 7, seeded=False)
    est = dpdist.SparseCovariance(2, 1.0, 1e-5, clip=2.0, random_state=seed, scheduler="synchronous")
    est.fit(X)
    assert seed.consumed
    with pytest.raises(ValidationError, match="already drove a fit"):
        est.fit(X)
    with pytest.raises(ValidationError, match="already drove a fit"):
        dpdist.SecondMoment(1.0, m=1, radius=20.0, lambda_min=0.5, random_state=seed, scheduler="synchronous").fit(X)
    # None draws fresh entropy every fit; an int may be reused (seeded, hence not private)
    assert resolve_random_state(None).entropy != resolve_random_state(None).entropy
    assert resolve_random_state(5) == resolve_random_state(5)


# ---------------------------------------------------------------------------------------
# PrivacyWarning exactly once per fit
# ---------------------------------------------------------------------------------------


def _warnings_of(fn) -> list:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            fn()
        except NoPrivateResult:
            pass
    return [w for w in caught if issubclass(w.category, PrivacyWarning)]


@pytest.mark.parametrize("name", list(FITS))
def test_unsafe_fits_warn_exactly_once_and_private_fits_never(name):
    fit, data = FITS[name]
    X = data()
    seeded = _warnings_of(lambda: fit(X, 3, "synchronous"))
    assert len(seeded) == 1, [str(w.message) for w in seeded]
    msg = str(seeded[0].message)
    assert "NOT PRIVATE" in msg or "unsafe" in msg
    with pytest.warns(PrivacyWarning):
        try:
            fit(X, 3, "synchronous")
        except NoPrivateResult:
            pass
    fresh = _warnings_of(lambda: fit(X, None, "synchronous"))
    if name in NOT_PRIVATE:
        assert len(fresh) == 1 and ("NOT PRIVATE" in str(fresh[0].message) or "unsafe" in str(fresh[0].message))
    else:
        assert fresh == []


def test_unsafe_no_privacy_warns_even_when_the_precondition_holds(monkeypatch):
    monkeypatch.setattr(sa, "baseline_privacy_min_samples", lambda *a: 0.0)
    X = gauss()
    caught = _warnings_of(lambda: SubsampleAggregateSecondMoment(2.0, 1e-3, m=6, unsafe_no_privacy=True,
                                                                 scheduler="synchronous").fit(X))
    assert len(caught) == 1 and "unsafe_no_privacy" in str(caught[0].message)
