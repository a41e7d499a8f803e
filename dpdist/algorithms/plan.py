"""The plan: what a fit would do and what it would be worth, before any data is read.

Every estimator's ``plan(n_samples, n_features, ...)`` returns a :class:`Plan`: a frozen
dataclass computed from public parameters and the data's shape only, with the same common
fields everywhere and the estimator's own fields after them. ``to_dict()`` gives its
JSON-compatible form (the command line's ``--plan`` and ``dpdist plan`` print it).

Common fields:

- ``n_samples``, ``n_features``: the size planned for;
- ``privacy``: the guarantee a fit would state (an ``ApproxDP`` or ``ZCDP``; ``None`` for a
  NOT PRIVATE baseline);
- ``noise_scale``: the estimator's headline noise scale (its documented meaning is in the
  subclass);
- ``error_bound``, ``error_metric``: the error the estimator's theorem predicts at this size
  and what it measures (``math.inf`` when the theorem gives no bound here, ``None`` when the
  declared parameters do not allow a prediction);
- ``error_scale``, ``error_scale_rule``: the scale of the quantity estimated, from public
  parameters (``sigma**2`` for a covariance, 1 for ``sin^2``, ...), and how it was chosen;
- ``unmet_conditions``: conditions of the prediction that this size does not meet;
- ``empirical``: the least n measured to reach a stated target on a stated instance family
  (``dpdist experiment sample-complexity``), at this ``n_features``, one dict per measurement
  mode, each labelled ``"empirical"`` with its source; empty where never measured. A
  measurement, not a guarantee: it holds for its instance family, target and budget;
- ``vacuous``, ``vacuous_reason``: derived, never given. A plan is **vacuous** when the
  predicted error is at least the scale of the quantity (``error_bound >= error_scale``) or a
  condition of the prediction is unmet: a release at this size says nothing the scale did not
  already say. A vacuous release is flagged: a :class:`~dpdist.exceptions.UtilityWarning`, a
  ``!!`` banner on the command line, and ``parameters["utility"]`` in its metadata.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from dpdist.privacy.release import to_jsonable
from dpdist.privacy.zcdp import Guarantee

__all__ = ["Plan", "UTILITY_FIELDS"]

#: The fields of a plan that a release records under ``parameters["utility"]``.
UTILITY_FIELDS = ("error_bound", "error_metric", "error_scale", "error_scale_rule", "vacuous", "vacuous_reason")
_HEAD = ("n_samples", "n_features", "privacy", "noise_scale")
_TAIL = ("error_bound", "error_metric", "error_scale", "error_scale_rule", "unmet_conditions", "vacuous",
         "vacuous_reason", "empirical")


@dataclass(frozen=True, kw_only=True)
class Plan:
    """What a fit would do at a data size, from public parameters only (see the module docstring).

    Read a field as an attribute (``plan.error_bound``); ``to_dict()`` is the JSON-compatible
    form.
    """

    n_samples: int
    n_features: int
    privacy: Guarantee | None = None
    noise_scale: float | None = None
    error_bound: float | None = None
    error_metric: str = ""
    error_scale: float | None = None
    error_scale_rule: str = ""
    unmet_conditions: tuple = ()
    empirical: tuple = ()
    vacuous: bool = field(init=False, default=False)
    vacuous_reason: str | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        reasons = []
        bound, scale = self.error_bound, self.error_scale
        if bound is not None and scale is not None and not (bound < scale):
            what = "unbounded at this size" if math.isinf(bound) else f"{bound:.3g}"
            reasons.append(f"predicted error {what} >= scale {scale:.3g} ({self.error_scale_rule}); "
                           f"error = {self.error_metric}")
        reasons.extend(self.unmet_conditions)
        object.__setattr__(self, "unmet_conditions", tuple(self.unmet_conditions))
        object.__setattr__(self, "vacuous", bool(reasons))
        object.__setattr__(self, "vacuous_reason", "; ".join(reasons) if reasons else None)

    @classmethod
    def _names(cls) -> tuple[str, ...]:
        names = [f.name for f in dataclasses.fields(cls)]
        middle = [n for n in names if n not in _HEAD and n not in _TAIL]
        return (*_HEAD, *middle, *_TAIL)

    def to_dict(self) -> dict:
        """The plan as JSON-compatible values: common fields first, the estimator's own
        fields, then the predicted error and the vacuity verdict."""
        return {name: to_jsonable(getattr(self, name)) for name in self._names()}

    def utility(self) -> dict:
        """What a release records of this plan (``parameters["utility"]``)."""
        return {name: to_jsonable(getattr(self, name)) for name in UTILITY_FIELDS}
