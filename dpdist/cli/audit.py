"""``dpdist audit``: empirical lower bounds on the privacy loss of every mechanism."""

from __future__ import annotations

from dpdist.cli._args import HelpFormatter

#: The module of a source checkout that registers the audits' twins.
DEFAULT_TWINS_MODULE = "tests.audit_twins"


def register(sub) -> None:
    p = sub.add_parser(
        "audit",
        help="audit the privacy of every mechanism (empirical lower bounds on epsilon)",
        description="Run each mechanism (or one component of it) many times on an adversarial "
        "pair of neighbouring inputs and print, per mechanism, the claimed privacy parameter, "
        "a lower bound on the true one that holds with the stated confidence (Clopper-Pearson), "
        "the number of trials and the verdict. A lower bound above the claim proves a bug. "
        "With --include-twins each mechanism is followed by its negative control, a deliberately "
        "mis-calibrated twin (noise halved) that the audit must flag; the twins are not part of "
        "the installed package: they live in the source checkout's tests/audit_twins.py, which "
        "--include-twins imports (see --twins-module). --include-slow adds the whole-estimator "
        "runs, among them the end-to-end audits (family 'end-to-end'): every public estimator's "
        "fit() with OS entropy on hostile neighbouring pairs, against the release's own claim "
        "(with --include-twins, also twins carrying two reproduced float bugs); --long runs them "
        "in their long form. "
        "Exit status 1 when an outcome is not the expected one (a real mechanism flagged, or a "
        "catchable twin not flagged).",
        formatter_class=HelpFormatter,
    )
    format_help = p.format_help

    def format_help_with_cases() -> str:
        # the list of cases needs dpdist.testing (about a second to import), which every other
        # dpdist command would pay at start-up: import it only when this help is printed
        from dpdist.testing.mechanisms import CASES

        p.epilog = "mechanisms: " + ", ".join(CASES) + " (or a family: the part before '/')"
        return format_help()

    p.format_help = format_help_with_cases
    p.add_argument("--mechanism", action="append", default=None, metavar="NAME",
                   help="audit only NAME (repeatable; a family name selects all its cases). "
                        "Default: every case except whole-estimator runs")
    p.add_argument("--trials", type=int, default=None,
                   help="trials per dataset for every case (default: each case's own short-form count)")
    p.add_argument("--trial-factor", type=float, default=1.0,
                   help="multiply each case's default number of trials, except the slow "
                        "whole-estimator cases (ignored with --trials)")
    p.add_argument("--confidence", type=float, default=0.95, help="joint confidence of each lower bound")
    p.add_argument("--include-twins", action="store_true",
                   help="also audit the mis-calibrated twins registered by --twins-module")
    p.add_argument("--twins-module", default=DEFAULT_TWINS_MODULE, metavar="MODULE",
                   help="the module that registers the twins (dpdist.testing.register_twins), imported "
                        "with --include-twins; looked up on the Python path, then in the current "
                        "directory (default %(default)s: run from the root of a source checkout)")
    p.add_argument("--include-slow", action="store_true",
                   help="also run the whole-estimator cases (including the end-to-end audits)")
    p.add_argument("--long", action="store_true",
                   help="long form of the end-to-end audits (enough trials to flag their bug twins; "
                        "about 10 minutes for the family)")
    p.add_argument("--seed", type=int, default=0, help="seed of the audit trials")
    p.add_argument("--output", "-o", default=None, help="write the table (with every number) as JSON here")
    p.add_argument("--json", action="store_true", help="print the table as JSON instead of text")
    p.set_defaults(func=run)


def run(args) -> int:
    import json
    import warnings

    from dpdist.cli._printing import print_json
    from dpdist.exceptions import UtilityWarning, ValidationError
    from dpdist.testing.mechanisms import audit_table, format_audit_table, run_audits

    if args.trials is not None and args.trials < 4:
        raise ValidationError(f"--trials must be >= 4, got {args.trials}")
    if not 0.0 < args.confidence < 1.0:
        raise ValidationError(f"--confidence must lie in (0, 1), got {args.confidence}")
    if not args.trial_factor > 0:
        raise ValidationError(f"--trial-factor must be > 0, got {args.trial_factor}")
    if args.include_twins:
        _import_twins(args.twins_module)
    try:
        # the audits fit estimators on small adversarial pairs on purpose: a fit whose plan is
        # vacuous there warns once per trial (thousands of lines); the verdicts do not depend on it
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UtilityWarning)
            pairs = run_audits(
                args.mechanism, n_trials=args.trials, trial_factor=args.trial_factor, confidence=args.confidence,
                seed=args.seed, include_twins=args.include_twins, include_slow=args.include_slow, long=args.long,
            )
    except LookupError as exc:  # an unknown name (KeyError), or no twins registered
        raise ValidationError(str(exc.args[0])) from None
    rows = audit_table(pairs)
    if args.output is not None:
        with open(args.output, "w") as fh:
            json.dump({"confidence": args.confidence, "seed": args.seed, "rows": rows}, fh, indent=2, default=str)
    if args.json:
        print_json(rows)
    else:
        print(format_audit_table(rows))
        if args.output is not None:
            print(f"written   : {args.output}")
    return 0 if all(r["as_expected"] for r in rows) else 1


def _import_twins(module: str) -> None:
    """Import ``module`` (it registers the twins), from the Python path or else from the
    current directory; a clear error naming it when neither has it."""
    import importlib
    import os
    import sys

    from dpdist.exceptions import ValidationError

    def load():
        importlib.import_module(module)

    try:
        load()
        return
    except ModuleNotFoundError as exc:
        first = exc
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
        try:
            load()
            return
        except ModuleNotFoundError as exc:
            first = exc
        finally:
            sys.path.remove(cwd)
    raise ValidationError(
        f"--include-twins: cannot import the twins module {module!r} ({first}); the twins are not part of "
        f"the installed package: run from the root of a source checkout (where {DEFAULT_TWINS_MODULE} lives) "
        "or name an importable module with --twins-module"
    ) from None
