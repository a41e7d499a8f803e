"""The COLT 2026 lower bounds measured: every estimator's error on the hard instances of
Theorems 2, 4, 5 and 6 beside the bound, ExpMech's dependence on k, and PrivNorm alone.

``dpdist experiment lower-bounds`` (:func:`run_lower_bounds`) writes ``lower_bounds.json``
and ``lower_bounds.png``. Each part:

- **Theorem 2** (covariance, Construction 1, SIMULATED): the 2/3-quantile of
  ``||M - Sigma||_op / sigma^2`` (Problem 1 with beta = 1/3) at each n, beside
  ``theorem2_alpha``, the alpha at which the theorem's sample complexity equals n.
- **Theorem 4** (PCA, Lemma 13's codebook of Corollary 2 instances, real fits): the rate at
  which the proof's decoder recovers the codeword from the released vector, beside
  ``theorem4_success_bound``, the most any (epsilon, delta)-DP algorithm can reach.
- **Theorem 5** (PCA, the edge-spike family, real fits): the mean ``sin^2`` over uniform
  members of the family, beside ``theorem5_risk_bound``, Proposition 4's lower bound on it.
- **Theorem 6** (dense PCA, Construction 2, SIMULATED): the n (log-interpolated on the grid)
  at which the 2/3-quantile of ``sin^2`` first reaches the target, beside ``d / epsilon``.
- **ExpMech** (Model 2, real fits): n*(k) at fixed d with its fitted exponent of k, beside
  Theorem 7's (the estimator's own planning value from the proof's bound, and the leading k^2).
- **PrivNorm** (Model 2, SIMULATED): the rate at which Algorithm 3's tests pass and its
  relative error vs n, beside its plan's forecast and Lemma 21's error bound.

Constants. Theorems 4 and 5 come with explicit bounds (Theorem 4's through the packing
argument of its proof, written out with group privacy in ``theorem4_success_bound``);
those are checked as stated: no private estimator may measure beyond them (a decoding rate
above Theorem 4's, a mean ``sin^2`` below Theorem 5's, beyond its confidence interval), which
would indicate a privacy bug. Theorems 2 and 6 are Omega(...)
statements whose constants the paper leaves unspecified (Theorem 2's universal alpha_0 and the
Omega, Theorem 6's Delta_0, C_1 and the Omega): their predictions use constant 1 and drop
Theorem 2's ``sqrt(d) exp(alpha_0 k) / epsilon`` branch, so their ratios compare shapes, not a
certified floor.

The formulas are in :mod:`~dpdist.experiments.lower_bound_formulas`, the parts that run the
estimators in :mod:`~dpdist.experiments.lower_bound_parts`, the figure and the README tables in
:mod:`~dpdist.experiments.lower_bound_plots`.
"""

from __future__ import annotations

import math
import time
import warnings

from dpdist.exceptions import UtilityWarning, ValidationError
from dpdist.experiments.lower_bound_parts import RUNNERS, _revision
from dpdist.experiments.lower_bound_plots import plot_lower_bounds

__all__ = ["CONFIG", "check", "run_lower_bounds"]

#: Sizes of the full run (about 20 minutes on one core) and of ``--smoke``.
CONFIG = {
    "full": {
        "theorem2": {"d": 200, "k": 20, "n": [1e3, 1e4, 1e5, 1e6, 1e7, 1e8], "reps": 30,
                     "methods": ["thresholded", "privcov", "privcov_laplace", "privcov_gumbel", "wang_xu"]},
        "theorem4": {"g": 6, "k": 6, "codewords": 400, "n": [2, 8, 32, 128, 512, 2048, 8192, 32768, 131072],
                     "reps": 50, "methods": ["empirical_pca", "thresholded_pca", "wang_xu_pca", "privpca",
                                             "privcov_power", "expmech"]},
        "theorem5": {"d": 64, "k": 16, "n": [2, 8, 32, 128, 512, 2048, 8192, 32768], "reps": 40,
                     "methods": ["empirical_pca", "thresholded_pca", "wang_xu_pca", "privpca", "privcov_power"]},
        "theorem6": {"d": [10, 20, 40, 80], "gamma": 0.3, "n": [1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9], "reps": 20,
                     "target": 0.1, "methods": ["thresholded_pca", "wang_xu_pca", "privcov_power"]},
        "expmech": {"d": 16, "k": [2, 3, 4, 5, 6], "reps": 10, "target": 0.1, "beta": 0.1, "rtol": 0.15,
                    "start": 1e4},
        "privnorm": {"d": 50, "k": 3, "n": [10 ** (e / 2) for e in range(12, 27)], "reps": 30},
    },
    "smoke": {
        "theorem2": {"d": 24, "k": 12, "n": [1e4, 1e6], "reps": 3, "methods": ["thresholded", "privcov"]},
        "theorem4": {"g": 6, "k": 6, "codewords": 30, "n": [8, 256], "reps": 2,
                     "methods": ["empirical_pca", "wang_xu_pca"]},
        "theorem5": {"d": 16, "k": 4, "n": [4, 256], "reps": 3, "methods": ["thresholded_pca", "wang_xu_pca"]},
        "theorem6": {"d": [6, 12, 24], "gamma": 0.3, "n": [1e3, 1e6], "reps": 3, "target": 0.1,
                     "methods": ["thresholded_pca", "wang_xu_pca"]},
        "expmech": {"d": 6, "k": [2, 3, 4], "reps": 1, "target": 0.9, "beta": 0.5, "rtol": 1.0, "start": 100},
        "privnorm": {"d": 20, "k": 3, "n": [1e6, 1e10], "reps": 2},
    },
}

