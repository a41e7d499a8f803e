"""Privacy budget types.

A budget is a frozen value. Mechanisms state what they spend as one of these, and the
``Release`` carries it. Validation happens here once, so every mechanism refuses a bad budget
with the same message before any data is read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dpdist.exceptions import ValidationError

__all__ = ["ApproxDP", "check_delta", "check_epsilon"]


def check_epsilon(epsilon: float, name: str = "epsilon") -> float:
    """Return ``epsilon`` as a float after checking it is finite and > 0."""
    try:
        value = float(epsilon)
    except (TypeError, ValueError):
        raise ValidationError(f"{name} must be a positive number, got {epsilon!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise ValidationError(f"{name} must be finite and > 0, got {epsilon!r}")
    return value


def check_delta(delta: float, name: str = "delta") -> float:
    """Return ``delta`` as a float after checking it lies in the open interval (0, 1)."""
    try:
        value = float(delta)
    except (TypeError, ValueError):
        raise ValidationError(f"{name} must be a number in (0, 1), got {delta!r}") from None
    if not (0.0 < value < 1.0):
        raise ValidationError(f"{name} must lie in the open interval (0, 1), got {delta!r}")
    return value


@dataclass(frozen=True)
class ApproxDP:
    """An (epsilon, delta)-differential-privacy guarantee under replace-one neighbours.

    Parameters
    ----------
    epsilon : float
        Finite and > 0.
    delta : float
        In [0, 1). ``delta = 0`` is pure DP.
    """

    epsilon: float
    delta: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        d = float(self.delta)
        if not (0.0 <= d < 1.0):
            raise ValidationError(f"delta must lie in [0, 1), got {self.delta!r}")
        object.__setattr__(self, "delta", d)

    def __add__(self, other: "ApproxDP") -> "ApproxDP":
        """Basic composition (DR14, Theorem 3.16): epsilons and deltas add."""
        if not isinstance(other, ApproxDP):
            return NotImplemented
        return ApproxDP(self.epsilon + other.epsilon, self.delta + other.delta)

    def to_dict(self) -> dict:
        return {"type": "approx-dp", "epsilon": self.epsilon, "delta": self.delta}
