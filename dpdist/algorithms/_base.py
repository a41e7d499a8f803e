"""Shared estimator machinery: parameter introspection, repr, release-to-attributes."""

from __future__ import annotations

import inspect
import math
import numbers

from dpdist.exceptions import ValidationError

__all__ = [
    "NONFINITE_POLICIES",
    "Estimator",
    "check_int",
    "check_nonfinite",
    "check_positive",
    "nonfinite_note",
    "refuse_nonfinite",
]

#: The values of ``on_nonfinite`` (the default everywhere is "zero").
NONFINITE_POLICIES = ("zero", "raise")


def check_nonfinite(on_nonfinite) -> str:
    """Validate ``on_nonfinite``: "zero" (default: rows holding NaN/inf become zero rows before
    any statistic, uncounted) or "raise" (explicit validation mode; reveals one bit)."""
    if on_nonfinite not in NONFINITE_POLICIES:
        raise ValidationError(f"on_nonfinite must be one of {NONFINITE_POLICIES}, got {on_nonfinite!r}")
    return on_nonfinite


def refuse_nonfinite(X, scheduler) -> None:
    """``on_nonfinite="raise"`` for estimators without a same-pass guard: one validation
    pass over X before any statistic is computed; raises ValidationError when X holds a NaN
    or an infinity (one bit about the data, documented)."""
    import dask.array as da

    from dpdist.engine.runtime import compute

    if not bool(compute(da.isfinite(X).all(), scheduler=scheduler, progress=False, noised=False)[0]):
        raise ValidationError(
            "X contains NaN or infinite values; nothing was computed or released (on_nonfinite='raise'). "
            "Pass on_nonfinite='zero' to replace such rows by zero rows"
        )


def nonfinite_note(on_nonfinite: str) -> str:
    """The release note recording how non-finite input was treated."""
    if on_nonfinite == "raise":
        return (
            "on_nonfinite='raise': the run checked that the input holds no NaN or inf; that this "
            "release exists reveals that bit about the data (not accounted in the budget)"
        )
    return (
        "rows holding NaN or inf are replaced by zero rows before any statistic (on_nonfinite='zero'; "
        "a per-row map inside the neighbour relation, not counted)"
    )


def check_positive(value, name: str, *, allow_none: bool = False) -> float | None:
    """A finite float > 0 (or None when allowed)."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value <= 0:
        raise ValidationError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def check_int(value, name: str, *, low: int = 1, high: int | None = None) -> int:
    """An int in [low, high]."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValidationError(f"{name} must be an integer, got {value!r}")
    value = int(value)
    if value < low or (high is not None and value > high):
        rng = f"[{low}, {high}]" if high is not None else f">= {low}"
        raise ValidationError(f"{name} must be in {rng}, got {value}")
    return value


class Estimator:
    """scikit-learn-style base: ``get_params``/``set_params`` from the ``__init__`` signature.

    Subclasses store every ``__init__`` parameter unchanged as an attribute of the same
    name and validate in ``fit`` (and ``plan``), never in ``__init__``.
    """

    @classmethod
    def _param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        return [p for p in sig.parameters if p != "self"]

    def get_params(self, deep: bool = True) -> dict:
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params):
        valid = set(self._param_names())
        for key, value in params.items():
            if key not in valid:
                raise ValidationError(f"invalid parameter {key!r} for {type(self).__name__}")
            setattr(self, key, value)
        return self

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    def _check_fitted(self, attr: str) -> None:
        if not hasattr(self, attr):
            raise AttributeError(f"{type(self).__name__} is not fitted yet; call fit(X) first")
