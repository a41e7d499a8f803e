"""The fixed public API: signatures and fitted attributes that code outside the repository calls.

Each expected signature is written here as data, copied from the declared contract, and never
read from the code. A signature holds when its positional parameters come first, in the stated
order, each keyword-only parameter stated exists and is keyword-only, and each stated default
is the default (``REQUIRED``: no default; ``ANY_DEFAULT``: some default, its value not fixed).
Parameters the contract does not list may follow, but only with a default, so that every call
written against the contract still runs. Each estimator is then fitted once, seeded, on tiny
data on the synchronous scheduler, and its fitted attributes are checked for their stated
types and shapes.
"""

from __future__ import annotations

import inspect
import math
import warnings

import dask
import numpy as np
import pytest
import scipy.sparse as sp

import dpdist
from dpdist import baselines

REQUIRED = object()
ANY_DEFAULT = object()
POS = inspect.Parameter.POSITIONAL_OR_KEYWORD
KW = inspect.Parameter.KEYWORD_ONLY

#: name -> (callable, [(parameter, kind, default)]), copied from the contract.
CONTRACT = {
    "SparseCovariance": (lambda: dpdist.SparseCovariance, [
        ("k", POS, REQUIRED), ("epsilon", POS, REQUIRED), ("delta", POS, REQUIRED),
        ("sigma", KW, None), ("clip", KW, None), ("beta", KW, 0.1), ("random_state", KW, None),
        ("scheduler", KW, None)]),
    "ThresholdedCovariance": (lambda: baselines.ThresholdedCovariance, [
        ("threshold", KW, None), ("sigma", KW, None)]),
    "GaussianCovariance": (lambda: baselines.GaussianCovariance, [
        ("epsilon", POS, REQUIRED), ("delta", POS, REQUIRED), ("sigma", KW, None), ("clip", KW, None),
        ("threshold", KW, None), ("random_state", KW, None)]),
    "load_result": (lambda: dpdist.load_result, [("path", POS, REQUIRED)]),
    "SpectralNorm": (lambda: dpdist.SpectralNorm, [
        ("k", POS, REQUIRED), ("epsilon", POS, REQUIRED), ("delta", POS, REQUIRED), ("gap", KW, REQUIRED),
        ("sigma", KW, REQUIRED), ("n_batches", KW, None), ("tau", KW, None), ("random_state", KW, None),
        ("scheduler", KW, None)]),
    "SparsePCA": (lambda: dpdist.SparsePCA, [
        ("k", POS, REQUIRED), ("epsilon", POS, REQUIRED), ("delta", POS, REQUIRED), ("gap", KW, REQUIRED),
        ("sigma", KW, REQUIRED), ("n_batches", KW, None), ("tau", KW, None), ("norm_fraction", KW, 0.5),
        ("lambda_hat", KW, None), ("random_state", KW, None), ("scheduler", KW, None)]),
    "ExpMechSparsePCA": (lambda: dpdist.ExpMechSparsePCA, [
        ("k", POS, REQUIRED), ("epsilon", POS, REQUIRED), ("delta", POS, REQUIRED), ("sigma", KW, None),
        ("clip", KW, None), ("max_subsets", KW, ANY_DEFAULT), ("random_state", KW, None)]),
    "AnalyzeGauss": (lambda: baselines.AnalyzeGauss, [
        ("epsilon", POS, REQUIRED), ("delta", POS, REQUIRED), ("row_norm", KW, REQUIRED),
        ("random_state", KW, None)]),
    "SecondMoment": (lambda: dpdist.SecondMoment, [
        ("rho", POS, REQUIRED), ("m", KW, REQUIRED), ("alpha", KW, 0.5), ("radius", KW, None),
        ("lambda_min", KW, None), ("init_fraction", KW, 0.1), ("sensitivity", KW, "paper"), ("xi", KW, 0.1),
        ("random_state", KW, None), ("scheduler", KW, None)]),
    "SubsampleAggregateSecondMoment": (lambda: baselines.SubsampleAggregateSecondMoment, [
        ("epsilon", POS, REQUIRED), ("delta", POS, REQUIRED), ("m", KW, REQUIRED), ("alpha", KW, 0.5),
        ("xi", KW, 0.1), ("unsafe_no_privacy", KW, False), ("random_state", KW, None)]),
}


