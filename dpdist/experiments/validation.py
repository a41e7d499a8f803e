"""The simulation against the real pipeline where n* is set, and how far apart they put n*.

The sample-complexity sweeps (:mod:`dpdist.experiments.sample_complexity`) measure n* on the
simulated pipelines. This module checks the simulation in the regime that decides n*: for each
method it takes the sweep's own instance and k (Construction 1 with k = 20 for covariance
methods, the Model-2 spike with k = 3, gap 0.5 for PCA methods; the sweep's ``DEFAULTS``) at the
first d of the sweep's grid, measures n* there with the sweep's own rule (``n_star`` with 12
repetitions, success when 11 of them meet the target, relative precision 0.15, the sweep's
seeds: the value the sweep command gives at that d), and compares, at that n:

- ``reps_real`` fits of the public estimator on fresh rows
  (:func:`~dpdist.experiments.methods.real_error`) against ``reps_sim`` simulated runs
  (:func:`~dpdist.experiments.methods.simulated_error`): their medians, their success fractions
  against the target, and two-sample tests (Kolmogorov-Smirnov, Mann-Whitney);
- the difference in medians as a shift of n: the simulator's local slope
  ``b = d log(median error) / d log(n)`` is measured from simulated runs at 0.8 n and 1.25 n,
  and a real median ``exp(D)`` times the simulated one is what the simulation gives at
  ``n exp(D / b)``; the real pipeline therefore needs ``exp(-D / b)`` times the simulated n* to
  reach the same error, and ``exp(-D / b) - 1`` is the *implied n* shift* (positive: the real
  pipeline needs more rows than the simulation says). Its 95% interval is a percentile
  bootstrap over the real runs and the three simulated samples.

A method *passes* when the interval lies within +-10%; a *shift* is found when it lies wholly
outside; otherwise the point is *inconclusive* at the number of real runs afforded, and the
record says how many would give an interval of that width (the interval narrows as
1/sqrt(reps_real)).

Where the real pipeline cannot reach n* on the machine that runs this (Algorithm 1, n* ~ 4e7
at d = 60; PrivPCA, n* ~ 1e17), the point is taken at the largest n given for it, and the record
says so (``reaches_n_star`` false) and whether that point is trivial (both paths at the
error's ceiling: nothing is learnt about the simulation there).
"""

from __future__ import annotations

import math
import time
import zlib

import numpy as np
from scipy import stats

from dpdist.simulate import SIMULATED

__all__ = ["FULL_POINTS", "SMOKE_POINTS", "SWEEP_REPS", "SWEEP_RTOL", "TOLERANCE", "compare", "implied_shift",
           "run_validation"]

#: The sweep's rule for n* (``dpdist experiment sample-complexity --reps 12 --rtol 0.15``).
SWEEP_REPS = 12
SWEEP_RTOL = 0.15
SWEEP_BETA = 0.1
#: A method passes when the 95% interval of its implied n* shift lies within +-TOLERANCE.
TOLERANCE = 0.10
#: The simulator's local slope is measured at n / SLOPE_STEP and n * SLOPE_STEP (0.8 n, 1.25 n).
SLOPE_STEP = 1.25
#: A slope flatter than this (|b| below it) defines no shift of n: the error does not move with n.
FLAT_SLOPE = 0.02

#: The full validation: (method, d, reps_real, n or None[, reps_sim]). None: at the method's n*
#: measured here with the sweep's rule; a number: the largest n afforded for a method whose n*
#: the real pipeline cannot reach here. d is the first d of each sweep's grid (60 covariance, 50
#: PCA). PrivPCA's simulated runs cost ~0.8 s each and both paths release nothing at 1e6: 40 do.
#: SparseCovariancePCA (``privcov_power``) and Algorithm 1 (``privcov``) get enough runs to narrow
#: their shift's interval to about +-4% (their shifts lie a few percent from zero: with 50 and 8
#: real runs they were inconclusive).
FULL_POINTS = [
    ("privcov_gumbel", 60, 40, None), ("wang_xu", 60, 12, None), ("thresholded", 60, 60, None),
    ("privcov_power", 50, 1500, None, 1500), ("wang_xu_pca", 50, 50, None), ("thresholded_pca", 50, 100, None),
    ("privcov", 60, 100, 1_000_000), ("privpca", 50, 4, 1_000_000, 40),
]
#: The CI short form (the sweeps' smoke instances): two cheap methods, a few seconds.
SMOKE_POINTS = [("thresholded", 24, 20, None), ("thresholded_pca", 20, 20, None)]


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


