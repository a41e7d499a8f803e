"""Job files: one TOML file declares a scheduled private release.

A job names the dataset, the ledger that holds its budget, the estimator and its
parameters, where the result goes, and where the computation runs::

    name = "weekly-claims-covariance"

    [dataset]
    url = "s3://warehouse/claims.zarr"   # a Zarr array (or a dpdist dataset group with X), or a
                                         # .parquet / .csv / .npy file (dpdist.data.formats)
    name = "claims"                      # optional label; the URL identifies the budget
    # columns = ["age", "income"]        # optional: the columns of a Parquet or CSV file to read
    # n_samples = 10_000_000             # optional: lets `dpdist plan` skip the store's metadata
    # n_features = 64

    [ledger]                             # optional: --ledger and DPDIST_LEDGER win (a different
                                         # ledger here is refused); else the default path
    url = "postgresql://dpdist@ledger-db/dpdist"

    [estimator]
    name = "SparseCovariance"            # see ESTIMATORS
    [estimator.params]                   # keyword arguments of the estimator
    k = 3
    epsilon = 0.5
    delta = 1e-7
    sigma = 1.0
    # require_useful = true              # (SpectralNorm, SparsePCA) refuse, exit 2, before reading
    #                                    # data when the plan predicts a rejected or vacuous release
    [estimator.plan]                     # optional extra arguments of plan() (guesses)

    [output]
    url = "s3://warehouse/releases/claims-{date}.zarr"  # {job} {date} {datetime} {run}
    overwrite = false
    # publish_not_private = true         # tests only: allows random_state (seeded noise) and
                                         # unsafe_no_privacy, and publishes NOT PRIVATE releases

    [scheduler]                          # optional; default: dask's local threads
    address = "tcp://dask-scheduler:8786"  # or "local-cluster", "threads", "synchronous"
    timeout = 3600                       # seconds to wait for the cluster / the computation

    # or, instead of [scheduler].address, a cluster the job starts and stops itself:
    [cluster]
    kind = "slurm"                       # "slurm" (dask-jobqueue SLURMCluster) or "local"
    jobs = 4                             # SLURM jobs (each runs `processes` workers)
    [cluster.options]                    # SLURMCluster keyword arguments
    queue = "compute"
    cores = 8
    memory = "32GiB"
    walltime = "02:00:00"

Strings may use ``${VAR}`` or ``${VAR:-default}`` to read the environment (for paths that
differ between hosts; keep secrets out of job files: they are read by libpq and botocore from
their own environment variables). :func:`load_job` validates everything that can be checked
without the data into a frozen :class:`Job`; every error names the file and the field.
"""

from __future__ import annotations

import datetime as _dt
import importlib
import inspect
import math
import numbers
import os
import re
import tomllib
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from dpdist.exceptions import ValidationError

__all__ = ["CLUSTER_KINDS", "ESTIMATORS", "ClusterSpec", "Job", "job_from_dict", "load_job"]

#: Estimators a job may run (the private ones: a job spends a ledger's budget). What each
#: predicts is in its plan(): every plan has ``error_bound`` and ``error_metric``.
ESTIMATORS: dict[str, str] = {
    "SparseCovariance": "dpdist.algorithms.sparse_covariance:SparseCovariance",
    "SparseCovariancePCA": "dpdist.algorithms.sparse_covariance_pca:SparseCovariancePCA",
    "SecondMoment": "dpdist.algorithms.second_moment:SecondMoment",
    "SparsePCA": "dpdist.algorithms.sparse_pca:SparsePCA",
    "SpectralNorm": "dpdist.algorithms.sparse_pca:SpectralNorm",
    "ExpMechSparsePCA": "dpdist.algorithms.expmech_pca:ExpMechSparsePCA",
    "GaussianCovariance": "dpdist.baselines:GaussianCovariance",
    "GaussianPCA": "dpdist.baselines:GaussianPCA",
    "AnalyzeGauss": "dpdist.baselines:AnalyzeGauss",
    "SubsampleAggregateSecondMoment": "dpdist.baselines:SubsampleAggregateSecondMoment",
}

