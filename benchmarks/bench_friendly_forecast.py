"""Do the plans of SpectralNorm and SparsePCA tell the truth about their private tests?

``plan()`` predicts, from public parameters only, the probability that PrivNorm's tests pass
(``norm_tests["pass_probability"]``) and that the whole fit releases a result
(``release_probability``), on the model's reference instance (the Model-2 sparse spike at the
plan's sigma, k and gap; :mod:`dpdist.algorithms._friendly_forecast`). This script measures
both on seeded runs and writes them side by side:

* simulated runs (:func:`dpdist.simulate.simulate_privpca`: the estimator's own tests and
  releases on exact batch statistics, rows taken as mean-zero, so compared with the plan of
  ``SparsePCA(..., assume_centered=True)``) on the reference instance, ``--runs`` seeds at three
  sizes per budget: where PrivNorm's tests pass about half the time, where the whole release
  does, and ten times that; for epsilon = 1 (the README's budget) and epsilon = 20 (m = 317);
* real-pipeline runs (the default ``SparsePCA``, which spends a share on a private mean, fitted
  on Model-2 data in memory, beside its own plan: m = 349 at epsilon = 20) on both
  sides of PrivNorm's transition and at it, and the README's ``dpdist norm`` example (SpectralNorm on
  200,000 x 16 Model-1 data, epsilon = 1, the same data each run), whose plan predicts rejection.

The plans' probabilities are over the data and the noise, so the real runs draw fresh data
each time (except the README's example, which is about that one dataset). ``predicted_range``
is the forecast's own Monte Carlo resolution (``*_range`` in the plan).

Usage: python benchmarks/bench_friendly_forecast.py [--runs R] [--real-runs R] [--smoke]
           [--out benchmarks/results/friendly_forecast.json]
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
import warnings

import numpy as np

import dpdist
from dpdist.exceptions import NoPrivateResult
from dpdist.experiments.fingerprint import provenance
from dpdist.simulate import model2_block_model, simulate_privpca

D, K, GAP, SIGMA, DELTA = 16, 3, 0.5, 1.3, 1e-6


def _revision() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _half(prob, lo: float, hi: float) -> float:
    """The n (log-bisection) where ``prob(n)`` crosses 1/2."""
    for _ in range(40):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if prob(mid) < 0.5 else (lo, mid)
    return hi


def _interval(passed: int, runs: int) -> list:
    from dpdist.testing import clopper_pearson

    lo, hi = clopper_pearson(passed, runs, 0.95)
    return [float(lo), float(hi)]


def simulated_estimator(eps: float) -> dpdist.SparsePCA:
    """The estimator :func:`simulate_privpca` runs, whose plan the simulated rows are compared with.

    The simulator runs the algorithm as published: rows taken as mean-zero, the whole budget
    split between PrivNorm and PrivPCA. The default ``SparsePCA`` first spends a share of the
    budget on a private mean, which leaves less for the tests and so more batches and a larger
    tau (at epsilon = 20: m = 349 instead of 317); its plan describes a different run than
    the simulated one. The real rows fit the default estimator and use its own plan."""
    return dpdist.SparsePCA(K, eps, DELTA, gap=GAP, sigma=SIGMA, assume_centered=True)


def simulated_sizes(eps: float) -> tuple:
    """Where the simulated estimator's plan predicts PrivNorm's tests, and the whole release,
    to pass half the time."""
    est = simulated_estimator(eps)
    n_norm = _half(lambda n: est.plan(int(n), D).norm_tests["pass_probability"], 1e5, 1e12)
    n_rel = _half(lambda n: est.plan(int(n), D).release_probability, 1e5, 1e20)
    return int(n_norm), int(n_rel)


def _outcomes(p, norm_passed: int, released: int, runs: int) -> dict:
    """The plan's predicted pass probabilities beside the counted passes (95% Clopper-Pearson)."""
    return {"privnorm_tests": {"predicted": p.norm_tests["pass_probability"],
                               "predicted_range": p.norm_tests["pass_probability_range"], "passed": norm_passed,
                               "clopper_pearson_95": _interval(norm_passed, runs)},
            "release": {"predicted": p.release_probability, "predicted_range": p.release_probability_range,
                        "passed": released, "clopper_pearson_95": _interval(released, runs)}}