def _signature_problems(fn, expected) -> list[str]:
    params = [p for p in inspect.signature(fn).parameters.values() if p.name != "self"]
    by_name = {p.name: p for p in params}
    problems = []
    positional = [name for name, kind, _ in expected if kind is POS]
    have_positional = [p.name for p in params if p.kind in (inspect.Parameter.POSITIONAL_ONLY, POS)]
    if have_positional[:len(positional)] != positional:
        problems.append(f"positional parameters {have_positional}, expected to start with {positional}")
    for name, kind, default in expected:
        p = by_name.get(name)
        if p is None:
            problems.append(f"{name}: missing")
            continue
        if p.kind is not kind:
            problems.append(f"{name}: {p.kind.description}, expected {kind.description}")
        if default is REQUIRED:
            if p.default is not inspect.Parameter.empty:
                problems.append(f"{name}: default {p.default!r}, expected none (required)")
        elif p.default is inspect.Parameter.empty:
            problems.append(f"{name}: required, expected a default")
        elif default is not ANY_DEFAULT and not (p.default == default and type(p.default) is type(default)):
            problems.append(f"{name}: default {p.default!r}, expected {default!r}")
    stated = {name for name, _, _ in expected}
    for p in params:
        if p.name not in stated and p.default is inspect.Parameter.empty and p.kind in (POS, KW):
            problems.append(f"{p.name}: an added parameter without a default breaks calls written to the contract")
    return problems


@pytest.mark.parametrize("name", list(CONTRACT))
def test_the_fixed_signature_holds(name):
    get, expected = CONTRACT[name]
    assert _signature_problems(get(), expected) == []


def test_the_signature_check_catches_a_renamed_or_changed_parameter():
    """The checker above is the test: it must refuse the changes the contract forbids."""
    expected = CONTRACT["AnalyzeGauss"][1]

    def renamed(epsilon, delta, *, radius, random_state=None):
        pass

    def defaulted(epsilon, delta, *, row_norm=1.0, random_state=None):
        pass

    def positional(epsilon, delta, row_norm, *, random_state=None):
        pass

    def extra_required(epsilon, delta, *, row_norm, random_state=None, tile):
        pass

    def extra_optional(epsilon, delta, *, row_norm, beta=0.1, random_state=None, tile=4):
        pass

    assert [p.split(":")[0] for p in _signature_problems(renamed, expected)] == ["row_norm", "radius"]
    assert _signature_problems(defaulted, expected) == ["row_norm: default 1.0, expected none (required)"]
    assert len(_signature_problems(positional, expected)) == 1
    assert [p.split(":")[0] for p in _signature_problems(extra_required, expected)] == ["tile"]
    assert _signature_problems(extra_optional, expected) == []


def test_noprivateresult_is_exported():
    assert issubclass(dpdist.NoPrivateResult, Exception)


# ------------------------------------------------------------------------ fitted attributes
def _gauss(n=300, d=6, seed=0, scales=None):
    X = np.random.default_rng(seed).standard_normal((n, d))
    return X * (np.asarray(scales) if scales is not None else 1.0)


def _spike(n=3000):
    from dpdist.testing.estimator_audits import spike_rows

    X = spike_rows(n, noise=0.01)
    X[1::2] = -X[0::2]
    return X


def _fit(est, X):
    with warnings.catch_warnings(), dask.config.set(scheduler="synchronous"):
        warnings.simplefilter("ignore")  # a seeded fit warns that it is not private
        fitted = est.fit(X)
    assert fitted is est
    return est


def _approx_dp(privacy, epsilon, delta):
    assert privacy.epsilon == epsilon and privacy.delta == delta