#: Estimator names that earlier job files used, and the name that replaced each: such a job is
#: refused with the new name rather than run under a name the package no longer has.
RENAMED_ESTIMATORS = {"WangXuCovariance": "GaussianCovariance", "WangXuPCA": "GaussianPCA"}

CLUSTER_KINDS = ("slurm", "local")
#: Estimator parameters a job file may not set (the job's own sections set them).
RESERVED_PARAMS = ("scheduler", "progress", "timeout", "ledger", "dataset")
#: Estimator parameters that make a release NOT PRIVATE (seeded noise: the same release every
#: run; no privacy precondition). A job file may set them only with
#: ``[output] publish_not_private = true``.
NOT_PRIVATE_PARAMS = ("random_state", "unsafe_no_privacy")

_TOP = {"name", "dataset", "ledger", "estimator", "output", "scheduler", "cluster"}
_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def _err(where: str, field_: str, message: str) -> ValidationError:
    return ValidationError(f"job file {where}: {field_}: {message}")


@dataclass(frozen=True)
class ClusterSpec:
    """A cluster the job starts for itself: ``kind`` (``slurm`` or ``local``), the number of
    ``jobs`` (SLURM jobs, or local workers) and the cluster class's keyword ``options``."""

    kind: str
    jobs: int = 1
    options: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True)
class Job:
    """A validated job file (frozen). Build with :func:`load_job`."""

    name: str
    source: str
    dataset_url: str
    estimator: str
    params: Mapping[str, Any]
    output_url: str
    dataset_name: str | None = None
    columns: tuple[str, ...] | None = None
    n_samples: int | None = None
    n_features: int | None = None
    ledger: str | None = None
    plan_args: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    overwrite: bool = False
    publish_not_private: bool = False
    scheduler: str | None = None
    timeout: float | None = None
    cluster: ClusterSpec | None = None

    @property
    def estimator_class(self) -> type:
        module, _, name = ESTIMATORS[self.estimator].partition(":")
        return getattr(importlib.import_module(module), name)

    def output_for(self, run: str, now: _dt.datetime | None = None) -> str:
        """The output URL with ``{job}``, ``{date}``, ``{datetime}`` and ``{run}`` filled in."""
        now = now or _dt.datetime.now(_dt.timezone.utc)
        return self.output_url.format(job=self.name, date=now.strftime("%Y%m%d"),
                                      datetime=now.strftime("%Y%m%dT%H%M%SZ"), run=run)

    def build_estimator(self, scheduler: Any = None) -> Any:
        """The estimator with the job's parameters (validated by the estimator in plan/fit). Its
        time limit is not a parameter: the runner sets ``[scheduler].timeout`` as the dask
        configuration key ``dpdist.timeout`` around the fit (:meth:`runtime_config`)."""
        cls = self.estimator_class
        kwargs = dict(self.params)
        if "scheduler" in inspect.signature(cls.__init__).parameters:
            kwargs["scheduler"] = scheduler
        return cls(**kwargs)

    def runtime_config(self) -> dict:
        """The dask configuration the job's fit runs under: ``dpdist.timeout`` from
        ``[scheduler].timeout`` (when given) and no library progress bar (a job logs, it draws
        nothing)."""
        config: dict = {"dpdist.progress": False}
        if self.timeout is not None:
            config["dpdist.timeout"] = self.timeout
        return config


def _expand(value: Any, where: str, field_: str) -> Any:
    if isinstance(value, str):
        def sub(m: re.Match) -> str:
            var, default = m.group(1), m.group(2)
            if var in os.environ:
                return os.environ[var]
            if default is not None:
                return default
            raise _err(where, field_, f"environment variable {var} is not set (write ${{{var}:-default}} "
                                      "for a default)")

        return _ENV.sub(sub, value)
    if isinstance(value, dict):
        return {k: _expand(v, where, f"{field_}.{k}" if field_ else k) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v, where, f"{field_}[{i}]") for i, v in enumerate(value)]
    return value


