"""How time and peak memory grow with n and d: PrivCov, SparsePCA, ExpMech and SecondMoment.

Each point is one ``fit`` on lazily generated data (a dask array: nothing is held whole, rows
are generated chunk by chunk inside the graph), on the threaded scheduler, in a fresh
subprocess whose own peak RSS (``ru_maxrss``) is reported: that is the memory an
out-of-core user sees. Two sweeps:

* over n (rows 1e5 .. 1e8 at small d = 10, row chunks of 250,000): time should be linear in
  n (fitted log-log slope ~ 1 over n >= 1e6, where the fixed cost is negligible and there are
  several chunks) and memory flat (slope ~ 0);
* over d at fixed n: PrivCov 100 .. 30,000 at n = 2,000 (time ~ a d^2 n for the Gram plus
  b d k for the selection noise: both coefficients are fitted; d = 100,000 is in
  bench_privcov.py --large-d 100000), SparsePCA 30 .. 300 at n = 1e6, ExpMech (k = 2) 100 .. 3,000
  and SecondMoment 4 .. 256 (dense d x d per batch or per level: the methods' own limits).

Writes ``scaling.json`` (every point, the fitted exponents) and ``scaling_n.png`` /
``scaling_d.png`` (log-log time and peak memory) to ``--out``. ``--smoke`` (CI) runs two tiny
points per method and sweep in this process (no per-point memory) in a few seconds.
``--max-n`` / ``--max-d-privcov`` bound the full sweeps. Timings on a shared machine are
noisy: the load average is recorded with every point.

Usage: python benchmarks/bench_scaling.py [--smoke] [--out DIR] [--max-n 1e8]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np

METHODS = ("privcov", "sparse_pca", "expmech", "second_moment")
N_GRID = (100_000, 1_000_000, 10_000_000, 100_000_000)
D_SMALL = 10
D_GRID = {
    "privcov": (100, 300, 1_000, 3_000, 10_000, 30_000),
    "sparse_pca": (30, 100, 300),
    "expmech": (100, 300, 1_000, 3_000),
    "second_moment": (4, 16, 64, 256),
}
N_FOR_D = {"privcov": 2_000, "sparse_pca": 1_000_000, "expmech": 20_000, "second_moment": 100_000}
CHUNK_ROWS = 250_000


def _data(n: int, d: int, seed: int = 0):
    import dask.array as da

    rows = max(1, min(n, CHUNK_ROWS, max(10_000, 2**24 // max(d, 1))))
    return da.random.default_rng(seed).standard_normal((n, d), chunks=(rows, d))


def run_point(method: str, n: int, d: int) -> dict:
    """One fit; returns wall seconds (generation, statistics and release) and a status."""
    import dpdist

    status = "released"
    t0 = time.perf_counter()
    if method == "privcov":
        dpdist.SparseCovariance(min(5, d), 1.0, 1e-6, clip=4.0, random_state=0,
                                scheduler="threads").fit(_data(n, d))
    elif method == "sparse_pca":
        from dpdist.data.model2 import make_model2

        rows = max(1, min(n, CHUNK_ROWS, 2**24 // d))
        m = make_model2(n, d, 2, gap=0.5, lambda1=10.0, chunks=rows, random_state=0)
        try:
            # as bench_sparse_pca.py: a large budget and tau = 0.38 so that both passes run
            dpdist.SparsePCA(2, 200.0, 1e-6, gap=0.5, sigma=m.sigma, n_batches=60, tau=0.38, random_state=0,
                             scheduler="threads").fit(m.X)
        except dpdist.NoPrivateResult as exc:  # the pipeline ran; the tests said no
            status = f"rejected at {exc.stage}"
    elif method == "expmech":
        dpdist.ExpMechSparsePCA(2, 1.0, 1e-6, clip=4.0, random_state=0, scheduler="threads",
                                max_subsets=10**9).fit(_data(n, d))
    elif method == "second_moment":
        import dask

        from dpdist.data.second_moment_generators import anisotropic_gaussian

        scales = np.logspace(0, 1, d)
        X = anisotropic_gaussian(n, scales, random_state=1, chunk_rows=max(1, min(n, CHUNK_ROWS, 2**24 // d))).X
        radius = 6.0 * float(np.sqrt((scales**2).sum()))  # public bound (rows beyond are clipped)
        # every level streams (as for data above dpdist.rows-in-memory-bytes): the out-of-core
        # regime whose memory must stay flat in n; smaller data may keep up to that constant
        with dask.config.set({"dpdist.rows-in-memory-bytes": 0}):
            dpdist.SecondMoment(1.0, m=5, radius=radius, lambda_min=0.5, random_state=0, scheduler="threads").fit(X)
    else:
        raise ValueError(method)
    return {"seconds": time.perf_counter() - t0, "status": status}


def point_in_subprocess(method: str, n: int, d: int) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--point", method, str(n), str(d)], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def fit_slope(x, y) -> float | None:
    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = (x > 0) & (y > 0)
    if ok.sum() < 2:
        return None
    return float(np.polyfit(np.log(x[ok]), np.log(y[ok]), 1)[0])


def privcov_model(points: list[dict], k: int = 5) -> dict:
    """Least squares ``t = a d^2 n + b d k + c`` over the d sweep (n fixed)."""
    d = np.array([p["d"] for p in points], float)
    n = np.array([p["n"] for p in points], float)
    t = np.array([p["seconds"] for p in points], float)
    if len(t) < 3:
        return {}
    A = np.stack([d**2 * n, d * k, np.ones_like(d)], axis=1)
    coef, *_ = np.linalg.lstsq(A, t, rcond=None)
    return {"a_seconds_per_d2n": float(coef[0]), "b_seconds_per_dk": float(coef[1]), "c_seconds": float(coef[2]),
            "gram_share_at_largest_d": float(coef[0] * A[-1, 0] / max(t[-1], 1e-12))}


def plot(results: dict, out: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for axis, key in (("n", "sweep_n"), ("d", "sweep_d")):
        fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(11, 4.2))
        for method in METHODS:
            pts = [p for p in results[key] if p["method"] == method]
            if not pts:
                continue
            x = [p[axis] for p in pts]
            slope = results["exponents"][axis].get(method, {})
            fmt = lambda v: "n/a" if v is None else f"{v:.2f}"  # noqa: E731
            lab_t = f"{method} (slope {fmt(slope.get('time'))})"
            lab_m = f"{method} (slope {fmt(slope.get('memory'))})"
            ax_t.loglog(x, [p["seconds"] for p in pts], "o-", label=lab_t)
            if all(p.get("peak_rss_mb") for p in pts):
                ax_m.loglog(x, [p["peak_rss_mb"] for p in pts], "o-", label=lab_m)
        ax_t.set_xlabel(axis)
        ax_t.set_ylabel("wall time (s)")
        ax_m.set_xlabel(axis)
        ax_m.set_ylabel("peak RSS of the fit process (MB)")
        fixed = f"d = {D_SMALL}" if axis == "n" else "n fixed per method (see scaling.json)"
        ax_t.set_title(f"time vs {axis} ({fixed})", fontsize=9)
        ax_m.set_title(f"peak memory vs {axis}", fontsize=9)
        for ax in (ax_t, ax_m):
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=7)
            ax.grid(True, which="both", lw=0.3)
        fig.tight_layout()
        fig.savefig(os.path.join(out, f"scaling_{axis}.png"), dpi=110)
        plt.close(fig)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--smoke", action="store_true", default=os.environ.get("DPDIST_BENCH_SMOKE", "") not in ("", "0"))
    p.add_argument("--out", default="bench-out")
    p.add_argument("--max-n", type=float, default=float(os.environ.get("DPDIST_SCALING_MAX_N", 1e8)))
    p.add_argument("--max-d-privcov", type=int, default=30_000)
    p.add_argument("--methods", default=",".join(METHODS))
    p.add_argument("--reuse", default=None, help="scaling.json of an earlier run: keep its points of the "
                   "methods not in --methods (re-measure one method without re-running the others)")
    p.add_argument("--point", nargs=3, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.point:
        method, n, d = args.point[0], int(args.point[1]), int(args.point[2])
        r = run_point(method, n, d)
        r["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
        print(json.dumps(r))
        return 0
    methods = [m for m in args.methods.split(",") if m]
    if args.smoke:
        n_grid, d_grid = (20_000, 60_000), {"privcov": (20, 60), "sparse_pca": (10, 20), "expmech": (10, 20),
                                             "second_moment": (3, 6)}
        n_for_d = {m: 20_000 for m in METHODS}
        runner = lambda m, n, d: run_point(m, n, d)  # noqa: E731  (in process: seconds only)
    else:
        n_grid = tuple(n for n in N_GRID if n <= args.max_n)
        d_grid = dict(D_GRID)
        d_grid["privcov"] = tuple(d for d in D_GRID["privcov"] if d <= args.max_d_privcov)
        n_for_d = N_FOR_D
        runner = point_in_subprocess
    results: dict = {"cores": os.cpu_count(), "d_small": D_SMALL, "sweep_n": [], "sweep_d": [],
                     "exponents": {"n": {}, "d": {}}, "smoke": args.smoke}
    if args.reuse:
        with open(args.reuse) as f:
            old = json.load(f)
        for key in ("sweep_n", "sweep_d"):
            results[key] += [q for q in old[key] if q["method"] not in methods]
    for method in methods:
        for n in n_grid:
            r = runner(method, n, D_SMALL)
            results["sweep_n"].append({"method": method, "n": n, "d": D_SMALL, **r, "load": os.getloadavg()[0]})
            print(f"{method:>13} n={n:>11,} d={D_SMALL}: {r['seconds']:8.2f} s  peak RSS "
                  f"{r.get('peak_rss_mb', float('nan')):7.0f} MB  {r['status']}", flush=True)
        for d in d_grid[method]:
            r = runner(method, n_for_d[method], d)
            results["sweep_d"].append({"method": method, "n": n_for_d[method], "d": d, **r, "load": os.getloadavg()[0]})
            print(f"{method:>13} n={n_for_d[method]:>11,} d={d:>6}: {r['seconds']:8.2f} s  peak RSS "
                  f"{r.get('peak_rss_mb', float('nan')):7.0f} MB  {r['status']}", flush=True)
    methods = [m for m in METHODS if any(q["method"] == m for q in results["sweep_n"] + results["sweep_d"])]
    for axis, key in (("n", "sweep_n"), ("d", "sweep_d")):
        for method in methods:
            pts = [q for q in results[key] if q["method"] == method]
            # over n the slope is fitted where the fixed cost is small (n >= 1e6 when there are 2+ such points)
            use = [q for q in pts if axis == "d" or q["n"] >= 1_000_000] if axis == "n" else pts
            if len(use) < 2:
                use = pts
            top = sorted(pts, key=lambda q: q[axis])[-2:]  # the last step: fixed costs matter least there
            results["exponents"][axis][method] = {
                "time": fit_slope([q[axis] for q in use], [q["seconds"] for q in use]),
                "memory": fit_slope([q[axis] for q in use], [q.get("peak_rss_mb", 0) for q in use]),
                "fitted_on": [q[axis] for q in use],
                "time_last_step": fit_slope([q[axis] for q in top], [q["seconds"] for q in top]),
                "memory_last_step": fit_slope([q[axis] for q in top], [q.get("peak_rss_mb", 0) for q in top]),
            }
    results["privcov_time_model"] = privcov_model([q for q in results["sweep_d"] if q["method"] == "privcov"])
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "scaling.json"), "w") as f:
        json.dump(results, f, indent=2)
    plot(results, args.out)
    for axis in ("n", "d"):
        for method, e in results["exponents"][axis].items():
            t, m = e["time"], e["memory"]
            tl, ml = e["time_last_step"], e["memory_last_step"]
            print(f"exponent over {axis}: {method:>13} time {t if t is None else round(t, 2)}  "
                  f"memory {m if m is None else round(m, 2)}  (last step: time "
                  f"{tl if tl is None else round(tl, 2)}, memory {ml if ml is None else round(ml, 2)})")
    if results["privcov_time_model"]:
        print("PrivCov time model t = a d^2 n + b d k + c:", results["privcov_time_model"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
