"""The run harness of the fitting commands: INPUT opened once, the scheduler and progress line,
the output, ledger and rejection record checked before any data is read, and the release written.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from typing import Any, Callable, Iterator

from dpdist.cli._banners import banner, privacy_banners, privacy_warnings
from dpdist.cli._flags import EstimatorCall, context_of, need, refuse
from dpdist.cli._printing import print_json

__all__ = ["fit_and_write", "input_shape", "plain_progress", "rejection_path", "run_context", "show_progress"]


def open_input(args):
    """INPUT as a validated dask array (metadata only, but a CSV's rows are counted), honouring
    ``--missing-chunks`` (refused for an input that is not a Zarr store) and ``--columns``."""
    from dpdist.data.formats import input_format
    from dpdist.data.validation import as_dask_array

    missing = getattr(args, "missing_chunks", None)
    if missing is not None and input_format(args.input) != "zarr":
        refuse(["missing_chunks"], context_of(args), "it applies to a Zarr INPUT")
    return as_dask_array(args.input, missing_chunks=missing or "auto", columns=getattr(args, "columns", None))


def runtime_config(args) -> dict:
    """The dask configuration a command's fit runs under: ``--timeout`` as ``dpdist.timeout``
    (when given; else the configured limit, one day by default)."""
    timeout = getattr(args, "timeout", None)
    return {} if timeout is None else {"dpdist.timeout": timeout}


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
    import dask

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
            with dask.config.set(runtime_config(args)), run_context(args) as scheduler, \
                    privacy_warnings() as warned:
                est = call.build(scheduler=scheduler)  # the command draws the progress line
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

                with dask.config.set(runtime_config(args)), privacy_warnings() as warned:
                    charged = charged_release(
                        ledger, dataset=dataset, cost=cost, job=f"dpdist {args.command}", target=out,
                        overwrite=args.overwrite, runtime=lambda: run_context(args),
                        build=lambda scheduler: call.build(scheduler=scheduler), data=data,
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