def _table(doc: dict, key: str, where: str, *, required: bool, allowed: set[str]) -> dict:
    value = doc.get(key)
    if value is None:
        if required:
            raise _err(where, f"[{key}]", "missing (required)")
        return {}
    if not isinstance(value, dict):
        raise _err(where, key, f"must be a table ([{key}]), got {type(value).__name__}")
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise _err(where, f"[{key}] {unknown[0]}", f"unknown field (allowed: {', '.join(sorted(allowed))})")
    return value


def _string(table: dict, key: str, where: str, prefix: str, *, required: bool = False) -> str | None:
    value = table.get(key)
    if value is None:
        if required:
            raise _err(where, f"{prefix}.{key}", "missing (required)")
        return None
    if not isinstance(value, str) or not value.strip():
        raise _err(where, f"{prefix}.{key}", f"must be a non-empty string, got {value!r}")
    return value


def _count(table: dict, key: str, where: str, prefix: str, low: int = 1) -> int | None:
    value = table.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise _err(where, f"{prefix}.{key}", f"must be an integer >= {low}, got {value!r}")
    return value


def _check_param(value: Any, where: str, field_: str) -> Any:
    # the estimators refuse strings for numbers and bools for counts; TOML keeps the types
    if isinstance(value, float) and not math.isfinite(value):
        raise _err(where, field_, f"must be finite, got {value!r}")
    if isinstance(value, (dict, list)):
        raise _err(where, field_, f"must be a number, string or boolean, got {type(value).__name__}")
    return value


