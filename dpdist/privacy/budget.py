"""Privacy budget types.

A budget is a frozen value. Mechanisms state what they spend as one of these, and the
``Release`` carries it. Validation happens here once, so every mechanism refuses a bad budget
with the same message before any data is read.
"""

from __future__ import annotations

from dataclasses import dataclass

from dpdist._validation import check_probability, check_real

__all__ = ["ApproxDP", "check_delta", "check_epsilon"]


def check_epsilon(epsilon: float, name: str = "epsilon") -> float:
    """Return ``epsilon`` as a float after checking it is a finite real number > 0
    (:mod:`dpdist._validation`: strings and bools are refused)."""
    return check_real(epsilon, name, low=0.0)


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
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "delta", check_real(self.delta, "delta", low=0.0, high=1.0, closed="left"))

    def __add__(self, other: "ApproxDP") -> "ApproxDP":
        """Basic composition (DR14, Theorem 3.16): epsilons and deltas add."""
        if not isinstance(other, ApproxDP):
            return NotImplemented
        return ApproxDP(self.epsilon + other.epsilon, self.delta + other.delta)

    def to_dict(self) -> dict:
        return {"type": "approx-dp", "epsilon": self.epsilon, "delta": self.delta}
