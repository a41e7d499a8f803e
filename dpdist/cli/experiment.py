"""``dpdist experiment``: the papers' claims as measured curves (see :mod:`dpdist.experiments`)."""

from __future__ import annotations

from dpdist.cli._args import HelpFormatter


def register(sub) -> None:
    p = sub.add_parser(
        "experiment",
        help="measured curves: sample complexity n*(d), simulation validation, NeurIPS curves, peer comparison, "
             "lower bounds",
        description="Run the experiments of dpdist.experiments; each writes JSON and PNG files to --out. "
        "Simulated results are labelled SIMULATED in their JSON and plots.",
    )
    inner = p.add_subparsers(dest="experiment", metavar="EXPERIMENT", required=True)

    sc = inner.add_parser(
        "sample-complexity",
        help="n*(d) per method (bisection over repeated seeds), fitted exponents, PrivCov/Wang-Xu crossover",
        formatter_class=HelpFormatter,
    )
    sc.add_argument("--mode", choices=("simulated", "real"), default="simulated",
                    help="draw the statistics (simulated, reaches d = 1e5) or fit the estimators on rows (real)")
    sc.add_argument("--methods",
                    default="thresholded,privcov,wang_xu,thresholded_pca,wang_xu_pca,privpca,privcov_power",
                    help="comma-separated: thresholded, privcov (selection='paper'), privcov_gumbel (the default "
                         "selection), privcov_laplace, wang_xu, thresholded_pca, wang_xu_pca, privpca, privcov_power, "
                         "expmech (real mode only)")
    sc.add_argument("--dims", default=None, help="comma-separated d grid (default: per problem); with --ks or "
                    "--epsilons, the one d they run at (default 1000)")
    sc.add_argument("--ks", default=None, metavar="K1,K2",
                    help="sweep k at a fixed d instead of d (Construction 1: each k must divide d and be >= "
                         "2 log(d/k)); results default to sample_complexity_k_<mode>.json")
    sc.add_argument("--epsilons", default=None, metavar="E1,E2",
                    help="sweep epsilon at a fixed d and k instead of d; results default to "
                         "sample_complexity_epsilon_<mode>.json")
    sc.add_argument("--dims-for", action="append", default=[], metavar="METHOD=D1,D2",
                    help="the d grid of one method, instead of --dims (repeatable)")
    sc.add_argument("--output", default=None, metavar="NAME.json",
                    help="results file name in --out (default sample_complexity_<mode>.json; its PNGs are named "
                         "after it)")
    sc.add_argument("--reps", type=int, default=20, help="repetitions per n (common random numbers)")
    sc.add_argument("--beta", type=float, default=0.1, help="failure probability: success needs >= (1-beta) reps")
    sc.add_argument("--epsilon", type=float, default=1.0)
    sc.add_argument("--delta", type=float, default=1e-6)
    sc.add_argument("--rtol", type=float, default=0.1, help="relative precision of n*")
    _common(sc)
    sc.set_defaults(func=_without_bars(run_sample_complexity))

    va = inner.add_parser("validate-simulation", help="simulated vs real error distributions at each method's n*: "
                          "the implied shift of n* with its 95%% interval", formatter_class=HelpFormatter)
    va.add_argument("--reps-sim", type=int, default=300)
    _common(va)
    va.set_defaults(func=_without_bars(run_validation))

    sm = inner.add_parser("second-moment-curves", help="NeurIPS 2025 curves: RecDPSME vs one-shot vs "
                          "subsample-and-aggregate (d-scaling, condition numbers, outliers)",
                          formatter_class=HelpFormatter)
    sm.add_argument("--rho", type=float, default=1.0)
    _common(sm)
    sm.set_defaults(func=_without_bars(run_second_moment))

    lb = inner.add_parser("lower-bounds", help="every estimator on the COLT 2026 hard instances (Theorems 2, 4, 5, "
                          "6) beside the bounds; ExpMech's n*(k); PrivNorm alone",
                          description="Writes lower_bounds.json and lower_bounds.png to --out. Exit status 1 when a "
                          "private estimator measures beyond a bound with explicit constants (Theorems 4 and 5): "
                          "that would indicate a privacy bug.",
                          formatter_class=HelpFormatter)
    lb.add_argument("--parts", default=None,
                    help="comma-separated subset of theorem2, theorem4, theorem5, theorem6, expmech, privnorm "
                         "(default: all)")
    lb.add_argument("--epsilon", type=float, default=1.0)
    lb.add_argument("--delta", type=float, default=1e-6)
    _common(lb)
    lb.set_defaults(func=_without_bars(run_lower_bounds))

    pe = inner.add_parser("peers", help="dpdist vs OpenDP vs diffprivlib PCA (needs .[compare])",
                          formatter_class=HelpFormatter)
    _common(pe)
    pe.set_defaults(func=_without_bars(run_peers))

    fp = inner.add_parser(
        "fingerprint",
        help="are the committed results fresh? (fingerprints of what their numbers depend on)",
        description="Each results file records, per method, a fingerprint of the noise scales, thresholds, clip "
        "levels and selection shares that the method's plan gives at fixed reference points. --check recomputes "
        "them from this code and reports each file's methods as fresh, stale (with the fields that differ) or "
        "unfingerprinted; exit status 1 when any is stale. --write stamps this code's commit and fingerprints "
        "into a results file: use it only right after regenerating that file with this same code (stamping an "
        "old file would call stale numbers fresh).",
        formatter_class=HelpFormatter,
    )
    fp.add_argument("--check", action="store_true", help="check every *.json under --results (the default action)")
    fp.add_argument("--write", nargs="+", default=[], metavar="FILE",
                    help="stamp the current commit and fingerprints into FILE (a results file just regenerated)")
    fp.add_argument("--results", default="benchmarks/results", help="directory of the results files to check")
    fp.add_argument("--json", action="store_true", help="print the result as one JSON document")
    fp.set_defaults(func=run_fingerprint)


