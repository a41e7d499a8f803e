"""PrivCov (Algorithm 1): assembly, noise calibration, accuracy, determinism, bad input."""

from __future__ import annotations

import math

import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
from dask.callbacks import Callback
from scipy import optimize, stats

import dpdist
from tests.privacy.float_factor import kappa
from dpdist.algorithms.sparse_covariance import assemble_privcov, private_sparse_covariance
from dpdist.data.synthetic import make_model1
from dpdist.exceptions import DataConversionWarning, ValidationError
from dpdist.report.metrics import operator_norm, support_metrics
from tests.privacy.balle_wang import bw_delta

from ..conftest import LONG


# ---------------------------------------------------------------- assembly (lines 9-17)
def test_assembly_applies_the_symmetric_and_rule():
    cols = np.array([[1, 2], [0, 2], [3, 0], [2, 1]])
    vals = np.array([[10.0, 20.0], [11.0, 21.0], [32.0, 30.0], [43.0, 41.0]])
    diag = np.array([1.0, 2.0, 3.0, 4.0])
    M = assemble_privcov(cols, vals, diag).toarray()
    expected = np.diag(diag)
    expected[0, 1] = expected[1, 0] = (10.0 + 11.0) / 2  # 1 in S_0 and 0 in S_1
    expected[0, 2] = expected[2, 0] = (20.0 + 30.0) / 2  # 2 in S_0 and 0 in S_2
    expected[2, 3] = expected[3, 2] = (32.0 + 43.0) / 2  # 3 in S_2 and 2 in S_3
    # (1, 2): 2 in S_1 but 1 not in S_2 -> 0; (1, 3): 1 in S_3 but 3 not in S_1 -> 0
    np.testing.assert_array_equal(M, expected)


def test_assembly_uses_released_diagonal_when_i_in_s_i():
    M = assemble_privcov(np.array([[0], [1]]), np.array([[5.0], [6.0]]), np.array([5.0, 6.0]))
    np.testing.assert_array_equal(M.toarray(), np.diag([5.0, 6.0]))


# ---------------------------------------------------------------- noise is what it claims
def _release_errors(selection):
    """Data with an exactly known second moment: every row equals v, so Sigma_hat = v v^T.
    Returns (released entries minus truth over 8 seeded fits, the last fit)."""
    d, k, n = 24, 3, 1000
    v = np.array([(-1.0, 0.5, 2.0)[i % 3] for i in range(d)])  # products exact in binary
    X = np.tile(v, (n, 1))
    truth = np.outer(v, v)
    errs = []
    for seed in range(8):
        est = dpdist.SparseCovariance(k, 1.0, 1e-3, clip=3.0, random_state=seed, scheduler="synchronous",
                                      selection=selection, assume_centered=True).fit(X)
        sel = est.selected_
        errs.append((est.release_.values["selected_values"] - np.take_along_axis(truth, sel, axis=1)).ravel())
        errs.append(est.release_.values["diagonal"] - np.diag(truth))
    return np.concatenate(errs), est


def test_released_values_have_laplace_scale_noise_scale():
    """selection="paper": released entries minus truth must be i.i.d. Laplace(noise_scale_)
    (fresh z noise, independent of the selection)."""
    e, est = _release_errors("paper")
    b = est.noise_scale_
    assert est.release_noise_scale_ == b
    assert stats.kstest(e, stats.laplace(scale=b).cdf).pvalue > 1e-3
    # E|Z| = b and sd|Z| = b: the mean absolute error is b within 5 standard errors (~7.5%
    # at N = 768); a factor-2 error in the scale (b/2 or 2b) is far outside.
    assert abs(np.abs(e).mean() / b - 1) < 5 / math.sqrt(len(e))


