"""PrivNorm's and PrivPCA's plans predict whether their private tests pass, and
``require_useful=True`` refuses, before reading any data, a fit the plan says is useless."""

from __future__ import annotations

import json
import math
import os

import dask.array as da
import numpy as np
import pytest

from dpdist import SparsePCA, SpectralNorm
from dpdist.algorithms._friendly_forecast import _bounded_laplace_sf, count_pass_probability
from dpdist.cli.main import main
from dpdist.exceptions import ValidationError
from dpdist.simulate import model2_block_model, simulate_privpca

README_NORM = dict(k=3, epsilon=1.0, delta=1e-6, gap=0.5, sigma=1.3)


def test_readme_norm_plan_predicts_the_rejection_every_run_meets():
    # `dpdist norm data.zarr --k 3 --epsilon 1 --delta 1e-6 --gap 0.5 --sigma 1.3` on 200,000 x 16:
    # every run is rejected at the good-set count test (tau = 1.93 is above every entry of a
    # 71-row batch moment, so no batch is good); the plan used to say tests_can_pass, nothing unmet
    plan = SpectralNorm(**README_NORM).plan(200_000, 16)
    tests = plan.tests
    assert tests["tests_can_pass"]  # the Z-test margin with all batches good is still positive ...
    assert tests["count_test_pass_probability"] < 1e-6  # ... but no good set is expected
    assert tests["expected_good_batches"] < 10 < 0.8 * plan.n_batches
    assert tests["weight_test_pass_probability"] > 0.99
    assert plan.release_probability < 1e-6
    assert any("predicted to pass with probability" in u for u in plan.unmet_conditions)
    assert plan.vacuous


def test_a_size_where_the_tests_pass_has_no_such_condition():
    plan = SpectralNorm(**README_NORM).plan(50_000_000, 16)
    assert plan.release_probability > 0.99
    assert not any("predicted to pass" in u for u in plan.unmet_conditions)


def test_bounded_laplace_tail_and_count_probability_against_sampling():
    rng = np.random.default_rng(1)
    x = rng.laplace(0.0, 2.0, 400_000)
    x = x[np.abs(x) <= 7.0]
    for t in (-9.0, -3.0, 0.0, 1.5, 6.0, 9.0):
        assert _bounded_laplace_sf(np.array([t]), 2.0, 7.0)[0] == pytest.approx(np.mean(x >= t), abs=3e-3)
    m, q, thr = 60, 0.85, 50.0
    c = rng.binomial(m, q, x.size)
    assert count_pass_probability(q, m, thr, 2.0, 7.0)[0] == pytest.approx(np.mean(c + x >= thr), abs=4e-3)


# Simulated runs of the estimator's own tests on the reference instance (Model-2 sparse spike at
# the plan's sigma, k, gap), at epsilon = 20 so that m = 317 and a run costs milliseconds. The
# sizes: PrivNorm's count test at its transition (n = 1.15e6), the full release where lambda_hat's
# noise rejects PrivPCA about half the time (1e9), and where everything passes (1e11).
@pytest.mark.parametrize("n", [1_000_000, 1_150_000, 1_170_000, 1_000_000_000, 100_000_000_000])
def test_predicted_pass_rates_match_simulated_runs(n):
    d, k, gap, sigma, eps, delta, runs = 16, 3, 0.5, 1.3, 20.0, 1e-6, 40
    # the simulator takes the rows as mean-zero and spends no share on a private mean
    plan = SparsePCA(k, eps, delta, gap=gap, sigma=sigma, assume_centered=True).plan(n, d)
    model = model2_block_model(d, k, gap=gap, lambda1=sigma**2)
    norm_passed = released = 0
    for seed in range(runs):
        r = simulate_privpca(model, float(n), eps, delta, np.random.default_rng(seed), gap=gap, sigma=sigma)
        t = r.info["tests"]["norm"]
        norm_passed += bool(t["count_passed"] and t.get("weight_passed", False))
        released += bool(r.released)
    for (lo, hi), passed in ((plan.norm_tests["pass_probability_range"], norm_passed),
                             (plan.release_probability_range, released)):
        # the forecast's range (its Monte Carlo resolution), widened by a binomial 3-sigma band
        # and 0.05 for its other approximations (normal Z, one batch size)
        rate = passed / runs
        low = lo - 3 * math.sqrt(lo * (1 - lo) / runs) - 0.05
        high = hi + 3 * math.sqrt(hi * (1 - hi) / runs) + 0.05
        assert low <= rate <= high, (n, lo, hi, passed)


