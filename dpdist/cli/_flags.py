"""Every flag a command accepts is either honoured or refused.

Estimator flags are matched to the chosen estimator by name: a flag whose destination
(``--mean-clip`` -> ``mean_clip``) is a parameter of the estimator's ``__init__`` (or, with
``--plan``, of its ``plan()``) is passed to it; any other given flag is refused with a usage
error (exit 2) naming it. Flags the command line honours itself are listed in
:data:`CLI_DESTS`; each command checks its own.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Iterable

__all__ = [
    "CLI_DESTS", "EstimatorCall", "Method", "RUN_ONLY_DESTS", "check_cli_flags", "context_of", "estimator_call",
    "given_flags", "need", "option", "refuse",
]

#: Destinations of flags the command line honours itself (never passed to an estimator).
CLI_DESTS = frozenset({
    "command", "func", "debug", "input", "method", "plan", "n_samples", "n_features", "output",
    "overwrite", "json", "progress", "target_sin2", "report_delta", "missing_chunks", "columns", "ledger",
    "no_ledger", "timeout",
})

#: Estimator parameters that only matter when data are read: refused with ``--plan``.
RUN_ONLY_DESTS = frozenset({"random_state", "scheduler", "timeout", "missing_chunks"})


def option(dest: str) -> str:
    """The flag spelling of an argparse destination (``mean_clip`` -> ``--mean-clip``)."""
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
    params : dict of str to str
        Flag destinations that reach the estimator under another parameter name
        (``{"radius": "row_norm"}``: ``--radius`` sets AnalyzeGauss's ``row_norm``).
    """

    estimator: str
    required: tuple[str, ...] = ()
    params: dict = field(default_factory=dict)

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
        """The estimator, with the ``runtime`` parameters (``scheduler``) it accepts."""
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
        if chosen.params.get(dest, dest) in init:
            kwargs[chosen.params.get(dest, dest)] = value
        elif dest in planp:
            plan_kwargs[dest] = value
        else:
            unused.append(dest)
    if unused:
        why = f"{cls.__name__} has no such parameter"
        if isinstance(methods, dict):
            users = sorted({name for name, m in methods.items() if m.estimator != chosen.estimator
                            and {m.params.get(u, u) for u in unused} <= _params(m.load().__init__)})
            if users:
                why += f"; it belongs to --method {' / '.join(users)}"
        refuse(unused, ctx, why)
    need(args, *chosen.required, context=ctx)
    return EstimatorCall(cls, kwargs, plan_kwargs)
