"""n*: the least n reaching a target error with probability 1 - beta, and its exponent in d, k
or epsilon.

:func:`n_star` brackets n* by factors of ``step`` and bisects in log n; at each n it runs
``reps`` repetitions with common random numbers (repetition r uses the same seeds at every n,
so the success curve is nearly monotone) and calls n a success when at least
``ceil((1 - beta) reps)`` errors are at most the target. :func:`sweep` does that for every
value of a grid (of d by default; of k at fixed d, or of epsilon at fixed d and k) and fits
``log n* = a + p log x`` by least squares; the confidence interval of the exponent p is the
regression's t-interval (95%) over the grid (``fit_exponent``). :func:`slopes` sets each
fitted exponent beside the paper's and beside the exponent of the estimator's own ``plan()``
bound over the same grid, with the difference measured - bound and its interval.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
from scipy import stats

from dpdist.exceptions import ValidationError

__all__ = ["NStar", "VARIABLES", "fit_exponent", "n_star", "slopes", "sweep"]

#: What a sweep varies: the dimension d, the sparsity k (at fixed d) or epsilon (at fixed d, k).
VARIABLES = ("d", "k", "epsilon")


@dataclass
class NStar:
    """Result of :func:`n_star`. ``n_star`` is the smallest n found to succeed (an upper
    bracket: the true n* lies in (``lower``, ``n_star``])."""

    n_star: float
    lower: float
    evaluations: list = field(default_factory=list)
    seconds: float = 0.0
    reached: bool = True


def _success(errors: np.ndarray, target: float, beta: float) -> bool:
    need = math.ceil((1.0 - beta) * len(errors) - 1e-9)
    return int(np.sum(errors <= target)) >= need


def n_star(error_at: Callable[[float, int], float], target: float, *, beta: float = 0.1, reps: int = 20,
           start: float = 1e3, step: float = 10.0, rtol: float = 0.1, n_min: float = 10.0,
           n_max: float = 1e22, integer: bool = True) -> NStar:
    """Least n (to relative precision ``rtol``) at which ``error_at(n, rep)`` is at most
    ``target`` for a fraction >= 1 - beta of ``reps`` repetitions."""
    t0 = time.perf_counter()
    evals: list = []
    cache: dict = {}

    def ok(n: float) -> bool:
        n = float(round(n)) if integer else float(n)
        if n not in cache:
            errs = np.array([error_at(n, r) for r in range(reps)])
            cache[n] = _success(errs, target, beta)
            evals.append({"n": n, "success": cache[n], "quantile": float(np.quantile(errs, 1 - beta)),
                          "median": float(np.median(errs))})
        return cache[n]

    lo, hi = None, None
    n = float(start)
    if ok(n):
        hi = n
        while hi / step >= n_min and ok(hi / step):
            hi /= step
        lo = hi / step
    else:
        lo = n
        while True:
            if lo * step > n_max:
                return NStar(math.inf, lo, evals, time.perf_counter() - t0, reached=False)
            if ok(lo * step):
                hi = lo * step
                break
            lo *= step
    while hi / lo > 1.0 + rtol:
        mid = math.sqrt(lo * hi)
        if integer and round(mid) in (round(lo), round(hi)):
            break
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return NStar(float(round(hi)) if integer else hi, lo, evals, time.perf_counter() - t0)


def fit_exponent(dims, nstars, *, min_d: float | None = None, variable: str = "d") -> dict:
    """Least-squares slope of ``log n*`` on ``log x`` (x the swept ``variable``, d by default)
    with its 95% t-interval (regression CI over the grid; it widens when the points bend away
    from a power law)."""
    d = np.asarray(dims, dtype=np.float64)
    y = np.asarray(nstars, dtype=np.float64)
    keep = np.isfinite(y) & (y > 0)
    if min_d is not None:
        keep &= d >= min_d
    d, y = d[keep], y[keep]
    if d.size < 3:
        raise ValidationError(f"need at least 3 finite n* values to fit an exponent, got {d.size}")
    res = stats.linregress(np.log(d), np.log(y))
    # n* equal at every point (a method that does not depend on the swept variable): slope 0, exactly
    stderr = 0.0 if np.all(y == y[0]) else res.stderr
    t = stats.t.ppf(0.975, d.size - 2)
    return {"exponent": float(res.slope), "ci95": [float(res.slope - t * stderr), float(res.slope + t * stderr)],
            "stderr": float(stderr), "intercept": float(res.intercept), "n_points": int(d.size),
            f"{variable}_range": [float(d.min()), float(d.max())],
            "ci_method": f"OLS slope, t-interval (95%) over the {variable} grid"}


def sweep(error_for_d: Callable[[int], Callable[[float, int], float]], dims, target: float, *, beta: float = 0.1,
          reps: int = 20, start: float = 1e3, rtol: float = 0.1, n_max: float = 1e22, progress=None,
          variable: str = "d") -> dict:
    """n* for every value of the grid ``dims`` (each search starts at the previous value's
    n*), then the exponent fit. ``error_for_d(x)`` returns the ``error_at(n, rep)`` at
    ``variable = x`` (d, k: integers; epsilon: a float); each row records x under ``variable``."""
    rows = []
    guess = float(start)
    for x in dims:
        x = float(x) if variable == "epsilon" else int(x)
        res = n_star(error_for_d(x), target, beta=beta, reps=reps, start=guess, rtol=rtol, n_max=n_max)
        rows.append({variable: x, "n_star": res.n_star, "lower": res.lower, "reached": res.reached,
                     "seconds": res.seconds, "evaluations": res.evaluations})
        if progress is not None:
            progress(rows[-1])
        if res.reached:
            guess = res.n_star
    out = {"rows": rows}
    finite = [r for r in rows if r["reached"]]
    if len(finite) >= 3:
        out["fit"] = fit_exponent([r[variable] for r in finite], [r["n_star"] for r in finite], variable=variable)
    return out


#: Defaults of the by-hand run (sizes for this 2-core machine; the simulation path reaches 1e5).
DEFAULTS = {
    "covariance": {"dims": [60, 200, 600, 2000, 6000, 20000, 100000], "k": 20, "target": 0.25},
    "pca": {"dims": [50, 200, 1000, 5000, 20000, 100000], "k": 3, "target": 0.1},
}
#: Where each method's search starts (the previous d's n* after the first d).
START = {"thresholded": 1e3, "thresholded_pca": 1e3, "wang_xu": 1e5, "wang_xu_pca": 1e5, "privcov": 1e6,
         "privcov_laplace": 1e6, "privcov_gumbel": 1e6, "privpca": 1e15, "expmech": 1e4, "privcov_power": 1e6}
SMOKE = {
    "covariance": {"dims": [24, 48, 96], "k": 12, "target": 0.25},
    "pca": {"dims": [20, 40, 80], "k": 3, "target": 0.1},
}
#: The fixed d of a sweep in k or epsilon when no d is given (``--dims`` with one value sets it).
FIXED_D = {"covariance": 1000, "pca": 1000}
SMOKE_FIXED_D = {"covariance": 48, "pca": 40}


def _grid(values, what: str, *, integer: bool) -> list:
    """The values of a k or epsilon grid, checked: distinct, increasing after sorting, each an
    integer >= 2 (k) or a finite positive number (epsilon)."""
    out = []
    for v in values:
        try:
            x = float(v)
        except (TypeError, ValueError):
            raise ValidationError(f"{what}: not a number: {v!r}") from None
        if integer and (not x.is_integer() or x < 2):
            raise ValidationError(f"{what}: each k must be an integer >= 2, got {v!r}")
        if not integer and not (math.isfinite(x) and x > 0):
            raise ValidationError(f"{what}: each epsilon must be a finite number > 0, got {v!r}")
        out.append(int(x) if integer else x)
    if len(out) < 1 or len(set(out)) != len(out):
        raise ValidationError(f"{what}: give one or more distinct values, got {list(values)!r}")
    return sorted(out)


def run_sample_complexity(methods, *, mode: str = "simulated", out_dir: str | None = None, dims=None,
                          reps: int = 20, beta: float = 0.1, epsilon: float = 1.0, delta: float = 1e-6,
                          smoke: bool = False, rtol: float = 0.1, seed: int = 0, log=print,
                          large_d_fit: float = 2000.0, output: str | None = None, command: str | None = None,
                          ks=None, epsilons=None) -> dict:
    """Sweep n*(d) for each method (``mode`` "simulated" or "real"; ``dims`` one grid for all or
    a dict method -> grid), fit exponents, find the
    PrivCov / Wang-Xu crossover, write ``output`` (default ``sample_complexity_<mode>.json``) and a
    PNG per table. The result records the commit, the fingerprints of its methods
    (:func:`~dpdist.experiments.fingerprint.provenance`) and ``command``, the command that
    produced it, when given.

    With ``ks`` (a grid of k) the sweep varies k at one d per method; with ``epsilons`` it
    varies epsilon at one d and the problem's k. ``dims`` then gives that d (one value, for
    all or per method; default :data:`FIXED_D`) and the default output is
    ``sample_complexity_k_<mode>.json`` or ``sample_complexity_epsilon_<mode>.json``. Every
    instance of the sweep is drawn before any n* is searched, so a (d, k) that Construction 1
    does not allow (k must divide d and, outside ``smoke``, ``k >= 2 log(d/k)``) stops the run
    before anything is written.

    Covariance methods run on Construction 1 (k = 20 by default: Construction 1 needs
    ``k >= 2 log(d/k)`` up to d ~ 4e5), PCA methods on Model 2 (k = 3, gap 0.5, lambda1 = 2).
    Targets: ``||M - Sigma||_op <= 0.25 sigma^2`` (Problem 1, alpha = 0.25) and ``sin^2 <= 0.1``
    (Problem 2, Delta = 0.1), each with probability >= 1 - beta.
    """
    import os
    import zlib

    from dpdist.experiments.methods import (METHODS, PAPER_EXPONENTS, covariance_instance, pca_instance,
                                            real_error, simulated_error)
    from dpdist.simulate import SIMULATED

    if mode not in ("simulated", "real"):
        raise ValidationError(f"mode must be 'simulated' or 'real', got {mode!r}")
    if output is not None and (os.path.basename(output) != output or not output.endswith(".json")):
        raise ValidationError(f"output must be a file name ending in .json (written in out_dir), got {output!r}")
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ValidationError(f"unknown method(s) {unknown}; choose from {sorted(METHODS)}")
    if ks is not None and epsilons is not None:
        raise ValidationError("a sweep varies one of d, k and epsilon: give ks or epsilons, not both")
    variable = "k" if ks is not None else "epsilon" if epsilons is not None else "d"
    values = None if variable == "d" else _grid(ks if variable == "k" else epsilons,
                                                "ks" if variable == "k" else "epsilons", integer=variable == "k")
    cfg = SMOKE if smoke else DEFAULTS
    result: dict = {"label": SIMULATED if mode == "simulated" else "real pipeline", "mode": mode,
                    "epsilon": epsilon if variable != "epsilon" else None, "delta": delta, "beta": beta,
                    "reps": reps, "rtol": rtol, "methods": {},
                    "date": time.strftime("%Y-%m-%d"),
                    "success_rule": "at least ceil((1-beta) reps) of reps errors <= target, common random numbers"}
    if variable != "d":
        result["variable"] = variable
        result["ks" if variable == "k" else "epsilons"] = values

    def points_of(name: str, c: dict) -> list:
        """The (d, k, epsilon) of each grid value of ``name``'s sweep."""
        if variable == "d":
            grid = c["dims"] if dims is None else list(dims.get(name, c["dims"]) if isinstance(dims, dict) else dims)
            return [(int(d), c["k"], epsilon) for d in grid]
        fixed = (SMOKE_FIXED_D if smoke else FIXED_D)[METHODS[name].problem]
        grid = [fixed] if dims is None else list(dims.get(name, [fixed]) if isinstance(dims, dict) else dims)
        if len(grid) != 1:
            raise ValidationError(f"a sweep in {variable} runs at one d per method; got the d grid {grid} for {name}")
        d = int(grid[0])
        return [(d, int(x), epsilon) if variable == "k" else (d, c["k"], float(x)) for x in values]

    instances: dict = {}

    def inst_for(problem: str, d: int, k: int):
        key = (problem, d, k)
        if key not in instances:
            instances[key] = (covariance_instance(d, k, random_state=seed, require_condition=not smoke)
                              if problem == "covariance" else pca_instance(d, k, random_state=seed))
        return instances[key]

    plans = {}
    for name in methods:
        meth = METHODS[name]
        plans[name] = points_of(name, cfg[meth.problem])
        if variable != "d":  # draw (and so check) every instance before anything runs
            for d, k, _ in plans[name]:
                inst_for(meth.problem, d, k)
    for name in methods:
        meth = METHODS[name]
        c = cfg[meth.problem]
        pts = plans[name]
        at = {d if variable == "d" else (k if variable == "k" else e): (d, k, e) for d, k, e in pts}

        def error_for_x(x, name=name, meth=meth, at=at):
            d, k, eps = at[x]
            inst = inst_for(meth.problem, d, k)
            if mode == "real":
                return lambda n, r: real_error(name, inst, int(n), r, epsilon=eps, delta=delta)
            extra = (k,) if variable == "k" else ()

            def err(n, r):
                rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(zlib.crc32(name.encode()), d, r)
                                                                   + extra))
                return simulated_error(name, inst, n, rng, epsilon=eps, delta=delta)

            return err

        t0 = time.perf_counter()
        res = sweep(error_for_x, list(at), c["target"], beta=beta, reps=reps, start=START.get(name, 1e3),
                    rtol=rtol, variable=variable, progress=lambda row, name=name: log(
                        f"{name} [{mode}] {variable}={row[variable]:g}: n*={row['n_star']:.4g} "
                        f"({row['seconds']:.1f}s)"))
        if variable == "d":
            paper = meth.paper_exponent
            res.update(k=c["k"])
        else:
            paper, rate = PAPER_EXPONENTS[variable].get(name, (None, None))
            for row in res["rows"]:
                row["d"], row["k"], row["epsilon"] = at[row[variable]]
            res.update(variable=variable, d=pts[0][0], k=pts[0][1] if variable != "k" else None,
                       epsilon=epsilon if variable != "epsilon" else None, paper_rate=rate)
        res.update(mode=mode, label=result["label"], problem=meth.problem, estimator=meth.estimator,
                   paper_samples=meth.paper_samples, paper_exponent=paper, private=meth.private,
                   target=c["target"], seconds=time.perf_counter() - t0,
                   instances=[inst_for(meth.problem, d, k).parameters for d, k, _ in pts])
        finite = [r for r in res["rows"] if r["reached"]]
        big = [r for r in finite if r["d"] >= large_d_fit]
        if variable == "d" and name == "privcov" and len(big) >= 3:
            res["fit_large_d"] = fit_exponent([r["d"] for r in big], [r["n_star"] for r in big])
        result["methods"][name] = res
    if variable == "d" and "privcov" in result["methods"] and "wang_xu" in result["methods"]:
        result["crossover"] = crossover(result["methods"]["privcov"], result["methods"]["wang_xu"],
                                        k=cfg["covariance"]["k"], epsilon=epsilon, delta=delta)
    add_theory(result)
    from dpdist.experiments.fingerprint import provenance

    if command is not None:
        result["commands"] = [command]
    result.update(provenance(result["methods"]))
    if out_dir is not None:
        from dpdist.experiments.plots import plot_sample_complexity, write_json

        name = output or ("sample_complexity_{mode}.json" if variable == "d" else
                          "sample_complexity_{variable}_{mode}.json").format(mode=mode, variable=variable)
        result["files"] = [write_json(result, out_dir, name)]
        problems = {v["problem"] for v in result["methods"].values()}
        for problem, title in (("covariance", "Table 1: covariance on Construction 1"),
                               ("pca", "Table 2: PCA on Model 2 (sparse spike)")):
            sub = {k: v for k, v in result["methods"].items() if v["problem"] == problem}
            if sub:
                png = os.path.join(out_dir, f"sample_complexity_{problem}_{mode}.png"
                                   if output is None and variable == "d" else
                                   name[:-5] + (f"_{problem}" if len(problems) > 1 else "") + ".png")
                budget = f"eps={epsilon}, " if variable != "epsilon" else ""
                plot_sample_complexity({"methods": sub}, png, variable=variable,
                                       title=f"{title}, n* vs {variable}, {budget}delta={delta}, "
                                       f"beta={beta}" + ("" if mode == "simulated" else " [REAL PIPELINE]"))
                result["files"].append(png)
    return result


