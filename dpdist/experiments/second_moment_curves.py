"""The NeurIPS 2025 (Mahpud-Sheffet) curves on the paper's instances, on the real pipeline.

Methods: RecDPSME (:class:`dpdist.SecondMoment`) with its own private radius and lambda_min
steps (``radius=None, lambda_min=None``: 5% + 5% of rho, nothing read off the sample), the
one-shot Gaussian mechanism at the same rho
(:func:`dpdist.algorithms.second_moment.one_shot_second_moment`) and subsample-and-aggregate
at equal privacy (:class:`dpdist.baselines.SubsampleAggregateSecondMoment`, (eps*, delta*) of
RecDPSME's rho split by the usual recipe). The error is the relative spectral error
``gamma = max |eig(Sigma^{-1/2} out Sigma^{-1/2}) - 1|`` of the (1 +- gamma) sandwich.

(a) d-scaling at fixed n: gamma against d in ``dscale_ds`` on two models, the ellipsoid
    ``x = A^{1/2} v`` (``A`` with log-spaced eigenvalues, condition ``dscale_condition``, m = 2d:
    every point has leverage d, so the tail set is empty once m (1 + alpha) >= d) and the
    truncated-Pareto model ``x = [lambda; v]`` (lambda ~ P6 on [1, B], dimension d + 1, m large
    enough that the tail set is empty). Each method gets a least-squares log-log slope with a
    bootstrap 95% interval (seeds resampled within each d), beside the exponent the bounds
    predict: gamma ~ m sqrt(d) / n with m proportional to d for RecDPSME (Theorem 3.3), so
    d^{3/2}; the one-shot mechanism's sigma g(d) / lambda_min with R^2 / lambda_min
    proportional to d, so d^{3/2}; subsample-and-aggregate's n = O~(d^2 / (eps gamma^3)), so
    d^{2/3} (its masking term alpha ||N + N^T|| / (96 (sqrt(d) + c)) alone is flat in d).
(b) Error against n on the ellipsoid at condition numbers ``conditions`` (d fixed).
(c) Outliers ``+-s u_min`` with ``s^2 = f K lambda_min``, ``K = 1/(7 eta) + 1``, on the
    anisotropic Gaussian (d = 4, scales 1..1000, m = 5): f <= 1 keeps Sigma_out <= K Sigma_D, the
    outlier condition of the robustness theorem (inside its regime); f = 50 is outside it. The
    recursion's lower bound against the clean Sigma_D, ``lambda_min(Sigma_D^{-1/2} out
    Sigma_D^{-1/2})``, and how often subsample-and-aggregate returns bottom.

Subsample-and-aggregate's privacy needs n >= 800 m max{...} (about 1e7 m at these budgets), that
is k = n / m >= 800 max{...} groups whatever m, and its agreement step compares all k^2 / 2 pairs
of groups. ``baseline_privacy`` records that least k for every d (and for larger rho at the
smallest d) with the pairwise time extrapolated from the measured fits: no configuration fits
this machine, so every baseline fit here runs with ``unsafe_no_privacy=True`` and is labelled NOT
PRIVATE. Its group count is a cost choice, not an accuracy one: when every group agrees, the
weighted average is the whole sample's second moment whatever the partition, so the error does
not depend on k (``baseline_group_count_check`` measures it at two group counts).

The one-shot mechanism needs a radius: the model's bound where the model has one (ellipsoid:
1; truncated Pareto: sqrt(B^2 + 1); public facts of the model, not of the sample), else
(the unbounded Gaussian of (c)) the radius RecDPSME's private step released for the same seed.
"""

from __future__ import annotations

import contextlib
import math
import os
import subprocess
import time

import numpy as np

__all__ = ["loglog_fit", "run_second_moment_curves"]

FULL = {"dscale_ds": [4, 8, 16, 32, 64], "dscale_n": 200_000, "dscale_condition": 1e4, "dscale_seeds": 3,
        "pareto_bound": 10.0, "conditions": [1e2, 1e4, 1e6], "ns": [10_000, 100_000, 1_000_000], "d": 8,
        "seeds": 3, "outlier_n": 400_000, "etas": [0.002, 0.01, 0.05], "fs": [0.25, 1.0, 50.0],
        "outlier_seeds": 5, "baseline_groups": 100, "check_groups": (100, 1000), "check_n": 100_000}
