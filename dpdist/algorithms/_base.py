"""Shared estimator machinery: parameter introspection, repr, release-to-attributes."""

from __future__ import annotations

import inspect
import math
import numbers

from dpdist.exceptions import ValidationError

__all__ = ["Estimator", "check_positive", "check_int"]


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
