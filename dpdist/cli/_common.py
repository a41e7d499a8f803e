"""Flags, checks, the run harness and printing shared by the sub-commands.

Every flag a command accepts is either honoured or refused. Estimator flags are matched to
the chosen estimator by name: a flag whose destination (``--row-norm`` -> ``row_norm``) is a
parameter of the estimator's ``__init__`` (or, with ``--plan``, of its ``plan()``) is passed
to it; any other given flag is refused with a usage error (exit 2) naming it. Flags the
command line honours itself are listed in :data:`CLI_DESTS`; each command checks its own.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import os
import signal
import sys
import threading
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

__all__ = [
    "CLI_DESTS",
    "RUN_ONLY_DESTS",
    "EstimatorCall",
    "HelpFormatter",
    "Method",
    "add_centering_args",
    "add_columns_arg",
    "add_input_arg",
    "add_json_arg",
    "add_nonfinite_arg",
    "add_output_args",
    "add_plan_args",
    "add_progress_args",
    "add_runtime_args",
    "banner",
    "check_cli_flags",
    "context_of",
    "estimator_call",
    "fit_and_write",
    "given_flags",
    "input_shape",
    "mark_required",
    "need",
    "option",
    "plain_progress",
    "print_json",
    "print_mapping",
    "print_plan",
    "privacy_banners",
    "privacy_warnings",
    "refuse",
    "rejection_path",
    "run_context",
    "show_progress",
]

#: Destinations of flags the command line honours itself (never passed to an estimator).
CLI_DESTS = frozenset({
    "command", "func", "debug", "input", "method", "plan", "n_samples", "n_features", "output",
    "overwrite", "json", "progress", "target_sin2", "report_delta", "missing_chunks", "columns", "ledger",
    "no_ledger",
})
#: Estimator parameters that only matter when data are read: refused with ``--plan``.
RUN_ONLY_DESTS = frozenset({"random_state", "scheduler", "timeout", "missing_chunks"})


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows ``(default: X)`` only for real defaults that the help text does not already
    state: None means "the library's default", and a help saying "default" in prose is kept
    as written."""

    def _get_help_string(self, action):
        no_default = action.default is None or action.default is False or action.default == argparse.SUPPRESS
        if no_default or "default" in (action.help or "").lower():
            return action.help
        return super()._get_help_string(action)


def mark_required(p: argparse.ArgumentParser, methods: dict[str, "Method"], *, method_flag: bool = True) -> None:
    """Append "(required)" to the help of every option all ``methods`` require, and
    "(required by --method a, b)" to one only some require (the checks themselves stay in
    :func:`estimator_call`, which also covers --plan)."""
    for action in p._actions:
        needed_by = [name for name, m in methods.items() if action.dest in m.required]
        if not needed_by or not action.option_strings:
            continue
        if len(needed_by) == len(methods) or not method_flag:
            mark = "(required)"
        else:
            mark = f"(required by --method {', '.join(needed_by)})"
        action.help = f"{action.help} {mark}" if action.help else mark


def _timeout_arg(text: str) -> float:
    """--timeout: seconds (> 0), or 'none' for no limit (``math.inf``, which estimators read as
    no limit)."""
    if text.strip().lower() == "none":
        return float("inf")
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds or 'none', got {text!r}") from None
    if not (value > 0 and value != float("inf")):
        raise argparse.ArgumentTypeError(f"expected seconds > 0 or 'none', got {text!r}")
    return value


