"""Which method should I use? Every registered estimator's predicted error for one question.

:func:`compare_methods` takes the public parameters of a question (the task, the data size
``(n, d)``, ``k``, the budget ``(epsilon, delta)``, the model's ``sigma`` and, for PCA, its
relative eigengap) and returns a :class:`Comparison`: one :class:`MethodRow` per registered
estimator of the task, with the error its own ``plan()`` predicts at this size (its theorem's
bound, on the task's common error metric), whether that plan is vacuous, the least n at
which the bound meets an optional target, and the n* measured by ``dpdist experiment
sample-complexity`` where the plan reports one (its ``empirical`` field). The best private
method is marked and the rule that chose it is said in words.

Estimators are compared through :data:`CANDIDATES`, a registry of :class:`Candidate` entries:
each says how to build its estimator from the question and, when its ``plan()`` does not
state the task's metric as its ``error_bound``, how to read that metric from its plan.
:func:`register` adds one; nothing else in this module names an estimator.

The comparison reads public parameters only, never data: the choice it makes (and
``--method auto`` on the command line) reveals nothing about the data.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
from dataclasses import dataclass, field
from typing import Any, Callable

from dpdist._validation import check_choice, check_int, check_positive
from dpdist.exceptions import ValidationError

__all__ = ["CANDIDATES", "TASKS", "Candidate", "Comparison", "MethodRow", "Question", "compare_methods",
           "register"]

#: The tasks compared, with the error metric every candidate of the task is ranked on and the
#: scale of the quantity (a plan whose predicted error is at least the scale is vacuous).
TASKS = {
    "covariance": {"metric": "||M - Sigma||_op", "scale_rule": "sigma**2"},
    "pca": {"metric": "sin^2(v_hat, v_1)", "scale_rule": "1"},
}


@dataclass(frozen=True)
class Question:
    """The public parameters of a comparison (validated by :func:`compare_methods`).

    ``gap`` is the relative eigengap ``(lambda_1 - lambda_2) / lambda_1``; with ``lambda_1 =
    sigma**2`` (the largest value a sigma-sub-Gaussian model allows) the absolute eigengap is
    ``gap * sigma**2`` (:attr:`eigengap`). ``target`` is relative to :attr:`scale`.
    """

    task: str
    n_samples: int
    n_features: int
    k: int
    epsilon: float
    delta: float
    sigma: float
    gap: float | None = None
    radius: float | None = None
    target: float | None = None

    @property
    def scale(self) -> float:
        """The scale of the quantity: ``sigma**2`` for a covariance, 1 for ``sin^2``."""
        return self.sigma**2 if self.task == "covariance" else 1.0

    @property
    def eigengap(self) -> float | None:
        """The absolute eigengap ``gap * sigma**2`` (None without ``gap``)."""
        return None if self.gap is None else self.gap * self.sigma**2


@dataclass(frozen=True)
class Candidate:
    """How one estimator takes part in a comparison.

    Parameters
    ----------
    name : str
        The method's name, unique within its task (the command line's ``--method`` name).
    task : {"covariance", "pca"}
    estimator : str or type
        The estimator class, or its dotted path (imported when compared).
    params : callable
        ``params(question) -> dict``: the estimator's constructor arguments. It raises
        :class:`~dpdist.exceptions.ValidationError` when the question lacks what it needs
        (the method is then listed as not applicable, with that message).
    plan_kwargs : callable, optional
        ``plan_kwargs(question) -> dict``: keyword arguments of its ``plan()``.
    error : callable, optional
        ``error(question, estimator, plan) -> float or None``: the task's metric
        (:data:`TASKS`) predicted at the plan's size. Default: ``plan.error_bound``; give it
        when the plan states another metric.
    """

    name: str
    task: str
    estimator: str | type
    params: Callable[[Question], dict]
    plan_kwargs: Callable[[Question], dict] = field(default=lambda q: {})
    error: Callable[[Question, Any, Any], float | None] | None = None

    def load(self) -> type:
        if isinstance(self.estimator, type):
            return self.estimator
        module, _, name = self.estimator.rpartition(".")
        return getattr(importlib.import_module(module), name)

    def build(self, question: Question, **extra: Any):
        """The estimator for ``question`` (``extra``: further constructor arguments)."""
        return self.load()(**{**self.params(question), **extra})

    def predict(self, question: Question, n_samples: int | None = None):
        """``(estimator, plan, error)`` at ``n_samples`` (default: the question's n)."""
        n = question.n_samples if n_samples is None else n_samples
        est = self.build(question)
        plan = est.plan(n, question.n_features, **self.plan_kwargs(question))
        value = plan.error_bound if self.error is None else self.error(question, est, plan)
        return est, plan, (None if value is None else float(value))


#: Every estimator a comparison ranks, in registration order (the last tie-break).
CANDIDATES: list[Candidate] = []


def register(candidate: Candidate) -> Candidate:
    """Add ``candidate`` to :data:`CANDIDATES` (a name already registered for its task is replaced)."""
    check_choice(candidate.task, "task", TASKS)
    for i, c in enumerate(CANDIDATES):
        if (c.task, c.name) == (candidate.task, candidate.name):
            CANDIDATES[i] = candidate
            return candidate
    CANDIDATES.append(candidate)
    return candidate


def _need(q: Question, *names: str) -> None:
    missing = [n for n in names if getattr(q, n) is None]
    if missing:
        raise ValidationError(f"needs {', '.join(missing)}")


def _budget(q: Question) -> dict:
    return {"epsilon": q.epsilon, "delta": q.delta}


def _operator_bound_of(pca_class: str) -> Callable:
    """``error`` for a covariance baseline whose plan states the largest entry error: Lemma
    3(1)'s operator-norm bound ``2 k lambda`` as its PCA twin's ``plan(k=...)`` states it
    (the same covariance release, the same constructor arguments)."""

    def error(q: Question, est, plan) -> float | None:
        module, _, name = pca_class.rpartition(".")
        twin = getattr(importlib.import_module(module), name)(**est.get_params())
        return twin.plan(plan.n_samples, plan.n_features, k=q.k).operator_error_bound

    return error


def _pca_kwargs(q: Question) -> dict:
    _need(q, "gap")
    return {"eigengap": q.eigengap}


def _privpca_params(q: Question) -> dict:
    _need(q, "gap")
    return {"k": q.k, **_budget(q), "gap": q.gap, "sigma": q.sigma}


def _analyze_gauss_params(q: Question) -> dict:
    _need(q, "radius")
    return {**_budget(q), "row_norm": q.radius}


register(Candidate("privcov", "covariance", "dpdist.SparseCovariance",
                   lambda q: {"k": q.k, **_budget(q), "sigma": q.sigma}))
register(Candidate("wang-xu", "covariance", "dpdist.baselines.GaussianCovariance",
                   lambda q: {**_budget(q), "sigma": q.sigma},
                   error=_operator_bound_of("dpdist.baselines.GaussianPCA")))
register(Candidate("thresholded", "covariance", "dpdist.baselines.ThresholdedCovariance",
                   lambda q: {"sigma": q.sigma}, error=_operator_bound_of("dpdist.baselines.ThresholdedPCA")))
register(Candidate("privpca", "pca", "dpdist.SparsePCA", _privpca_params))
register(Candidate("expmech", "pca", "dpdist.ExpMechSparsePCA", lambda q: {"k": q.k, **_budget(q), "sigma": q.sigma},
                   plan_kwargs=_pca_kwargs))
register(Candidate("privcov-power", "pca", "dpdist.SparseCovariancePCA",
                   lambda q: {"k": q.k, **_budget(q), "sigma": q.sigma}, plan_kwargs=_pca_kwargs))
register(Candidate("analyze-gauss", "pca", "dpdist.baselines.AnalyzeGauss", _analyze_gauss_params,
                   plan_kwargs=lambda q: {"sigma": q.sigma, **_pca_kwargs(q)}))
register(Candidate("wang-xu", "pca", "dpdist.baselines.GaussianPCA", lambda q: {**_budget(q), "sigma": q.sigma},
                   plan_kwargs=lambda q: {"k": q.k, **_pca_kwargs(q)}))
register(Candidate("thresholded", "pca", "dpdist.baselines.ThresholdedPCA", lambda q: {"sigma": q.sigma},
                   plan_kwargs=lambda q: {"k": q.k, **_pca_kwargs(q)}))


@dataclass(frozen=True)
class MethodRow:
    """One estimator in a :class:`Comparison`.

    ``predicted_error`` is the task's metric as the estimator's ``plan()`` bounds it at the
    question's size (``math.inf``: the theorem gives no bound there; None: not applicable or
    no prediction). ``vacuous``: the prediction is at least the scale, or a condition of the
    plan is unmet (``vacuous_reason`` says which). ``theorem_n``: the least n at which the
    bound meets the target with every condition met (None without a target or when
    unreachable). ``measured``: the plan's ``empirical`` entries (n* measured on a stated
    instance family, target and budget, at this d). ``rank``: 1 for the best private method,
    None for a method not in the choice (NOT PRIVATE, or not applicable).
    """

    name: str
    estimator: str
    private: bool | None
    applicable: bool
    reason: str | None = None
    predicted_error: float | None = None
    vacuous: bool | None = None
    vacuous_reason: str | None = None
    theorem_n: float | None = None
    meets_target: bool | None = None
    measured: tuple = ()
    rank: int | None = None
    best: bool = False
    plan: Any = None

    def to_dict(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "plan"}
        out["measured"] = [dict(m) for m in self.measured]
        out["plan"] = None if self.plan is None else self.plan.to_dict()
        return out


@dataclass(frozen=True)
class Comparison:
    """The result of :func:`compare_methods`: the question, one row per registered
    estimator of the task (best first, then the other private methods by rank, then the
    NOT PRIVATE and the inapplicable ones), the best method's name (None when no private
    method applies) and why it was chosen."""

    question: Question
    metric: str
    rows: tuple[MethodRow, ...]
    best: str | None
    reason: str

    def __iter__(self):
        return iter(self.rows)

    def row(self, name: str) -> MethodRow:
        for r in self.rows:
            if r.name == name:
                return r
        raise KeyError(name)

    def candidate(self) -> Candidate | None:
        """The registered :class:`Candidate` of the best method (None when there is none)."""
        if self.best is None:
            return None
        return next(c for c in CANDIDATES if (c.task, c.name) == (self.question.task, self.best))

    def choice_record(self) -> dict:
        """What a release made by the chosen method records of the choice (public values only)."""
        from dpdist.privacy.release import to_jsonable

        return to_jsonable({
            "method": self.best, "estimator": None if self.best is None else self.row(self.best).estimator,
            "reason": self.reason, "rule": RULE, "question": dataclasses.asdict(self.question), "metric": self.metric,
            "predicted_errors": {r.name: r.predicted_error for r in self.rows if r.applicable},
        })

    def to_dict(self) -> dict:
        """JSON-compatible values (an unbounded error is the string ``"inf"``)."""
        from dpdist.privacy.release import to_jsonable

        return to_jsonable({"question": dataclasses.asdict(self.question), "metric": self.metric, "best": self.best,
                            "reason": self.reason, "rule": RULE, "rows": [r.to_dict() for r in self.rows]})


#: The choice rule, in words (recorded with every choice).
RULE = ("among the applicable private methods: first those whose plan is not vacuous, then those whose bound "
        "is vacuous with every condition met, then those with an unmet condition; within a group the smallest "
        "predicted error; on a tie the smaller measured n* at this d, then the first registered. NOT PRIVATE "
        "methods are shown, never chosen. The choice reads public parameters only")


def _measured_n_star(measured: tuple) -> float:
    for mode in ("simulated", "real"):
        for m in measured:
            if m.get("mode") == mode and m.get("n_star") is not None:
                return float(m["n_star"])
    return math.inf


def _tier(row: MethodRow) -> int:
    if row.plan is not None and row.plan.unmet_conditions:
        return 2
    return 1 if row.vacuous else 0


def _err(value: float | None) -> float:
    return math.inf if value is None or math.isnan(value) else value


def _fmt(value: float | None) -> str:
    return "no bound" if value is None or math.isinf(value) else f"{value:.3g}"


def _row(c: Candidate, q: Question) -> MethodRow:
    try:
        est, plan, err = c.predict(q)
        est.check_fit(q.n_samples, q.n_features)  # what a fit would refuse before reading data
    except ValidationError as exc:
        private = None
        try:
            private = c.build(q).privacy_cost() is not None
        except ValidationError:
            pass
        name = c.estimator.__name__ if isinstance(c.estimator, type) else c.estimator.rpartition(".")[2]
        return MethodRow(c.name, name, private, False, reason=str(exc))
    reasons = []
    if err is None or not err < q.scale:
        reasons.append(f"predicted error {_fmt(err)} >= scale {q.scale:.3g} ({TASKS[q.task]['scale_rule']})")
    reasons.extend(plan.unmet_conditions)
    theorem_n = meets = None
    if q.target is not None:
        goal = q.target * q.scale
        meets = err is not None and err <= goal and not plan.unmet_conditions

        def error_at(n: int) -> float:
            try:
                _, p, e = c.predict(q, n)
            except ValidationError:
                return math.inf
            return math.inf if p.unmet_conditions else _err(e)

        from dpdist.algorithms._utility import search_min_samples

        try:
            theorem_n = float(search_min_samples(error_at, goal, start=4, limit=10**30))
        except ValidationError:
            theorem_n = None
    return MethodRow(c.name, type(est).__name__, est.privacy_cost() is not None, True,
                     predicted_error=err, vacuous=bool(reasons), vacuous_reason="; ".join(reasons) or None,
                     theorem_n=theorem_n, meets_target=meets, measured=tuple(plan.empirical),
                     plan=plan)


def _choose(rows: list[MethodRow], q: Question) -> tuple[str | None, str, list[MethodRow]]:
    """The best row's name, why, and the eligible rows in rank order."""
    order = {r.name: i for i, r in enumerate(rows)}
    eligible = [r for r in rows if r.applicable and r.private]
    if not eligible:
        why = "; ".join(f"{r.name}: {'NOT PRIVATE' if r.private is False else r.reason}" for r in rows)
        return None, f"no private method applies ({why})", []

    def key(r: MethodRow):
        return (_tier(r), _err(r.predicted_error), _measured_n_star(r.measured), order[r.name])

    ranked = sorted(eligible, key=key)
    best = ranked[0]
    tier, err = _tier(best), _err(best.predicted_error)
    metric = TASKS[q.task]["metric"]
    tied = [r for r in ranked[1:] if _tier(r) == tier and
            (_err(r.predicted_error) == err or math.isclose(_err(r.predicted_error), err, rel_tol=1e-9))]
    others = [r for r in ranked[1:] if r not in tied]
    if tied:
        names = ", ".join(r.name for r in tied)
        if _measured_n_star(best.measured) < min(_measured_n_star(r.measured) for r in tied):
            why = (f"it ties with {names} on the predicted {metric} ({_fmt(err)}) and has the smaller measured n* "
                   f"at d = {q.n_features:,} ({_measured_n_star(best.measured):.3g})")
        else:
            why = (f"it ties with {names} on the predicted {metric} ({_fmt(err)}) and no measured n* at "
                   f"d = {q.n_features:,} separates them: the first registered is taken")
    else:
        why = f"smallest predicted {metric}: {_fmt(err)}"
        if others:
            why += " against " + ", ".join(f"{_fmt(r.predicted_error)} ({r.name}"
                                           + (", vacuous" if r.vacuous else "") + ")" for r in others)
    if tier == 1:
        why += (f"; every applicable private method's plan is vacuous at n = {q.n_samples:,}: its bound says "
                "nothing the scale does not")
    elif tier == 2:
        why += f"; every applicable private method has an unmet condition at n = {q.n_samples:,} ({best.vacuous_reason})"
    elif any(r.vacuous for r in others):
        why += "; vacuous plans rank after every non-vacuous one"
    return best.name, why, ranked


def compare_methods(n_samples: int, n_features: int, *, k: int, epsilon: float, delta: float, sigma: float,
                    task: str = "covariance", gap: float | None = None, radius: float | None = None,
                    target: float | None = None) -> Comparison:
    """Compare every registered estimator of ``task`` on one question; mark the best.

    Parameters
    ----------
    n_samples, n_features : int
        The data size planned for (public: read from a store's metadata, never its rows).
    k : int
        Sparsity: rows of the covariance with at most k non-zeros (``"covariance"``), or the
        support size of the leading component (``"pca"``).
    epsilon, delta : float
        The budget each private estimator would spend.
    sigma : float
        The model's sub-Gaussian scale (sets clip levels and the scale ``sigma**2``).
    task : {"covariance", "pca"}, default "covariance"
        Covariance methods are ranked on the ``||M - Sigma||_op`` their theorems bound, PCA
        methods on ``sin^2`` to the top eigenvector.
    gap : float, optional
        Relative eigengap ``(lambda_1 - lambda_2) / lambda_1``, required for ``"pca"``; the
        absolute one is taken as ``gap * sigma**2`` (``lambda_1 = sigma**2``).
    radius : float, optional
        Public bound on the rows' L2 norms (only methods that clip rows to it use it).
    target : float, optional
        Error target relative to the scale (``||M - Sigma||_op <= target * sigma**2``, or
        ``sin^2 <= target``): each row then says whether the bound meets it at this n and the
        least n at which it would (``theorem_n``).

    Returns
    -------
    Comparison
        One :class:`MethodRow` per registered estimator (:data:`CANDIDATES`), the best
        private method's name and the reason in words. The rule (:data:`RULE`): applicable
        private methods only (NOT PRIVATE baselines are listed and marked, never chosen;
        a method whose plan or pre-fit checks refuse the question is listed with the
        refusal); non-vacuous plans before vacuous ones, vacuous bounds before unmet
        conditions; then the smallest predicted error; ties go to the smaller measured n* at
        this d, then to the first registered.

    Notes
    -----
    Only public parameters enter: the question and each estimator's ``plan()``, which reads no
    data. The choice therefore reveals nothing about the data and costs no privacy budget.
    The predicted errors are theorem bounds (conservative, with the estimators' own
    constants); the measured n* hold for the instance family, target and budget they were
    measured on, shown with each, and break ties only.
    """
    task = check_choice(task, "task", TASKS)
    q = Question(task, check_int(n_samples, "n_samples", low=2), check_int(n_features, "n_features", low=2),
                 check_int(k, "k", low=1), check_positive(epsilon, "epsilon"), check_positive(delta, "delta"),
                 check_positive(sigma, "sigma"), check_positive(gap, "gap", allow_none=True),
                 check_positive(radius, "radius", allow_none=True), check_positive(target, "target", allow_none=True))
    if task == "pca" and gap is None:
        raise ValidationError("task='pca' needs gap (the relative eigengap of the model)")
    if not q.delta < 1:
        raise ValidationError(f"delta must be in (0, 1), got {delta!r}")
    cands = [c for c in CANDIDATES if c.task == task]
    rows = [_row(c, q) for c in cands]
    best, reason, ranked = _choose(rows, q)
    rank = {r.name: i + 1 for i, r in enumerate(ranked)}
    rows = [dataclasses.replace(r, rank=rank.get(r.name), best=r.name == best) for r in rows]
    rows.sort(key=lambda r: (r.rank is None, r.rank or 0, r.private is not False, not r.applicable))
    return Comparison(q, TASKS[task]["metric"], tuple(rows), best, reason)
