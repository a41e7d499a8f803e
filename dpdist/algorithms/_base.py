"""The estimator contract shared by every public estimator and baseline.

:class:`Estimator` gives every estimator the same behaviour (checked by
``tests/test_estimator_contract.py`` over all of them, as scikit-learn's ``check_estimator``):

- ``get_params()`` / ``set_params(**params)`` from the ``__init__`` signature, and a ``repr``
  showing every parameter; ``type(est)(**est.get_params())`` is an unfitted estimator with
  equal parameters. ``__init__`` stores its arguments unchanged and validates nothing.
- ``fit(X)`` validates every parameter (:mod:`dpdist._validation`) before reading data,
  returns ``self``, and is atomic: the fitted attributes (names ending in ``_``) are set
  together, only after the release succeeded. A failed fit (a ``ValidationError``, a
  ``NoPrivateResult``, an ``InfrastructureError``, Ctrl-C) leaves the object exactly as it
  was: unfitted if it was, and after a failed *re*fit still holding the previous successful
  fit's attributes, which describe that earlier fit (its ``release_`` records its
  parameters). A ``NoPrivateResult`` carries the rejected release (``exc.release``).
- ``plan(n_samples, n_features, ...)`` returns a frozen :class:`~dpdist.algorithms.plan.Plan`
  (with ``to_dict()``), from public parameters only; ``privacy_cost()`` the guarantee a fit
  would state (None for a NOT PRIVATE estimator).
- ``require_useful=True`` (where an estimator has it) makes ``fit`` refuse with a
  ``ValidationError``, before reading any data or reserving any budget, when ``plan(n, d)``
  at the data's shape is vacuous or has an unmet condition (for example private tests
  predicted to fail). The plan depends only on public parameters and the shape, so the
  refusal leaks nothing about the data.
- A vacuous release (the plan's predicted error is at least the scale of the quantity, see
  :mod:`dpdist.algorithms.plan`) emits one :class:`~dpdist.exceptions.UtilityWarning` and is
  recorded in the release's ``parameters["utility"]`` (every release records the verdict).
- ``fit(X, reservation=r)`` fits against a privacy-budget reservation the caller holds, the one
  way every caller (Python, the command line, the job runner) charges a ledger::

      with ledger.charge(dataset, est.privacy_cost(), job="weekly") as r:
          est.fit(X, reservation=r)

  ``fit`` checks every parameter, the shape of ``X`` and that ``r`` reserves exactly
  ``privacy_cost()`` (all metadata: nothing is read before a refusal), then marks ``r``
  running and fits. A ``ValidationError`` raised after that depends on the data (e.g.
  ``on_nonfinite="raise"``: one bit) and ``fit`` commits ``r`` as spent; the ``with`` block
  resolves every other outcome (:meth:`dpdist.ops.ledger.Ledger.charge`: committed on success,
  committed with what was spent on a ``NoPrivateResult``, refunded when nothing can have been
  spent). ``r`` is any object with ``cost``, ``running()`` and ``commit(...)``
  (:class:`dpdist.ops.ledger.ChargeProtocol`; this layer never imports :mod:`dpdist.ops`). A
  ``fit`` without a reservation is recorded in no ledger: nothing counts it against the
  dataset's budget.
- Where a fit runs: ``scheduler=`` where an estimator has it, else dask's configuration and the
  active ``distributed`` client (:mod:`dpdist.engine.scheduler`); its time limit and progress
  bar from the dask configuration keys ``dpdist.timeout`` and ``dpdist.progress``
  (:mod:`dpdist.engine.runtime`), validated when ``fit`` starts.
- scikit-learn's estimator protocol, without importing scikit-learn (an optional dependency):
  ``__sklearn_tags__`` (scikit-learn's tags, built when scikit-learn asks for them) and
  ``__sklearn_clone__`` (``sklearn.base.clone``: an unfitted estimator with the same parameters,
  sharing the scheduler and a ``NoiseSeed``, see :meth:`Estimator.__sklearn_clone__`);
  ``n_features_in_`` after a fit. The PCA estimators add ``transform`` and ``fit_transform``
  (:class:`~dpdist.algorithms._projection.Projection`), so they work as a step of a ``sklearn.pipeline.Pipeline``.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import inspect
import warnings
from typing import Any, ClassVar, NamedTuple

from dpdist._validation import check_choice, check_int, check_positive
from dpdist.algorithms._constraints import (
    Boolean, Integer, Options, Params, RandomState, Scheduler, validate_params,
)
from dpdist.algorithms.fingerprint import register
from dpdist.exceptions import VacuousReleaseWarning, ValidationError
from dpdist.privacy.zcdp import Guarantee

__all__ = [
    "BASE_PARAMETER_CONSTRAINTS",
    "NONFINITE_POLICIES",
    "Estimator",
    "FitResult",
    "check_int",
    "check_nonfinite",
    "check_positive",
    "nonfinite_note",
    "record_utility",
    "reports_empirical",
    "refuse_nonfinite",
]

#: The values of ``on_nonfinite`` (the default everywhere is "zero").
NONFINITE_POLICIES = ("zero", "raise")


def check_nonfinite(on_nonfinite) -> str:
    """Validate ``on_nonfinite``: "zero" (default: rows holding NaN/inf become zero rows before
    any statistic, uncounted) or "raise" (explicit validation mode; reveals one bit)."""
    return check_choice(on_nonfinite, "on_nonfinite", NONFINITE_POLICIES)


#: The runtime parameters many estimators share, checked by ``fit`` (never by ``plan``) for
#: each estimator that has them, in this order and before the estimator's own table.
BASE_PARAMETER_CONSTRAINTS: dict = {
    "scheduler": Scheduler(),
    "random_state": RandomState(),
    "on_nonfinite": Options(*NONFINITE_POLICIES),
    "tile_size": Integer(),
    "subsets_per_task": Integer(),
    "require_useful": Boolean(),
}


class FitResult(NamedTuple):
    """A fit's release and its one plan (or the ValidationError computing it raised)."""

    release: Any
    plan: Any


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