def simulated_row(eps: float, n: int, runs: int) -> dict:
    """``runs`` seeded simulated fits at size n beside the simulated estimator's plan."""
    p = simulated_estimator(eps).plan(int(n), D)
    model = model2_block_model(D, K, gap=GAP, lambda1=SIGMA**2)
    t0 = time.perf_counter()
    norm_passed = released = 0
    for seed in range(runs):
        r = simulate_privpca(model, float(int(n)), eps, DELTA, np.random.default_rng(seed), gap=GAP, sigma=SIGMA)
        if (r.info["n_batches"], r.info["tau"]) != (p.n_batches, p.tau):
            raise RuntimeError(f"the simulator ran m = {r.info['n_batches']}, tau = {r.info['tau']:.6g}; the plan "
                               f"compared with it has m = {p.n_batches}, tau = {p.tau:.6g}")
        t = r.info["tests"]["norm"]
        norm_passed += bool(t["count_passed"] and t.get("weight_passed", False))
        released += bool(r.released)
    return {
        "mode": "simulated", "estimator": "SparsePCA", "assume_centered": True, "epsilon": eps,
        "n_samples": int(n), "n_batches": p.n_batches,
        "runs": runs, "seconds": round(time.perf_counter() - t0, 1),
        **_outcomes(p, norm_passed, released, runs),
    }


def simulated(eps: float, runs: int) -> list:
    n_norm, n_rel = simulated_sizes(eps)
    rows = []
    for n in (n_norm, n_rel, 10 * n_rel):
        rows.append(simulated_row(eps, n, runs))
        print(json.dumps(rows[-1]), flush=True)
    return rows


def real_privpca(eps: float, sizes, runs: int) -> list:
    from dpdist.data.model2 import make_model2

    rows = []
    for n in sizes:
        est = dpdist.SparsePCA(K, eps, DELTA, gap=GAP, sigma=SIGMA, scheduler="threads")
        p = est.plan(n, D)
        norm_passed = released = 0
        t0 = time.perf_counter()
        for seed in range(runs):  # fresh data and noise each run: the forecast is over both
            X = np.asarray(make_model2(n, D, K, gap=GAP, lambda1=SIGMA**2, random_state=seed).X)
            est.set_params(random_state=seed)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    est.fit(X)
                norm_passed += 1
                released += 1
            except NoPrivateResult as exc:
                norm_passed += exc.stage.startswith("privpca")
        rows.append({
            "mode": "real", "estimator": "SparsePCA", "assume_centered": False, "epsilon": eps, "n_samples": n,
            "n_batches": p.n_batches,
            "runs": runs, "seconds": round(time.perf_counter() - t0, 1),
            "data": "make_model2(random_state=seed), fresh each run",
            **_outcomes(p, norm_passed, released, runs),
        })
        print(json.dumps(rows[-1]), flush=True)
    return rows


def real_readme_norm(runs: int, n: int = 200_000) -> dict:
    import tempfile

    from dpdist.data.synthetic import make_model1

    est = dpdist.SpectralNorm(K, 1.0, DELTA, gap=GAP, sigma=SIGMA, scheduler="threads")
    p = est.plan(n, D)
    tmp = tempfile.mkdtemp()
    X = make_model1(D, K, random_state=0).write_zarr(f"{tmp}/data.zarr", n)  # as `dpdist generate` writes it
    passed, stages = 0, []
    t0 = time.perf_counter()
    for seed in range(runs):
        est.set_params(random_state=seed)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # seeded (NOT PRIVATE) and vacuous: known here
                est.fit(X)
            passed += 1
        except NoPrivateResult as exc:
            stages.append(exc.stage)
    row = {"mode": "real", "estimator": "SpectralNorm (the README's dpdist norm example)", "epsilon": 1.0,
           "n_samples": n, "n_batches": p.n_batches, "runs": runs, "seconds": round(time.perf_counter() - t0, 1),
           "release": {"predicted": p.release_probability, "predicted_range": p.release_probability_range,
                       "passed": passed,
                       "clopper_pearson_95": _interval(passed, runs)},
           "rejected_stages": sorted(set(stages)),
           "expected_good_batches": p.tests["expected_good_batches"], "good_batches_needed": 0.8 * p.n_batches}
    print(json.dumps(row), flush=True)
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--real-runs", type=int, default=10)
    ap.add_argument("--smoke", action="store_true", help="a few runs, to check the script works")
    ap.add_argument("--out", default="benchmarks/results/friendly_forecast.json")
    args = ap.parse_args(argv)
    runs, real_runs = (3, 1) if args.smoke else (args.runs, args.real_runs)
    rows = simulated(20.0, runs) + simulated(1.0, runs)
    rows += real_privpca(20.0, (1_050_000, 1_170_000, 1_300_000), real_runs)
    rows.append(real_readme_norm(real_runs))
    doc = {
        "produced_by": "benchmarks/bench_friendly_forecast.py", "code_revision": _revision(),
        "instance": f"Model-2 sparse spike d={D}, k={K}, gap={GAP}, lambda1=sigma^2={SIGMA**2:.4g} "
                    "(the plans' reference instance); README row: Model 1 (dpdist generate)",
        "delta": DELTA, "rows": rows,
    }
    doc.update(provenance(["privpca"]))  # the commit and the fingerprint of the plans forecast here
    if not args.smoke:
        with open(args.out, "w") as fh:
            json.dump(doc, fh, indent=1)
        print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
