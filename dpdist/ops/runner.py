"""Run a job file against a ledger: plan (a dry run), and run.

:func:`plan_job` reads no data: the data's shape comes from the job file or the store's
metadata, and it prints what the job would spend and what it would leave.

:func:`run_job` is the whole life of a scheduled release::

    validate the job and the estimator's parameters (plan(), metadata only)   -> exit 2
    with require_useful = true: refuse a plan that says rejected or vacuous   -> exit 2
    check the output location is free                                         -> exit 2
    reserve the cost in the ledger                                            -> exit 3
    open the runtime: connect to / start the cluster                          -> exit 5, refunded
    mark running; fit (reads the data, draws the noise)                       -> 4 committed / 5
                                                  (a refusal during the pass: 2, committed as spent)
    stage the result on local disk, checksum it; prepare it at the target
    commit the ledger entry with the output location and checksum (one transaction)
    publish the result (a rename, or the object store's commit marker)

so a result is never readable before its ledger entry is committed
(:mod:`dpdist.data.publish`), and a failure before the running stage spends nothing. A
release that is not private (``private`` False in its metadata) is neither published nor
committed as a release unless the job sets ``[output] publish_not_private = true``: it ends
as "no private result" (exit 4) with the reservation counted as spent.

The direct commands (``dpdist covariance``, ``pca``, ``norm``, ``second-moment``) go through
the same :func:`charged_release` when a ledger is pinned (``--ledger`` or ``DPDIST_LEDGER``);
:func:`command_ledger` decides, before anything is read, whether a command charges a ledger,
is refused, or runs unrecorded (and what its release records about that).
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass
from typing import Any, Callable, ContextManager

import dask

from dpdist.data.publish import check_target, stage_result
from dpdist.exceptions import BudgetExceeded, InfrastructureError, NoPrivateResult, ValidationError
from dpdist.ops.cluster import scheduler_for
from dpdist.ops.composition import cost_to_dict, epsilon_at, within
from dpdist.ops.job import Job
from dpdist.ops.ledger import (
    LEDGER_ENV,
    Entry,
    Ledger,
    SQLiteLedger,
    canonical_dataset,
    default_ledger_path,
    open_ledger,
    pinned_ledger_url,
    redact_url,
    resolve_ledger_url,
)
from dpdist.privacy.budget import ApproxDP
from dpdist.privacy.zcdp import ZCDP, Guarantee

__all__ = ["Charged", "charged_release", "command_ledger", "estimator_cost", "job_ledger", "plan_job", "run_job"]


def estimator_cost(est: Any, *, allow_not_private: bool = False) -> Guarantee:
    """The guarantee an estimator's parameters declare (reserved before reading data): its
    ``privacy_cost()`` (:mod:`dpdist.algorithms._base`; e.g. ``(2 eps, 4 e^eps delta)`` for the
    subsample-and-aggregate baseline, MS25 Lemma A.4). :func:`charged_release` checks after the
    fit that the release spent no more than this.

    An estimator whose release would not be private (NOT PRIVATE, seeded noise,
    ``unsafe_no_privacy``) is refused, unless ``allow_not_private`` (a job's
    ``publish_not_private``) and it still declares a cost.
    """
    if not allow_not_private:
        if getattr(est, "unsafe_no_privacy", False):
            raise ValidationError("a release charged to a ledger may not run with unsafe_no_privacy=True "
                                  "(the result would be NOT PRIVATE)")
        if getattr(est, "random_state", None) is not None:
            raise ValidationError("a release charged to a ledger may not seed its noise (random_state): a seeded "
                                  "release is NOT PRIVATE")
    cost = est.privacy_cost()
    if cost is None:
        raise ValidationError(f"{type(est).__name__} declares no privacy cost (it is NOT PRIVATE): it cannot be "
                              "charged to a ledger")
    return cost


def job_ledger(job: Job, flag: str | None = None) -> tuple[Ledger, str]:
    """Open the job's ledger (flag, job file, ``DPDIST_LEDGER``, default) and say which."""
    url, source = resolve_ledger_url(flag, job.ledger)
    return open_ledger(url), source