def _log_median(x: np.ndarray, axis=-1) -> np.ndarray:
    return np.log(np.maximum(np.median(x, axis=axis), 1e-300))


def implied_shift(real, sim, sim_low, sim_high, *, step: float = SLOPE_STEP, target: float | None = None,
                  n_boot: int = 2000, seed: int = 0, tolerance: float = TOLERANCE) -> dict:
    """The relative shift of n* implied by the real-vs-simulated difference at one n.

    ``real`` and ``sim`` are errors at n, ``sim_low`` and ``sim_high`` simulated errors at
    ``n / step`` and ``n * step``. The slope ``b`` of log(median error) on log(n) comes from the
    last two; the shift is ``exp(-(log median real - log median sim) / b) - 1``. The 95% interval
    is the percentile bootstrap, resampling each sample on its own. With ``target``, the success
    fractions (errors <= target) and the bootstrap interval of their difference are added.
    ``verdict``: "pass" (interval within +-tolerance), "shift" (wholly outside), "inconclusive",
    or "flat" (|b| < FLAT_SLOPE: the error does not move with n, no shift is defined).
    """
    real, sim, lo, hi = (np.asarray(a, dtype=np.float64) for a in (real, sim, sim_low, sim_high))
    span = 2.0 * math.log(step)
    slope = float((_log_median(hi) - _log_median(lo)) / span)
    diff = float(_log_median(real) - _log_median(sim))
    rng = np.random.default_rng(seed)

    def boot(x):
        return x[rng.integers(0, x.size, size=(n_boot, x.size))]

    rb, sb, lb, hb = boot(real), boot(sim), boot(lo), boot(hi)
    out = {"slope_dlog_error_dlog_n": slope, "log_median_ratio_real_over_sim": diff,
           "slope_n": [1.0 / step, step], "bootstrap": n_boot}
    if target is not None:
        fr, fs = float(np.mean(real <= target)), float(np.mean(sim <= target))
        d = np.mean(rb <= target, axis=1) - np.mean(sb <= target, axis=1)
        out.update(success_real=fr, success_sim=fs, success_difference=fr - fs,
                   success_difference_ci95=[float(np.quantile(d, 0.025)), float(np.quantile(d, 0.975))],
                   success_sim_low_high=[float(np.mean(lo <= target)), float(np.mean(hi <= target))])
    if abs(slope) < FLAT_SLOPE:
        out.update(shift=None, shift_ci95=None, verdict="flat", reps_real_needed=None)
        return out
    slopes = (_log_median(hb) - _log_median(lb)) / span
    diffs = _log_median(rb) - _log_median(sb)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        shifts = np.expm1(-diffs / slopes)
    shifts = np.where(np.abs(slopes) < FLAT_SLOPE, np.inf * np.sign(-diffs), shifts)
    shift = float(math.expm1(-diff / slope))
    ci = [float(np.quantile(shifts, 0.025)), float(np.quantile(shifts, 0.975))]
    if -tolerance <= ci[0] and ci[1] <= tolerance:
        verdict = "pass"
    elif ci[0] > tolerance or ci[1] < -tolerance:
        verdict = "shift"
    else:
        verdict = "inconclusive"
    half = max(shift - ci[0], ci[1] - shift)  # the wider side of the interval
    room = tolerance - abs(shift)
    if verdict == "pass":
        needed = int(real.size)
    elif room > 0 and math.isfinite(half):
        needed = int(math.ceil(real.size * (half / room) ** 2))
    else:
        needed = None  # the point estimate itself lies outside +-tolerance
    out.update(shift=shift, shift_ci95=ci, verdict=verdict, reps_real_needed=needed)
    return out