SMOKE = {"dscale_ds": [4, 8], "dscale_n": 10_000, "dscale_condition": 1e4, "dscale_seeds": 2,
         "pareto_bound": 10.0, "conditions": [1e2, 1e6], "ns": [20_000], "d": 4, "seeds": 2,
         "outlier_n": 10_000, "etas": [0.05], "fs": [1.0, 50.0], "outlier_seeds": 2, "baseline_groups": 60,
         "check_groups": (60, 120), "check_n": 10_000}
OUTLIER_M = 5
OUTLIER_SCALES = (1.0, 10.0, 100.0, 1000.0)
# exponent of gamma in d at fixed n that each method's bound predicts (see the module docstring)
BOUND_EXPONENTS = {"recdpsme": 1.5, "one_shot": 1.5, "baseline": 2.0 / 3.0}


def _rel_error(S_ih: np.ndarray, M: np.ndarray) -> float:
    return float(np.abs(np.linalg.eigvalsh(S_ih @ M @ S_ih) - 1.0).max())


def _inv_sqrt(S: np.ndarray) -> np.ndarray:
    w, v = np.linalg.eigh(S)
    return (v / np.sqrt(w)) @ v.T


def loglog_fit(xs, errors, *, n_boot: int = 2000, seed: int = 0) -> dict:
    """Least-squares slope of log(error) on log(x) over every (x, seed) point, with a 95%
    percentile-bootstrap interval that resamples the seeds within each x.

    ``errors[i]`` holds the per-seed errors at ``xs[i]``; x values without a finite positive
    error are left out (at least two x values must remain)."""
    pts = [(float(x), np.asarray([e for e in es if np.isfinite(e) and e > 0], dtype=float))
           for x, es in zip(xs, errors)]
    pts = [(x, e) for x, e in pts if e.size]
    if len(pts) < 2:
        return {"slope": None, "ci95": None, "n_points": sum(e.size for _, e in pts)}
    lx = np.concatenate([np.full(e.size, math.log(x)) for x, e in pts])
    ly = [np.log(e) for _, e in pts]

    def slopes(y):  # least-squares slope of each row of y on lx
        xc = lx - lx.mean()
        return (y - y.mean(axis=-1, keepdims=True)) @ xc / (xc @ xc)

    if all(y.size == 1 for y in ly):  # one value per x (a deterministic curve): nothing to resample
        return {"slope": float(slopes(np.concatenate(ly))), "ci95": None, "n_points": int(lx.size)}
    rng = np.random.default_rng(seed)
    boot = slopes(np.concatenate([y[rng.integers(0, y.size, (n_boot, y.size))] for y in ly], axis=1))
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return {"slope": float(slopes(np.concatenate(ly))), "ci95": [float(lo), float(hi)], "n_points": int(lx.size)}


def _code_revision() -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True,
                             check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "."], cwd=os.path.dirname(here),
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return rev + ("-dirty" if dirty else "")