def test_sparse_covariance_fitted_attributes():
    est = _fit(dpdist.SparseCovariance(2, 1.0, 1e-5, clip=2.0, random_state=1), _gauss())
    C = est.covariance_
    assert sp.isspmatrix_csr(C) or isinstance(C, sp.csr_array)
    assert C.shape == (6, 6) and abs(C - C.T).max() == 0
    for name in ("support_", "clip_", "noise_scale_", "release_"):
        assert hasattr(est, name), name
    assert est.clip_ == 2.0
    _approx_dp(est.privacy_, 1.0, 1e-5)


def test_covariance_baselines_fitted_attributes():
    X = _gauss()
    t = _fit(baselines.ThresholdedCovariance(threshold=0.1), X)
    g = _fit(baselines.GaussianCovariance(1.0, 1e-5, sigma=1.0, random_state=1), X)
    for est in (t, g):
        assert est.covariance_.shape == (6, 6)


def test_load_result_reads_a_written_result(tmp_path):
    from dpdist.data.results import write_result

    path = write_result(tmp_path / "r.zarr", {"mechanism": "m"}, {"a": np.arange(3.0)})
    loaded = dpdist.load_result(path)
    np.testing.assert_array_equal(loaded.a, np.arange(3.0))


def test_spectral_norm_and_sparse_pca_fitted_attributes():
    X = _spike()
    kw = dict(gap=0.5, sigma=math.sqrt(5), n_batches=100, tau=0.02, random_state=1)
    norm = _fit(dpdist.SpectralNorm(2, 50.0, 1e-3, **kw), X)
    for name in ("norm_", "noise_scale_", "tau_", "release_"):
        assert hasattr(norm, name), name
    assert norm.n_batches_ == 100 and norm.tau_ == 0.02
    _approx_dp(norm.privacy_, 50.0, 1e-3)
    pca = _fit(dpdist.SparsePCA(2, 50.0, 1e-3, **kw), X)
    assert pca.components_.shape == (1, X.shape[1])
    assert np.linalg.norm(pca.components_) == pytest.approx(1.0, abs=1e-12)
    for name in ("lambda_hat_", "noise_scale_", "tau_", "release_"):
        assert hasattr(pca, name), name
    assert pca.n_batches_ == 100
    _approx_dp(pca.privacy_, 50.0, 1e-3)


def test_pca_baselines_fitted_components():
    X = _gauss()
    for est in (dpdist.ExpMechSparsePCA(2, 1.0, 1e-5, sigma=1.0, random_state=1),
                baselines.AnalyzeGauss(1.0, 1e-5, row_norm=3.0, random_state=1)):
        comp = _fit(est, X).components_
        assert comp.shape == (1, 6)
        assert np.linalg.norm(comp) == pytest.approx(1.0, abs=1e-12)


def test_second_moment_fitted_attributes():
    est = _fit(dpdist.SecondMoment(1.0, m=1, radius=20.0, lambda_min=0.5, random_state=1),
               _gauss(scales=[1, 2, 3, 5, 8, 13]))
    assert isinstance(est.second_moment_, np.ndarray) and est.second_moment_.shape == (6, 6)
    assert len(est.noise_scales_) == est.n_levels_ >= 1
    assert est.radius_ == 20.0 and est.lambda_min_ == 0.5
    assert est.privacy_.rho == 1.0
    assert est.privacy_.to_approx_dp(1e-6) == pytest.approx(1.0 + 2 * math.sqrt(math.log(1e6)))  # rho + 2 sqrt(rho ln(1/delta))
    assert hasattr(est, "release_")


def test_subsample_aggregate_fitted_second_moment():
    est = _fit(baselines.SubsampleAggregateSecondMoment(2.0, 1e-3, m=30, unsafe_no_privacy=True, random_state=1),
               _gauss(3000, 3, seed=5))  # rows on which the groups agree, so that a value is released
    assert isinstance(est.second_moment_, np.ndarray) and est.second_moment_.shape == (3, 3)