@pytest.mark.parametrize("selection", ["gumbel", "laplace"])
def test_released_values_have_gaussian_release_noise_scale(selection):
    """selection="gumbel" and "laplace": released entries minus truth are i.i.d. N(0,
    release_noise_scale_^2), the calibration's Gaussian sigma (up to the lattice's 2**-28), not
    the selection's scale."""
    e, est = _release_errors(selection)
    s = est.release_noise_scale_
    cal = est.release_.parameters["calibration"]
    assert s == pytest.approx(cal["gaussian_sigma"], rel=1e-6) and s != est.noise_scale_
    assert stats.kstest(e, stats.norm(scale=s).cdf).pvalue > 1e-3
    # E e^2 = s^2 with relative standard error sqrt(2 / N) (5% at N = 768): 5 of them
    assert abs(np.mean(e**2) / s**2 - 1) < 5 * math.sqrt(2 / len(e))


def test_noise_scale_attribute_is_the_calibrated_scale():
    X = np.random.default_rng(0).standard_normal((500, 10))
    est = dpdist.SparseCovariance(2, 0.8, 1e-5, clip=2.5, random_state=0, scheduler="synchronous",
                                  assume_centered=True, selection="paper").fit(X)
    delta_row = 1e-5 / 20
    eps_row = 0.2 / math.sqrt(20 * math.log(2e5))
    b = 2 * (2 * 2.5**2 / 500) / eps_row * math.sqrt(3 * math.log(10 / delta_row))
    # kappa: the Gram's float error; the lattice adds at most gamma per unit of sensitivity
    gamma = est.release_.mechanisms[0]["noise"]["release"]["lattice"]["gamma"]
    sens = kappa(500) * 2 * 2.5**2 / 500
    assert kappa(500) * b <= est.noise_scale_ <= kappa(500) * b * (1 + gamma / sens) * (1 + 1e-15)
    assert est.clip_ == 2.5
    _check_budget(est.release_, 0.8, 1e-5)


def _check_budget(rel, epsilon, delta):
    """The release states the charged budget, and its events account (our accountant) to at
    most that budget."""
    from dpdist.privacy.accounting import release_guarantee
    from dpdist.privacy.budget import ApproxDP

    assert rel.privacy == ApproxDP(epsilon, delta)
    accounted = release_guarantee([e for _, e in rel.events], delta=delta)
    assert accounted == rel.accountant().approx_dp(delta, external=False)
    assert accounted.delta == delta and 0 < accounted.epsilon <= epsilon


# ---------------------------------------------------------------- accuracy on Model 1
def test_accuracy_on_model1_within_theorem_1_bound():
    """Lazily generated Model-1 data at an n where the theory applies (d = 16, k = 3).
    With probability >= 1 - beta = 0.9 the Theorem 1 bound holds; the fixed seeds below pass.
    The support is recovered: b ~ 0.03 while the smallest true off-diagonal entry is 0.2."""
    model = make_model1(16, 3, structure="banded", random_state=3)
    n = 4_000_000 if not LONG else 16_000_000
    X = model.samples(n, chunk_rows=500_000)
    sigma = math.sqrt(model.sigma2)
    est = dpdist.SparseCovariance(3, 2.0, 1e-6, sigma=sigma, random_state=1, scheduler="threads").fit(X)
    plan = est.plan(n, 16)
    err = operator_norm(est.covariance_ - model.covariance)
    assert err <= plan.error_bound
    s = support_metrics(est.covariance_, model.covariance)
    assert s["recall"] == 1.0 and s["precision"] == 1.0
    wx = dpdist.baselines.GaussianCovariance(2.0, 1e-6, sigma=sigma, random_state=1, scheduler="threads").fit(X)
    err_wx = operator_norm(wx.covariance_ - model.covariance)
    print(f"\nd=16 n={n}: PrivCov error {err:.4f} (bound {plan.error_bound:.3g}), Wang-Xu error {err_wx:.4f}")
    # with the row clip the release's sensitivity is C / (R sqrt(d)) of the entry route's, and
    # PrivCov beats the Wang-Xu baseline already at d = 16
    assert err < err_wx


