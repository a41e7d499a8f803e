"""``--method auto`` for ``dpdist covariance`` and ``dpdist pca``: the best method of
:func:`dpdist.compare_methods` for the input's size and the given public parameters."""

from __future__ import annotations

import sys

from dpdist.cli._flags import CLI_DESTS, EstimatorCall, given_flags, need, refuse
from dpdist.cli._run import input_shape

#: Flags that state the question (passed to compare_methods), per task.
QUESTION = {"covariance": ("k", "epsilon", "delta", "sigma"), "pca": ("k", "epsilon", "delta", "sigma", "gap",
                                                                        "radius")}
#: Flags that only say how the chosen estimator runs (passed on when it takes them).
RUNTIME = ("random_state", "scheduler", "on_nonfinite", "tile_size")


def auto_call(args, task: str) -> tuple[EstimatorCall, dict, str]:
    """The chosen method's :class:`EstimatorCall`, the record the release keeps under
    ``method_choice``, and the line saying which method and why.

    Reads the input's shape only (metadata), as the chosen method's own checks do; the
    choice depends on public parameters alone.
    """
    from dpdist.algorithms.compare import compare_methods
    from dpdist.exceptions import ValidationError

    ctx = "`--method auto`"
    required = [d for d in QUESTION[task] if d != "radius"]
    other = [d for d in given_flags(args) if (d not in CLI_DESTS or d == "target_sin2") and d not in QUESTION[task]
             and d not in RUNTIME]
    refuse(other, ctx, f"it uses {', '.join('--' + d for d in QUESTION[task])} and the run options; name a "
                       "method to set the others")
    need(args, *required, context=ctx)
    if not args.plan and args.input is None:
        raise ValidationError("INPUT (a Zarr store, or a .parquet, .csv or .npy file) is required unless --plan "
                              "is given")
    n, d = input_shape(args)  # metadata only
    comp = compare_methods(n, d, task=task, **{q: getattr(args, q) for q in QUESTION[task]})
    if comp.best is None:
        raise ValidationError(f"--method auto: {comp.reason}")
    cand = comp.candidate()
    cls = cand.load()
    kwargs = cand.params(comp.question)
    call = EstimatorCall(cls, kwargs, cand.plan_kwargs(comp.question))
    runtime = {k: v for k, v in given_flags(args).items() if k in RUNTIME}
    refuse([k for k in runtime if not call.accepts(k)], f"{cls.__name__} (the method --method auto chose, "
                                                        f"{comp.best})", "it has no such parameter")
    kwargs.update(runtime)
    line = f"method auto: {comp.best} ({cls.__name__}): {comp.reason}"
    return call, comp.choice_record(), line


def say(args, line: str) -> None:
    """Print the choice: on stdout, or on stderr when stdout holds one JSON document."""
    print(f"dpdist {args.command}: {line}" if args.json else line, file=sys.stderr if args.json else sys.stdout)