PARTS = ("theorem2", "theorem4", "theorem5", "theorem6", "expmech", "privnorm")


def run_lower_bounds(*, smoke: bool = False, parts=None, epsilon: float = 1.0, delta: float = 1e-6,
                     out_dir: str | None = None, log=print) -> dict:
    """Run the parts (default all), return the result and write ``lower_bounds.json`` and
    ``lower_bounds.png`` to ``out_dir`` (``lower_bounds_smoke.*`` with ``smoke``)."""
    import os

    parts = list(PARTS) if parts is None else list(parts)
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        raise ValidationError(f"unknown part(s) {unknown}; choose from {list(PARTS)}")
    if not (isinstance(epsilon, (int, float)) and 0 < epsilon <= 1):
        raise ValidationError(f"epsilon must be in (0, 1] (the theorems' range), got {epsilon!r}")
    if not (isinstance(delta, (int, float)) and 0 < delta < 1):
        raise ValidationError(f"delta must be in (0, 1), got {delta!r}")
    cfg = CONFIG["smoke" if smoke else "full"]
    cmd = ["dpdist experiment lower-bounds"] + (["--smoke"] if smoke else []) + \
        ([f"--parts {','.join(parts)}"] if parts != list(PARTS) else []) + \
        ([f"--epsilon {epsilon:g}"] if epsilon != 1.0 else []) + ([f"--delta {delta:g}"] if delta != 1e-6 else [])
    result: dict = {"produced_by": "dpdist experiment lower-bounds (dpdist/experiments/lower_bounds.py)",
                    "commands": ["OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 nice -n 10 " + " ".join(cmd)],
                    "code_revision": _revision(), "date": time.strftime("%Y-%m-%d"), "smoke": smoke,
                    "epsilon": epsilon, "delta": delta, "config": {p: cfg[p] for p in parts}, "seconds": {}}
    for p in parts:
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UtilityWarning)  # vacuous plans at small n are what is measured here
            result[p] = RUNNERS[p](cfg[p], epsilon, delta, log)
        result["seconds"][p] = time.perf_counter() - t0
    result["check"] = check(result)
    from dpdist.experiments.fingerprint import FINGERPRINTED, provenance

    used = [r["method"] for p in parts for r in result[p].get("rows", []) if isinstance(r, dict) and "method" in r]
    used += ["expmech"] if "expmech" in parts else []
    record = provenance([m for m in dict.fromkeys(used) if m in FINGERPRINTED])
    result["fingerprints"] = record["fingerprints"]
    if out_dir is not None:
        from dpdist.experiments.plots import write_json

        stem = "lower_bounds_smoke" if smoke else "lower_bounds"
        result["files"] = [write_json(result, out_dir, f"{stem}.json")]
        png = os.path.join(out_dir, f"{stem}.png")
        plot_lower_bounds(result, png)
        result["files"].append(png)
    return result


def check(result: dict) -> dict:
    """Rows where a private estimator measured beyond a certified bound (Theorem 4: a decoding
    rate whose confidence interval lies above the bound; Theorem 5: a mean sin^2 whose interval
    lies below it), and per private estimator the extreme ratio measured / bound of each part."""
    violations = []
    for part in ("theorem4", "theorem5"):
        for row in result.get(part, {}).get("rows", []):
            if row["private"] and row["violates_bound"]:
                violations.append({"part": part, "method": row["method"], "n": row["n"]})
    smallest = {}
    for part in ("theorem2", "theorem5"):  # errors: the claim is measured / bound >= 1
        for row in result.get(part, {}).get("rows", []):
            if row["private"] and row["ratio"] is not None:
                key = f"{part}:{row['method']}"
                smallest[key] = min(smallest.get(key, math.inf), row["ratio"])
    largest = {}
    for row in result.get("theorem4", {}).get("rows", []):  # a success rate: the claim is measured / bound <= 1
        if row["private"]:
            key = f"theorem4:{row['method']}"
            largest[key] = max(largest.get(key, -math.inf), row["ratio"])
    for row in result.get("theorem6", {}).get("n_at_target", []):
        if row["private"] and row["ratio"] is not None:
            key = f"theorem6:{row['method']}"
            smallest[key] = min(smallest.get(key, math.inf), row["ratio"])
    return {"private_below_certified_bound": violations, "no_private_estimator_below_certified_bounds": not violations,
            "smallest_ratio_measured_over_bound": smallest,
            "largest_ratio_success_over_bound": largest}