def job_from_dict(doc: dict, source: str = "<dict>") -> Job:
    """Validate a parsed job document (the TOML's tables) into a :class:`Job`."""
    where = source
    unknown = sorted(set(doc) - _TOP)
    if unknown:
        raise _err(where, unknown[0], f"unknown top-level field (allowed: {', '.join(sorted(_TOP))})")
    doc = _expand(doc, where, "")
    name = doc.get("name")
    if name is None:
        name = os.path.splitext(os.path.basename(source))[0] or "job"
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.@-]+", name):
        raise _err(where, "name", f"must be letters, digits, '_', '-', '.', '@', got {name!r}")

    ds = _table(doc, "dataset", where, required=True,
                allowed={"url", "name", "columns", "n_samples", "n_features"})
    dataset_url = _string(ds, "url", where, "dataset", required=True)
    dataset_name = _string(ds, "name", where, "dataset")
    columns = ds.get("columns")
    if columns is not None:
        if (not isinstance(columns, list) or not columns
                or not all(isinstance(c, str) and c.strip() for c in columns)):
            raise _err(where, "dataset.columns", f"must be a non-empty list of column names, got {columns!r}")
        columns = tuple(columns)
    n_samples = _count(ds, "n_samples", where, "dataset", low=2)
    n_features = _count(ds, "n_features", where, "dataset", low=2)

    led = _table(doc, "ledger", where, required=False, allowed={"url"})
    ledger = _string(led, "url", where, "ledger")

    est = _table(doc, "estimator", where, required=True, allowed={"name", "params", "plan"})
    est_name = _string(est, "name", where, "estimator", required=True)
    if est_name in RENAMED_ESTIMATORS:
        raise _err(where, "estimator.name", f"{est_name!r} was renamed: write name = "
                                            f"\"{RENAMED_ESTIMATORS[est_name]}\"")
    if est_name not in ESTIMATORS:
        raise _err(where, "estimator.name", f"must be one of {', '.join(ESTIMATORS)}, got {est_name!r} (a job "
                                            "spends a ledger's budget, so only private estimators run as jobs)")
    params = est.get("params", {})
    if not isinstance(params, dict):
        raise _err(where, "estimator.params", "must be a table")
    module, _, cls_name = ESTIMATORS[est_name].partition(":")
    accepted = inspect.signature(getattr(importlib.import_module(module), cls_name).__init__).parameters
    for key, value in params.items():
        if key in RESERVED_PARAMS:
            raise _err(where, f"estimator.params.{key}", "is set by the job's [scheduler]/[cluster] tables, "
                                                         "not as a parameter")
        if key not in accepted or key == "self":
            raise _err(where, f"estimator.params.{key}",
                       f"{est_name} has no parameter {key!r} (parameters: "
                       f"{', '.join(p for p in accepted if p not in ('self',) + RESERVED_PARAMS)})")
        _check_param(value, where, f"estimator.params.{key}")
    missing = [p.name for p in accepted.values()
               if p.name != "self" and p.default is inspect.Parameter.empty and p.name not in params
               and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    if missing:
        raise _err(where, f"estimator.params.{missing[0]}", f"missing (required by {est_name})")
    plan_args = est.get("plan", {})
    if not isinstance(plan_args, dict):
        raise _err(where, "estimator.plan", "must be a table")
    for key, value in plan_args.items():
        _check_param(value, where, f"estimator.plan.{key}")

    out = _table(doc, "output", where, required=True, allowed={"url", "overwrite", "publish_not_private"})
    output_url = _string(out, "url", where, "output", required=True)
    try:
        output_url.format(job="j", date="d", datetime="t", run="r")
    except (KeyError, IndexError, ValueError) as exc:
        raise _err(where, "output.url", f"unknown placeholder {exc} (allowed: {{job}} {{date}} {{datetime}} "
                                        "{run})") from None
    overwrite = out.get("overwrite", False)
    if not isinstance(overwrite, bool):
        raise _err(where, "output.overwrite", f"must be true or false, got {overwrite!r}")
    publish_not_private = out.get("publish_not_private", False)
    if not isinstance(publish_not_private, bool):
        raise _err(where, "output.publish_not_private", f"must be true or false, got {publish_not_private!r}")
    if not publish_not_private:
        for key in NOT_PRIVATE_PARAMS:
            if key in params and params[key] is not False:  # random_state = 0 seeds too
                raise _err(where, f"estimator.params.{key}",
                           "makes the release NOT PRIVATE (" + ("seeded noise gives the same release every run"
                           if key == "random_state" else "the mechanism's privacy precondition is not checked")
                           + "); a job spends a ledger's budget on private releases only (a test job that "
                           "means it sets [output] publish_not_private = true)")

    sch = _table(doc, "scheduler", where, required=False, allowed={"address", "timeout"})
    scheduler = _string(sch, "address", where, "scheduler")
    if scheduler is not None:
        from dpdist.engine.runtime import check_scheduler

        try:
            check_scheduler(scheduler)
        except ValidationError as exc:
            raise _err(where, "scheduler.address", str(exc)) from None
    timeout = sch.get("timeout")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, numbers.Real)
                                or not math.isfinite(timeout) or timeout <= 0):
        raise _err(where, "scheduler.timeout", f"must be a number of seconds > 0, got {timeout!r}")

    cluster = None
    cl = _table(doc, "cluster", where, required=False, allowed={"kind", "jobs", "options"})
    if cl:
        if scheduler is not None:
            raise _err(where, "cluster", "give either [scheduler].address or [cluster], not both")
        kind = _string(cl, "kind", where, "cluster", required=True)
        if kind not in CLUSTER_KINDS:
            raise _err(where, "cluster.kind", f"must be one of {CLUSTER_KINDS}, got {kind!r}")
        options = cl.get("options", {})
        if not isinstance(options, dict):
            raise _err(where, "cluster.options", "must be a table")
        cluster = ClusterSpec(kind, _count(cl, "jobs", where, "cluster") or 1, MappingProxyType(dict(options)))

    return Job(
        name=name, source=source, dataset_url=dataset_url, dataset_name=dataset_name, columns=columns,
        n_samples=n_samples, n_features=n_features, ledger=ledger, estimator=est_name,
        params=MappingProxyType(dict(params)),
        plan_args=MappingProxyType(dict(plan_args)), output_url=output_url, overwrite=overwrite,
        publish_not_private=publish_not_private,
        scheduler=scheduler, timeout=float(timeout) if timeout is not None else None, cluster=cluster,
    )


def load_job(path: str | os.PathLike) -> Job:
    """Read and validate the job file at ``path``.

    Raises
    ------
    ValidationError
        The file is missing, is not TOML, or a field is missing, unknown or invalid (the
        message names the file and the field).
    """
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except FileNotFoundError:
        raise ValidationError(f"job file {path}: does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValidationError(f"job file {path}: not valid TOML: {exc}") from None
    return job_from_dict(doc, source=path)