def _data(job: Job) -> Any:
    """What the estimator is given: the dataset URL, or, with ``columns``, the validated array
    of those columns (the ledger keeps the budget under the URL either way)."""
    if job.columns is None:
        return job.dataset_url
    from dpdist.data.validation import as_dask_array

    return as_dask_array(job.dataset_url, columns=list(job.columns))


def _shape(job: Job) -> tuple[int, int]:
    if job.n_samples is not None and job.n_features is not None:
        return job.n_samples, job.n_features
    from dpdist.data.validation import as_dask_array

    try:
        n, d = as_dask_array(job.dataset_url, columns=None if job.columns is None else list(job.columns)).shape
    except (OSError, TimeoutError) as exc:
        raise InfrastructureError(f"cannot read the metadata of {job.dataset_url!r}: {exc}") from None
    return int(n), int(d)


def _plan(job: Job, est: Any, n: int, d: int) -> dict:
    """The estimator's :class:`~dpdist.algorithms.plan.Plan` (validates its parameters and the
    shape; reads no data), as JSON-compatible values."""
    try:
        plan = est.plan(n, d, **dict(job.plan_args))
    except TypeError as exc:
        raise ValidationError(f"job file {job.source}: estimator.plan: {exc}") from None
    return plan.to_dict()


def _predicted(plan: dict) -> dict | None:
    """The plan's predicted error (every plan has the same fields), or None when it predicts none."""
    if plan.get("error_bound") is None:
        return None
    return {"value": plan["error_bound"], "metric": plan["error_metric"], "plan_key": "error_bound",
            "scale": plan["error_scale"], "vacuous": plan["vacuous"], "vacuous_reason": plan["vacuous_reason"]}


def _cost_summary(cost: Guarantee, delta: float | None) -> dict:
    out = {"cost": cost_to_dict(cost)}
    if isinstance(cost, ZCDP) and delta:
        out["epsilon_at_delta"] = {"delta": delta, "epsilon": epsilon_at(cost, delta), "conversion": "CKS20"}
    return out


def _prepare(job: Job) -> tuple[Any, Guarantee, tuple[int, int], dict]:
    est = job.build_estimator()
    cost = estimator_cost(est, allow_not_private=job.publish_not_private)
    n, d = _shape(job)
    try:
        plan = _plan(job, est, n, d)
    except ValidationError as exc:
        raise ValidationError(f"job file {job.source}: estimator {job.estimator}: {exc}") from None
    return est, cost, (n, d), plan


def plan_job(job: Job, *, ledger: Ledger | None = None) -> dict:
    """The dry run of ``job``: cost, cost at the dataset's delta, budget before and after,
    predicted error and the estimator's full plan. Reads no data and changes no ledger."""
    _, cost, (n, d), plan = _prepare(job)
    dataset = canonical_dataset(job.dataset_url)
    out: dict = {
        "job": job.name,
        "dataset": dataset,
        "dataset_name": job.dataset_name,
        "estimator": job.estimator,
        "shape": [n, d],
        "events": [cost_to_dict(cost)],  # the cost as one event; typed mechanism events are finer
    }
    total = ledger.total(dataset) if ledger is not None else None
    delta = float(total.delta) if isinstance(total, ApproxDP) else None
    out.update(_cost_summary(cost, delta))
    if ledger is None:
        out["budget"] = None
    elif total is None:
        out["budget"] = {"total": None, "note": f"no budget set for {dataset}; the run would be refused"}
    else:
        before = ledger.remaining(dataset)
        after = ledger.remaining(dataset, extra=cost)
        out["budget"] = {
            "total": cost_to_dict(total),
            "remaining_before": before.remaining(),
            "remaining_after": after.remaining() if after.fits else None,
            "fits": after.fits,
            "open_reservations": len(ledger.open_reservations(dataset)),
        }
        if not after.fits:
            out["budget"]["reason"] = after.reason
    out["predicted_error"] = _predicted(plan)
    out["plan"] = plan
    return out


@dataclass
class Charged:
    """What :func:`charged_release` did: the fitted estimator, the metadata it published, the
    committed ledger entry, the output's location and checksum."""

    estimator: Any
    metadata: dict
    entry: Entry
    output: str
    checksum: str


