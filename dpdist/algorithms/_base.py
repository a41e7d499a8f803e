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
- ``ledger=`` (any object with the ``charge(dataset, cost, *, job=None)`` context manager of
  :class:`dpdist.ops.ledger.ChargeProtocol`; this layer never imports :mod:`dpdist.ops`) makes
  ``fit`` reserve ``privacy_cost()`` on ``dataset`` before reading any data, mark the
  reservation running when the data are read, and resolve it: committed on success, committed
  with what was spent on a ``NoPrivateResult``, refunded when an ``InfrastructureError`` says no
  noise was drawn, committed as spent when the data themselves were refused (a ``ValidationError``
  during the pass, e.g. ``on_nonfinite="raise"``: that refusal reveals one bit). A ``fit``
  without ``ledger=`` is recorded in no ledger: nothing counts it against the dataset's budget.
- scikit-learn's estimator protocol, without importing scikit-learn (an optional dependency):
  ``__sklearn_tags__`` (scikit-learn's tags, built when scikit-learn asks for them) and
  ``__sklearn_clone__`` (``sklearn.base.clone``: an unfitted estimator with the same parameters,
  sharing the ledger, the scheduler and a ``NoiseSeed``, see :meth:`Estimator.__sklearn_clone__`);
  ``n_features_in_`` after a fit. The PCA estimators add ``transform`` and ``fit_transform``
  (:class:`Projection`), so they work as a step of a ``sklearn.pipeline.Pipeline``.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import inspect
import os
import warnings
from typing import Any, ClassVar, NamedTuple

import numpy as np

from dpdist._validation import check_choice, check_int, check_positive
from dpdist.algorithms._constraints import (
    Boolean, Integer, Options, Params, RandomState, Scheduler, Timeout, Unchecked, validate_params,
)
from dpdist.algorithms.fingerprint import register
from dpdist.exceptions import VacuousReleaseWarning, ValidationError

__all__ = [
    "BASE_PARAMETER_CONSTRAINTS",
    "NONFINITE_POLICIES",
    "Estimator",
    "FitResult",
    "Projection",
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
    "timeout": Timeout(),
    "random_state": RandomState(),
    "on_nonfinite": Options(*NONFINITE_POLICIES),
    "tile_size": Integer(),
    "chunk_size": Integer(),
    "progress": Boolean(allow_none=True),
    "require_useful": Boolean(),
    "ledger": Unchecked("checked by fit's ledger path (it needs a charge context manager)"),
    "dataset": Unchecked("checked by fit's ledger path with the input it names"),
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
      (:meth:`_release_of`); without a table, ``_fit_release(X)`` validates and releases;
    - ``_fitted_attributes(release) -> dict``: the ``*_`` attributes of a successful fit;
    - ``plan(n_samples, n_features, ...) -> Plan``.

    It may override ``_check_fit(n, d)`` (every check a fit makes before reading data, for
    the ledger path; default: the runtime parameters and ``plan(n, d)``), ``_utility_plan``
    and ``privacy_cost``.
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
    _shared_params = ("ledger", "scheduler", "random_state")

    def __sklearn_clone__(self):
        """An unfitted estimator with the same parameters (what ``sklearn.base.clone`` returns).

        The ledger, the scheduler and the ``random_state`` are the very same objects, the
        other parameters deep copies (as ``clone`` makes them). A clone charges the same
        ledger, hence the same budget (a copied ledger would be a second budget for the same
        data), runs on the same cluster, and a ``NoiseSeed`` stays one seed: consumed by the
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

    def _release_of(self, X: Any, *, assess: bool = True) -> FitResult:
        """One fit's work for an estimator with a table: validate once, open ``X`` (metadata),
        check the shape rules once, compute the plan once, refuse a useless fit
        (``require_useful``), release. ``assess=False`` (a functional form, whose release
        records no utility verdict) computes no plan unless ``require_useful`` needs one."""
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
        return FitResult(self._release_validated(Xd, params, plan), plan)

    # -- hooks -------------------------------------------------------------------------
    def _fit_release(self, X: Any):
        """The fit's release: with a constraints table, :meth:`_release_of` (a :class:`FitResult`);
        an estimator without one implements it."""
        if self._parameter_constraints is None:  # pragma: no cover - every such subclass implements it
            raise NotImplementedError
        return self._release_of(X)

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

    def _check_runtime(self) -> None:
        """Validate the parameters that only matter when data are read (scheduler, timeout,
        random_state, on_nonfinite, tile_size, progress), where the estimator has them. An
        estimator with a constraints table checks them with the others, once per fit."""
        if self._parameter_constraints is not None:
            return
        from dpdist.engine.runtime import check_scheduler, check_timeout
        from dpdist.privacy.noise import check_random_state

        names = set(self._param_names())
        if "scheduler" in names:
            check_scheduler(self.scheduler)
        if "timeout" in names:
            check_timeout(self.timeout)
        if "random_state" in names:
            check_random_state(self.random_state)
        if "on_nonfinite" in names:
            check_nonfinite(self.on_nonfinite)
        if "tile_size" in names:
            check_int(self.tile_size, "tile_size")
        if "chunk_size" in names:
            check_int(self.chunk_size, "chunk_size")
        if "progress" in names and self.progress is not None:
            from dpdist._validation import check_bool

            check_bool(self.progress, "progress")

    def _check_fit(self, n_samples: int, n_features: int) -> None:
        """Every check a fit makes before reading data, for data of this shape."""
        if self._parameter_constraints is not None:
            params = self._validate_together(self._validate_params(), n_samples, n_features)
            self._check_useful(self._plan_validated(params), required=getattr(params, "require_useful", False))
            return
        self._check_runtime()
        plan = self.plan(n_samples, n_features)
        self._check_useful(plan)

    def _requires_useful(self) -> bool:
        """Whether this estimator has ``require_useful`` and it is set (validated)."""
        if "require_useful" not in self._param_names():
            return False
        from dpdist._validation import check_bool

        return check_bool(self.require_useful, "require_useful")

    def _check_useful(self, plan, *, required: bool | None = None) -> None:
        """``require_useful=True``: refuse (ValidationError, exit 2 on the command line) when
        ``plan`` says the release would be rejected or vacuous (an unmet condition, such as
        private tests predicted to fail, or a predicted error at least the scale).

        The plan is computed from public parameters and the data's shape only, never from the
        data, so the refusal and its message reveal nothing about the data; it is taken before
        any data is read, any noise is drawn, or any budget is reserved. ``required``: the
        validated ``require_useful`` (None: read and check it here).
        """
        if (self._requires_useful() if required is None else required) and plan.vacuous:
            raise ValidationError(
                f"require_useful=True: {type(self).__name__} refused before reading any data or spending any "
                f"budget: its plan at n_samples={plan.n_samples}, n_features={plan.n_features} says "
                f"{plan.vacuous_reason}"
            )

    def _utility_plan(self, release):
        """The plan whose verdict a release records: ``plan(n, d)`` at the release's size."""
        p = release.parameters
        return self.plan(p["n_samples"], p["n_features"])

    # -- fitting -----------------------------------------------------------------------
    def _finish(self, release) -> dict:
        """The attributes of a successful fit, with the utility verdict recorded (the fit's own
        plan when it computed one: a :class:`FitResult`)."""
        if isinstance(release, FitResult):
            release, plan = release
        else:
            try:
                plan = self._utility_plan(release)
            except ValidationError as exc:
                plan = exc
        release = record_utility(release, plan, stacklevel=4)
        return {**self._fitted_attributes(release), "n_features_in_": int(release.parameters["n_features"])}

    def fit(self, X: Any, y: Any = None):
        """Fit on ``X`` (rows are individuals) and release; returns self.

        Parameters are validated before any data is read. The fitted attributes are set only
        when the fit succeeds; a failed fit leaves the estimator as it was (see
        :mod:`dpdist.algorithms._base`). With ``ledger=``, the privacy cost is reserved on
        ``dataset`` first and committed with the fit (:meth:`fit_reserved`). Without
        ``ledger=`` the fit is recorded in no ledger at all: nothing counts what it spends
        against the dataset's budget (the command line's ``dpdist run``, and the direct
        commands given ``--ledger`` or ``DPDIST_LEDGER``, do charge one).
        """
        ledger, dataset = self._ledger_and_dataset(X)
        self._check_runtime()
        if ledger is None:
            if self._parameter_constraints is None and self._requires_useful():  # the shape is metadata: nothing is read before the refusal
                self._check_useful(self.plan(*self._open(X).shape))
            attrs = self._finish(self._fit_release(X))
        else:
            Xd = self._open(X)
            self._check_fit(*Xd.shape)
            cost = self._charged_cost()
            with ledger.charge(dataset, cost, job=f"{type(self).__name__}.fit") as reservation:
                release = self._fit_on_reservation(Xd, reservation)
            attrs = self._finish(release)
        self.__dict__.update(attrs)
        return self

    def fit_reserved(self, X: Any, reservation: Any):
        """Fit against a reservation the caller holds and resolves (the job runner of
        :mod:`dpdist.ops.runner`, which commits it with the output's checksum).

        Checks every parameter and the shape of ``X`` (metadata only), then calls
        ``reservation.running()`` and fits. A ``ValidationError`` raised after that depends
        on the data (e.g. ``on_nonfinite="raise"``: one bit) and is committed as spent
        (``outcome="refused-during-pass"``); on success the reservation is left open for the
        caller. Returns self (attributes set only on success).
        """
        Xd = self._open(X)
        self._check_fit(*Xd.shape)
        self._charged_cost()
        release = self._fit_on_reservation(Xd, reservation)
        self.__dict__.update(self._finish(release))
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

    def _fit_on_reservation(self, Xd: Any, reservation: Any):
        reservation.running()
        try:
            return self._fit_release(Xd)
        except ValidationError as exc:
            # every parameter and the shape were checked before the reservation: a refusal now
            # depends on the data, so it counts as spent
            reservation.commit(outcome="refused-during-pass", note=f"counted as spent: {exc}"[:500])
            raise

    def _ledger_and_dataset(self, X: Any) -> tuple[Any, str | None]:
        """Validate ``ledger`` and ``dataset``; the dataset id (default: a path input's
        canonical location)."""
        ledger = getattr(self, "ledger", None)
        dataset = getattr(self, "dataset", None)
        if dataset is not None and (not isinstance(dataset, str) or not dataset.strip()):
            raise ValidationError(f"dataset must be a non-empty string naming the data, got {dataset!r}")
        if ledger is None:
            return None, dataset
        if not callable(getattr(ledger, "charge", None)):
            raise ValidationError(
                f"ledger must have a charge(dataset, cost, *, job=None) context manager "
                f"(dpdist.ops.ledger.open_ledger), got {ledger!r}"
            )
        if dataset is None:
            if not isinstance(X, (str, os.PathLike)):
                raise ValidationError(
                    "with ledger=, give dataset= (the identifier the ledger's budget is kept under): X is "
                    "not a path, so it does not name its dataset"
                )
            from dpdist.data.validation import canonical_location

            dataset = canonical_location(os.fspath(X))
        return ledger, dataset


class Projection:
    """``transform`` and ``fit_transform`` of a PCA estimator (mixed in before :class:`Estimator`).

    ``transform(X)`` projects the rows of ``X``, centred at the mean the fit centred at
    (``location_``, released with the components; absent or zero when the fit took the data as
    centred), on the released ``components_``: ``(X - location_) @ components_.T``, of shape
    ``(n_samples, n_components)``, as scikit-learn's ``PCA.transform`` subtracts ``mean_``. The
    projected rows are the data seen through the released components, not a private release:
    publish the fitted estimator's attributes, not the transformed data.
    """

    def transform(self, X: Any):
        """``(X - location_) @ components_.T``: a NumPy array for in-memory ``X``, a lazy dask array for a dask
        array, a ``zarr.Array`` or a path. ``X`` is validated as ``fit`` validates it and must
        have the fitted ``n_features_in_`` columns. Rows holding NaN or inf are treated as
        ``fit`` treats them: zero rows (projected to 0) under ``on_nonfinite="zero"``, refused
        under ``on_nonfinite="raise"``."""
        import dask.array as da
        import zarr

        from dpdist.data.validation import as_dask_array

        self._check_fitted("components_")
        Xd = as_dask_array(X, min_rows=1, min_cols=1)
        expected = self.components_.shape[1]
        if Xd.shape[1] != expected:
            raise ValidationError(
                f"X has {Xd.shape[1]} features, but {type(self).__name__} is expecting {expected} features "
                "as input (the number of columns it was fitted on)"
            )
        finite = da.isfinite(Xd).all(axis=1, keepdims=True)
        if getattr(self, "on_nonfinite", "zero") == "raise":
            if not bool(finite.all().compute(scheduler="synchronous")):
                raise ValidationError("X contains NaN or infinite values; nothing was transformed "
                                      "(on_nonfinite='raise')")
        else:
            Xd = da.where(finite, Xd, Xd.dtype.type(0))
        location = getattr(self, "location_", None)
        if location is not None and np.any(location):
            Xd = Xd - np.asarray(location, dtype=Xd.dtype)  # as in fit: a zeroed row is centred like any other
        out = Xd @ np.asarray(self.components_, dtype=Xd.dtype).T
        if isinstance(X, (da.Array, zarr.Array, str, os.PathLike)):
            return out
        return out.compute(scheduler="synchronous")  # X is in memory already

    def fit_transform(self, X: Any, y: Any = None):
        """``fit(X)`` then ``transform(X)`` (``y`` is ignored)."""
        return self.fit(X, y).transform(X)