def _sweep_config(problem: str, smoke: bool) -> dict:
    from dpdist.experiments.sample_complexity import DEFAULTS, SMOKE

    return (SMOKE if smoke else DEFAULTS)[problem]


def _instance(problem: str, d: int, k: int, seed: int, smoke: bool):
    from dpdist.experiments.methods import covariance_instance, pca_instance

    if problem == "covariance":
        return covariance_instance(d, k, random_state=seed, require_condition=not smoke)
    return pca_instance(d, k, random_state=seed)


def _sweep_n_star(method: str, inst, d: int, target: float, *, epsilon: float, delta: float, seed: int) -> dict:
    """n* of ``method`` at d by the sweep's rule and seeds (what the sweep command gives at the
    first d of its grid)."""
    from dpdist.experiments.methods import simulated_error
    from dpdist.experiments.sample_complexity import START, n_star

    def err(n, r):
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(zlib.crc32(method.encode()), d, r)))
        return simulated_error(method, inst, n, rng, epsilon=epsilon, delta=delta)

    res = n_star(err, target, beta=SWEEP_BETA, reps=SWEEP_REPS, start=START.get(method, 1e3), rtol=SWEEP_RTOL)
    return {"n_star": res.n_star, "lower": res.lower, "reached": res.reached, "seconds": res.seconds}


def _committed_n_star(method: str, d: int) -> dict | None:
    """The committed sweep's n* at d (results files named in the empirical table) and whether
    its fingerprint still matches the code."""
    from dpdist.algorithms.measured import TABLE, table_status
    from dpdist.algorithms.measured import interpolate_loglog as _loglog

    entry = TABLE.get((method, "simulated"))
    if entry is None:
        return None
    found = _loglog(entry["points"], d)
    if found is None:
        return None
    return {"n_star": float(found[0]), "source": entry["source"], "status": table_status(method)["status"]}


def _simulate(method, inst, n, reps, *, seed, tag, epsilon, delta) -> np.ndarray:
    from dpdist.experiments.methods import simulated_error

    key = zlib.crc32(method.encode())
    return np.array([
        simulated_error(method, inst, n, np.random.default_rng(
            np.random.SeedSequence(seed, spawn_key=(key, inst.n_features, tag, int(n) % (1 << 31), r))),
            epsilon=epsilon, delta=delta)
        for r in range(reps)])


