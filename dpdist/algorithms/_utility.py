"""The least sample size at which a predicted error meets a target: one search for every plan.

Utility only: it searches over public sizes and never enters a noise scale.
"""

from __future__ import annotations

from dpdist._validation import check_positive
from dpdist.exceptions import ValidationError

__all__ = ["search_min_samples"]


def search_min_samples(error_at, target: float, *, start: int = 40, limit: int = 10**40) -> int:
    """Least n with ``error_at(n) <= target`` for a non-increasing ``error_at`` (doubling,
    then bisection to 0.1% relative precision). Raises ValidationError when unreachable."""
    target = check_positive(target, "target error")
    lo, hi = start // 2, start
    while error_at(hi) > target:
        lo, hi = hi, hi * 2
        if hi > limit:
            raise ValidationError(f"target error {target} is not reachable at any sample size")
    while hi - lo > max(1, lo // 1000):
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if error_at(mid) <= target else (mid, hi)
    return int(hi)