def charged_release(
    ledger: Ledger,
    *,
    dataset: str,
    cost: Guarantee,
    job: str,
    target: str,
    overwrite: bool,
    runtime: Callable[[], ContextManager[Any]],
    build: Callable[[Any], Any],
    data: Any,
    annotate: Callable[[Any], dict],
    extra_values: Callable[[Any], dict] | None = None,
    publish_not_private: bool = False,
) -> Charged:
    """Reserve ``cost`` on ``dataset``, fit, and publish the release at ``target`` only after
    committing the ledger entry with the output's location and checksum (see the module
    docstring); the life shared by ``dpdist run`` and the direct commands.

    ``runtime()`` opens where the fit runs (entered after the reservation) and yields what
    ``build(runtime)`` needs to make the estimator; ``data`` is what ``fit`` reads;
    ``annotate(reservation)`` returns fields added to the published metadata;
    ``extra_values(estimator)`` values added to the published ones.

    Raises
    ------
    ValidationError (2), BudgetExceeded (3), NoPrivateResult (4), InfrastructureError (5)
        After resolving the reservation as described in :meth:`Ledger.charge`. A release that
        is not private, unless ``publish_not_private``, is a NoPrivateResult: nothing is
        published and the reservation counts as spent.
    """
    with ledger.charge(dataset, cost, job=job, output=target, unspent_until_running=True) as reservation:
        with runtime() as where:  # e.g. the fit's Runtime: its deadline bounds the whole fit
            est = build(where)
            try:
                # fit against the reservation: checks the parameters, the shape and the reserved
                # cost, marks the reservation running, fits, and commits a refusal during the pass
                # (it depends on the data, e.g. on_nonfinite="raise": one bit) as spent; success
                # leaves the reservation open, to be committed below with the output's checksum
                est.fit(data, reservation=reservation)
            except (ValidationError, NoPrivateResult, InfrastructureError):
                raise
            except (OSError, TimeoutError) as exc:  # storage or network during the pass
                raise InfrastructureError(f"{type(exc).__name__} during the fit: {exc}", noise_drawn=True) from None
        rel = est.release_
        if not within(rel.privacy, cost):  # a bug: never publish what the ledger did not reserve
            raise RuntimeError(f"the release states {rel.privacy!r}, more than the reserved {cost!r}; "
                               "nothing was published and the reservation counts as spent")
        if not rel.private and not publish_not_private:
            reasons = "; ".join(rel.not_private_reasons) or "NOT PRIVATE"
            raise NoPrivateResult(f"the release is not private ({reasons}); nothing was published and the "
                                  "reservation counts as spent", stage="publish", release=rel)
        meta = rel.metadata()
        meta.update(annotate(reservation))
        values = dict(rel.values)
        for key, value in (extra_values(est) if extra_values is not None else {}).items():
            values.setdefault(key, value)
        staged = None
        try:
            staged = stage_result(target, meta, values, overwrite=overwrite)
            staged.prepare()
            entry = reservation.commit(output=target, checksum=staged.checksum)  # with the events the fit recorded
        except BaseException as exc:
            if staged is not None:
                staged.discard()
            if reservation.open:  # noise was drawn: whatever failed, the budget is spent
                reservation.commit(outcome="failed-counted-as-spent", note=f"{type(exc).__name__}: {exc}"[:500])
            if isinstance(exc, (OSError, ValidationError)):  # the output location failed after the fit
                raise InfrastructureError(
                    f"writing the result to {target!r} failed after the fit ({type(exc).__name__}: {exc}); nothing "
                    "was published; noise had been drawn: the budget counts as spent", noise_drawn=True) from None
            raise
        staged.publish()
    return Charged(est, meta, entry, target, staged.checksum)