def run_validation(points=None, *, smoke: bool = False, reps_sim: int = 300, epsilon: float = 1.0,
                   delta: float = 1e-6, alpha: float = 0.01, seed: int = 0, out_dir: str | None = None,
                   command: str | None = None, scheduler: str | None = "synchronous", log=print) -> dict:
    """Validate the simulation at ``points`` ((method, d, reps_real, n or None) tuples, with an
    optional fifth element: that point's number of simulated runs instead of ``reps_sim``;
    default :data:`FULL_POINTS`, or :data:`SMOKE_POINTS` with ``smoke``); see the module docstring.
    Writes ``simulation_validation.json`` and a PNG of the error ranges to ``out_dir`` when given;
    ``command`` is recorded as the command that produced the result."""
    import os

    from dpdist.experiments.methods import METHODS, real_error

    t_start = time.perf_counter()
    pts = points if points is not None else (SMOKE_POINTS if smoke else FULL_POINTS)
    out = {"label": f"{SIMULATED} vs real pipeline", "epsilon": epsilon, "delta": delta,
           "date": time.strftime("%Y-%m-%d"), "smoke": bool(smoke),
           "n_star_rule": f"least n with >= {math.ceil((1 - SWEEP_BETA) * SWEEP_REPS - 1e-9)} of {SWEEP_REPS} "
                          f"simulated errors <= target, relative precision {SWEEP_RTOL}, the sweep's seeds",
           "shift_rule": ("implied n* shift = exp(-(log median real - log median sim) / b) - 1, b = d log(median "
                          f"simulated error) / d log n from simulated runs at n / {SLOPE_STEP} and n * {SLOPE_STEP}; "
                          "95% percentile bootstrap over the real and simulated runs"),
           "pass_rule": f"pass when the shift's 95% interval lies within +-{TOLERANCE:g}; shift when it lies wholly "
                        "outside; else inconclusive",
           "tests": f"two-sample KS and Mann-Whitney, reported; a point agrees when both p > {alpha} / n_points",
           "alpha": alpha, "points": []}
    for method, d, reps_real, n_given, *own in pts:
        n_sim = int(own[0]) if own else int(reps_sim)
        problem = METHODS[method].problem
        cfg = _sweep_config(problem, smoke)
        k, target = cfg["k"], cfg["target"]
        inst = _instance(problem, d, k, seed, smoke)
        t0 = time.perf_counter()
        measured = _sweep_n_star(method, inst, d, target, epsilon=epsilon, delta=delta, seed=seed)
        committed = None if smoke else _committed_n_star(method, d)
        if n_given is None:
            n = int(round(measured["n_star"]))
        else:
            n = int(n_given)
        reaches = bool(measured["reached"] and n >= measured["n_star"] / 1.5)
        t_nstar = time.perf_counter() - t0
        t0 = time.perf_counter()
        real = np.array([real_error(method, inst, n, r, epsilon=epsilon, delta=delta, scheduler=scheduler)
                         for r in range(reps_real)])
        t_real = time.perf_counter() - t0
        t0 = time.perf_counter()
        kw = {"seed": seed, "epsilon": epsilon, "delta": delta}
        sim = _simulate(method, inst, n, n_sim, tag=0, **kw)
        sim_lo = _simulate(method, inst, n / SLOPE_STEP, n_sim, tag=1, **kw)
        sim_hi = _simulate(method, inst, n * SLOPE_STEP, n_sim, tag=2, **kw)
        t_sim = time.perf_counter() - t0
        ceiling = 1.0 if problem == "pca" else math.inf
        row = {"method": method, "problem": problem, "d": d, "n": n, "k": inst.k, "target": target,
               "instance": inst.parameters, "n_star": measured["n_star"], "n_star_lower": measured["lower"],
               "n_star_reached_by_simulation": measured["reached"], "n_star_committed": committed,
               "n_over_n_star": n / measured["n_star"] if measured["reached"] else 0.0,
               "reaches_n_star": reaches,
               "real_seconds": t_real, "sim_seconds": t_sim, "n_star_seconds": t_nstar,
               **compare(real, sim),
               **implied_shift(real, sim, sim_lo, sim_hi, target=target, seed=seed)}
        row["sim_median_low_high"] = [float(np.median(sim_lo)), float(np.median(sim_hi))]
        # a point says nothing about the simulation when both paths sit at the error's ceiling
        # (PCA: sin^2 of 2/3 or more is no better than a random direction inside a 3-block)
        row["trivial"] = bool(problem == "pca" and row["real_median"] >= 0.5 and row["sim_median"] >= 0.5
                              or row["real_median"] >= ceiling)
        out["points"].append(row)
        shift = ("no shift defined (the error does not move with n)" if row["shift"] is None else
                 f"n* shift {row['shift']:+.1%} [{row['shift_ci95'][0]:+.1%}, {row['shift_ci95'][1]:+.1%}]")
        log(f"{method} d={d} k={inst.k} n={n:.3g} (n* {measured['n_star']:.3g}): median real "
            f"{row['real_median']:.4g} / sim {row['sim_median']:.4g}, slope {row['slope_dlog_error_dlog_n']:.2f}, "
            f"{shift}: {row['verdict']} ({t_real:.0f}s real, {t_sim:.0f}s sim, {t_nstar:.0f}s n*)")
    cut = alpha / max(1, len(out["points"]))
    for row in out["points"]:
        row["tests_agree"] = bool(row["ks_pvalue"] > cut and row["mannwhitney_pvalue"] > cut)
    out["methods"] = {r["method"]: _summary(r) for r in out["points"]}
    out["all_pass"] = all(s["verdict"] == "pass" for s in out["methods"].values())
    out["shift_found"] = sorted(m for m, s in out["methods"].items() if s["verdict"] == "shift")
    out["seconds"] = time.perf_counter() - t_start
    from dpdist.experiments.fingerprint import provenance

    if command is not None:
        out["commands"] = [command]
    out.update(provenance(p[0] for p in pts))
    if out_dir is not None:
        from dpdist.experiments.plots import write_json

        out["files"] = [write_json(out, out_dir, "simulation_validation.json"),
                        _plot(out, os.path.join(out_dir, "simulation_validation.png"))]
    return out