# ---------------------------------------------------------------- crossover through plan()
def test_crossover_with_wang_xu_through_plan():
    """b / sigma_WX = 8 sqrt(2 log(2/delta) (k+1) log(d/delta_row) / d) / (eps m), m = sigma_WX /
    Delta_WX the analytic Gaussian mechanism's multiplier at (eps, delta) (derived from the two
    calibrations); Wang-Xu wins below d ~ 16,000 at k = 3, eps = 0.5, delta = 1e-6."""
    k, eps, delta, n = 3, 0.5, 1e-6, 10**9
    m = optimize.brentq(lambda s: bw_delta(1.0, eps, s) - delta, 1e-3, 1e4, xtol=1e-15, rtol=1e-14)

    def ratio(d):
        p = dpdist.SparseCovariance(k, eps, delta, clip=4.0, assume_centered=True, selection="paper").plan(n, d)
        return p.calibrated_noise_scale / p.wang_xu_gaussian_sigma  # the two calibrations, before any lattice

    for d in (60, 1000, 20_000, 100_000):
        expected = 8 * math.sqrt(2 * math.log(2 / delta) * (k + 1) * math.log(d / (delta / (2 * d))) / d) / (eps * m)
        assert ratio(d) == pytest.approx(expected, rel=1e-8)
    assert ratio(60) > 13  # at d = 60, k = 3 Wang-Xu's noise is about 13x smaller
    assert ratio(1000) > 1 and ratio(12_000) > 1
    assert ratio(16_000) < 1 and ratio(100_000) < 1


# ---------------------------------------------------------------- determinism
def _fit(X, **kw):
    params = dict(k=3, epsilon=1.0, delta=1e-4, clip=3.0, random_state=2024, scheduler="synchronous")
    params.update(kw)
    return dpdist.SparseCovariance(**params).fit(X)


def _same_release(a, b):
    np.testing.assert_array_equal(np.sort(a.selected_, axis=1), np.sort(b.selected_, axis=1))
    A, B = a.covariance_, b.covariance_
    assert (A != 0).toarray().tolist() == (B != 0).toarray().tolist()
    np.testing.assert_allclose(A.toarray(), B.toarray(), rtol=1e-10, atol=1e-13)


def test_same_seed_same_release_across_chunkings(rng):
    x = rng.standard_normal((3000, 30))
    x[:, 1] += x[:, 0]
    x[:, 7] -= 0.8 * x[:, 5]
    base = _fit(da.from_array(x, chunks=(3000, 30)), tile_size=30)
    _same_release(base, _fit(da.from_array(x, chunks=(700, 30)), tile_size=8))
    _same_release(base, _fit(da.from_array(x, chunks=(1100, 13)), tile_size=13))


def test_same_seed_same_release_on_a_two_worker_cluster(rng, local_cluster):
    x = rng.standard_normal((2000, 20))
    x[:, 3] += x[:, 2]
    X = da.from_array(x, chunks=(500, 10))
    _same_release(_fit(X, tile_size=10), _fit(X, tile_size=7, scheduler=local_cluster))


def test_different_seeds_give_different_noise(rng):
    x = rng.standard_normal((500, 8))
    a, b = _fit(x, random_state=1), _fit(x, random_state=2)
    assert not np.allclose(a.covariance_.diagonal(), b.covariance_.diagonal())
    assert a.release_.seeding["mode"] == "seeded"
    c = _fit(x, random_state=None)
    assert c.release_.seeding["mode"] == "os-entropy" and "random_state" not in c.release_.seeding


# ---------------------------------------------------------------- out of core / large d
class _TaskShapes(Callback):
    def __init__(self):
        super().__init__()
        self.max_elems = 0
        self.shapes = []

    def _posttask(self, key, result, dsk, state, id):
        if isinstance(result, np.ndarray):
            self.max_elems = max(self.max_elems, result.size)
            self.shapes.append(result.shape)


