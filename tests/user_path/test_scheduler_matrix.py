"""The scheduler matrix, as a user runs it: one plain script (``fit_everything.py``, no
``__main__`` guard) fits every public estimator and baseline, once per kind of scheduler, in
a subprocess; the JSON summaries must agree with the synchronous run (same shapes, the
requested budgets, the same seeded releases).

The script reads ``data.zarr`` by a relative path from the user's directory; the real
cluster's scheduler and workers run in another directory, so the cluster runs also check
that relative paths reach the workers as absolute ones (a relative path used to read
all-zero chunks there).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from tests.clusters import last_json, run_python

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).resolve().parent / "fit_everything.py"
#: (output shapes, budget) every run must report; budget None for a NOT PRIVATE baseline.
EXPECTED = {
    "SparseCovariance": ({"covariance_": [6, 6]}, {"epsilon": 1.0, "delta": 1e-5}),
    "SparseCovariancePCA": ({"covariance_": [6, 6], "components_": [1, 6]}, {"epsilon": 1.0, "delta": 1e-5}),
    "SpectralNorm": ({"norm_": []}, {"epsilon": 200.0, "delta": 1e-6}),
    "SparsePCA": ({"components_": [1, 6]}, {"epsilon": 2000.0, "delta": 1e-6}),
    "ExpMechSparsePCA": ({"components_": [1, 6]}, {"epsilon": 1.0, "delta": 1e-6}),
    "SecondMoment": ({"second_moment_": [6, 6]}, {"rho": 1.0}),
    "GaussianCovariance": ({"covariance_": [6, 6]}, {"epsilon": 1.0, "delta": 1e-5}),
    "ThresholdedCovariance": ({"covariance_": [6, 6]}, None),
    "AnalyzeGauss": ({"components_": [1, 6], "covariance_": [6, 6]}, {"epsilon": 1.0, "delta": 1e-5}),
    "GaussianPCA": ({"components_": [1, 6], "covariance_": [6, 6]}, {"epsilon": 1.0, "delta": 1e-5}),
    "ThresholdedPCA": ({"components_": [1, 6], "covariance_": [6, 6]}, None),
    "SubsampleAggregateSecondMoment": ({"second_moment_": [6, 6]}, None),  # unsafe_no_privacy: NOT PRIVATE
}


UNGUARDED = """\
import numpy as np, dpdist
X = np.random.default_rng(0).standard_normal((500, 4))
dpdist.SparseCovariance(2, 1.0, 1e-5, clip=2.0, scheduler="local-cluster").fit(X)
"""


@pytest.fixture(scope="module")
def runs(workdir, real_cluster) -> dict:
    """Every subprocess of this module, run three at a time (each is mostly imports): the
    matrix of schedulers, and an unguarded script asking for "local-cluster", as a file and
    piped to ``python -``."""
    text = SCRIPT.read_text()
    assert text.rstrip().endswith("\nmain()")
    guarded = workdir / "fit_everything_guarded.py"
    guarded.write_text(text.rstrip()[: -len("main()")] + 'if __name__ == "__main__":\n    main()\n')
    (workdir / "use.py").write_text(UNGUARDED)
    jobs = {
        "synchronous": dict(args=[str(SCRIPT), "synchronous", "data.zarr"]),
        "threads": dict(args=[str(SCRIPT), "threads", "data.zarr"]),
        # piped to `python -`, as from a shell or another program
        "default": dict(args=["-", "default", "data.zarr"], stdin=text),
        "local-cluster": dict(args=[str(guarded), "local-cluster", "data.zarr"]),
        "address": dict(args=[str(SCRIPT), real_cluster, "data.zarr"]),
        "client": dict(args=[str(SCRIPT), f"client:{real_cluster}", "data.zarr"]),
        "unguarded-file": dict(args=["use.py"]),
        "unguarded-pipe": dict(args=["-"], stdin=UNGUARDED),
    }
    with ThreadPoolExecutor(3) as pool:
        futures = {k: pool.submit(run_python, cwd=workdir, **job) for k, job in jobs.items()}
        return {k: f.result() for k, f in futures.items()}


@pytest.fixture(scope="module")
def reference(runs) -> dict:
    summary = last_json(runs["synchronous"])
    assert sorted(summary) == sorted(EXPECTED)
    for name, (shapes, budget) in EXPECTED.items():
        got = summary[name]
        if "bottom" in got:  # a private test returned bottom: only the baseline may, at this size
            assert name == "SubsampleAggregateSecondMoment", got
            continue
        assert got["shapes"] == shapes, name
        assert got["budget"] == pytest.approx(budget) if budget else got["budget"] is None, name
        assert np.all(np.isfinite(got["values"])), name
    return summary


def _assert_same_release(got: dict, ref: dict) -> None:
    assert sorted(got) == sorted(ref)
    for name, r in ref.items():
        g = got[name]
        if "bottom" in r:
            assert g == r, name
            continue
        assert g["shapes"] == r["shapes"] and g["budget"] == r["budget"], name
        gv, rv = np.asarray(g["values"]), np.asarray(r["values"])
        np.testing.assert_array_equal(gv == 0, rv == 0, err_msg=name)  # same supports
        # same seeded noise and the same reduction trees: equal up to BLAS rounding
        np.testing.assert_allclose(gv, rv, rtol=1e-9, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("kind", ["default", "threads", "local-cluster"])
def test_every_estimator_on_a_local_scheduler(kind, runs, reference):
    _assert_same_release(last_json(runs[kind]), reference)


@pytest.mark.parametrize("kind", ["address", "client"])
def test_every_estimator_on_a_real_cluster_whose_workers_run_elsewhere(kind, runs, reference):
    _assert_same_release(last_json(runs[kind]), reference)


@pytest.mark.parametrize("piped", [False, True])
def test_local_cluster_from_an_unguarded_script_fails_in_one_line(piped, runs):
    proc = runs["unguarded-pipe" if piped else "unguarded-file"]
    fix = "code piped to `python -`" if piped else "re-import use.py and would run its line 3 again"
    last = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 1
    assert last.startswith("dpdist.exceptions.ValidationError: scheduler='local-cluster' starts worker processes")
    assert fix in last and 'if __name__ == "__main__":' in last
    assert "Nanny" not in proc.stderr and "bootstrapping" not in proc.stderr  # no process was started