def add_theory(result: dict) -> dict:
    """Add the estimators' own planning value (theorem constants,
    :func:`~dpdist.experiments.empirical.theory_n_star`) for the same target at every measured
    point, the exponent of that planning value over the same grid (``fit_theory``) and the
    exponent of measured / theory (``fit_measured_over_theory``: the difference of the two
    exponents, with its interval): close to 0 when the measurement follows the theorem's
    dependence on the swept variable, log factors included."""
    from dpdist.experiments.empirical import theory_n_star

    variable = result.get("variable", "d")
    for name, res in result["methods"].items():
        for row, inst in zip(res["rows"], res["instances"]):
            gap = inst.get("gap") if res["problem"] == "pca" else None
            row["theory_n"] = theory_n_star(name, row["d"], k=row.get("k", res["k"]), sigma=math.sqrt(inst["sigma2"]),
                                            target=res["target"], epsilon=row.get("epsilon", result["epsilon"]),
                                            delta=result["delta"], gap=gap)
        pts = [(r[variable], r["n_star"], r["theory_n"]) for r in res["rows"] if r["reached"] and r.get("theory_n")]
        if len(pts) >= 3:
            x, n, th = zip(*pts)
            res["fit_theory"] = fit_exponent(x, th, variable=variable)
            res["fit_measured_over_theory"] = fit_exponent(x, np.divide(n, th), variable=variable)
            res["theory_over_measured_median"] = float(np.median(np.divide(th, n)))
    return result