def test_no_task_outputs_a_d_by_d_array(rng):
    d = 96
    x = rng.standard_normal((400, d))
    with _TaskShapes() as cb:
        _fit(da.from_array(x, chunks=(100, 32)), tile_size=16)
    assert cb.shapes, "callback saw no tasks"
    assert (d, d) not in cb.shapes
    assert cb.max_elems <= max(400 * 32, 16 * 16)  # a data chunk or a tile, never d x d


def test_result_is_symmetric_and_k_plus_one_rcs(rng):
    est = _fit(rng.standard_normal((400, 25)), k=4)
    M = est.covariance_
    assert (abs(M - M.T)).max() == 0
    assert (np.diff(M.indptr) <= 5).all()
    assert est.support_.dtype == bool and est.support_.nnz == M.nnz


# ---------------------------------------------------------------- epsilon > 1
def test_epsilon_above_one_is_accepted_and_composes_below_it(rng):
    est = _fit(rng.standard_normal((300, 10)), epsilon=5.0, selection="paper")
    cal = est.release_.parameters["calibration"]
    assert cal["composed_epsilon"] <= 5.0
    _check_budget(est.release_, 5.0, est.delta)
    est = _fit(rng.standard_normal((300, 10)), epsilon=5.0)
    _check_budget(est.release_, 5.0, est.delta)


# ---------------------------------------------------------------- bad input
class _Unreadable:
    """A dask array whose every chunk raises if read: parameter errors must come first."""

    @staticmethod
    def make(n=100, d=6):
        def boom(block_id=None):
            raise AssertionError("data were read")

        return da.map_blocks(boom, chunks=((n,), (d,)), dtype=np.float64, meta=np.empty((0, 0)))


@pytest.mark.parametrize(
    "kw,match",
    [
        (dict(k=7), "k must satisfy"),
        (dict(k=0), "k must be"),
        (dict(epsilon=0.0), "epsilon"),
        (dict(epsilon=-1.0), "epsilon"),
        (dict(delta=0.0), "delta"),
        (dict(delta=1.0), "delta"),
        (dict(clip=None, sigma=None), "sigma"),
        (dict(clip=-1.0), "clip"),
        (dict(beta=1.5), "beta"),
        (dict(on_nonfinite="drop"), "on_nonfinite"),
        (dict(scheduler="bogus"), "scheduler"),
        (dict(random_state=-3), "random_state"),
        (dict(tile_size=0), "tile_size"),
        (dict(selection="fast"), "selection must be one of"),
        (dict(selection=None), "selection must be one of"),
    ],
)
def test_parameter_errors_raise_before_any_data_is_read(kw, match):
    with pytest.raises(ValidationError, match=match):
        _fit(_Unreadable.make(), **kw)


@pytest.mark.parametrize(
    "X,match",
    [
        (np.zeros(10), "2-D"),
        (np.zeros((1, 5)), "at least 2 rows"),
        (np.zeros((5, 1)), "at least 2 columns"),
        (np.array([["a", "b"], ["c", "d"]]), "dtype"),
        (np.zeros((4, 3), dtype=complex), "dtype"),
    ],
)
def test_bad_data_shapes_and_dtypes(X, match):
    with pytest.raises(ValidationError, match=match):
        _fit(X, k=1)


def test_missing_zarr_path(tmp_path):
    with pytest.raises(ValidationError, match="does not exist"):
        _fit(str(tmp_path / "nope.zarr"))


def test_unknown_chunks_refused(rng):
    X = da.from_array(rng.standard_normal((50, 4)), chunks=10)
    X = X[X[:, 0] > -10]  # boolean indexing: unknown row chunks
    with pytest.raises(ValidationError, match="unknown chunk"):
        _fit(X, k=1)