def run_second_moment_curves(*, smoke: bool = False, rho: float = 1.0, delta_star: float = 1e-6,
                             out_dir: str | None = None, scheduler: str = "threads", log=print,
                             command: str | None = None) -> dict:
    """Run (a), (b) and (c); write ``second_moment_curves.json`` and three PNGs to ``out_dir``.

    ``command`` is recorded in the JSON (the CLI passes its own command line)."""
    import warnings

    from dpdist import NoPrivateResult, SecondMoment
    from dpdist.algorithms.second_moment.release import one_shot_second_moment
    from dpdist.baselines import SubsampleAggregateSecondMoment
    from dpdist.data.second_moment_generators import (
        anisotropic_gaussian,
        ellipsoid,
        lambda_circ_v,
        outlier_mixture,
        pareto6_moment,
    )
    from dpdist.exceptions import PrivacyWarning, UtilityWarning
    from dpdist.privacy.mechanisms.subsample_aggregate import (
        baseline_masking_scale,
        baseline_privacy_min_samples,
        equal_privacy_baseline_budget,
    )

    cfg = SMOKE if smoke else FULL
    eps_b, delta_b = equal_privacy_baseline_budget(rho, delta_star)
    out: dict = {
        "label": "real pipeline", "rho": rho, "delta_star": delta_star, "baseline_epsilon": eps_b,
        "baseline_delta": delta_b, "baseline_label": "NOT PRIVATE run (unsafe_no_privacy=True)",
        "date": time.strftime("%Y-%m-%d"), "produced_by": "dpdist/experiments/second_moment_curves.py",
        "command": command or f"run_second_moment_curves(smoke={smoke}, rho={rho}, delta_star={delta_star})",
        "code_revision": _code_revision(), "smoke": smoke, "config": {k: list(v) if isinstance(v, tuple) else v
                                                                      for k, v in cfg.items()},
        "recdpsme_initialisation": "private radius and lambda_min steps of SecondMoment (radius=None, "
                                   "lambda_min=None), 5% of rho each",
        "bound_exponents": BOUND_EXPONENTS,
        "dscaling": [], "ellipsoid": [], "outliers": [],
    }
    t_start, cpu_start = time.perf_counter(), time.process_time()
    pair_seconds: dict = {}

    @contextlib.contextmanager
    def quiet():  # seeded, vacuous-at-small-n and NOT PRIVATE runs are what this experiment is for
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyWarning)
            warnings.simplefilter("ignore", UtilityWarning)
            yield

    def recdpsme(X, m, seed):
        with quiet():
            return SecondMoment(rho, m=m, random_state=seed, scheduler=scheduler).fit(X)

    def one_shot(X, radius, seed):
        with quiet():
            return one_shot_second_moment(X, rho, radius=radius, random_state=seed,
                                          scheduler=scheduler).values["second_moment"]

    def baseline(X, m_base, seed):
        """The baseline's estimate (None for bottom) and the seconds it took."""
        t0 = time.perf_counter()
        try:
            with quiet():
                est = SubsampleAggregateSecondMoment(eps_b, delta_b, m=m_base, unsafe_no_privacy=True,
                                                     random_state=seed, scheduler=scheduler).fit(X)
            return est.second_moment_, time.perf_counter() - t0
        except NoPrivateResult:
            return None, time.perf_counter() - t0

    def predicted(est, n, dim, radius, lam):
        """The plan's predicted gamma at the model's radius and lambda_min, and at the released ones."""
        return (est.plan(n, dim, radius=radius, lambda_min=lam).predicted_gamma,
                est.plan(n, dim, radius=est.radius_, lambda_min=est.lambda_min_).predicted_gamma)

    # (a) d-scaling at fixed n on the ellipsoid and the truncated-Pareto model
    n = cfg["dscale_n"]
    B = cfg["pareto_bound"]
    s6 = pareto6_moment(2, B)
    for model in ("ellipsoid", "truncated_pareto"):
        for d in cfg["dscale_ds"]:
            if model == "ellipsoid":
                data = ellipsoid(n, d, condition=cfg["dscale_condition"], random_state=100 + d)
                dim, m, radius = d, 2 * d, 1.0
            else:
                data = lambda_circ_v(n, d, bound=B, random_state=200 + d)
                dim, radius = d + 1, math.sqrt(B**2 + 1)
                m = max(2 * dim, math.ceil((B**2 / s6 + d) / 1.5))  # max leverage B^2/sigma6^2 + d <= m (1 + alpha)
            X = data.X.persist(scheduler=scheduler)
            S = data.second_moment
            S_ih = _inv_sqrt(S)
            lam = float(np.linalg.eigvalsh(S)[0])
            m_base = max(10 * dim, n // cfg["baseline_groups"])
            row = {"model": model, "d": dim, "n": n, "m": m, "baseline_m": m_base, "baseline_groups": n // m_base,
                   "recdpsme": [], "one_shot": [], "baseline": [], "baseline_bottom": 0, "n_levels": [],
                   "predicted_gamma_released": [], "one_shot_radius": radius,
                   "condition": cfg["dscale_condition"] if model == "ellipsoid" else None,
                   "pareto_bound": B if model == "truncated_pareto" else None}
            for s in range(cfg["dscale_seeds"]):
                est = recdpsme(X, m, s)
                row["recdpsme"].append(_rel_error(S_ih, est.second_moment_))
                row["n_levels"].append(est.n_levels_)
                pg, pg_rel = predicted(est, n, dim, radius, lam)
                row["predicted_gamma"] = pg
                row["predicted_gamma_released"].append(pg_rel)
                row["one_shot"].append(_rel_error(S_ih, one_shot(X, radius, s)))
                b, secs = baseline(X, m_base, s)
                pair_seconds.setdefault(dim, []).append(secs / (row["baseline_groups"] ** 2 / 2))
                if b is None:
                    row["baseline_bottom"] += 1
                else:
                    row["baseline"].append(_rel_error(S_ih, b))
            row["baseline_masking_scale"] = baseline_masking_scale(0.5, dim, 0.1)
            out["dscaling"].append(row)
            log(f"d-scaling {model} d={dim}: RecDPSME {np.median(row['recdpsme']):.3g} (L={row['n_levels']}), "
                f"one-shot {np.median(row['one_shot']):.3g}, S&A "
                f"{np.median(row['baseline']) if row['baseline'] else float('nan'):.3g} "
                f"(bottom {row['baseline_bottom']}/{cfg['dscale_seeds']}), predicted {row['predicted_gamma']:.3g}")
    out["dscaling_fits"] = {}
    for model in ("ellipsoid", "truncated_pareto"):
        rows = [r for r in out["dscaling"] if r["model"] == model]
        ds = [r["d"] for r in rows]
        fits = {k: loglog_fit(ds, [r[k] for r in rows]) for k in ("recdpsme", "one_shot", "baseline")}
        fits["predicted_gamma"] = loglog_fit(ds, [[r["predicted_gamma"]] for r in rows])
        out["dscaling_fits"][model] = fits
        log(f"d-scaling {model} slopes: " + ", ".join(
            f"{k} {v['slope']:.2f} {v['ci95'] or ''}" for k, v in fits.items() if v["slope"] is not None))

    # (b) error against n at several condition numbers
    d = cfg["d"]
    m = 2 * d
    for cond in cfg["conditions"]:
        for n in cfg["ns"]:
            data = ellipsoid(n, d, condition=cond, random_state=int(math.log10(cond)) * 1000 + n % 997)
            X = data.X.persist(scheduler=scheduler)
            S = data.second_moment
            S_ih = _inv_sqrt(S)
            lam = float(np.linalg.eigvalsh(S)[0])
            m_base = max(10 * d, n // cfg["baseline_groups"])
            row = {"condition": cond, "n": n, "d": d, "m": m, "baseline_m": m_base, "baseline_groups": n // m_base,
                   "recdpsme": [], "one_shot": [], "baseline": [], "baseline_bottom": 0, "n_levels": [],
                   "predicted_gamma_released": [], "radius_released": [], "lambda_min_released": [],
                   "lambda_min": lam}
            for s in range(cfg["seeds"]):
                est = recdpsme(X, m, s)
                row["recdpsme"].append(_rel_error(S_ih, est.second_moment_))
                row["n_levels"].append(est.n_levels_)
                row["radius_released"].append(est.radius_)
                row["lambda_min_released"].append(est.lambda_min_)
                pg, pg_rel = predicted(est, n, d, 1.0, lam)
                row["predicted_gamma"] = pg
                row["predicted_gamma_released"].append(pg_rel)
                row["one_shot"].append(_rel_error(S_ih, one_shot(X, 1.0, s)))
                b, _ = baseline(X, m_base, s)
                if b is None:
                    row["baseline_bottom"] += 1
                else:
                    row["baseline"].append(_rel_error(S_ih, b))
            out["ellipsoid"].append(row)
            log(f"ellipsoid cond={cond:.0e} n={n:.0e}: RecDPSME {np.median(row['recdpsme']):.3g} "
                f"(L={row['n_levels']}), one-shot {np.median(row['one_shot']):.3g}, S&A "
                f"{np.median(row['baseline']) if row['baseline'] else float('nan'):.3g} "
                f"(bottom {row['baseline_bottom']}/{cfg['seeds']}), predicted {row['predicted_gamma']:.3g}")

    # the baseline's group count: the same fit at two k
    data = ellipsoid(cfg["check_n"], d, condition=1e4, random_state=7)
    X = data.X.persist(scheduler=scheduler)
    S_ih = _inv_sqrt(data.second_moment)
    check = {"n": cfg["check_n"], "d": d, "condition": 1e4, "groups": [], "errors": []}
    for k in cfg["check_groups"]:
        b, _ = baseline(X, cfg["check_n"] // k, 0)
        check["groups"].append(k)
        check["errors"].append(None if b is None else _rel_error(S_ih, b))
    out["baseline_group_count_check"] = check
    log(f"S&A group count check: k={check['groups']} errors {check['errors']}")

    # (c) outliers inside (f <= 1) and outside (f = 50) the theorem's regime
    n = cfg["outlier_n"]
    C_ih = _inv_sqrt(np.diag(np.asarray(OUTLIER_SCALES) ** 2))
    cases = [(0.0, None)] + [(eta, f) for f in cfg["fs"] for eta in cfg["etas"]]
    for eta, f in cases:
        data = (outlier_mixture(n, OUTLIER_SCALES, eta=eta, f=f, kind="point", random_state=11) if eta
                else anisotropic_gaussian(n, OUTLIER_SCALES, random_state=11))
        Xn = data.X.compute(scheduler=scheduler)
        m_base = 400
        row = {"eta": eta, "f": f, "n": n, "m": OUTLIER_M, "seeds": cfg["outlier_seeds"], "baseline_m": m_base,
               "regime": ("clean" if f is None else "inside: f <= 1, Sigma_out <= K Sigma_D" if f <= 1
                          else "outside: f > 1, Sigma_out = f K lambda_min u u^T exceeds K Sigma_D"),
               "recdpsme_lambda_min_vs_clean": [], "one_shot_lambda_min_vs_clean": [],
               "baseline_lambda_min_vs_clean": [], "baseline_bottom": 0, "radius_released": [],
               "lambda_min_released": [],
               "one_shot_radius_rule": "the radius RecDPSME's private step released for the same seed"}
        for s in range(cfg["outlier_seeds"]):
            est = recdpsme(Xn, OUTLIER_M, s)
            row["recdpsme_lambda_min_vs_clean"].append(float(np.linalg.eigvalsh(C_ih @ est.second_moment_ @ C_ih)[0]))
            row["radius_released"].append(est.radius_)
            row["lambda_min_released"].append(est.lambda_min_)
            o = one_shot(Xn, est.radius_, s)
            row["one_shot_lambda_min_vs_clean"].append(float(np.linalg.eigvalsh(C_ih @ o @ C_ih)[0]))
            b, _ = baseline(Xn, m_base, s)
            if b is None:
                row["baseline_bottom"] += 1
            else:
                row["baseline_lambda_min_vs_clean"].append(float(np.linalg.eigvalsh(C_ih @ b @ C_ih)[0]))
        out["outliers"].append(row)
        log(f"outliers eta={eta} f={f}: RecDPSME lambda_min vs Sigma_D min {min(row['recdpsme_lambda_min_vs_clean']):.4f}"
            f", S&A bottom {row['baseline_bottom']}/{cfg['outlier_seeds']}")

    # the least configuration at which the baseline is private, and what it would cost here
    priv = []
    for d in cfg["dscale_ds"]:
        eta_b = baseline_masking_scale(0.5, d, 0.1)
        for r in ([rho, 10 * rho, 100 * rho] if d == min(cfg["dscale_ds"]) else [rho]):
            e, dl = equal_privacy_baseline_budget(r, delta_star)
            k_min = baseline_privacy_min_samples(d, d, e, dl, eta_b) / d  # k = n / m, whatever m
            per_pair = float(np.median(pair_seconds.get(d, [math.nan])))
            priv.append({"d": d, "rho": r, "epsilon": e, "delta": dl, "min_groups": k_min, "min_n_at_m_eq_d": k_min * d,
                         "pairs": k_min**2 / 2, "measured_seconds_per_pair": per_pair,
                         "extrapolated_pairwise_seconds": per_pair * k_min**2 / 2})
    out["baseline_privacy"] = priv
    from dpdist.experiments.fingerprint import provenance

    out["fingerprints"] = provenance(["recdpsme", "one_shot", "subsample_aggregate"])["fingerprints"]
    out["seconds"] = time.perf_counter() - t_start
    out["cpu_seconds"] = time.process_time() - cpu_start  # this process's CPU time (the machine is shared)
    if out_dir is not None:
        from dpdist.experiments.plots import write_json

        out["files"] = [write_json(out, out_dir, "second_moment_curves.json"), *_plots(out, out_dir)]
    return out


def _median(xs) -> float:
    return float(np.median(xs)) if len(xs) else float("nan")


def _plots(out: dict, out_dir: str) -> list[str]:
    from dpdist.experiments.plots import _pyplot

    plt = _pyplot()
    names = {"recdpsme": ("o-", "RecDPSME, private R and lambda_min"), "one_shot": ("s-", "one-shot Gaussian, same rho"),
             "baseline": ("^-", "subsample-aggregate (NOT PRIVATE run)")}
    # d-scaling
    models = [m for m in ("ellipsoid", "truncated_pareto") if any(r["model"] == m for r in out["dscaling"])]
    fig, axes = plt.subplots(1, len(models), figsize=(5.5 * len(models), 4.6), squeeze=False)
    for ax, model in zip(axes[0], models):
        rows = [r for r in out["dscaling"] if r["model"] == model]
        ds = [r["d"] for r in rows]
        fits = out["dscaling_fits"][model]
        for key, (style, label) in names.items():
            pts = [(r["d"], _median(r[key])) for r in rows if r[key]]
            if not pts:
                continue
            f = fits[key]
            ci = f"[{f['ci95'][0]:.2f}, {f['ci95'][1]:.2f}]" if f["ci95"] else ""
            ax.loglog(*zip(*pts), style, label=f"{label}: slope {f['slope']:.2f} {ci}, bound {BOUND_EXPONENTS[key]:.2f}")
        ax.loglog(ds, [r["predicted_gamma"] for r in rows], "k--",
                  label=f"predicted gamma (the plan's): slope {fits['predicted_gamma']['slope']:.2f}")
        ax.axhline(1.0, color="grey", lw=0.6)
        title = (f"ellipsoid, cond(A) = {rows[0]['condition']:.0e}" if model == "ellipsoid"
                 else f"truncated Pareto [lambda; v], B = {rows[0]['pareto_bound']:g}")
        ax.set_title(f"{title}, n = {rows[0]['n']:.0e}", fontsize=9)
        ax.set_xlabel("d")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=6)
    axes[0][0].set_ylabel("gamma = max |eig(S^-1/2 out S^-1/2) - 1| (median)")
    fig.suptitle(f"Real pipeline: error vs d at fixed n, rho = {out['rho']} (95% bootstrap CI of the slopes)",
                 fontsize=10)
    fig.tight_layout()
    p0 = os.path.join(out_dir, "second_moment_dscaling.png")
    fig.savefig(p0, dpi=110)
    plt.close(fig)
    # condition numbers
    conds = sorted({r["condition"] for r in out["ellipsoid"]})
    fig, axes = plt.subplots(1, len(conds), figsize=(4.2 * len(conds), 4.2), sharey=True, squeeze=False)
    for ax, cond in zip(axes[0], conds):
        rows = [r for r in out["ellipsoid"] if r["condition"] == cond]
        n = [r["n"] for r in rows]
        for key, (style, label) in names.items():
            pts = [(r["n"], _median(r[key])) for r in rows if r[key]]
            if pts:
                ax.loglog(*zip(*pts), style, label=label + " (median)")
        ax.loglog(n, [r["predicted_gamma"] for r in rows], "k--", label="predicted gamma (the plan's)")
        ax.axhline(1.0, color="grey", lw=0.6)
        ax.set_title(f"ellipsoid, cond(A) = {cond:.0e}, d = {rows[0]['d']}, L = {rows[-1]['n_levels'][0]}", fontsize=9)
        ax.set_xlabel("n")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("max |eig(S^-1/2 out S^-1/2) - 1|")
    axes[0][0].legend(fontsize=7)
    fig.suptitle(f"Real pipeline: RecDPSME vs one-shot vs subsample-and-aggregate, rho = {out['rho']}", fontsize=10)
    fig.tight_layout()
    p1 = os.path.join(out_dir, "second_moment_condition.png")
    fig.savefig(p1, dpi=110)
    plt.close(fig)
    # outliers
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.5))
    clean = [r for r in out["outliers"] if r["f"] is None]
    for f in sorted({r["f"] for r in out["outliers"] if r["f"] is not None}):
        rows = clean + [r for r in out["outliers"] if r["f"] == f]
        eta = [100 * r["eta"] for r in rows]
        where = "inside" if f <= 1 else "OUTSIDE"
        ax.plot(eta, [min(r["recdpsme_lambda_min_vs_clean"]) for r in rows], "o-",
                label=f"f = {f:g} ({where} the theorem's regime)")
        bx.plot(eta, [r["baseline_bottom"] / r["seeds"] for r in rows], "^-", label=f"f = {f:g} ({where})")
    ax.axhline(1.0, color="grey", lw=0.6)
    ax.set_xlabel("outlier fraction (%)")
    ax.set_ylabel("RecDPSME: worst seed of lambda_min(S_D^-1/2 out S_D^-1/2)")
    bx.set_xlabel("outlier fraction (%)")
    bx.set_ylabel("subsample-aggregate (NOT PRIVATE run): bottom rate")
    for a in (ax, bx):
        a.set_xscale("symlog", linthresh=0.1)
        a.legend(fontsize=7)
        a.grid(True, alpha=0.3)
    fig.suptitle(f"Real pipeline: outliers +-s u_min, d = 4 prototype, n = {out['outliers'][0]['n']:.0e}, "
                 "private R and lambda_min", fontsize=10)
    fig.tight_layout()
    p2 = os.path.join(out_dir, "second_moment_outliers.png")
    fig.savefig(p2, dpi=110)
    plt.close(fig)
    return [p0, p1, p2]