def _without_bars(run):
    """An experiment prints one line per point: the thousands of fits it makes show no progress
    bars (``dpdist.progress`` False in dask's configuration while it runs)."""

    def quiet(args) -> int:
        import dask

        with dask.config.set({"dpdist.progress": False}):
            return run(args)

    return quiet


def _common(p) -> None:
    p.add_argument("--out", default="benchmarks/results", help="directory for the JSON and PNG files")
    p.add_argument("--smoke", action="store_true", help="tiny sizes (checks that the experiment runs)")
    p.add_argument("--json", action="store_true", help="print the result as one JSON document")


def _json(args, result: dict) -> bool:
    """With --json, print ``result`` as the command's one JSON document (and nothing else)."""
    if getattr(args, "json", False):
        from dpdist.cli._printing import print_json
        from dpdist.privacy.release import to_jsonable

        print_json(to_jsonable(result))
        return True
    return False


def _progress(message: str) -> None:
    """Progress lines go to stderr: stdout holds the result (one JSON document with --json)."""
    import sys

    print(message, file=sys.stderr, flush=True)


def _files(result: dict) -> None:
    for f in result.get("files", []):
        print(f"wrote {f}")


def run_sample_complexity(args) -> int:
    from dpdist.experiments.sample_complexity import run_sample_complexity as run

    import shlex

    from dpdist.exceptions import ValidationError

    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    dims = None if args.dims is None else [int(x) for x in args.dims.split(",") if x.strip()]
    if args.dims_for:
        grids = {}
        for item in args.dims_for:
            name, _, grid = item.partition("=")
            if name.strip() not in methods or not grid.strip():
                raise ValidationError(f"--dims-for takes METHOD=D1,D2 for a method of --methods, got {item!r}")
            try:
                grids[name.strip()] = [int(x) for x in grid.split(",") if x.strip()]
            except ValueError:
                raise ValidationError(f"--dims-for: the grid must be integers, got {item!r}") from None
        dims = {m: grids[m] for m in grids} | ({m: dims for m in methods if m not in grids} if dims else {})
    def grid(text, what):
        if text is None:
            return None
        items = [x.strip() for x in text.split(",") if x.strip()]
        try:
            return [float(x) for x in items]
        except ValueError:
            raise ValidationError(f"{what} takes comma-separated numbers, got {text!r}") from None

    res = run(methods, mode=args.mode, out_dir=args.out, ks=grid(args.ks, "--ks"),
              epsilons=grid(args.epsilons, "--epsilons"),
              dims=dims, reps=args.reps, beta=args.beta, epsilon=args.epsilon, delta=args.delta, smoke=args.smoke,
              rtol=args.rtol, log=_progress, output=args.output,
              command=shlex.join(["dpdist", *getattr(args, "argv", [])]))
    if _json(args, res):
        return 0
    print(f"[{res['label']}]")
    variable = res.get("variable", "d")
    for name, r in res["methods"].items():
        fit = r.get("fit")
        txt = "n/a (fewer than 3 points)" if fit is None else \
            f"{fit['exponent']:.3f}, 95% CI [{fit['ci95'][0]:.3f}, {fit['ci95'][1]:.3f}]"
        paper = "n/a" if r["paper_exponent"] is None else f"{r['paper_exponent']:g}"
        line = f"{name:16s} exponent of {variable}: {txt}   (paper: {paper}"
        if "fit_theory" in r:
            dif = r["fit_measured_over_theory"]
            line += (f"; plan() bound: {r['fit_theory']['exponent']:.3f}; measured - bound: {dif['exponent']:.3f} "
                     f"[{dif['ci95'][0]:.3f}, {dif['ci95'][1]:.3f}]")
        print(line + ")")
    if "crossover" in res:
        c = res["crossover"]
        print(f"PrivCov/Wang-Xu crossover d: measured {c['measured_n_star_crossover_d']}, noise scales "
              f"{c['noise_scale_crossover_d']:.4g}, closed form {c['closed_form_crossover_d']:.4g}")
    _files(res)
    return 0