def test_nonfinite_rows_become_zero_rows_by_default_and_raise_on_request(rng):
    x = rng.standard_normal((200, 6))
    x[17, 2] = np.nan
    with pytest.raises(ValidationError, match="NaN or infinite"):
        _fit(x, k=2, on_nonfinite="raise")
    est = _fit(x, k=2)
    assert np.isfinite(est.covariance_.data).all()
    assert any("zero rows" in n for n in est.release_.notes)
    x[17] = 0.0  # the whole row, not only the NaN entry (the row rule)
    _same_release(est, _fit(x, k=2))
    raised = _fit(x, k=2, on_nonfinite="raise")
    assert any("reveals that bit" in n for n in raised.release_.notes)


def test_integer_input_is_converted_with_a_warning():
    X = np.random.default_rng(0).integers(-3, 3, size=(100, 5))
    with pytest.warns(DataConversionWarning, match="float64"):
        est = _fit(X, k=2)
    assert est.covariance_.dtype == np.float64


# ---------------------------------------------------------------- functional form, params, plan
def test_functional_form_returns_the_release(rng):
    x = rng.standard_normal((300, 6))
    rel = private_sparse_covariance(x, 2, 1.0, 1e-5, clip=2.0, random_state=5, scheduler="synchronous")
    est = _fit(x, k=2, epsilon=1.0, delta=1e-5, clip=2.0, random_state=5)
    assert rel.parameters["selection"] == "gumbel" and "gaussian_release" in rel.noise_scales
    assert sp.issparse(rel.values["covariance"])
    np.testing.assert_array_equal(rel.values["covariance"].toarray(), est.covariance_.toarray())
    meta = rel.metadata()
    assert meta["mechanism"].startswith("PrivCov") and meta["privacy"]["epsilon"] <= 1.0
    _check_budget(rel, 1.0, 1e-5)
    assert meta["version"] == dpdist.__version__ and any("k+1" in n for n in meta["notes"])


def test_get_set_params_and_repr():
    est = dpdist.SparseCovariance(3, 1.0, 1e-6, sigma=1.0)
    assert est.get_params()["k"] == 3
    est.set_params(k=4)
    assert "k=4" in repr(est)
    with pytest.raises(ValidationError):
        est.set_params(kk=1)


def test_plan_and_min_samples_read_no_data():
    est = dpdist.SparseCovariance(3, 1.0, 1e-6, sigma=1.0)
    p = est.plan(10**7, 1000)
    # entry clip and row clip get beta/6 each of the "no clipping" event
    assert p.clip == pytest.approx(math.sqrt(2 * math.log(12 * 10**7 * 1000 / 0.1)))
    t = math.log(6 * 10**7 / 0.1)
    assert p.row_clip == pytest.approx(math.sqrt(1000 + 2 * math.sqrt(1000 * t) + 2 * t))
    assert dpdist.SparseCovariance(3, 1.0, 1e-6, sigma=1.0, selection="paper").plan(10**7, 1000).clip == \
        pytest.approx(math.sqrt(2 * math.log(6 * 10**7 * 1000 / 0.1)))
    n = est.min_samples(1.0, 1000)
    assert est.plan(n, 1000).error_bound <= 1.0 < est.plan(int(n * 0.99), 1000).error_bound
    with pytest.raises(ValidationError):
        dpdist.SparseCovariance(3, 1.0, 1e-6, clip=2.0).min_samples(1.0, 100)


# ---------------------------------------------------------------- one pass over the data
def _count_chunk_reads(fit, tmp_path):
    import zarr
    from unittest import mock

    z = zarr.create_array(str(tmp_path / "x.zarr"), shape=(400, 6), chunks=(100, 6), dtype="f8")
    z[...] = np.random.default_rng(0).standard_normal((400, 6))
    reads = []
    original = zarr.Array.__getitem__

    def spy(self, sel):
        out = original(self, sel)
        if getattr(out, "size", 0):
            reads.append(sel)
        return out

    with mock.patch.object(zarr.Array, "__getitem__", spy):
        fit(z)
    return len(reads)


def test_privcov_reads_each_chunk_once(tmp_path):
    """The non-finite check and the Gram share one read of every chunk."""
    assert _count_chunk_reads(lambda z: _fit(z, k=2, assume_centered=True), tmp_path) == 4