def add_runtime_args(p: argparse.ArgumentParser) -> None:
    """--random-state, --scheduler, --timeout, --missing-chunks, --progress/--no-progress
    (mirroring the Python API: ``random_state``, ``scheduler``, ``timeout`` on estimators;
    ``missing_chunks`` of :func:`dpdist.data.as_dask_array`)."""
    from dpdist.engine.runtime import DEFAULT_TIMEOUT

    p.add_argument("--random-state", type=int, default=None,
                   help="seed the noise (reproducible; tests only). Default: OS entropy")
    p.add_argument("--scheduler", default=None,
                   help="where to run: 'threads', 'synchronous', 'processes', 'local-cluster' (start a "
                        "Dask LocalCluster for this run), or the address of a running cluster "
                        "(tcp://HOST:PORT or HOST:PORT; any address dask accepts). Default: dask's configured "
                        "scheduler (threads), starting nothing")
    p.add_argument("--timeout", type=_timeout_arg, default=None, metavar="SECONDS",
                   help=f"fail (exit 5) when the run has not finished after SECONDS (default "
                        f"{DEFAULT_TIMEOUT:g}: one day), "
                        "or when the cluster has had no worker for 30 s; 'none': no limit")
    p.add_argument("--missing-chunks", choices=("auto", "fill", "raise"), default=None,
                   help="how chunk files absent from the input Zarr store are read: 'auto' (the default) "
                        "refuses a store whose chunk manifest (written by dpdist) records chunks it no longer "
                        "holds, and reads a store without one per the Zarr specification (missing chunks are "
                        "the fill value); 'fill' always reads them as the fill value; 'raise' also refuses a "
                        "store without a chunk manifest")
    p.add_argument("--progress", dest="progress", action="store_true", default=None,
                   help="show progress on stderr as plain lines for logs: one per stage or pass, per 10%% and "
                        "per finished stage (default: a redrawn line, only on a terminal)")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="show no progress at all")


def add_progress_args(p: argparse.ArgumentParser) -> None:
    """--progress/--no-progress for commands without :func:`add_runtime_args`."""
    p.add_argument("--progress", dest="progress", action="store_true", default=None,
                   help="show progress on stderr as plain lines for logs: one per stage or pass, per 10%% and "
                        "per finished stage (default: a redrawn line, only on a terminal)")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="show no progress at all")


def add_json_arg(p: argparse.ArgumentParser, what: str = "the result") -> None:
    p.add_argument("--json", action="store_true",
                   help=f"print {what} as one JSON document on stdout (errors too: {{\"error\": ...}})")


#: What INPUT may be, for help texts.
INPUT_HELP = ("a Zarr array path/URL (or a dpdist dataset group with X), or by suffix a Parquet (.parquet, "
              ".pq: a file, a directory of them or a glob; local or s3://), CSV (.csv) or NumPy (.npy, local) file")


def _columns_arg(text: str) -> list[str]:
    """--columns: comma-separated column names."""
    names = [c.strip() for c in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(f"expected comma-separated column names, got {text!r}")
    return names


def add_input_arg(p: argparse.ArgumentParser) -> None:
    """INPUT and --columns (``columns`` of :func:`dpdist.data.as_dask_array`)."""
    p.add_argument("input", nargs="?", metavar="INPUT", help=INPUT_HELP)
    add_columns_arg(p)


def add_columns_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--columns", type=_columns_arg, metavar="A,B,...",
                   help="the columns of a Parquet or CSV INPUT to read, by name, in this order (default: all)")


def add_plan_args(p: argparse.ArgumentParser, what: str) -> None:
    """--plan (print ``what`` for the input's size; read no data), --n-samples, --n-features."""
    p.add_argument("--plan", action="store_true",
                   help=f"print {what} for the input's size; read no data (but a CSV INPUT's rows are counted)")
    p.add_argument("--n-samples", type=int, help="with --plan and no INPUT: n")
    p.add_argument("--n-features", type=int, help="with --plan and no INPUT: d")