def run_validation(args) -> int:
    from dpdist.experiments.validation import run_validation as run

    import shlex

    res = run(smoke=args.smoke, reps_sim=args.reps_sim, out_dir=args.out, log=_progress,
              command=shlex.join(["dpdist", *getattr(args, "argv", [])]))
    if not _json(args, res):
        for name, s in res["methods"].items():
            shift = "none defined" if s["shift"] is None else (
                f"{s['shift']:+.1%} [{s['shift_ci95'][0]:+.1%}, {s['shift_ci95'][1]:+.1%}]")
            print(f"{name:16s} n={s['n']:.3g} (n* {s['n_star']:.3g}) implied n* shift {shift}: {s['verdict']}"
                  + (f" ({s['note']})" if "note" in s else ""))
        print(f"every method within +-10%: {res['all_pass']}; shift found: {', '.join(res['shift_found']) or 'none'}")
        _files(res)
    return 1 if res["shift_found"] else 0


def run_second_moment(args) -> int:
    from dpdist.experiments.second_moment_curves import run_second_moment_curves as run

    res = run(smoke=args.smoke, rho=args.rho, out_dir=args.out, log=_progress,
              command=" ".join(["dpdist", *getattr(args, "argv", [])]))
    if not _json(args, res):
        _files(res)
    return 0


def run_peers(args) -> int:
    from dpdist.experiments.peers import run_peer_comparison as run

    res = run(smoke=args.smoke, out_dir=args.out, log=_progress)
    if not _json(args, res):
        _files(res)
    return 0


def run_fingerprint(args) -> int:
    import glob
    import os

    from dpdist.experiments.fingerprint import check_result, stamp

    if args.write:
        for path in args.write:  # every file is read before any is written
            if not os.path.isfile(path):
                raise FileNotFoundError(f"--write: no such results file: {path}")
        written = stamp(args.write)
        if not _json(args, {"written": written}):
            for path, rec in written.items():
                revision = rec.get('fingerprints_revision', rec.get('code_revision'))
                print(f"stamped {path}: fingerprints of revision {revision}, methods {', '.join(rec['fingerprints'])}")
        return 0
    import json

    report = {}
    for path in sorted(glob.glob(os.path.join(args.results, "**", "*.json"), recursive=True)):
        with open(path) as fh:
            report[path] = check_result(json.load(fh))
    stale = any(r["status"] == "stale" for methods in report.values() for r in methods.values())
    if not _json(args, {"files": report, "stale": stale}):
        for path, methods in report.items():
            print(path + ("" if methods else ": no method results (timings only)"))
            for method, r in methods.items():
                print(f"  {method:20s} {r['status']}")
                for line in r["differences"]:
                    print(f"      {line}")
    return 1 if stale else 0


def run_lower_bounds(args) -> int:
    from dpdist.experiments.lower_bounds import run_lower_bounds as run

    parts = None if args.parts is None else [p.strip() for p in args.parts.split(",") if p.strip()]
    res = run(smoke=args.smoke, parts=parts, epsilon=args.epsilon, delta=args.delta, out_dir=args.out, log=_progress)
    if _json(args, res):
        return 0
    chk = res["check"]
    print("no private estimator beyond a certified bound (Theorems 4, 5): "
          f"{chk['no_private_estimator_below_certified_bounds']}")
    for key, r in chk["smallest_ratio_measured_over_bound"].items():
        print(f"{key:32s} smallest measured / bound: {r:.3g}")
    for key, r in chk["largest_ratio_success_over_bound"].items():
        print(f"{key:32s} largest decoding rate / bound: {r:.3g}")
    _files(res)
    return 0 if chk["no_private_estimator_below_certified_bounds"] else 1