def _summary(row: dict) -> dict:
    """One method's conclusion, in words a reader of the JSON can check against the numbers."""
    s = {"d": row["d"], "k": row["k"], "n": row["n"], "n_star": row["n_star"], "reaches_n_star": row["reaches_n_star"],
         "shift": row["shift"], "shift_ci95": row["shift_ci95"], "verdict": row["verdict"],
         "reps_real": row["reps_real"], "reps_real_needed": row["reps_real_needed"], "trivial": row["trivial"]}
    if not row["reaches_n_star"]:
        s["note"] = (f"the real pipeline cannot reach n* = {row['n_star']:.2g} here; validated at the largest n "
                     f"afforded, {row['n']:.2g}" + (" (a trivial point: both paths at the error's ceiling)"
                                                    if row["trivial"] else ""))
    elif row["verdict"] == "inconclusive":
        need = row["reps_real_needed"]
        s["note"] = (f"inconclusive with {row['reps_real']} real runs; " +
                     (f"about {need} would give an interval of this width inside +-{TOLERANCE:.0%}" if need else
                      f"the point estimate lies outside +-{TOLERANCE:.0%}: more runs would show a shift or "
                      "move the estimate"))
    return s


def _plot(out: dict, path: str) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = out["points"]
    fig, ax = plt.subplots(figsize=(9, 0.5 * len(pts) + 1.6))
    for i, p in enumerate(pts):
        ax.plot(p["real_q10_q90"], [i + 0.12] * 2, "-", color="C0")
        ax.plot([p["real_median"]], [i + 0.12], "o", color="C0", label="real pipeline" if i == 0 else None)
        ax.plot(p["sim_q10_q90"], [i - 0.12] * 2, "-", color="C1")
        ax.plot([p["sim_median"]], [i - 0.12], "s", color="C1", label="SIMULATED" if i == 0 else None)
        ax.plot([p["target"]], [i], "|", color="k", markersize=14, label="target" if i == 0 else None)

    def label(p):
        shift = "n* shift: none defined" if p["shift"] is None else (
            f"n* shift {p['shift']:+.0%} [{p['shift_ci95'][0]:+.0%}, {p['shift_ci95'][1]:+.0%}]")
        where = "" if p["reaches_n_star"] else " (n* unreachable)"
        return f"{p['method']} d={p['d']} k={p['k']} n={p['n']:.2g}{where}\n{shift}: {p['verdict']}"

    ax.set_yticks(range(len(pts)))
    ax.set_yticklabels([label(p) for p in pts], fontsize=7)
    ax.set_xscale("log")
    ax.set_xlabel("error (median and 10-90% range; ||M - Sigma||_op / sigma^2 or sin^2)")
    ax.set_title("SIMULATED vs real pipeline at each method's n*", fontsize=10)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
