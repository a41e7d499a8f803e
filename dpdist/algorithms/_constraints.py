"""Declarative parameter constraints: each estimator lists its parameters once, with a rule each.

An estimator's ``_parameter_constraints`` maps every ``__init__`` parameter to a constraint
object (as scikit-learn's ``_parameter_constraints``, written for dpdist without importing
scikit-learn). A constraint checks one value and returns it normalised (an ``int`` for an
integer, a float for a real, ...). Each delegates to the checks of :mod:`dpdist._validation`
or :mod:`dpdist.privacy.budget`, so a refused value gets the same message wherever it is
refused. :func:`validate_params` applies a table once, in the table's order, and returns a
frozen :class:`Params`; the code below the boundary takes those values and checks nothing
again.

:func:`functional_form` writes an estimator's functional form (as
``sklearn.decomposition.fastica`` is ``FastICA``'s): the function builds the estimator from
its arguments and returns what the fit releases; its signature and docstring are generated
from the estimator's, so the parameter list exists once.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

from dpdist._validation import check_bool, check_choice, check_int, check_real
from dpdist.privacy.budget import check_delta, check_epsilon

__all__ = [
    "Boolean",
    "Constraint",
    "Custom",
    "Delta",
    "Epsilon",
    "Integer",
    "Options",
    "Params",
    "RandomState",
    "Real",
    "Scheduler",
    "functional_form",
    "validate_params",
]


class Constraint:
    """A rule for one parameter: ``check(value, name)`` returns the value normalised or raises
    :class:`~dpdist.exceptions.ValidationError` naming ``name``, the rule and the value."""

    def check(self, value: Any, name: str) -> Any:  # pragma: no cover - every kind implements it
        raise NotImplementedError

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({args})"


class Real(Constraint):
    """A real number in an interval (:func:`dpdist._validation.check_real`); ``finite=False``
    admits +-inf; ``allow_none`` returns None for None."""

    def __init__(self, *, low: float | None = None, high: float | None = None, closed: str = "neither",
                 finite: bool = True, allow_none: bool = False):
        self.low, self.high, self.closed, self.finite, self.allow_none = low, high, closed, finite, allow_none

    def check(self, value: Any, name: str) -> float | None:
        return check_real(value, name, low=self.low, high=self.high, closed=self.closed, finite=self.finite,
                          allow_none=self.allow_none)


class Integer(Constraint):
    """An integer in ``[low, high]`` (:func:`dpdist._validation.check_int`)."""

    def __init__(self, *, low: int | None = 1, high: int | None = None, allow_none: bool = False):
        self.low, self.high, self.allow_none = low, high, allow_none

    def check(self, value: Any, name: str) -> int | None:
        return check_int(value, name, low=self.low, high=self.high, allow_none=self.allow_none)


class Options(Constraint):
    """One of the given values (:func:`dpdist._validation.check_choice`)."""

    def __init__(self, *values: Any):
        self.values = values

    def check(self, value: Any, name: str) -> Any:
        return check_choice(value, name, self.values)


class Boolean(Constraint):
    """``True`` or ``False`` (:func:`dpdist._validation.check_bool`); ``allow_none`` keeps None."""

    def __init__(self, *, allow_none: bool = False):
        self.allow_none = allow_none

    def check(self, value: Any, name: str) -> bool | None:
        if value is None and self.allow_none:
            return None
        return check_bool(value, name)


class Epsilon(Constraint):
    """A privacy epsilon (:func:`dpdist.privacy.budget.check_epsilon`)."""

    def check(self, value: Any, name: str) -> float:
        return check_epsilon(value, name)


class Delta(Constraint):
    """A privacy delta in (0, 1) (:func:`dpdist.privacy.budget.check_delta`)."""

    def check(self, value: Any, name: str) -> float:
        return check_delta(value, name)


class Custom(Constraint):
    """A parameter with a rule of its own: ``fn(value, name)`` returns the normalised value or
    raises. ``keep=True`` keeps the value as given (``fn`` only checks it: e.g. a
    ``random_state``, which is resolved once by the fit, never by validation)."""

    def __init__(self, fn: Callable[[Any, str], Any], *, keep: bool = False):
        self.fn, self.keep = fn, keep

    def check(self, value: Any, name: str) -> Any:
        out = self.fn(value, name)
        return value if self.keep else out

    def __repr__(self) -> str:
        return f"Custom({getattr(self.fn, '__qualname__', self.fn)!r})"


class Scheduler(Constraint):
    """A ``scheduler`` (:func:`dpdist.engine.runtime.check_scheduler`), kept as given: the fit
    connects to it."""

    def check(self, value: Any, name: str) -> Any:
        from dpdist.engine.runtime import check_scheduler

        check_scheduler(value)
        return value


class RandomState(Constraint):
    """A ``random_state`` (:func:`dpdist.privacy.noise.check_random_state`), kept as given: the
    fit resolves it once (a ``NoiseSeed`` is consumed by its fit, never by validation)."""

    def check(self, value: Any, name: str) -> Any:
        from dpdist.privacy.noise.streams import check_random_state

        check_random_state(value)
        return value


class Params:
    """Validated parameter values, read-only: ``params.k``; ``params.replace(name=value)``
    returns a copy with values changed or added (derived values of a cross-parameter check)."""

    __slots__ = ("_values",)

    def __init__(self, values: dict[str, Any]):
        object.__setattr__(self, "_values", dict(values))

    def __getattr__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"no validated parameter {name!r}") from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("validated parameters are read-only; use replace()")

    def __contains__(self, name: str) -> bool:
        return name in self._values

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Params) and self._values == other._values

    __hash__ = None  # type: ignore[assignment]

    def replace(self, **changes: Any) -> "Params":
        return Params({**self._values, **changes})

    def as_dict(self) -> dict[str, Any]:
        return dict(self._values)

    def __repr__(self) -> str:
        return "Params(" + ", ".join(f"{k}={v!r}" for k, v in self._values.items()) + ")"


def validate_params(constraints: dict[str, Constraint], values: dict[str, Any]) -> Params:
    """Check each value of ``values`` named in ``constraints`` once, in the table's order (the
    first refused raises); returns the normalised values. A name of the table missing from
    ``values`` is skipped (an estimator without that parameter)."""
    return Params({name: rule.check(values[name], name) for name, rule in constraints.items() if name in values})


def functional_form(cls: type, *, name: str, positional: tuple[str, ...] = (), summary: str,
                    returns: str) -> Callable:
    """The functional form of estimator ``cls``: ``name(X, *positional, **rest)`` builds
    ``cls(...)`` from its arguments and returns the release of its fit (``cls._release_of``:
    the release as the fit makes it, without the fit's plan and utility record; the fitted
    attributes are never set).

    The function's ``__signature__`` is ``X`` followed by ``cls.__init__``'s parameters (those
    named in ``positional`` positional-or-keyword, the others keyword-only, with the
    estimator's defaults and annotations). Its docstring is ``summary``, then the Parameters
    section
    of ``cls``'s docstring (or of the first base class that has one), then ``returns`` (the
    sections after the parameters: Returns, Notes, ...).
    """
    init = inspect.signature(cls.__init__)
    params = [inspect.Parameter("X", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Any)]
    for p in list(init.parameters.values())[1:]:
        kind = (inspect.Parameter.POSITIONAL_OR_KEYWORD if p.name in positional
                else inspect.Parameter.KEYWORD_ONLY)
        params.append(p.replace(kind=kind))
    signature = inspect.Signature(params, return_annotation="Release")

    def form(*args: Any, **kwargs: Any) -> Any:
        arguments = dict(signature.bind(*args, **kwargs).arguments)
        X = arguments.pop("X")
        return cls(**arguments)._release_of(X, assess=False).release

    form.__name__ = form.__qualname__ = name
    form.__module__ = cls.__module__
    form.__signature__ = signature  # type: ignore[attr-defined]
    form.__doc__ = _form_doc(cls, summary, returns)
    form.estimator = cls  # type: ignore[attr-defined]
    return form


def _form_doc(cls: type, summary: str, returns: str) -> str:
    """``summary``, the estimator's Parameters section (``X`` first), then ``returns``."""
    docs = [inspect.cleandoc(c.__doc__ or "") for c in cls.__mro__]  # the first class that lists them
    lines = next((doc.splitlines() for doc in docs if "\nParameters\n" in doc), [])
    entries: list[list[str]] = []
    if "Parameters" in lines:
        for line in lines[lines.index("Parameters") + 2:]:
            if line and not line.startswith(" "):
                if line.strip("-") == "":  # the next section's underline: its title was the last entry
                    entries.pop()
                    break
                entries.append([line])
            elif entries:
                entries[-1].append(line)
    kept = [line for entry in entries for line in entry]
    while kept and not kept[-1]:
        kept.pop()
    return "\n".join([
        summary, "",
        f"Builds :class:`~{cls.__module__}.{cls.__name__}` from the arguments and returns the release of its "
        "fit (the estimator and its fitted attributes are discarded).", "",
        "Parameters", "----------",
        "X : array-like, dask array, zarr.Array or str",
        "    ``n x d`` data, one row per individual.",
        *kept, "", "Returns", "-------", *inspect.cleandoc(returns).splitlines()])