# ------------------------------------------------------------------------------------------
# require_useful
# ------------------------------------------------------------------------------------------


def _poisoned(n, d):
    """A dask array whose every read raises: shows that nothing is read."""

    import dask

    def boom():
        raise AssertionError("the data were read")

    return da.from_delayed(dask.delayed(boom, pure=False)(), shape=(n, d), dtype=float)


class _Reservation:
    """A reservation that records what the fit asked of it."""

    def __init__(self, cost):
        self.cost, self.calls = cost, []

    def running(self):  # pragma: no cover - must not be reached
        self.calls.append("running")

    def commit(self, **kw):  # pragma: no cover - must not be reached
        self.calls.append("commit")


@pytest.mark.parametrize("cls", [SpectralNorm, SparsePCA])
def test_require_useful_refuses_before_reading_or_reserving(cls):
    est = cls(**README_NORM, require_useful=True)
    with pytest.raises(ValidationError, match="require_useful=True.*refused before reading any data.*predicted"):
        est.fit(_poisoned(200_000, 16))
    assert not hasattr(est, "release_")
    reservation = _Reservation(est.privacy_cost())
    with pytest.raises(ValidationError, match="require_useful=True"):
        est.fit(_poisoned(200_000, 16), reservation=reservation)
    assert reservation.calls == []  # never marked running: the caller's block refunds it
    # without it the same fit goes on and reads the data
    with pytest.raises(AssertionError, match="the data were read"):
        cls(**README_NORM).fit(_poisoned(200_000, 16))


def test_require_useful_lets_a_useful_fit_read_its_data():
    # at n = 1e8 and epsilon 100 the plan predicts a release (probability ~1), error bound 1.0 < 1.69
    est = SpectralNorm(3, 100.0, 1e-6, gap=0.5, sigma=1.3, require_useful=True)
    n = 10**8
    plan = est.plan(n, 16)
    assert not plan.vacuous and plan.release_probability > 0.99
    with pytest.raises(AssertionError, match="the data were read"):
        est.fit(_poisoned(n, 16))


def test_require_useful_is_validated():
    with pytest.raises(ValidationError, match="require_useful must be True or False"):
        SpectralNorm(**README_NORM, require_useful="yes").fit(_poisoned(200_000, 16))


def test_cli_require_useful_exits_2_and_writes_nothing(tmp_path, capsys):
    import zarr

    path = str(tmp_path / "x.zarr")
    arr = zarr.create_array(path, shape=(200_000, 16), chunks=(50_000, 16), dtype="f8")
    arr[...] = np.random.default_rng(0).standard_normal((200_000, 16))
    out = tmp_path / "norm.zarr"
    base = ["norm", path, "--k", "3", "--epsilon", "1", "--delta", "1e-6", "--gap", "0.5", "--sigma", "1.3"]
    assert main([*base, "--output", str(out), "--require-useful", "--json"]) == 2
    doc = json.loads(capsys.readouterr().out)
    assert doc["error"]["message"].startswith("--require-useful: SpectralNorm refused") and doc["exit_code"] == 2
    assert not os.path.exists(out) and not os.path.exists(f"{out}.rejected.json")
    assert main([*base, "--plan", "--require-useful"]) == 2  # --plan runs nothing: the flag is refused
    assert "--require-useful is not used" in capsys.readouterr().err
    assert main(["pca", path, "--method", "expmech", "--k", "3", "--epsilon", "1", "--delta", "1e-6",
                 "--output", str(out), "--require-useful"]) == 2
    assert "it belongs to --method privpca" in capsys.readouterr().err
