"""Parameter validation: one rule, shared by every layer (privacy, engine, data, algorithms, ops).

The rule (the same for every layer, so that a value refused in one is refused in all):

- **Numbers are numbers.** A numeric parameter is a real number of a numeric type: ``int``,
  ``float``, or a numpy real scalar (``np.float32``, ``np.int64``, ...; anything registered as
  :class:`numbers.Real`). Refused: ``bool`` and ``np.bool_`` (``True`` is not 1 here),
  strings (``"1.5"``: the command line parses its strings before calling), ``None`` where the
  parameter is not optional, 0-d arrays, ``Decimal``, and non-finite values (NaN, +-inf)
  unless the parameter's rule says otherwise.
- **Integers are integers.** An integer parameter is an ``int`` or numpy integer, never a
  float with an integral value (``3.0``) and never a bool.
- **Every refusal names the parameter, the rule and the value**, as a
  :class:`~dpdist.exceptions.ValidationError` (exit code 2): ``epsilon must be a finite real
  number > 0, got '1.5' (str)``.

Validation happens once, at the boundary: in an estimator's ``fit``/``plan`` and in the
public functions (calibration, budgets, mechanisms), never in ``__init__``
(scikit-learn's convention), and always before any data are read.

This module imports only the standard library, numpy and :mod:`dpdist.exceptions`, so the
privacy layer (pure numpy/scipy) may use it too; ``tests/test_architecture.py`` checks that.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Iterable

from dpdist.exceptions import ValidationError

__all__ = [
    "check_bool",
    "check_choice",
    "check_int",
    "check_positive",
    "check_probability",
    "check_real",
    "describe",
]

_BOUNDS = {"neither": ("(", ")"), "left": ("[", ")"), "right": ("(", "]"), "both": ("[", "]")}


def describe(value: Any) -> str:
    """``value`` as error messages show it: its repr and, for non-numbers, its type."""
    text = repr(value)
    if len(text) > 80:
        text = text[:77] + "..."
    if isinstance(value, (bool, str)) or not isinstance(value, numbers.Number):
        return f"{text} ({type(value).__name__})"
    return text


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _rule(low, high, closed: str, finite: bool, integer: bool = False) -> str:
    kind = "an integer" if integer else ("a finite real number" if finite else "a real number")
    if low is not None and high is not None:
        left, right = _BOUNDS[closed]
        return f"{kind} in {left}{low:g}, {high:g}{right}"
    if low is not None:
        return f"{kind} {'>=' if closed in ('left', 'both') else '>'} {low:g}"
    if high is not None:
        return f"{kind} {'<=' if closed in ('right', 'both') else '<'} {high:g}"
    return kind


def check_real(
    value: Any,
    name: str,
    *,
    low: float | None = None,
    high: float | None = None,
    closed: str = "neither",
    finite: bool = True,
    allow_none: bool = False,
) -> float | None:
    """``value`` as a float after checking the rule of this module and the interval.

    Parameters
    ----------
    value : object
        What the caller passed.
    name : str
        The parameter's name (used in the error message).
    low, high : float, optional
        Bounds of the interval; ``closed`` says which ends belong to it
        (``"neither"``, ``"left"``, ``"right"`` or ``"both"``, as scikit-learn's ``Interval``).
    finite : bool, default True
        Refuse NaN and +-inf (``False`` admits +-inf, never NaN, e.g. for a timeout).
    allow_none : bool, default False
        Return None for None (an optional parameter left at its default).

    Raises
    ------
    ValidationError
        Naming ``name``, the rule and ``value``.
    """
    if value is None and allow_none:
        return None
    rule = _rule(low, high, closed, finite)
    if not _is_real(value):
        raise ValidationError(
            f"{name} must be {rule} (int, float or numpy scalar; strings and bools are not numbers), "
            f"got {describe(value)}"
        )
    x = float(value)
    ok = not math.isnan(x) and (math.isfinite(x) or not finite)
    if ok and low is not None:
        ok = x >= low if closed in ("left", "both") else x > low
    if ok and high is not None:
        ok = x <= high if closed in ("right", "both") else x < high
    if not ok:
        raise ValidationError(f"{name} must be {rule}, got {describe(value)}")
    return x


def check_positive(value: Any, name: str, *, allow_none: bool = False) -> float | None:
    """A finite real number > 0 (or None when ``allow_none``)."""
    return check_real(value, name, low=0.0, allow_none=allow_none)


def check_probability(value: Any, name: str, *, allow_none: bool = False) -> float | None:
    """A real number in the open interval (0, 1) (failure probabilities, fractions, delta)."""
    return check_real(value, name, low=0.0, high=1.0, allow_none=allow_none)


def check_int(value: Any, name: str, *, low: int | None = 1, high: int | None = None,
              allow_none: bool = False) -> int | None:
    """An integer (``int`` or numpy integer; not bool, not float) in ``[low, high]``."""
    if value is None and allow_none:
        return None
    rule = _rule(low, high, "both", False, integer=True)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValidationError(f"{name} must be {rule} (int or numpy integer), got {describe(value)}")
    v = int(value)
    if (low is not None and v < low) or (high is not None and v > high):
        raise ValidationError(f"{name} must be {rule}, got {v}")
    return v


def check_choice(value: Any, name: str, choices: Iterable[Any]) -> Any:
    """One of ``choices`` (compared by equality; a bool never matches a non-bool choice)."""
    choices = tuple(choices)
    if not any(value == c and isinstance(value, bool) == isinstance(c, bool) for c in choices):
        raise ValidationError(f"{name} must be one of {choices}, got {describe(value)}")
    return value


def check_bool(value: Any, name: str) -> bool:
    """``True`` or ``False`` (``bool`` or ``np.bool_``; not 0/1, not strings)."""
    import numpy as np

    if not isinstance(value, (bool, np.bool_)):
        raise ValidationError(f"{name} must be True or False, got {describe(value)}")
    return bool(value)