def record_utility(release, plan, *, stacklevel: int = 3):
    """``release`` with ``plan``'s utility verdict recorded in ``parameters["utility"]`` (and a
    note when vacuous); warns :class:`~dpdist.exceptions.UtilityWarning` once when vacuous.

    ``plan`` is computed from public parameters (or, for a private initialisation, from
    released values), so the record is public. A plan that could not be computed (None, or
    an exception instance) records ``vacuous: None`` with the reason: the release is never
    lost for its utility check.
    """
    if plan is None or isinstance(plan, Exception):
        utility = {"vacuous": None, "vacuous_reason": f"not assessed: {plan}"}
        vacuous = False
    else:
        utility = plan.utility()
        vacuous = plan.vacuous
        if plan.error_bound is None and not vacuous:
            utility.update(vacuous=None, vacuous_reason="not assessed: the plan predicts no error for these parameters")
    notes = tuple(release.notes)
    if vacuous:
        notes += (f"VACUOUS release: {plan.vacuous_reason}",)
    release = dataclasses.replace(release, parameters={**release.parameters, "utility": utility}, notes=notes)
    if vacuous:
        warnings.warn(VacuousReleaseWarning(f"VACUOUS release of {release.mechanism}: {plan.vacuous_reason}; at "
                                            "this size its guarantee says nothing about the released values (see "
                                            "plan())"),
                      stacklevel=stacklevel)
    return release


def reports_empirical(method: str):
    """Decorate an estimator's ``plan()``: the plan's ``empirical`` field gets the n* that
    ``dpdist experiment sample-complexity`` measured for ``method`` at the plan's
    ``n_features`` (:func:`dpdist.algorithms.measured.measured_n_star`, from the data file shipped
    with the package), one entry per measurement mode (simulated, real), each labelled
    *empirical* with its instance family, target, budget and source file. Only inside the
    measured range of d (no extrapolation); a value measured at another budget or on another
    instance family is a reference point, not a prediction for this fit."""

    def wrap(plan_method):
        @functools.wraps(plan_method)
        def plan(self, *args, **kwargs):
            out = plan_method(self, *args, **kwargs)
            from dpdist.algorithms.measured import measured_n_star

            found = [m.to_dict() for mode in ("simulated", "real")
                     if (m := measured_n_star(method, out.n_features, mode=mode)) is not None]
            return dataclasses.replace(out, empirical=tuple(found)) if found else out

        return plan

    return wrap