def slopes(result: dict) -> dict:
    """Per method of a sample-complexity result, from its rows: the fitted exponent of n* in the
    swept variable (``measured``, with its 95% interval), the paper's (``paper``), the exponent
    of the estimator's own ``plan()`` bound over the same points (``plan``) and the difference
    measured - plan with its interval (``difference``: the fit of log(n* / bound); it is exactly
    the difference of the two slopes). ``bracket``: how far the slope can move with each n*
    anywhere in its search bracket (``lower``, ``n_star``], half the range (the regression
    interval does not see it: n* found on the same grid steps give a zero-width interval).
    A method with fewer than 3 measured points is left out."""
    variable = result.get("variable", "d")
    out = {}
    for name, res in result["methods"].items():
        rows = [r for r in res["rows"] if r["reached"]]
        if len(rows) < 3:
            continue
        x, n, th = zip(*[(r[variable], r["n_star"], r.get("theory_n")) for r in rows])
        lx = np.log(np.asarray(x, dtype=np.float64))
        w = (lx - lx.mean()) / np.sum((lx - lx.mean()) ** 2)
        widths = np.log([r["n_star"] / r["lower"] for r in rows]) if all("lower" in r for r in rows) else None
        entry = {"variable": variable, "paper": res.get("paper_exponent"),
                 "measured": fit_exponent(x, n, variable=variable),
                 "bracket": None if widths is None else float(np.sum(np.abs(w) * widths) / 2)}
        if all(t for t in th):
            entry["plan"] = fit_exponent(x, th, variable=variable)
            entry["difference"] = fit_exponent(x, np.divide(n, th), variable=variable)
        out[name] = entry
    return out


