"""The simulation against the real pipeline: the same error distribution, by two-sample tests.

For each (method, d, n) both paths run on the same instance: ``reps_real`` fits of the public
estimator on fresh rows (:func:`~dpdist.experiments.methods.real_error`) and ``reps_sim``
simulated runs (:func:`~dpdist.experiments.methods.simulated_error`). The two samples of errors
are compared by the two-sample Kolmogorov-Smirnov test (``scipy.stats.ks_2samp``, exact
p-value for small samples) and, as a check with more power against a shift, the
Mann-Whitney U test. A point *passes* when both p-values exceed ``alpha / n_points``
(Bonferroni over the points of one run).
"""

from __future__ import annotations

import time

import numpy as np
from scipy import stats

from dpdist.simulate import SIMULATED

__all__ = ["FULL_POINTS", "SMOKE_POINTS", "compare", "run_validation"]

#: The by-hand validation: d in {50, 200}, n up to 1e7 (Construction 1 with k = 10, so that
#: k >= 2 log(d/k) holds at both d; Model 2 with k = 3). (method, d, n, reps_real).
FULL_POINTS = [
    ("thresholded", 50, 2_000, 40), ("thresholded", 50, 20_000, 30), ("thresholded", 200, 20_000, 20),
    ("wang_xu", 50, 100_000, 30), ("wang_xu", 50, 1_000_000, 15), ("wang_xu", 200, 1_000_000, 10),
    ("privcov", 50, 1_000_000, 15), ("privcov", 50, 10_000_000, 8), ("privcov", 200, 2_000_000, 8),
    ("privcov_laplace", 24, 300_000, 20), ("privcov_laplace", 50, 1_000_000, 10),
    ("privcov_gumbel", 24, 300_000, 20), ("privcov_gumbel", 50, 1_000_000, 10),
    ("thresholded_pca", 50, 2_000, 40), ("thresholded_pca", 200, 5_000, 30),
    ("wang_xu_pca", 50, 200_000, 30), ("wang_xu_pca", 200, 1_000_000, 10),
    ("privpca", 50, 1_000_000, 10), ("privcov_power", 50, 10_000_000, 8),
]
#: The CI short form: tiny sizes, enough repetitions for a meaningful test.
SMOKE_POINTS = [("thresholded", 24, 400, 30), ("privcov", 24, 100_000, 20), ("privcov_gumbel", 24, 10_000, 20),
                ("wang_xu", 24, 20_000, 30), ("wang_xu_pca", 20, 200_000, 30)]


def compare(real: np.ndarray, sim: np.ndarray) -> dict:
    """Two-sample tests of two error samples (KS and Mann-Whitney), with the summaries."""
    real = np.asarray(real, dtype=np.float64)
    sim = np.asarray(sim, dtype=np.float64)
    if np.ptp(np.concatenate([real, sim])) == 0:
        ks_p = mw_p = 1.0
    else:
        ks_p = float(stats.ks_2samp(real, sim).pvalue)
        mw_p = float(stats.mannwhitneyu(real, sim, alternative="two-sided").pvalue)
    return {"ks_pvalue": ks_p, "mannwhitney_pvalue": mw_p,
            "real_median": float(np.median(real)), "sim_median": float(np.median(sim)),
            "real_q10_q90": [float(np.quantile(real, 0.1)), float(np.quantile(real, 0.9))],
            "sim_q10_q90": [float(np.quantile(sim, 0.1)), float(np.quantile(sim, 0.9))],
            "reps_real": int(real.size), "reps_sim": int(sim.size)}


def run_validation(points=None, *, smoke: bool = False, reps_sim: int = 300, epsilon: float = 1.0,
                   delta: float = 1e-6, alpha: float = 0.01, seed: int = 0, out_dir: str | None = None,
                   log=print) -> dict:
    """Run the comparison at ``points`` ((method, d, n, reps_real) tuples; default
    :data:`FULL_POINTS`, or :data:`SMOKE_POINTS` with ``smoke``). Writes
    ``simulation_validation.json`` and a PNG of the quantiles to ``out_dir`` when given."""
    import os
    import zlib

    from dpdist.experiments.methods import METHODS, covariance_instance, pca_instance, real_error, simulated_error

    pts = points if points is not None else (SMOKE_POINTS if smoke else FULL_POINTS)
    out = {"label": f"{SIMULATED} vs real pipeline", "epsilon": epsilon, "delta": delta, "alpha": alpha,
           "test": "two-sample KS and Mann-Whitney; pass when both p > alpha / n_points (Bonferroni)",
           "date": time.strftime("%Y-%m-%d"), "points": []}
    for method, d, n, reps_real in pts:
        problem = METHODS[method].problem
        if problem == "covariance":
            k = 12 if d % 10 else 10
            inst = covariance_instance(d, k, random_state=seed)
        else:
            inst = pca_instance(d, 3, random_state=seed)
        t0 = time.perf_counter()
        real = np.array([real_error(method, inst, n, r, epsilon=epsilon, delta=delta) for r in range(reps_real)])
        t_real = time.perf_counter() - t0
        t0 = time.perf_counter()
        sim = np.array([
            simulated_error(method, inst, n, np.random.default_rng(
                np.random.SeedSequence(seed, spawn_key=(zlib.crc32(method.encode()), d, n % (1 << 31), r))),
                epsilon=epsilon, delta=delta)
            for r in range(reps_sim)])
        row = {"method": method, "d": d, "n": n, "k": inst.k, "instance": inst.parameters,
               "real_seconds": t_real, "sim_seconds": time.perf_counter() - t0, **compare(real, sim)}
        out["points"].append(row)
        log(f"{method} d={d} n={n:.0e}: KS p={row['ks_pvalue']:.3f}, MW p={row['mannwhitney_pvalue']:.3f}, "
            f"median real {row['real_median']:.4g} / sim {row['sim_median']:.4g} "
            f"({t_real:.1f}s real, {row['sim_seconds']:.1f}s sim)")
    cut = alpha / max(1, len(out["points"]))
    for row in out["points"]:
        row["passes"] = bool(row["ks_pvalue"] > cut and row["mannwhitney_pvalue"] > cut)
    out["all_pass"] = all(r["passes"] for r in out["points"])
    from dpdist.experiments.fingerprint import provenance

    out.update(provenance(p[0] for p in pts))
    if out_dir is not None:
        from dpdist.experiments.plots import write_json

        out["files"] = [write_json(out, out_dir, "simulation_validation.json"), _plot(out, os.path.join(out_dir, "simulation_validation.png"))]
    return out


def _plot(out: dict, path: str) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = out["points"]
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(pts) + 1.5))
    for i, p in enumerate(pts):
        ax.plot(p["real_q10_q90"], [i + 0.12] * 2, "-", color="C0")
        ax.plot([p["real_median"]], [i + 0.12], "o", color="C0", label="real pipeline" if i == 0 else None)
        ax.plot(p["sim_q10_q90"], [i - 0.12] * 2, "-", color="C1")
        ax.plot([p["sim_median"]], [i - 0.12], "s", color="C1", label="SIMULATED" if i == 0 else None)
    ax.set_yticks(range(len(pts)))
    ax.set_yticklabels([f"{p['method']} d={p['d']} n={p['n']:.0e} (KS p={p['ks_pvalue']:.2f})" for p in pts],
                       fontsize=7)
    ax.set_xscale("log")
    ax.set_xlabel("error (median and 10-90% range)")
    ax.set_title("SIMULATED vs real pipeline: error distributions", fontsize=10)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
