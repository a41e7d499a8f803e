"""Privacy budget types.

A budget is a frozen value. Mechanisms state what they spend as one of these, and the
``Release`` carries it. Validation happens here once, so every mechanism refuses a bad budget
with the same message before any data is read.
"""

from __future__ import annotations

from dataclasses import dataclass

from dpdist._validation import check_probability, check_real

from dpdist.exceptions import ValidationError

__all__ = ["MAX_EPSILON", "ApproxDP", "check_delta", "check_epsilon"]

#: The largest epsilon a mechanism accepts. Every estimator computes its release up to it
#: (tested at this value); above it the calibrations leave float64's range (e^epsilon
#: overflows, noise scales fall below the smallest lattice step) long before epsilon
#: reaches the float maximum, so a larger epsilon is refused before any data is read. An
#: epsilon this large gives no meaningful privacy: it is for checking accuracy only.
MAX_EPSILON = 1e6


def check_epsilon(epsilon: float, name: str = "epsilon") -> float:
    """Return ``epsilon`` as a float after checking it is a finite real number > 0 and at
    most :data:`MAX_EPSILON` (:mod:`dpdist._validation`: strings and bools are refused)."""
    epsilon = check_real(epsilon, name, low=0.0)
    if epsilon > MAX_EPSILON:
        raise ValidationError(
            f"{name}={epsilon:g} is larger than the largest epsilon dpdist supports, {MAX_EPSILON:g}: "
            f"choose {name} <= {MAX_EPSILON:g} (an epsilon that large already gives no meaningful privacy)"
        )
    return epsilon


def check_delta(delta: float, name: str = "delta") -> float:
    """Return ``delta`` as a float after checking it lies in the open interval (0, 1)."""
    return check_probability(delta, name)


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
        # a guarantee (a composed total, a ledger's budget) may exceed what one mechanism accepts
        object.__setattr__(self, "epsilon", check_real(self.epsilon, "epsilon", low=0.0))
        object.__setattr__(self, "delta", check_real(self.delta, "delta", low=0.0, high=1.0, closed="left"))

    def __add__(self, other: "ApproxDP") -> "ApproxDP":
        """Basic composition (DR14, Theorem 3.16): epsilons and deltas add."""
        if not isinstance(other, ApproxDP):
            return NotImplemented
        return ApproxDP(self.epsilon + other.epsilon, self.delta + other.delta)

    def to_dict(self) -> dict:
        return {"type": "approx-dp", "epsilon": self.epsilon, "delta": self.delta}

    def describe(self) -> str:
        """The guarantee in words for messages and plots, e.g. ``"(1, 1e-06)-DP"``."""
        return f"({self.epsilon:g}, {self.delta:g})-DP"