def noise_crossover_d(k: int, epsilon: float, delta: float, *, n: int = 10**6, clip: float = 1.0) -> float:
    """The d at which PrivCov's per-entry Laplace scale equals Wang-Xu's Gaussian sigma at the
    same (epsilon, delta, n, clip), from the calibration functions themselves (both scale as
    clip^2 / n, so the answer does not depend on n or clip). The closed form of
    :func:`closed_form_crossover` approximates it."""
    from scipy import optimize

    from dpdist.privacy.mechanisms.gaussian import wang_xu_calibration
    from dpdist.privacy.mechanisms.privcov.calibration import privcov_calibration

    def log_ratio(logd: float) -> float:
        d = int(round(math.exp(logd)))
        b = privcov_calibration(epsilon, delta, n, d, k, clip).laplace_scale
        s = wang_xu_calibration(epsilon, delta, n, d, clip)["gaussian_sigma"]
        return math.log(b / s)

    lo, hi = math.log(max(k + 2, 4)), math.log(1e9)
    if log_ratio(lo) < 0:
        return float(max(k + 2, 4))
    return float(round(math.exp(optimize.brentq(log_ratio, lo, hi, xtol=1e-4))))


def closed_form_crossover(k: int, delta: float) -> float:
    """The d solving ``d = 64 (k + 1) log(d / delta_row)``, ``delta_row = delta / (2 d)``.

    Per entry, PrivCov's Laplace scale is ``(4 R^2 / n) 4 sqrt(2 d log(2 / delta))
    sqrt((k + 1) log(d / delta_row)) / epsilon`` and a Gaussian release of the whole clipped
    matrix (Frobenius sensitivity ``2 R^2 d / n``) has ``sigma = (2 R^2 d / n)
    sqrt(2 log(1.25 / delta)) / epsilon``; their ratio is about ``8 sqrt((k + 1)
    log(d / delta_row) / d)``, which is 1 at this d (about 8,000 for k = 3, delta = 1e-6)."""
    d = 1000.0
    for _ in range(200):
        d = 64 * (k + 1) * math.log(d * 2 * d / delta)
    return d