class Estimator:
    """Base of every public estimator: the contract of this module's docstring.

    A subclass stores every ``__init__`` argument unchanged as an attribute of the same name,
    lists a rule for each in ``_parameter_constraints`` and implements

    - ``_validate_together(params, n, d)``, ``_plan_validated(params)`` and
      ``_release_validated(X, params, plan) -> Release`` (emitting the PrivacyWarning of an
      unsafe mode): a fit validates once, plans once and releases from the checked values
      (:meth:`_release_of`);
    - ``_fitted_attributes(release) -> dict``: the ``*_`` attributes of a successful fit;
    - ``plan(n_samples, n_features, ...) -> Plan``.

    It may override ``_check_fit(n, d)`` (every check a fit makes before reading data, for a
    caller that reserves budget first; default: the parameters, the shape and the plan),
    ``_release_of`` (an estimator whose plan needs values the release decides) and
    ``privacy_cost``.
    """

    #: Least (rows, columns) the fit accepts (:func:`dpdist.data.validation.as_dask_array`).
    _min_shape = (2, 2)

    #: Every ``__init__`` parameter's rule (:mod:`dpdist.algorithms._constraints`), those of
    #: :data:`BASE_PARAMETER_CONSTRAINTS` excepted, in the order ``fit`` and ``plan`` check
    #: them. An estimator with a table implements ``_validate_together``, ``_plan_validated``
    #: and ``_release_validated``; without one (None) it validates inside ``_fit_release``.
    _parameter_constraints: ClassVar[dict | None] = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        register(cls)  # the measured n*'s fingerprint evaluates plans by class name

    @classmethod
    def _param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        return [p for p in sig.parameters if p != "self"]

    def get_params(self, deep: bool = True) -> dict:
        """The ``__init__`` parameters, as given (``deep`` is accepted for scikit-learn)."""
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params):
        """Set ``__init__`` parameters (validated at the next fit or plan); returns self."""
        valid = set(self._param_names())
        unknown = [key for key in params if key not in valid]
        if unknown:  # checked before anything is set
            raise ValidationError(
                f"invalid parameter {unknown[0]!r} for {type(self).__name__} (parameters: {', '.join(sorted(valid))})"
            )
        for key, value in params.items():
            setattr(self, key, value)
        return self

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    #: Parameters that name a shared resource rather than hold a value: a clone refers to the
    #: same object (see :meth:`__sklearn_clone__`).
    _shared_params = ("scheduler", "random_state")

    def __sklearn_clone__(self):
        """An unfitted estimator with the same parameters (what ``sklearn.base.clone`` returns).

        The scheduler and the ``random_state`` are the very same objects, the other parameters
        deep copies (as ``clone`` makes them). A clone runs on the same cluster, and a
        ``NoiseSeed`` stays one seed: consumed by the
        first fit of either, refused by the second (a copied seed would draw the same noise
        twice). An int ``random_state`` is an int, as in scikit-learn: clones seeded alike draw
        the same noise (seeds are for tests and reproduction only).
        """
        params = {k: v if k in self._shared_params else copy.deepcopy(v) for k, v in self.get_params().items()}
        return type(self)(**params)

    def __sklearn_tags__(self):
        """scikit-learn's tags (called by scikit-learn only, so it imports scikit-learn here).

        Unsupervised (no ``y``); NaN accepted while ``on_nonfinite="zero"`` (such rows become
        zero rows); non-deterministic unless ``random_state`` is given; a transformer when the
        estimator has ``transform``.
        """
        from sklearn.utils import InputTags, Tags, TargetTags, TransformerTags

        names = set(self._param_names())
        return Tags(
            estimator_type=None,
            target_tags=TargetTags(required=False),
            transformer_tags=TransformerTags() if hasattr(self, "transform") else None,
            input_tags=InputTags(allow_nan=getattr(self, "on_nonfinite", None) == "zero"),
            non_deterministic="random_state" in names and self.random_state is None,
        )

    def _check_fitted(self, attr: str) -> None:
        if not hasattr(self, attr):
            raise AttributeError(f"{type(self).__name__} is not fitted yet; call fit(X) first")

    # -- validation ------------------------------------------------------------------------
    @classmethod
    def _constraints(cls, *, fit: bool = True) -> dict:
        """The table a fit (``fit=True``: the base runtime entries the estimator has, then its
        own) or a plan (its own) checks."""
        own = dict(cls._parameter_constraints or {})
        if not fit:
            return own
        names = cls._param_names()
        return {**{k: v for k, v in BASE_PARAMETER_CONSTRAINTS.items() if k in names and k not in own}, **own}

    def _validate_params(self, *, fit: bool = True) -> Params:
        """Every parameter checked once, in the table's order; the normalised values. ``fit=False``
        (a plan, a cost, a sample size) leaves the runtime parameters unchecked."""
        return validate_params(self._constraints(fit=fit), self.get_params())

    def _validate_together(self, params: Params, n_samples: Any, n_features: Any) -> Params:
        """The rules between parameters and the data's shape, checked once after the table (for
        example ``k <= n_features``); returns ``params`` with values derived from them."""
        return params

    def _validated_at(self, n_samples: Any, n_features: Any) -> Params:
        """What ``plan`` / ``min_samples`` work from: the model's parameters and the shape, checked."""
        return self._validate_together(self._validate_params(fit=False), n_samples, n_features)

    # An estimator with a table implements _plan_validated(params) (the plan from validated
    # values, the shape among them) and _release_validated(X, params, plan) (the release from the
    # opened input; ``plan`` is the fit's plan, the ValidationError computing it raised, or None
    # for a functional form, which records no utility verdict); neither checks anything again.

    def _release_of(self, X: Any, *, assess: bool = True, before_release: Any = None) -> FitResult:
        """One fit's work for an estimator with a table: validate once, open ``X`` (metadata),
        check the shape rules once, compute the plan once, refuse a useless fit
        (``require_useful``), call ``before_release()`` (a ledger reservation marked running),
        release. ``assess=False`` (a functional form, whose release records no utility verdict)
        computes no plan unless ``require_useful`` needs one."""
        params = self._validate_params()
        Xd = self._open(X)
        params = self._validate_together(params, *Xd.shape)
        required, plan = getattr(params, "require_useful", False), None
        if assess or required:
            try:
                plan = self._plan_validated(params)
            except ValidationError as exc:
                if required:
                    raise
                plan = exc  # the release is never lost for its utility check
        if required:
            self._check_useful(plan, required=True)
        if before_release is not None:
            before_release()
        return FitResult(self._release_validated(Xd, params, plan), plan)

    # -- hooks -------------------------------------------------------------------------
    def _fit_release(self, X: Any, **kwargs: Any) -> FitResult:
        """The fit's release and its plan (:meth:`_release_of`)."""
        return self._release_of(X, **kwargs)

    def _fitted_attributes(self, release) -> dict:  # pragma: no cover
        raise NotImplementedError

    def privacy_cost(self):
        """The guarantee a successful fit states, from the parameters alone (reserved by a
        ledger before any data is read): ``ZCDP(rho)`` for a ``rho`` estimator, else
        ``ApproxDP(epsilon, delta)``; None for a NOT PRIVATE estimator."""
        if "rho" in self._param_names():
            from dpdist.privacy.zcdp import ZCDP

            return ZCDP(self.rho)
        if "epsilon" in self._param_names():
            from dpdist.privacy.budget import ApproxDP, check_delta, check_epsilon

            return ApproxDP(check_epsilon(self.epsilon), check_delta(self.delta))
        return None

    def _check_fit(self, n_samples: int, n_features: int) -> None:
        """Every check a fit makes before reading data, for data of this shape."""
        params = self._validate_together(self._validate_params(), n_samples, n_features)
        self._check_useful(self._plan_validated(params), required=getattr(params, "require_useful", False))

    def _requires_useful(self) -> bool:
        """Whether this estimator has ``require_useful`` and it is set (validated)."""
        if "require_useful" not in self._param_names():
            return False
        from dpdist._validation import check_bool

        return check_bool(self.require_useful, "require_useful")

    def _check_useful(self, plan, *, required: bool) -> None:
        """``require_useful=True``: refuse (ValidationError, exit 2 on the command line) when
        ``plan`` says the release would be rejected or vacuous (an unmet condition, such as
        private tests predicted to fail, or a predicted error at least the scale).

        The plan is computed from public parameters and the data's shape only, never from the
        data, so the refusal and its message reveal nothing about the data; it is taken before
        any data is read, any noise is drawn, or any budget is reserved. ``required``: the
        validated ``require_useful``.
        """
        if required and plan.vacuous:
            raise ValidationError(
                f"require_useful=True: {type(self).__name__} refused before reading any data or spending any "
                f"budget: its plan at n_samples={plan.n_samples}, n_features={plan.n_features} says "
                f"{plan.vacuous_reason}"
            )

    # -- fitting -----------------------------------------------------------------------
    def _finish(self, result: FitResult) -> dict:
        """The attributes of a successful fit, with the utility verdict of the fit's own plan
        recorded."""
        release, plan = result
        release = record_utility(release, plan, stacklevel=4)
        return {**self._fitted_attributes(release), "n_features_in_": int(release.parameters["n_features"])}

    def fit(self, X: Any, y: Any = None, *, reservation: Any = None):
        """Fit on ``X`` (rows are individuals) and release; returns self.

        Parameters are validated before any data is read. The fitted attributes are set only
        when the fit succeeds; a failed fit leaves the estimator as it was (see
        :mod:`dpdist.algorithms._base`).

        Parameters
        ----------
        X : array-like, dask array, zarr.Array or str
            The data, one row per individual.
        y : ignored
        reservation : optional
            What ``ledger.charge(dataset, privacy_cost(), job=...)`` yields: the fit is charged
            to that ledger. Its cost must be exactly :meth:`privacy_cost` (else a
            ``ValidationError`` before any data is read). ``fit`` marks it running before
            reading data and commits it as spent when the data refuse the pass (a
            ``ValidationError`` then depends on the data); the caller's ``with`` block resolves
            it otherwise. Without it the fit is recorded in no ledger at all: nothing counts
            what it spends against the dataset's budget (the command line's ``dpdist run``, and
            the direct commands given ``--ledger`` or ``DPDIST_LEDGER``, do charge one).

        Examples
        --------
        >>> with ledger.charge("claims.zarr", est.privacy_cost(), job="weekly") as r:  # doctest: +SKIP
        ...     est.fit("claims.zarr", reservation=r)
        """
        from dpdist.engine.runtime import check_runtime_config

        check_runtime_config()  # dpdist.timeout and dpdist.progress
        if reservation is None:
            attrs = self._finish(self._fit_release(X))
        else:  # the parameters, the shape and the plan are checked before it is marked running
            self._check_reservation(reservation)
            attrs = self._finish(self._fit_on_reservation(self._open(X), reservation))
        self.__dict__.update(attrs)
        return self

    def check_fit(self, n_samples: int, n_features: int) -> None:
        """Every check :meth:`fit` makes before reading data of this shape (the parameters, the
        runtime ones and the size); raises ``ValidationError``. Reads nothing: a caller that
        reserves budget calls it first, so a bad parameter is refused before the reservation."""
        self._check_fit(n_samples, n_features)

    def _open(self, X: Any):
        """``X`` as a validated dask array (metadata only; its chunk reading is decided from public
        information: :func:`dpdist.data.validation.chunk_reading`)."""
        from dpdist.data.validation import as_dask_array

        rows, cols = self._min_shape
        return as_dask_array(X, min_rows=rows, min_cols=cols)

    def _charged_cost(self):
        cost = self.privacy_cost()
        if cost is None:
            raise ValidationError(
                f"{type(self).__name__} with these parameters gives no privacy guarantee (NOT PRIVATE): it cannot "
                "be charged to a privacy ledger"
            )
        return cost

    def _check_reservation(self, reservation: Any) -> None:
        """Refuse a reservation that is not one, or that does not hold exactly what this fit
        spends (a caller could otherwise reserve less than the fit spends). Reads no data."""
        cost = self._charged_cost()
        if not (hasattr(reservation, "cost") and callable(getattr(reservation, "running", None))
                and callable(getattr(reservation, "commit", None))):
            raise ValidationError(
                "reservation must be what ledger.charge(dataset, cost) yields (an object with cost, running() "
                f"and commit()), got {reservation!r}; nothing was read"
            )
        reserved = reservation.cost
        if not _same_cost(reserved, cost):
            raise ValidationError(
                f"the reservation holds {_describe(reserved)}, but {type(self).__name__}.fit spends {_describe(cost)} "
                "(its privacy_cost()): reserve exactly est.privacy_cost(); nothing was read or spent"
            )

    def _fit_on_reservation(self, Xd: Any, reservation: Any) -> FitResult:
        """Fit against ``reservation``: marked running once every parameter, the shape and the
        plan are checked (in the fit itself, once); a ``ValidationError`` after that depends on
        the data and is committed as spent."""
        started = []

        def running() -> None:
            reservation.running()
            started.append(True)

        try:
            result = self._fit_release(Xd, before_release=running)
        except ValidationError as exc:
            if started:  # a refusal now depends on the data, so it counts as spent
                reservation.commit(outcome="refused-during-pass", note=f"counted as spent: {exc}"[:500])
            raise
        record = getattr(reservation, "record", None)
        if callable(record):  # the commit that releases stores what ran (the ledger composes it)
            record(result.release.events)
        return result


def _same_cost(a: Guarantee, b: Guarantee) -> bool:
    """Whether two guarantees are the same charge (same kind, same parameters)."""
    if type(a) is not type(b):
        return False
    fields = ("rho",) if hasattr(b, "rho") else ("epsilon", "delta")
    return all(getattr(a, f, None) == getattr(b, f) for f in fields)


def _describe(cost: Guarantee) -> str:
    describe = getattr(cost, "describe", None)
    return describe() if callable(describe) else repr(cost)
