"""``dpdist`` command line: parses, calls the library, prints. Computes nothing itself.

Each sub-command lives in its own module under ``dpdist.cli`` exposing ``register(sub)``,
which adds its parser and sets ``func``; :data:`COMMANDS` lists the modules.

Errors: every error is one line on stderr, ``dpdist COMMAND: error: ...``, and the exit code
says what happened (:data:`EXIT_CODES`, also in ``dpdist --help``). ``--debug`` or
``DPDIST_DEBUG=1`` adds the traceback. With ``--json``, stdout holds exactly one JSON
document, on failure too: ``{"status", "exit_code", "error": {"type", "message", "exit_code"}, ...}``
(``status`` from :data:`STATUS`; ``job`` too for the commands that take a job file). A failure
after a privacy-budget ledger reservation also says what the ledger now holds, on the stderr line
and in the document: ``entry`` (the ledger entry's id), ``spent`` (the cost it counts, or null
when the reservation was released) and ``noise_drawn`` (false only when the ledger released the
reservation because no noise can have been drawn).

SIGTERM (``systemctl stop``, a Kubernetes eviction, a SLURM preemption) is handled like Ctrl-C:
the reservation is resolved on the way out, one line says how, and the exit code is 143.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import multiprocessing
import os
import re
import signal
import sys
import threading
import traceback
import warnings

from dpdist._version import __version__
from dpdist.exceptions import ValidationError

COMMANDS = ("demo", "generate", "convert", "covariance", "second_moment", "pca", "norm", "audit", "experiment")
COMMANDS += ("budget", "plan", "run", "report")  # operations: ledgers, plans, jobs, reports

#: Exit codes of the ``dpdist`` command (dpdist.exceptions gives each error class its code).
EXIT_CODES = (
    (0, "success"),
    (1, "internal error (a bug or an unexpected failure; rerun with --debug or DPDIST_DEBUG=1 for the traceback)"),
    (2, "usage or validation error: a bad or unused flag, parameter, input or output location; "
        "nothing was read or spent"),
    (3, "the privacy-budget ledger refused the job; nothing was spent"),
    (4, "no private result: a private test rejected; the budget counts as spent and is recorded in "
        "OUTPUT.rejected.json beside the requested output"),
    (5, "infrastructure failure: scheduler unreachable, workers lost, storage unreadable, timeout"),
    (130, "interrupted (Ctrl-C); no result was written (after a ledger reservation, the line says "
          "whether the budget was charged)"),
    (143, "terminated (SIGTERM); handled like Ctrl-C"),
)

#: ``status`` of the JSON document of a failed command, by exit code (orchestrators read it).
STATUS = {1: "error", 2: "invalid", 3: "refused", 4: "no-private-result", 5: "infrastructure-failure",
          130: "interrupted", 143: "terminated"}

EPILOG = (
    "exit codes:\n"
    + "".join(f"  {code:<5}{text}\n" for code, text in EXIT_CODES)
    + "\n--json (every command): stdout holds exactly one JSON document, the result or, on failure,\n"
    '  {"status": ..., "exit_code": ..., "error": {"type": ..., "message": ..., "exit_code": ...}};\n'
    "  banners, progress and error lines go to stderr.\n"
    "--debug or DPDIST_DEBUG=1: print the traceback of an error.\n"
    "Banners (stderr, lines with '!!'): seeded noise, NOT PRIVATE results, --unsafe-no-privacy."
)


class _UsageError(ValidationError):
    """An argparse error, raised instead of argparse's exit so it is reported like any other."""

    def __init__(self, prog: str, message: str):
        super().__init__(message)
        self.prog = prog


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2, like every other usage error
        raise _UsageError(self.prog, f"{message} (see {self.prog} --help)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="dpdist",
        description="Differentially private covariance, sparse covariance, PCA and second "
        "moments of chunked Zarr data on Dask.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"dpdist {__version__}")
    parser.add_argument("--debug", action="store_true", help="print tracebacks of errors (or DPDIST_DEBUG=1)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        importlib.import_module(f"dpdist.cli.{name}").register(sub)
    for p in sub.choices.values():
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                       help="print the traceback of an error (or DPDIST_DEBUG=1)")
    return parser


def _one_line(text: str, limit: int = 600) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _QuietInterrupt:
    """The Ctrl-C and SIGTERM handler of a command: stop the worker processes the command
    started (a LocalCluster's workers ignore SIGINT, see ``cli._run.run_context``, and would
    log every task the cluster's shutdown cancels; processes that were there before are left
    alone), silence logging and warnings, then interrupt the main thread (``KeyboardInterrupt``,
    or :class:`~dpdist.exceptions.Terminated` for SIGTERM)."""

    def __init__(self) -> None:
        self.keep = set(multiprocessing.active_children())
        self.fired = False

    def __call__(self, signum, frame):
        self.fired = True
        logging.disable(logging.CRITICAL)
        warnings.simplefilter("ignore")
        for child in multiprocessing.active_children():
            if child not in self.keep:
                child.kill()
        if signum == signal.SIGTERM:
            from dpdist.exceptions import Terminated

            raise Terminated("SIGTERM")
        raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """Run ``dpdist`` with ``argv`` (default ``sys.argv[1:]``) and return the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if threading.current_thread() is not threading.main_thread():
        return _run(argv)
    handler = _QuietInterrupt()
    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with warnings.catch_warnings():  # undoes the warnings filter a Ctrl-C set
            return _run(argv)
    finally:
        for sig, prev in previous.items():
            signal.signal(sig, prev)
        if handler.fired:
            logging.disable(logging.NOTSET)


def _run(argv: list[str]) -> int:
    from dpdist.exceptions import (EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_TERMINATED, DpdistError,
                                   InfrastructureError, Terminated)

    debug = "--debug" in argv or os.environ.get("DPDIST_DEBUG", "") not in ("", "0")
    report = _Reporter("dpdist", want_json="--json" in argv, debug=debug)
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        report.label = f"dpdist {args.command}"
        report.words = _FlagWords(parser, args)
        if getattr(args, "job", None) is not None:
            report.extra["job"] = args.job
        args.argv = argv
        with warnings.catch_warnings():
            from dpdist.exceptions import DataConversionWarning

            warnings.showwarning = _WarningLine(report.label)
            warnings.simplefilter("always", DataConversionWarning)  # a note of the run, never an error
            return int(args.func(args) or 0)
    except KeyboardInterrupt as exc:
        what, code = ("terminated (SIGTERM)", EXIT_TERMINATED) if isinstance(exc, Terminated) else \
            ("interrupted", EXIT_INTERRUPTED)
        told, extra = _ledger_outcome(exc)
        message = f"{what}; no result was written{told}" if told else f"{what}; nothing was written"
        return report(message, code, type(exc).__name__, prefix="", extra=extra)
    except _UsageError as exc:
        report.label = exc.prog
        return report(str(exc), exc.exit_code, "UsageError")
    except DpdistError as exc:  # exit codes: see dpdist.exceptions
        message = report.words(_one_line(exc))
        told, extra = _ledger_outcome(exc)
        if exc.exit_code == 4:
            message = f"no private result: {message}"
        message += told
        if isinstance(exc, InfrastructureError) and not told and "spent" not in message:
            message += ("; noise had been drawn: the budget counts as spent" if exc.noise_drawn
                        else "; nothing was spent")
        if getattr(exc, "record_path", None):
            message += f"; the spent budget is recorded in {exc.record_path}"
            extra["rejected_record"] = exc.record_path
        return report(message, exc.exit_code, type(exc).__name__, extra=extra)
    except FileNotFoundError as exc:
        told, extra = _ledger_outcome(exc)
        return report(_one_line(exc) + told, 2, type(exc).__name__, extra=extra)
    except OSError as exc:  # an untyped storage or network failure
        told, extra = _ledger_outcome(exc)
        return report(f"{type(exc).__name__}: {_one_line(exc)} (infrastructure failure){told}", 5,
                      type(exc).__name__, extra=extra)
    except Exception as exc:
        told, extra = _ledger_outcome(exc)
        return report(f"{type(exc).__name__}: {_one_line(exc)} (a bug or an unexpected failure; rerun with "
                      f"--debug or DPDIST_DEBUG=1 for the traceback){told}", EXIT_INTERNAL, type(exc).__name__,
                      prefix="internal error: ", extra=extra)


def _ledger_outcome(exc: BaseException) -> tuple[str, dict]:
    """What the ledger holds for a failure after a reservation (``exc.ledger_entry``, attached
    by :meth:`dpdist.ops.ledger.Ledger.charge`): the end of the stderr line and the fields
    ``entry``, ``spent`` and ``noise_drawn`` of the JSON document; nothing without a reservation."""
    entry = getattr(exc, "ledger_entry", None)
    if entry is None:
        return "", {}
    from dpdist.cli.budget import _fmt

    if entry.state == "refunded":
        return (f"; ledger entry {entry.id} refunded: nothing was spent",
                {"entry": entry.id, "spent": None, "noise_drawn": False})
    if entry.state == "committed":
        return (f"; ledger entry {entry.id} committed as spent ({_fmt(entry.cost)}): noise may have been drawn",
                {"entry": entry.id, "spent": entry.cost, "noise_drawn": True})
    running = entry.stage == "running"
    return (f"; ledger entry {entry.id} is still open and counts {_fmt(entry.cost)} until "
            f"'dpdist budget recover' resolves it" + (" (noise may have been drawn)" if running else ""),
            {"entry": entry.id, "spent": entry.cost, "noise_drawn": running})


class _FlagWords:
    """Rewrites a library message in the command line's words: ``name=value`` of a parameter
    the command has a flag for becomes ``--flag value`` (``--flag`` alone for a switch set to
    True), and a parameter name with an underscore becomes its flag (``lambda_min`` ->
    ``--lambda-min``). ``n_samples``/``n_features`` are flags only with ``--plan``."""

    def __init__(self, parser: argparse.ArgumentParser | None = None, args: argparse.Namespace | None = None):
        self.flags: dict[str, tuple[str, bool]] = {}
        if parser is None or args is None:
            return
        sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        command = sub.choices.get(args.command) if sub is not None else None
        for action in getattr(command, "_actions", ()):
            longs = [o for o in action.option_strings if o.startswith("--")]
            if not longs or action.dest in ("help", "debug", "json"):
                continue
            if action.dest in ("n_samples", "n_features") and not getattr(args, "plan", False):
                continue
            switch = isinstance(action, argparse._StoreTrueAction)
            self.flags.setdefault(action.dest, (longs[0], switch))

    def __call__(self, message: str) -> str:
        if not self.flags:
            return message
        names = "|".join(sorted(map(re.escape, self.flags), key=len, reverse=True))

        def with_value(m: re.Match) -> str:
            flag, switch = self.flags[m["name"]]
            value, tail = m["value"], ""
            if value.endswith(":"):  # "name=True: ..." ends a clause, the colon is not the value's
                value, tail = value[:-1], ":"
            if switch and value == "True":
                return flag + tail
            return f"{flag} {value}{tail}"

        bare = "|".join(re.escape(n) for n in self.flags if "_" in n)

        def words(part: str) -> str:
            part = re.sub(rf"(?<![\w.-])(?P<name>{names})=(?P<value>'[^']*'|[^\s,;)']+)", with_value, part)
            if bare:
                part = re.sub(rf"(?<![\w.-])({bare})(?![\w=])", lambda m: self.flags[m[1]][0], part)
            return part

        # quoted text (paths, URLs, values echoed back) is left as it is
        parts = re.split(r"('[^']*')", message)
        return "".join(part if i % 2 else words(part) for i, part in enumerate(parts))


class _WarningLine:
    """``warnings.showwarning`` of a command: each warning as one line on stderr,
    ``dpdist COMMAND: note: ...`` for an input conversion (:class:`dpdist.DataConversionWarning`),
    ``dpdist COMMAND: warning: ...`` otherwise (with the category when it is not dpdist's),
    without the source line Python adds."""

    def __init__(self, label: str):
        self.label = label

    def __call__(self, message, category, filename, lineno, file=None, line=None) -> None:
        from dpdist.exceptions import DataConversionWarning

        if issubclass(category, DataConversionWarning):
            text = f"note: {_one_line(message)}"
        elif category.__module__.startswith("dpdist"):
            text = f"warning: {_one_line(message)}"
        else:
            text = f"warning: {category.__name__}: {_one_line(message)}"
        try:
            print(f"{self.label}: {text}", file=sys.stderr if file is None else file)
        except (OSError, ValueError):  # stderr closed: as warnings.showwarning, say nothing
            pass


class _Reporter:
    """Prints an error: the traceback (debug only), one line on stderr, the JSON document."""

    def __init__(self, label: str, *, want_json: bool, debug: bool):
        self.label, self.want_json, self.debug = label, want_json, debug
        self.extra: dict = {}
        self.words = _FlagWords()

    def __call__(self, message: str, code: int, kind: str, *, prefix: str = "error: ", extra: dict | None = None) -> int:
        if self.debug:
            traceback.print_exc(file=sys.stderr)
        print(f"{self.label}: {prefix}{message}", file=sys.stderr)
        if self.want_json:
            from dpdist.cli._printing import print_json

            print_json({"status": STATUS.get(code, "error"), "exit_code": code,
                        "error": {"type": kind, "message": message, "exit_code": code}, **self.extra, **(extra or {})})
        return code


def console_main() -> None:
    """The ``dpdist`` executable: ``sys.exit(main())``, except that after Ctrl-C or SIGTERM the process
    ends at once instead of waiting, at interpreter exit, for dask's worker threads to finish
    the tasks they are running (minutes on large chunks). By then every context manager has
    run: clusters are closed and no temporary output is left."""
    from dpdist.exceptions import EXIT_INTERRUPTED, EXIT_TERMINATED

    code = main()
    if code in (EXIT_INTERRUPTED, EXIT_TERMINATED):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":  # pragma: no cover
    console_main()
