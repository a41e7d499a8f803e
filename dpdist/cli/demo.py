"""``dpdist demo``: the whole pipeline on an embedded default.

Generates a Model-1 dataset into a Zarr store, runs the private sparse covariance (PrivCov)
and the Wang-Xu Gaussian baseline at the same budget, and the NON-PRIVATE thresholded
estimate, on the default scheduler (or --scheduler); prints the PrivCov release, each
estimate's error against the known truth, and what the whole demo spent: the two private
releases of the same data add up by basic composition. Without --workdir everything is
written to a temporary directory that is removed at exit; with --workdir DIR the data and
both private releases stay in DIR.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time

from dpdist.cli._common import (
    HelpFormatter,
    add_json_arg,
    add_progress_args,
    banner,
    print_json,
    privacy_banners,
    privacy_warnings,
    run_context,
)


def register(sub) -> None:
    p = sub.add_parser(
        "demo",
        help="generate data, run PrivCov and its baselines, print the results and the budget spent",
        description=__doc__,
        formatter_class=HelpFormatter,
    )
    p.add_argument("--n-samples", type=int, default=4_000_000)
    p.add_argument("--n-features", type=int, default=16)
    p.add_argument("--k", type=int, default=3)
    p.add_argument("--epsilon", type=float, default=2.0, help="epsilon of each private release")
    p.add_argument("--delta", type=float, default=1e-6, help="delta of each private release")
    p.add_argument("--structure", choices=("block", "banded", "graph"), default="banded")
    p.add_argument("--workdir", default=None,
                   help="keep the dataset and both private releases in this directory (created if "
                        "needed). Default: a temporary directory, removed at exit")
    p.add_argument("--scheduler", default=None,
                   help="where to run (as for `dpdist covariance`; default: the library's default)")
    p.add_argument("--random-state", type=int, default=None, help="seed the privacy noise (default: OS entropy)")
    add_progress_args(p)
    add_json_arg(p, "a summary")
    p.set_defaults(func=run)


def _workdir(path: str | None) -> tuple[str, bool]:
    """(directory, keep): --workdir, created and checked writable, or a temporary one."""
    from dpdist.data.results import check_output_path

    if path is None:
        return tempfile.mkdtemp(prefix="dpdist-demo-"), False
    os.makedirs(path, exist_ok=True)
    check_output_path(os.path.join(path, "privcov.zarr"), overwrite=True)  # writable, before any work
    return os.path.abspath(path), True


def run(args) -> int:
    import numpy as np

    import dpdist
    from dpdist.data.results import write_result
    from dpdist.data.synthetic import make_model1
    from dpdist.report.metrics import operator_norm, support_metrics
    from dpdist.report.text import format_release

    say = (lambda *a, **k: None) if args.json else print
    model = make_model1(args.n_features, args.k, structure=args.structure, random_state=0)
    sigma = float(np.sqrt(model.sigma2))
    budget = dict(epsilon=args.epsilon, delta=args.delta, sigma=sigma, random_state=args.random_state)
    plan = dpdist.SparseCovariance(args.k, **budget).plan(args.n_samples, args.n_features)  # validates first
    workdir, keep = _workdir(args.workdir)
    try:
        say(f"dpdist {dpdist.__version__} demo: Model 1 ({args.structure}, d={args.n_features}, "
            f"k={args.k}, sigma^2={model.sigma2:.3f}), n={args.n_samples:,}")
        release = "" if plan.release_sigma is None else f", release Gaussian sigma={plan.release_sigma:.4g}"
        say(f"plan      : clip R={plan.clip:.3f}, selection Laplace scale b={plan.noise_scale:.4g}{release}, "
            f"error bound {plan.error_bound:.3g} (Wang-Xu Gaussian scale {plan.wang_xu_sigma:.3g})")
        with run_context(args) as sched, privacy_warnings() as warned:  # prints nothing inside: progress line
            cluster = None
            if not isinstance(sched, (str, type(None))):
                cluster = f"cluster   : {sched.scheduler.address} ({len(sched.scheduler_info()['workers'])} workers)"
            t0 = time.perf_counter()
            data = model.write_zarr(os.path.join(workdir, "model1.zarr"), args.n_samples, scheduler=sched,
                                    overwrite=True)
            t_data = time.perf_counter() - t0
            t0 = time.perf_counter()
            privcov = dpdist.SparseCovariance(args.k, **budget, scheduler=sched, progress=False).fit(data)
            t_priv = time.perf_counter() - t0
            wang_xu = dpdist.baselines.GaussianCovariance(**budget, scheduler=sched).fit(data)
            thresholded = dpdist.baselines.ThresholdedCovariance(sigma=sigma, scheduler=sched).fit(data)
        if cluster:
            say(cluster)
        say(f"data      : {data if keep else 'Model-1 samples'} written in {t_data:.1f}s")
        rows = (("PrivCov", privcov), ("Wang-Xu Gaussian", wang_xu), ("thresholded", thresholded))
        outputs = {}
        if keep:
            for name, est in rows[:2]:
                path = os.path.join(workdir, f"{name.split()[0].lower()}.zarr")
                outputs[name] = write_result(path, est.release_.metadata(), est.release_.values, overwrite=True)
        total = privcov.release_.privacy + wang_xu.release_.privacy  # basic composition (DR14, Thm 3.16)
        banner(args, privacy_banners(*(est.release_.metadata() for _, est in rows), warned=warned))
        truth = model.covariance
        summary = []
        for name, est in rows:
            meta = est.release_.metadata()
            s = support_metrics(est.covariance_, truth)
            summary.append({"estimator": name, "mechanism": meta["mechanism"], "private": meta["private"],
                            "privacy": meta["privacy"], "output": outputs.get(name),
                            "operator_norm_error": operator_norm(est.covariance_ - truth),
                            "recall": s["recall"], "precision": s["precision"]})
        if args.json:
            print_json({"model": model.describe(), "n_samples": args.n_samples, "plan": plan,
                        "releases": summary, "privacy_total": total.to_dict(), "composition": "basic",
                        "workdir": workdir if keep else None, "kept": keep})
            return 0
        print()
        print(format_release(privcov.release_.metadata()))
        print(f"released  : {privcov.covariance_.nnz} non-zeros of {args.n_features}^2 in {t_priv:.1f}s")
        print()
        print(f"{'estimator':<34}{'||M - Sigma||_op':>18}{'recall':>9}{'precision':>11}")
        for row in summary:
            label = f"{row['estimator']} ({'private' if row['private'] else 'NOT private'})"
            print(f"{label:<34}{row['operator_norm_error']:>18.4f}{row['recall']:>9.2f}{row['precision']:>11.2f}")
        print(f"\n||Sigma||_op = {model.sigma2:.3f}. At small d the Wang-Xu baseline is the better private "
              "estimator;\nPrivCov's noise grows like sqrt(d) instead of d and overtakes it near "
              "d ~ 64 (k+1) log(d/delta_row).")
        print()
        print(f"spent     : PrivCov ({args.epsilon:g}, {args.delta:g})-DP + Wang-Xu ({args.epsilon:g}, "
              f"{args.delta:g})-DP on the same data = ({total.epsilon:g}, {total.delta:g})-DP for the whole "
              "demo (basic composition)")
        print("            the thresholded row is NOT PRIVATE (no guarantee at all); fine for synthetic data, "
              "never on real data")
        if keep:
            for name, path in outputs.items():
                print(f"written   : {name}: {path}")
        else:
            print("results   : temporary (removed at exit); pass --workdir DIR to keep the data and both releases")
    finally:
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0