def run_job(job: Job, *, ledger: Ledger, run: str | None = None) -> dict:
    """Execute ``job`` (see the module docstring); returns what happened.

    Raises
    ------
    ValidationError (2), BudgetExceeded (3), NoPrivateResult (4), InfrastructureError (5)
        After resolving the reservation as described in :meth:`Ledger.charge`.
    """
    run = run or uuid.uuid4().hex[:12]
    est, cost, _, plan = _prepare(job)
    if est._requires_useful() and plan["vacuous"]:  # the plan is public: refused before any reservation
        raise ValidationError(f"job file {job.source}: require_useful = true and the plan says the release would be "
                              f"rejected or vacuous ({plan['vacuous_reason']}); nothing was read, reserved or spent")
    dataset = canonical_dataset(job.dataset_url)
    target = check_target(job.output_for(run), overwrite=job.overwrite)
    predicted = _predicted(plan)

    def annotate(reservation) -> dict:
        return {"job": {
            "name": job.name, "run": run, "dataset": dataset, "dataset_name": job.dataset_name,
            "reservation": reservation.id, "ledger_backend": type(ledger).__name__,
            "host": socket.gethostname(), "predicted_error": predicted,
            **({"published_not_private": True} if job.publish_not_private else {}),
        }}

    with dask.config.set(job.runtime_config()):  # [scheduler].timeout bounds the fit
        done = charged_release(
            ledger, dataset=dataset, cost=cost, job=job.name, target=target, overwrite=job.overwrite,
            runtime=lambda: scheduler_for(job), build=job.build_estimator, data=_data(job), annotate=annotate,
            publish_not_private=job.publish_not_private,
        )
    remaining = ledger.remaining(dataset).remaining()
    return {
        "status": "released", "exit_code": 0, "job": job.name, "run": run, "dataset": dataset,
        "reservation": done.entry.id, "output": target, "checksum": done.checksum,
        **_cost_summary(cost, None), "remaining": remaining, "predicted_error": predicted,
        "mechanism": done.metadata.get("mechanism"), "private": done.metadata.get("private"),
    }


def command_ledger(flag: str | None, no_ledger: bool, dataset: str) -> tuple[Ledger | None, dict]:
    """For a direct command on ``dataset``: the ledger it charges (None: it runs unrecorded)
    and what its release records about the ledger (``metadata["ledger"]``). Opens nothing
    but ledgers and reads no data.

    - ``--ledger`` or ``DPDIST_LEDGER`` pins a ledger: the command charges it, as ``dpdist run``
      does (a dataset without a budget there is refused with exit 3).
    - ``--no-ledger``: runs unrecorded, and the release says it was told so. Refused (exit 2)
      together with a pinned ledger: the operator's pin is not the command's to drop.
    - neither: runs unrecorded unless the default ledger holds a budget for ``dataset``; then
      it is refused (exit 3), naming both ways out.
    """
    pinned = pinned_ledger_url(flag)
    if no_ledger:
        if pinned is not None:
            url, source = pinned
            raise ValidationError(f"--no-ledger contradicts {source} ({redact_url(url)!r}), which pins the ledger "
                                  f"every release is charged to" + (f"; unset {LEDGER_ENV} to run unrecorded"
                                                                    if source == LEDGER_ENV else ""))
        return None, {"recorded": False, "reason": "--no-ledger: the run was told not to use a ledger"}
    if pinned is not None:
        url, source = pinned
        ledger = open_ledger(url)
        return ledger, {"recorded": True, "ledger": describe_ledger(ledger), "source": source}
    default = default_ledger_path()
    if os.path.exists(default):  # never created here
        with SQLiteLedger(default) as led:
            total = led.total(dataset)
        if total is not None:
            raise BudgetExceeded(
                f"dataset {canonical_dataset(dataset)!r} has a privacy budget in the default ledger {default!r}, "
                f"and no ledger is configured: pass --ledger {default} (or set {LEDGER_ENV}) to charge this run to "
                "it, or --no-ledger to run without recording it (the release records that); nothing was read or "
                "spent")
    return None, {"recorded": False, "reason": f"no ledger configured (--ledger, {LEDGER_ENV}) and no budget for "
                                               "this dataset in the default ledger"}


def describe_ledger(ledger: Ledger) -> str:
    """The ledger's location for messages (password masked)."""
    return redact_url(getattr(ledger, "url", "?"))