def parse_mean(text: str) -> Any:
    """``--mean``: comma-separated numbers, or the path of a ``.npy`` file holding the vector."""
    t = str(text).strip()
    if t.endswith(".npy"):
        import numpy as np

        try:
            return np.load(t, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise argparse.ArgumentTypeError(f"cannot read the mean from {t!r}: {exc}") from None
    try:
        return [float(v) for v in t.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--mean takes comma-separated numbers (e.g. --mean=-1.5,2) or a .npy file, got {text!r}") from None


def add_centering_args(p: argparse.ArgumentParser) -> None:
    """--assume-centered, --mean, --mean-fraction, --mean-clip (the estimators' centring)."""
    p.add_argument("--assume-centered", action="store_true", default=None,
                   help="take the data as mean-zero and release the second moment (1/n) sum x x^T "
                   "(default: centre the data and release the covariance)")
    p.add_argument("--mean", type=parse_mean,
                   help="a public mean to centre at: comma-separated numbers (--mean=-1.5,2,...) or a .npy "
                   "file; recorded as public, costs no budget (default: a private mean)")
    p.add_argument("--mean-fraction", type=float,
                   help="share of the budget spent on the private mean (default 0.1; of mu^2 or rho where "
                        "the stages compose exactly, see docs/estimators.md)")
    p.add_argument("--mean-clip", type=float,
                   help="L2 radius the rows are scaled to for the private mean; must cover the rows' norms "
                   "(default: --radius where the method has it, else the entry clip, from --clip or --sigma, "
                   "times sqrt(d))")


def add_nonfinite_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--on-nonfinite", choices=("raise", "zero"),
                   help="rows with NaN/inf: refuse the input, or zero them (default: the estimator's)")


def add_output_args(p: argparse.ArgumentParser, required: bool = True) -> None:
    """--output, --overwrite, --json, and the ledger the release is charged to (--ledger,
    --no-ledger)."""
    p.add_argument("--output", "-o", required=required,
                   help="result Zarr group to write (atomically)" + ("" if required else "; required unless --plan"))
    p.add_argument("--overwrite", action="store_true", help="replace an existing output")
    add_json_arg(p, "the release metadata (or the plan)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--ledger", default=None,
                   help="charge the release to this privacy-budget ledger (a path, sqlite:///PATH or "
                        "postgresql://...), as `dpdist run` does: reserve before reading, commit with the "
                        "output. Default: $DPDIST_LEDGER; with neither, the run is recorded nowhere, and is "
                        "refused (exit 3) when the default ledger holds a budget for INPUT")
    g.add_argument("--no-ledger", action="store_true",
                   help="run without a ledger although the default ledger holds a budget for INPUT (the "
                        "release records it); refused when --ledger or $DPDIST_LEDGER names a ledger")


def print_json(obj) -> None:
    json.dump(obj, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def print_mapping(mapping: dict, as_json: bool, *, skip: Iterable[str] = ("calibration",), width: int = 22) -> None:
    """Print a plan-like mapping as JSON or as aligned ``key : value`` lines."""
    if as_json:
        print_json(mapping)
        return
    for key, value in mapping.items():
        if key not in skip:
            print(f"{key:>{width}} : {value}")


def print_plan(args, plan, extra: dict | None = None, *, width: int = 22) -> int:
    """Print what ``--plan`` computed: the :class:`~dpdist.privacy.plan.Plan`'s fields (and
    ``extra`` ones) as aligned lines, or one JSON document with ``--json``. A vacuous plan (the
    predicted error is at least the scale of the quantity) also gets a ``!!`` banner on stderr.
    Returns the exit code (0)."""
    mapping = {**plan.to_dict(), **(extra or {})}
    if not args.json:  # one readable line per measurement instead of a dict
        found = mapping.pop("empirical", ())
        if not found:
            mapping["empirical"] = "never measured at this n_features"
        for e in found:
            mapping[f"empirical n* ({e['mode']})"] = (
                f"{e['n_star']:.3g} for {e['target']} on {e['instance_family']} at (epsilon={e['epsilon']:g}, "
                f"delta={e['delta']:g}), {1 - e['beta']:g} of runs [{e['source']}, {e['date']}]")
    print_mapping(mapping, args.json, skip=("calibration", "schedule"), width=width)
    if plan.vacuous:
        banner(args, [f"VACUOUS plan: {plan.vacuous_reason}"])
    return 0


def option(dest: str) -> str:
    """The flag spelling of an argparse destination (``row_norm`` -> ``--row-norm``)."""
    return "INPUT" if dest == "input" else f"--{dest.replace('_', '-')}"


def need(args, *names: str, context: str = "") -> None:
    """Raise a ValidationError naming every missing ``--option`` among ``names``."""
    from dpdist.exceptions import ValidationError

    missing = [option(n) for n in names if getattr(args, n, None) is None]
    if missing:
        prefix = f"{context} needs option(s)" if context else "missing required option(s)"
        raise ValidationError(f"{prefix}: {', '.join(missing)}")


def refuse(dests: Iterable[str], context: str, why: str = "") -> None:
    """Raise a usage error naming flags that ``context`` does not use (no-op when none)."""
    from dpdist.exceptions import ValidationError

    dests = list(dests)
    if dests:
        names = ", ".join(option(d) for d in dests)
        verb = "is" if len(dests) == 1 else "are"
        raise ValidationError(f"{names} {verb} not used by {context}{'; ' + why if why else ''}")


def given_flags(args) -> dict[str, Any]:
    """The flags the user gave: every destination whose value is not None or False."""
    return {k: v for k, v in vars(args).items()
            if k not in ("func", "command", "debug", "argv") and v is not None and v is not False}


def context_of(args) -> str:
    """``dpdist COMMAND [--method M] [--plan]``, for messages."""
    text = f"dpdist {args.command}"
    if getattr(args, "method", None) is not None:
        text += f" --method {args.method}"
    if getattr(args, "plan", False):
        text += " --plan"
    return f"`{text}`"


def check_cli_flags(args, *, plan_flags: Iterable[str] = (), fit_flags: Iterable[str] = ()) -> None:
    """Refuse the command-line flags that the chosen mode does not use.

    With ``--plan`` nothing is read, run or written: ``--output``, ``--overwrite``,
    ``--progress`` and ``RUN_ONLY_DESTS`` are refused, and ``--n-samples``/``--n-features``
    are used only without INPUT. Without ``--plan``, ``--n-samples``/``--n-features`` and the
    command's ``plan_flags`` are refused. ``fit_flags`` are the command's extra flags that only
    a run uses.
    """
    given = given_flags(args)
    ctx = context_of(args)
    if getattr(args, "plan", False):
        unused = [d for d in ("output", "overwrite", "progress", "ledger", "no_ledger", *sorted(RUN_ONLY_DESTS),
                              *fit_flags) if d in given]
        refuse(unused, ctx, "--plan reads no data and writes nothing")
        if args.input is not None:
            refuse([d for d in ("n_samples", "n_features") if d in given], ctx, "INPUT gives the size")
        else:
            refuse([d for d in ("columns",) if d in given], ctx, "it selects columns of INPUT")
    else:
        refuse([d for d in ("n_samples", "n_features", *plan_flags) if d in given], ctx, "it is a --plan option")


@dataclass(frozen=True)
class Method:
    """How one ``--method`` maps to an estimator class.

    Parameters
    ----------
    estimator : str
        Dotted path of the class, imported when used (``"dpdist.SparseCovariance"``).
    required : tuple of str
        Destinations that must be given, in fit and plan mode alike.
    """

    estimator: str
    required: tuple[str, ...] = ()

    def load(self) -> type:
        import importlib

        module, _, name = self.estimator.rpartition(".")
        return getattr(importlib.import_module(module), name)


@dataclass
class EstimatorCall:
    """An estimator class with the keyword arguments the given flags map to."""

    cls: type
    kwargs: dict
    plan_kwargs: dict = field(default_factory=dict)

    def accepts(self, name: str) -> bool:
        return name in _params(self.cls.__init__)

    def build(self, **runtime: Any):
        """The estimator, with ``runtime`` parameters (scheduler, progress) it accepts."""
        return self.cls(**{**self.kwargs, **{k: v for k, v in runtime.items() if self.accepts(k)}})


def _params(fn) -> set[str]:
    return set(inspect.signature(fn).parameters) - {"self"}


def estimator_call(args, methods: Method | dict[str, Method]) -> EstimatorCall:
    """Map the given flags onto the chosen method's estimator, refusing the ones it does not take.

    ``methods`` is the command's ``{--method name: Method}`` (the choice is ``args.method``)
    or its single :class:`Method`. A flag goes to ``__init__`` when it names one of its
    parameters; with ``--plan``, flags naming a parameter of ``plan()`` (and not of
    ``__init__``) go to ``plan()``. Any other given flag, outside :data:`CLI_DESTS`, is a
    usage error that names the methods using it.
    """
    from dpdist.exceptions import ValidationError

    chosen = methods if isinstance(methods, Method) else methods[args.method]
    cls = chosen.load()
    ctx = context_of(args)
    plan = bool(getattr(args, "plan", False))
    if plan and not hasattr(cls, "plan"):
        raise ValidationError(f"--plan is not available for {ctx.replace(' --plan', '')}")
    init = _params(cls.__init__)
    planp = _params(cls.plan) - {"n_samples", "n_features"} if plan else set()
    kwargs, plan_kwargs, unused = {}, {}, []
    for dest, value in given_flags(args).items():
        if dest in CLI_DESTS or (plan and dest in RUN_ONLY_DESTS):
            continue
        if dest in init:
            kwargs[dest] = value
        elif dest in planp:
            plan_kwargs[dest] = value
        else:
            unused.append(dest)
    if unused:
        why = f"{cls.__name__} has no such parameter"
        if isinstance(methods, dict):
            users = sorted({name for name, m in methods.items() if m.estimator != chosen.estimator
                            and set(unused) <= _params(m.load().__init__)})
            if users:
                why += f"; it belongs to --method {' / '.join(users)}"
        refuse(unused, ctx, why)
    need(args, *chosen.required, context=ctx)
    return EstimatorCall(cls, kwargs, plan_kwargs)


def open_input(args):
    """INPUT as a validated dask array (metadata only, but a CSV's rows are counted), honouring
    ``--missing-chunks`` (refused for an input that is not a Zarr store) and ``--columns``."""
    from dpdist.data.formats import input_format
    from dpdist.data.validation import as_dask_array

    missing = getattr(args, "missing_chunks", None)
    if missing is not None and input_format(args.input) != "zarr":
        refuse(["missing_chunks"], context_of(args), "it applies to a Zarr INPUT")
    return as_dask_array(args.input, missing_chunks=missing or "auto", columns=getattr(args, "columns", None))


def input_shape(args) -> tuple[int, int]:
    """(n, d) for ``--plan``: from INPUT's metadata (no data read) or --n-samples/--n-features."""
    if args.input is not None:
        n, d = open_input(args).shape  # metadata only
        return int(n), int(d)
    need(args, "n_samples", "n_features", context="--plan without INPUT")
    return int(args.n_samples), int(args.n_features)


# --------------------------------------------------------------------------- running


def show_progress(args) -> bool:
    """--progress / --no-progress, else only when stderr is a terminal."""
    flag = getattr(args, "progress", None)
    return bool(flag) if flag is not None else sys.stderr.isatty()


def plain_progress(args) -> bool:
    """Progress for logs (plain lines, nothing redrawn): with --progress, or when stderr is
    not a terminal; a terminal without the flag gets the redrawn line."""
    return getattr(args, "progress", None) is True or not sys.stderr.isatty()


@contextlib.contextmanager
def _children_ignore_sigint() -> Iterator[None]:
    """Processes started inside (LocalCluster workers) inherit an ignored SIGINT.

    A terminal's Ctrl-C goes to the whole process group; workers that ignore it are shut down
    by their cluster instead of each printing a KeyboardInterrupt traceback. A Ctrl-C while
    the cluster starts is ignored too (a few seconds).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextlib.contextmanager
def run_context(args, scheduler: Any = None) -> Iterator[Any]:
    """Open the command's scheduler once and show one progress line; yield what to pass as
    ``scheduler=`` (a ``distributed.Client``, or the scheduler name for a local one).

    A scheduler that cannot be reached is an :class:`~dpdist.exceptions.InfrastructureError`
    (exit 5; nothing was read or spent).
    """
    from dpdist.cli._progress import progress_display
    from dpdist.engine.runtime import client_for
    from dpdist.exceptions import InfrastructureError

    scheduler = getattr(args, "scheduler", None) if scheduler is None else scheduler
    with contextlib.ExitStack() as stack:
        try:
            with _children_ignore_sigint():
                client = stack.enter_context(client_for(scheduler))
        except OSError as exc:
            raise InfrastructureError(
                f"cannot reach the Dask scheduler {scheduler!r}: {' '.join(str(exc).split())}; nothing was read or spent"
            ) from exc
        stack.enter_context(progress_display(show_progress(args), f"dpdist {args.command}", client,
                                             plain=plain_progress(args)))
        yield client if client is not None else scheduler


@contextlib.contextmanager
def privacy_warnings() -> Iterator[list[tuple[type[Warning], str]]]:
    """Collect the :class:`dpdist.PrivacyWarning` and :class:`dpdist.UtilityWarning` raised
    inside, as ``(category, message)`` pairs (they become banners); other warnings pass through
    unchanged."""
    from dpdist.exceptions import PrivacyWarning, UtilityWarning

    warned: list[tuple[type[Warning], str]] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PrivacyWarning)
        warnings.simplefilter("always", UtilityWarning)
        try:
            yield warned
        finally:
            others = []
            for w in caught:
                if issubclass(w.category, (PrivacyWarning, UtilityWarning)):
                    if (w.category, str(w.message)) not in warned:
                        warned.append((w.category, str(w.message)))
                else:
                    others.append(w)
    for w in others:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)


def _banner_kind(category: type[Warning]) -> str | None:
    """The banner a warning category raises: ``"seeded"``, ``"unsafe"``, ``"vacuous"``, or None
    for a warning of another kind (shown as it is)."""
    from dpdist.exceptions import NotPrivateWarning, SeededReleaseWarning, VacuousReleaseWarning

    for cls, kind in ((SeededReleaseWarning, "seeded"), (NotPrivateWarning, "unsafe"),
                      (VacuousReleaseWarning, "vacuous")):
        if issubclass(category, cls):
            return kind
    return None


def privacy_banners(*metas: dict | None, warned: Iterable[tuple[type[Warning], str]] = ()) -> list[str]:
    """Banner lines for the unsafe modes of releases: seeded noise, NOT PRIVATE,
    ``unsafe_no_privacy``, and for vacuous releases; from their metadata and from the warnings
    :func:`privacy_warnings` collected.

    Each kind is said once, whichever of the two flagged it (the library may flag a mode in
    the metadata, with a warning, or both). A warning's kind is its category
    (:class:`~dpdist.exceptions.SeededReleaseWarning`,
    :class:`~dpdist.exceptions.NotPrivateWarning`,
    :class:`~dpdist.exceptions.VacuousReleaseWarning`), never its wording; a warning of another
    category is shown as is.
    """
    kinds: dict[str, str] = {}
    vacuous: dict[str, str] = {}  # said after the privacy banners
    for meta in metas:
        meta = meta or {}
        utility = (meta.get("parameters") or {}).get("utility") or {}
        if utility.get("vacuous"):
            vacuous.setdefault(meta.get("mechanism", ""), f"VACUOUS release of {meta.get('mechanism', 'this result')}: "
                                                          f"{utility.get('vacuous_reason')}; at this size its "
                                                          "guarantee says nothing about the released values (see --plan)")
        seeded = (meta.get("seeding") or {}).get("mode") == "seeded"
        if seeded:
            kinds.setdefault("seeded", "SEEDED noise (--random-state): reproducible, so NOT a private "
                                       "release; for tests only")
        if (meta.get("parameters") or {}).get("unsafe_no_privacy"):
            kinds.setdefault("unsafe", "--unsafe-no-privacy: the mechanism's privacy precondition does not "
                                       "hold; the result is NOT PRIVATE")
        seeded_only = seeded and len(meta.get("not_private_reasons") or ()) <= 1
        if meta.get("private") is False and not seeded_only:  # a seeded release has its own banner
            kinds.setdefault("unsafe", f"NOT PRIVATE: {meta.get('mechanism', 'this result')} gives no "
                                       "differential-privacy guarantee")
    others = []
    said = bool(vacuous)  # the metadata says it; the VacuousReleaseWarnings repeat it
    for category, text in warned:
        kind = _banner_kind(category)
        if kind == "vacuous":
            if not said:
                vacuous.setdefault(text, text)
        elif kind is None:
            others.append(f"WARNING: {text}")
        else:
            kinds.setdefault(kind, text)
    return [*kinds.values(), *others, *vacuous.values()]


def banner(args, lines: Iterable[str]) -> None:
    """Print each line on stderr as ``dpdist COMMAND: !! line``."""
    for line in lines:
        print(f"dpdist {args.command}: !! {line}", file=sys.stderr)


def rejection_path(output: str) -> str:
    """Where a rejected run records its spent budget: ``OUTPUT.rejected.json`` beside OUTPUT."""
    return os.fspath(output).rstrip(os.sep) + ".rejected.json"


def _rejection_record(exc, est, args, output: str) -> dict:
    """What a NoPrivateResult spent, as written to :func:`rejection_path`."""
    import datetime

    from dpdist._version import __version__

    meta = exc.release.metadata() if getattr(exc, "release", None) is not None else None
    spent = (meta or {}).get("privacy")
    rule = "as recorded by the mechanism (the stages it ran)"
    if spent is None:
        params = {k: getattr(est, k, None) for k in ("epsilon", "delta", "rho")}
        if params["rho"] is not None:
            spent = {"type": "zcdp", "rho": float(params["rho"])}
        elif params["epsilon"] is not None:
            spent = {"type": "approx-dp", "epsilon": float(params["epsilon"]), "delta": float(params["delta"])}
        rule = "the whole requested budget (the mechanism did not itemise the stages it ran)"
    return {
        "status": "rejected",
        "exit_code": exc.exit_code,
        "message": str(exc),
        "stage": getattr(exc, "stage", None),
        "privacy_spent": spent,
        "privacy_spent_rule": rule,
        "command": ["dpdist", *getattr(args, "argv", [])],
        "input": args.input,
        "output_requested": output,
        "release": meta,
        "dpdist_version": __version__,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def fit_and_write(
    call: EstimatorCall,
    args,
    summary: Callable[[object], list[str]],
    extra_values: Callable[[object], dict] | None = None,
    report_delta: float | None = None,
    extra_metadata: dict | None = None,
) -> int:
    """Check INPUT, --output and the ledger, fit, write the release atomically, print a summary.

    Order: the output location (parent exists and is writable, OUTPUT and its rejection
    record free) and the ledger (:func:`dpdist.ops.runner.command_ledger`) are checked before
    the scheduler starts or any data is read. With a ledger (``--ledger`` or
    ``$DPDIST_LEDGER``) the release goes through :func:`dpdist.ops.runner.charged_release`,
    as ``dpdist run``'s does: reserved before reading, published only after its entry is
    committed with the output's checksum. Without one it is written after the fit succeeded;
    either way a failure leaves nothing behind, and the release's metadata says under
    ``"ledger"`` whether it was recorded and where. A :class:`~dpdist.exceptions.NoPrivateResult`
    writes the record of the spent budget to ``OUTPUT.rejected.json`` (atomically) and
    propagates (exit 4). Banners for seeded, NOT PRIVATE and unsafe releases go to stderr; with
    ``--json`` stdout holds one document, the release metadata plus ``"output"``.
    ``extra_metadata`` (public fields, e.g. how ``--method auto`` chose) is added to the
    published metadata.
    """
    from dpdist.data.results import check_output_path, write_json, write_result
    from dpdist.exceptions import NoPrivateResult, ValidationError
    from dpdist.ops.ledger import canonical_dataset, redact_url
    from dpdist.ops.runner import charged_release, command_ledger, estimator_cost
    from dpdist.report.text import format_release

    if args.input is None:
        raise ValidationError("INPUT (a Zarr store, or a .parquet, .csv or .npy file) is required unless --plan "
                              "is given")
    if args.output is None:
        raise ValidationError("--output is required")
    out = check_output_path(args.output, overwrite=args.overwrite)
    record = rejection_path(out)
    if os.path.exists(record):
        raise ValidationError(f"{record!r} exists: it records the budget an earlier rejected run spent; "
                              "move it away first")
    ledger, ledger_record = command_ledger(getattr(args, "ledger", None), bool(getattr(args, "no_ledger", False)),
                                           args.input)
    est, warned, charged = None, [], None
    try:
        if ledger is None:
            with run_context(args) as scheduler, privacy_warnings() as warned:
                est = call.build(scheduler=scheduler, progress=False)  # the command draws the progress line
                est.fit(open_input(args))
        else:
            with ledger:
                est = call.build()
                try:
                    cost = estimator_cost(est)
                except ValidationError as exc:
                    raise ValidationError(f"{exc} (the release would be charged to the ledger "
                                          f"{ledger_record['ledger']!r}, named by {ledger_record['source']})") from None
                data = open_input(args)  # metadata only
                est.check_fit(*data.shape)  # every parameter checked before the reservation
                dataset = canonical_dataset(args.input)

                def annotate(reservation) -> dict:
                    return {**(extra_metadata or {}),
                            "ledger": {**ledger_record, "dataset": dataset, "entry": reservation.id,
                                       "backend": type(ledger).__name__}}

                with privacy_warnings() as warned:
                    charged = charged_release(
                        ledger, dataset=dataset, cost=cost, job=f"dpdist {args.command}", target=out,
                        overwrite=args.overwrite, runtime=lambda: run_context(args),
                        build=lambda scheduler: call.build(scheduler=scheduler, progress=False), data=data,
                        annotate=annotate, extra_values=extra_values,
                    )
                est = charged.estimator
    except NoPrivateResult as exc:
        exc.record_path = write_json(record, {**_rejection_record(exc, est, args, out), "ledger": ledger_record})
        banner(args, privacy_banners(exc.release.metadata() if exc.release is not None else None, warned=warned))
        raise
    if charged is not None:
        meta = charged.metadata
    else:
        rel = est.release_
        values = dict(rel.values)
        if extra_values is not None:
            for key, value in extra_values(est).items():
                values.setdefault(key, value)
        meta = {**rel.metadata(), **(extra_metadata or {}), "ledger": ledger_record}
        write_result(out, meta, values, overwrite=args.overwrite)
    banner(args, privacy_banners(meta, warned=warned))
    if args.json:
        print_json({**meta, "output": out})
    else:
        print(format_release(meta, report_delta=report_delta))
        for line in summary(est):
            print(line)
        led = meta["ledger"]
        if led["recorded"]:
            print(f"ledger    : entry {led['entry']} committed in {redact_url(led['ledger'])}")
        else:
            print(f"ledger    : NOT RECORDED in any ledger ({led['reason']})")
        print(f"written   : {out}")
    return 0
