"""Job files: validated into a frozen Job; every error names the file and the field."""

from __future__ import annotations

import dataclasses

import pytest

from dpdist.exceptions import ValidationError
from dpdist.ops.job import job_from_dict, load_job
from tests.ops.conftest import job_toml


def _doc(**over):
    doc = {
        "name": "weekly",
        "dataset": {"url": "/data/x.zarr"},
        "estimator": {"name": "SparseCovariance", "params": {"k": 2, "epsilon": 0.5, "delta": 1e-7, "sigma": 1.0}},
        "output": {"url": "/out/x-{date}.zarr"},
    }
    for key, value in over.items():
        if value is None:
            doc.pop(key)
        else:
            doc[key] = value
    return doc


def test_job_file_loads_into_a_frozen_job(tmp_path):
    path = tmp_path / "weekly.toml"
    path.write_text(job_toml("/data/x.zarr", "/out/{job}-{run}.zarr", extra="timeout = 30\n"))
    job = load_job(path)
    assert (job.name, job.estimator, job.scheduler, job.timeout) == ("tiny-job", "SparseCovariance", "synchronous", 30.0)
    assert dict(job.params) == {"k": 2, "epsilon": 0.1, "delta": 1e-8, "sigma": 1.0}
    assert job.output_for("abc") == "/out/tiny-job-abc.zarr"
    with pytest.raises(dataclasses.FrozenInstanceError):
        job.name = "other"
    with pytest.raises(TypeError):
        job.params["k"] = 5


def test_a_job_may_run_sparse_covariance_pca():
    job = job_from_dict(_doc(estimator={"name": "SparseCovariancePCA",
                                        "params": {"k": 3, "epsilon": 1.0, "delta": 1e-6, "sigma": 1.5}}), "j.toml")
    assert job.estimator == "SparseCovariancePCA" and dict(job.params)["k"] == 3


@pytest.mark.parametrize("doc, field", [
    (_doc(dataset=None), r"\[dataset\]: missing"),
    (_doc(dataset={"path": "/x"}), r"\[dataset\] path: unknown field"),
    (_doc(extra=1), "extra: unknown top-level field"),
    (_doc(estimator={"name": "ThresholdedCovariance"}), "estimator.name: must be one of"),
    (_doc(estimator={"name": "SparseCovariance", "params": {"k": 2, "epsilon": 1.0, "delta": 1e-7, "kk": 1}}),
     "estimator.params.kk: SparseCovariance has no parameter 'kk'"),
    (_doc(estimator={"name": "SparseCovariance", "params": {"k": 2, "epsilon": 1.0}}),
     "estimator.params.delta: missing"),
    (_doc(estimator={"name": "SparseCovariance", "params": {"k": 2, "epsilon": 1.0, "delta": 1e-7,
                                                            "scheduler": "threads"}}),
     r"estimator.params.scheduler: is set by the job's \[scheduler\]"),
    (_doc(estimator={"name": "SubsampleAggregateSecondMoment",
                     "params": {"epsilon": 1.0, "delta": 1e-7, "m": 5, "unsafe_no_privacy": True}}),
     "estimator.params.unsafe_no_privacy"),
    (_doc(output={"url": "/out/{when}.zarr"}), "output.url: unknown placeholder"),
    (_doc(output={"url": "/out/x.zarr", "overwrite": "yes"}), "output.overwrite: must be true or false"),
    (_doc(scheduler={"address": "tcp://h:1", "timeout": -1}), "scheduler.timeout: must be a number"),
    (_doc(scheduler={"address": "tcp://h:1"}, cluster={"kind": "slurm"}), "cluster: give either"),
    (_doc(scheduler={"address": "tpc://h:1"}), "scheduler.address: scheduler 'tpc://h:1' is not a dask scheduler "
                                               "address: unknown scheme 'tpc://'"),
    (_doc(cluster={"kind": "pbs"}), "cluster.kind: must be one of"),
    (_doc(cluster={"kind": "slurm", "jobs": 0}), "cluster.jobs: must be an integer >= 1"),
    (_doc(name="two words"), "name: must be letters"),
    (_doc(dataset={"url": "${DPDIST_TEST_UNSET_VAR}/x.zarr"}), "dataset.url: environment variable "
                                                                 "DPDIST_TEST_UNSET_VAR is not set"),
])
def test_invalid_fields_are_named(doc, field):
    with pytest.raises(ValidationError, match=f"job file j.toml: {field}"):
        job_from_dict(doc, "j.toml")


@pytest.mark.parametrize("old, new", [("WangXuCovariance", "GaussianCovariance"), ("WangXuPCA", "GaussianPCA")])
def test_a_removed_estimator_name_is_refused_naming_its_replacement(old, new):
    params = {"epsilon": 0.5, "delta": 1e-7, "sigma": 1.0}
    with pytest.raises(ValidationError, match=f"job file j.toml: estimator.name: '{old}' was renamed: "
                                              f'write name = "{new}"'):
        job_from_dict(_doc(estimator={"name": old, "params": params}), "j.toml")
    job = job_from_dict(_doc(estimator={"name": new, "params": params}), "j.toml")
    assert job.estimator == new and job.estimator_class.__name__ == new


def test_environment_expansion(monkeypatch):
    monkeypatch.setenv("DPDIST_TEST_DATA", "/mnt/data")
    job = job_from_dict(_doc(dataset={"url": "${DPDIST_TEST_DATA}/x.zarr"},
                             output={"url": "${DPDIST_TEST_OUT:-/tmp}/r.zarr"}), "j.toml")
    assert (job.dataset_url, job.output_url) == ("/mnt/data/x.zarr", "/tmp/r.zarr")


def test_unreadable_job_files(tmp_path):
    with pytest.raises(ValidationError, match="does not exist"):
        load_job(tmp_path / "none.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("name = \n")
    with pytest.raises(ValidationError, match="not valid TOML"):
        load_job(bad)