def crossover(privcov: dict, wang_xu: dict, *, k: int, epsilon: float, delta: float) -> dict:
    """Where PrivCov overtakes Wang-Xu: the d at which the measured n* curves cross (log-log
    interpolation between grid points), next to the noise-scale crossover of the
    calibrations and the closed form of :func:`closed_form_crossover`."""
    a = {r["d"]: r["n_star"] for r in privcov["rows"] if r["reached"]}
    b = {r["d"]: r["n_star"] for r in wang_xu["rows"] if r["reached"]}
    ds = sorted(set(a) & set(b))
    measured = None
    for d0, d1 in zip(ds, ds[1:]):
        r0, r1 = math.log(a[d0] / b[d0]), math.log(a[d1] / b[d1])
        if r0 > 0 >= r1:
            t = r0 / (r0 - r1)
            measured = math.exp(math.log(d0) + t * (math.log(d1) - math.log(d0)))
            break
    if measured is None and ds:
        measured = "PrivCov below Wang-Xu on the whole grid" if a[ds[0]] <= b[ds[0]] else \
            "Wang-Xu below PrivCov on the whole grid"
    return {
        "measured_n_star_crossover_d": measured,
        "ratio_n_star_privcov_over_wang_xu": {int(d): a[d] / b[d] for d in ds},
        "noise_scale_crossover_d": noise_crossover_d(k, epsilon, delta),
        "closed_form_crossover_d": closed_form_crossover(k, delta),
        "k": k,
        "closed_form": "d = 64 (k+1) log(d / delta_row), delta_row = delta / (2d): noise scales equal per entry",
    }