def test_privcov_with_a_private_mean_reads_each_chunk_twice(tmp_path):
    """The mean must be released before the second moment around it: one more read, no more."""
    assert _count_chunk_reads(lambda z: _fit(z, k=2), tmp_path) == 8


def test_wang_xu_reads_each_chunk_once(tmp_path):
    fit = lambda z: dpdist.baselines.GaussianCovariance(1.0, 1e-5, clip=2.0, random_state=0,  # noqa: E731
                                                        scheduler="synchronous", assume_centered=True).fit(z)
    assert _count_chunk_reads(fit, tmp_path) == 4


def test_wang_xu_with_a_private_mean_reads_each_chunk_twice(tmp_path):
    fit = lambda z: dpdist.baselines.GaussianCovariance(1.0, 1e-5, clip=2.0, random_state=0,  # noqa: E731
                                                        scheduler="synchronous").fit(z)
    assert _count_chunk_reads(fit, tmp_path) == 8


def test_plan_noise_scale_is_the_scale_the_release_reports():
    # the plan's noise_scale is the scale after the lattice's rounding charge, as released;
    # the calibrated (pre-lattice) b is calibrated_noise_scale
    X = np.random.default_rng(0).standard_normal((400, 6))
    est = dpdist.SparseCovariance(2, 1.0, 1e-6, sigma=1.3, random_state=0, scheduler="synchronous")
    plan = est.plan(*X.shape)
    est.fit(X)
    assert plan.noise_scale == est.release_.noise_scales["gumbel_select"] == est.noise_scale_
    assert plan.calibrated_noise_scale < plan.noise_scale < plan.calibrated_noise_scale * (1 + 1e-4)
    assert plan.to_dict()["noise_scale"] == plan.noise_scale


@pytest.mark.parametrize("selection", ["gumbel", "laplace", "paper"])
def test_selected_sets_are_released_in_column_order(selection):
    """S_i is released as a set (the guarantee covers the set, not the noisy ranking the engine
    merges by): every row of selected_ is increasing, its values follow their columns, and the
    covariance is the same matrix as before the reordering."""
    X = np.random.default_rng(0).standard_normal((300, 12))
    est = dpdist.SparseCovariance(4, 1.0, 1e-5, clip=2.0, random_state=3, scheduler="synchronous",
                                  selection=selection).fit(X)
    cols, vals = est.selected_, est.release_.values["selected_values"]
    assert (np.diff(cols, axis=1) > 0).all()
    rebuilt = assemble_privcov(cols[:, ::-1], vals[:, ::-1], est.release_.values["diagonal"])
    np.testing.assert_array_equal(rebuilt.toarray(), est.covariance_.toarray())
    # a mutual pair's entry is the mean of its two released values, read at their columns
    i, j = next((i, j) for i in range(12) for j in cols[i] if j != i and i in cols[j])
    vi, vj = vals[i][list(cols[i]).index(j)], vals[j][list(cols[j]).index(i)]
    assert est.covariance_[i, j] == (vi + vj) / 2


def test_the_plan_names_the_wang_xu_noise_sd_as_the_gaussian_baseline_does():
    """``wang_xu_gaussian_sigma`` (the baseline's noise sd, beside ``sigma``, the data's scale) is
    the ``gaussian_sigma`` the Wang-Xu baseline's own plan reports at the same budget and clip."""
    from dpdist.baselines import GaussianCovariance

    p = dpdist.SparseCovariance(2, 1.0, 1e-5, clip=2.0, sigma=1.0, assume_centered=True).plan(1000, 6)
    g = GaussianCovariance(1.0, 1e-5, clip=2.0, assume_centered=True).plan(1000, 6)
    assert p.wang_xu_gaussian_sigma == g.gaussian_sigma and p.sigma == 1.0
    assert not hasattr(p, "wang_xu_sigma")
