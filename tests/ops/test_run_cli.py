"""`dpdist plan` and `dpdist run` on job files: exit codes, JSON, what reaches the ledger and disk."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np


import pytest

from dpdist.cli.main import main
from dpdist.data.publish import result_checksum
from dpdist.data.results import load_result
from dpdist.ops.ledger import open_ledger
from dpdist.privacy.budget import ApproxDP
from tests.ops.conftest import free_port, job_toml


def cli(capsys, *args):
    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def setup(tmp_path, tiny_dataset):
    ledger = str(tmp_path / "ledger.sqlite")
    out = tmp_path / "out"
    out.mkdir()

    def make(epsilon=0.1, **kw):
        job = tmp_path / f"job-{len(list(tmp_path.glob('job-*')))}.toml"
        job.write_text(job_toml(tiny_dataset, kw.pop("output", f"{out}/cov-{{run}}.zarr"), epsilon=epsilon,
                                ledger=ledger, **kw))
        return str(job)

    with open_ledger(ledger) as led:
        yield led, make, out, tiny_dataset


def test_scheduled_job_runs_until_the_budget_refuses(setup, capsys):
    """Releases at (0.4, 1e-8) on (1, 1e-6): by their stated costs two fit; the events the
    committed releases recorded compose (zCDP, converted once at the whole delta) to less, so
    four run before the fifth is refused."""
    led, make, out, ds = setup
    job = make(epsilon=0.4)
    assert cli(capsys, "budget", "set", ds, "--epsilon", "1.0", "--delta", "1e-6", "--name", "tiny",
               "--ledger", led.url)[0] == 0
    for i in range(4):
        code, text, err = cli(capsys, "run", job)
        assert code == 0, (i, err)
        assert "written" in text
    code, text, err = cli(capsys, "run", job, "--json")
    assert code == 3
    refused = json.loads(text)
    assert refused["status"] == "refused" and "exceed its budget" in refused["error"]["message"]
    assert refused["exit_code"] == 3 and refused["job"] == job
    assert len(os.listdir(out)) == 4
    code, hist, _ = cli(capsys, "budget", "history", "tiny", "--ledger", led.url)
    lines = hist.strip().splitlines()
    assert [line.split()[3] for line in lines[1:]] == ["budget-set"] + ["committed"] * 4 + ["refused"]
    code, text, _ = cli(capsys, "budget", "show", ds, "--json", "--ledger", led.url)
    status = json.loads(text)
    assert (status["committed"], status["refused"]) == (4, 1)
    assert status["spent"]["events_accounted_by"] == "zcdp-cks20"
    assert 0.0 < float(status["remaining"]["epsilon"]) < 0.4  # the fifth asked for more than is left
    code, text, _ = cli(capsys, "budget", "show", ds, "--ledger", led.url)
    assert "(the releases' events composed by the zcdp-cks20 rule at delta=1e-06)" in text
    code, text, _ = cli(capsys, "budget", "history", "tiny", "--json", "--ledger", led.url)
    committed = [e for e in json.loads(text) if e["state"] == "committed"]
    assert len(committed) == 4 and all([s["step"] for s in e["events"]] == ["mean", "PrivCov rows"] for e in committed)
    assert committed[0]["events"][0] == {"step": "mean", "type": "gaussian",
                                         "noise_multiplier": committed[0]["events"][0]["noise_multiplier"]}


def test_run_json_output_and_the_result_it_names(setup, capsys):
    led, make, out, ds = setup
    led.set_budget(ds, ApproxDP(1.0, 1e-6))
    code, text, err = cli(capsys, "run", make(), "--json")
    assert code == 0, err
    res = json.loads(text)
    assert res["status"] == "released" and res["exit_code"] == 0
    [entry] = [e for e in led.history(ds) if e.state == "committed"]
    assert (entry.id, entry.output, entry.checksum) == (res["reservation"], res["output"], res["checksum"])
    assert result_checksum(res["output"]) == res["checksum"]
    meta = load_result(res["output"]).metadata
    assert meta["job"]["reservation"] == entry.id and meta["job"]["predicted_error"]["plan_key"] == "error_bound"
    assert not [p for p in os.listdir(out) if p.startswith(".")]  # no staging left behind


def test_plan_reads_no_data_and_changes_no_ledger(setup, capsys, tmp_path):
    led, make, out, ds = setup
    # a copy of the store whose chunks are garbage: reading any value would fail
    meta_only = str(tmp_path / "meta-only.zarr")
    shutil.copytree(ds, meta_only)
    chunks = [os.path.join(b, f) for b, _, fs in os.walk(os.path.join(meta_only, "c")) for f in fs]
    assert chunks
    for path in chunks:
        with open(path, "wb") as f:
            f.write(b"not a chunk")
    led.set_budget(meta_only, ApproxDP(1.0, 1e-6))
    job = tmp_path / "plan.toml"
    job.write_text(job_toml(meta_only, f"{out}/x.zarr", epsilon=0.25, ledger=led.url))
    before = led.history(meta_only)
    code, text, err = cli(capsys, "plan", str(job), "--json")
    assert code == 0, err
    plan = json.loads(text)
    assert plan["shape"] == [2000, 6] and plan["events"] == [{"type": "approx-dp", "epsilon": "0.25", "delta": "1E-8"}]
    assert plan["budget"]["remaining_after"]["epsilon"] == "0.75" and plan["budget"]["fits"]
    assert plan["predicted_error"]["metric"].startswith("||M - Sigma||_op") and plan["predicted_error"]["value"] > 0
    assert led.history(meta_only) == before
    code, text, _ = cli(capsys, "plan", str(job))
    assert "after job  : eps=0.75" in text and "predicted" in text
    import zarr

    with pytest.raises(Exception):  # the chunks are indeed unreadable
        zarr.open_array(meta_only, mode="r")[...]


def test_plan_of_a_zcdp_job_converts_at_the_datasets_delta(setup, capsys, tmp_path):
    led, make, out, ds = setup
    led.set_budget(ds, ApproxDP(2.0, 1e-6))
    est = ('[estimator]\nname = "SecondMoment"\n[estimator.params]\nrho = 0.05\nm = 50\n'
           'radius = 6.0\nlambda_min = 0.5\n')
    code, text, err = cli(capsys, "plan", make(estimator=est), "--json")
    assert code == 0, err
    plan = json.loads(text)
    from dpdist.privacy.zcdp import cks20_epsilon

    assert plan["epsilon_at_delta"]["epsilon"] == pytest.approx(cks20_epsilon(0.05, 1e-6))
    assert plan["predicted_error"]["plan_key"] == "error_bound" and plan["predicted_error"]["metric"].startswith("gamma")


def test_plan_refused_exits_3(setup, capsys):
    led, make, out, ds = setup
    led.set_budget(ds, ApproxDP(0.05, 1e-6))
    code, text, _ = cli(capsys, "plan", make())
    assert code == 3 and "REFUSED" in text


def test_existing_output_is_invalid_before_any_reservation(setup, capsys):
    led, make, out, ds = setup
    led.set_budget(ds, ApproxDP(1.0, 1e-6))
    (out / "taken.zarr").mkdir()
    code, text, err = cli(capsys, "run", make(output=f"{out}/taken.zarr"), "--json")
    doc = json.loads(text)
    assert code == 2 and doc["status"] == "invalid"
    assert [e.state for e in led.history(ds)] == ["budget-set"]
    assert not {"entry", "spent", "noise_drawn"} & doc.keys() and "ledger entry" not in err  # no reservation


def test_invalid_job_exits_2(setup, capsys, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[dataset]\nurl = "/x.zarr"\n')
    code, _, err = cli(capsys, "run", str(bad))
    assert code == 2 and "[estimator]: missing" in err


def test_unreachable_scheduler_exits_5_and_releases_the_reservation(setup, capsys):
    led, make, out, ds = setup
    led.set_budget(ds, ApproxDP(1.0, 1e-6))
    job = make(scheduler=f"tcp://127.0.0.1:{free_port()}", extra="timeout = 2\n")
    code, text, err = cli(capsys, "run", job, "--json")
    assert code == 5, err
    doc = json.loads(text)
    assert doc["status"] == "infrastructure-failure"
    [entry] = [e for e in led.history(ds) if e.state != "budget-set"]
    assert (entry.state, entry.stage) == ("refunded", "reserved")
    assert (doc["entry"], doc["spent"], doc["noise_drawn"]) == (entry.id, None, False)
    assert err.strip().endswith(f"; ledger entry {entry.id} refunded: nothing was spent")
    assert os.listdir(out) == []


def test_no_private_result_exits_4_and_commits_what_was_spent(setup, capsys):
    led, make, out, ds = setup
    led.set_budget(ds, ApproxDP(2.0, 1e-6))
    est = ('[estimator]\nname = "SparsePCA"\n[estimator.params]\nk = 2\nepsilon = 1.0\ndelta = 1e-6\n'
           'gap = 0.5\nsigma = 1.0\nn_batches = 20\n')
    code, text, err = cli(capsys, "run", make(estimator=est), "--json")
    assert code == 4, err
    doc = json.loads(text)
    assert doc["status"] == "no-private-result"
    [entry] = [e for e in led.history(ds) if e.state != "budget-set"]
    # PrivPCA rejected in its PrivNorm stage: the private mean's share (0.1) and PrivNorm's half
    # of the rest were spent
    assert (entry.state, entry.outcome) == ("committed", "no-private-result")
    assert entry.cost == {"type": "approx-dp", "epsilon": "0.55", "delta": "5.5E-7"}
    assert (doc["entry"], doc["spent"], doc["noise_drawn"]) == (entry.id, entry.cost, True)
    assert f"ledger entry {entry.id} committed as spent (eps=0.55 delta=5.5e-07)" in err
    assert os.listdir(out) == []


def test_local_cluster_section_runs_the_job(setup, capsys):
    led, make, out, ds = setup
    led.set_budget(ds, ApproxDP(1.0, 1e-6))
    job = make(scheduler="threads", extra="[cluster]\nkind = \"local\"\njobs = 1\n[cluster.options]\nprocesses = false\n")
    text = open(job).read().replace('address = "threads"\n', "")
    open(job, "w").write(text)
    code, out_, err = cli(capsys, "run", job, "--json")
    assert code == 0, err


def test_budget_set_validation(setup, capsys):
    led, make, out, ds = setup
    lf = ("--ledger", led.url)
    assert cli(capsys, "budget", "set", ds, "--epsilon", "1.0", *lf)[0] == 2
    assert cli(capsys, "budget", "set", ds, "--rho", "0.5", "--epsilon", "1", "--delta", "1e-6", *lf)[0] == 2
    assert cli(capsys, "budget", "set", ds, "--rho", "-1", *lf)[0] == 2
    code, _, err = cli(capsys, "budget", "show", ds, *lf)  # the refused sets recorded nothing
    assert code == 2 and f"dataset {ds!r}" in err and "is not in the ledger" in err





def test_a_refusal_during_the_pass_counts_as_spent(setup, capsys, tmp_path):
    """A non-finite row refused under on_nonfinite="raise" is a data-dependent bit: the run exits
    2 and its reservation is committed, so repeated runs cannot probe that bit for free."""
    import zarr

    led, make, out, ds = setup
    nan_ds = str(tmp_path / "nan.zarr")
    X = zarr.open_array(ds, mode="r")[...]
    X[7, 3] = np.nan
    zarr.create_array(nan_ds, shape=X.shape, chunks=(500, X.shape[1]), dtype="f8")[...] = X
    led.set_budget(nan_ds, ApproxDP(1.0, 1e-6))
    job = tmp_path / "nan.toml"
    job.write_text(job_toml(nan_ds, f"{out}/nan.zarr", ledger=led.url).replace(
        "sigma = 1.0", 'sigma = 1.0\non_nonfinite = "raise"'))
    code, text, err = cli(capsys, "run", str(job), "--json")
    assert code == 2 and "NaN" in err
    [entry] = [e for e in led.history(nan_ds) if e.state != "budget-set"]
    assert (entry.state, entry.outcome) == ("committed", "refused-during-pass")
    doc = json.loads(text)  # the exit code says invalid; the document says what the ledger charged
    assert (doc["entry"], doc["spent"], doc["noise_drawn"]) == (entry.id, entry.cost, True)
    assert f"ledger entry {entry.id} committed as spent (eps=0.1 delta=1e-08)" in err
    assert os.listdir(out) == []


def _seeded(job: str, *, publish_not_private: bool) -> str:
    """``job`` with random_state in its parameters (and, if asked, publish_not_private)."""
    with open(job) as f:
        text = f.read().replace("sigma = 1.0\n", "sigma = 1.0\nrandom_state = 0\n", 1)
    if publish_not_private:
        text = text.replace("\n[scheduler]\n", "\npublish_not_private = true\n[scheduler]\n", 1)
    with open(job, "w") as f:
        f.write(text)
    return job


@pytest.mark.parametrize("command", ["run", "plan"])
def test_a_seeded_job_is_refused_before_anything_is_reserved(setup, capsys, command):
    led, make, out, ds = setup
    led.set_budget(ds, ApproxDP(1.0, 1e-6))
    code, _, err = cli(capsys, command, _seeded(make(), publish_not_private=False))
    assert code == 2
    assert "estimator.params.random_state" in err and "NOT PRIVATE" in err and "publish_not_private" in err
    assert [e.state for e in led.history(ds)] == ["budget-set"] and os.listdir(out) == []


def test_a_job_that_says_publish_not_private_publishes_a_seeded_release_and_pays(setup, capsys):
    led, make, out, ds = setup
    led.set_budget(ds, ApproxDP(1.0, 1e-6))
    code, text, err = cli(capsys, "run", _seeded(make(), publish_not_private=True), "--json")
    assert code == 0, err
    res = json.loads(text)
    assert res["private"] is False and "NOT PRIVATE" in err  # the banner says it
    meta = load_result(res["output"]).metadata
    assert meta["private"] is False and meta["job"]["published_not_private"] is True
    assert [(e.state, e.output) for e in led.history(ds)][1:] == [("committed", res["output"])]


def test_a_release_that_is_not_private_is_neither_published_nor_committed_as_released(setup, monkeypatch):
    """The runner's last guard: a not-private release without publish_not_private (here a
    seeded estimator let past the job file's and the cost's checks) ends as no private result
    (exit 4), publishes nothing, and counts the reservation as spent."""
    import dataclasses

    from dpdist.exceptions import NoPrivateResult
    from dpdist.ops import runner
    from dpdist.ops.job import load_job
    from dpdist.ops.runner import run_job

    monkeypatch.setattr(runner, "estimator_cost", lambda est, **kw: est.privacy_cost())
    led, make, out, ds = setup
    led.set_budget(ds, ApproxDP(1.0, 1e-6))
    job = dataclasses.replace(load_job(_seeded(make(), publish_not_private=True)), publish_not_private=False)
    with pytest.raises(NoPrivateResult, match="not private") as info:
        run_job(job, ledger=led)
    assert info.value.exit_code == 4
    assert os.listdir(out) == []
    assert [(e.state, e.outcome) for e in led.history(ds)][1:] == [("committed", "no-private-result")]


def test_the_operators_ledger_wins_over_the_job_files(setup, capsys, tmp_path, monkeypatch):
    """DPDIST_LEDGER (or --ledger) pins the ledger: a job file naming another ledger is refused
    with exit 2 and neither ledger changes; a job file naming none is charged to the pinned one."""
    led, make, out, ds = setup
    led.set_budget(ds, ApproxDP(1.0, 1e-6))
    own = str(tmp_path / "own.sqlite")
    with open_ledger(own) as other:
        other.set_budget(ds, ApproxDP(100.0, 1e-3))
    job = tmp_path / "job-own.toml"
    job.write_text(job_toml(ds, f"{out}/own-{{run}}.zarr", ledger=own))
    monkeypatch.setenv("DPDIST_LEDGER", led.url)
    for args in (["run", str(job)], ["plan", str(job)], ["run", str(job), "--ledger", led.url]):
        code, _, err = cli(capsys, *args)
        assert code == 2 and "pins" in err, args
    assert os.listdir(out) == []
    for url in (own, led.url):
        with open_ledger(url) as check:
            assert [e.state for e in check.history(ds)] == ["budget-set"]
    unpinned = tmp_path / "job-none.toml"
    unpinned.write_text(job_toml(ds, f"{out}/none-{{run}}.zarr"))
    code, text, err = cli(capsys, "run", str(unpinned), "--json")
    assert code == 0, err
    assert [(e.state, e.output) for e in led.history(ds)][1:] == [("committed", json.loads(text)["output"])]


def test_neighbouring_stores_that_differ_in_a_stored_chunk_are_run_and_charged_alike(tmp_path, capsys):
    """zarr's default config leaves out a chunk equal to the fill value, so one row decides
    whether a chunk file exists. The store with the row and its neighbour without it give the
    same exit code, the same kind of output, and a committed ledger entry each."""
    import zarr

    x = np.random.default_rng(0).standard_normal((2000, 6))
    x[500:1000] = 0.0
    y = x.copy()
    x[700, 3] = 1.0  # the only non-zero entry of chunk 1
    ledger = str(tmp_path / "ledger.sqlite")
    outcomes = []
    for name, values in (("with-row", x), ("without-row", y)):
        ds = str(tmp_path / f"{name}.zarr")
        zarr.create_array(ds, shape=values.shape, chunks=(500, 6), dtype="f8")[...] = values  # default config
        assert os.path.exists(os.path.join(ds, "c", "1", "0")) == (name == "with-row")
        job = tmp_path / f"{name}.toml"
        job.write_text(job_toml(ds, str(tmp_path / f"out-{name}-{{run}}.zarr"), epsilon=0.25, ledger=ledger))
        assert cli(capsys, "budget", "set", ds, "--epsilon", "1.0", "--delta", "1e-6", "--ledger", ledger)[0] == 0
        code, text, err = cli(capsys, "run", str(job), "--json")
        doc = json.loads(text)
        with open_ledger(ledger) as led:
            states = [e.state for e in led.history(ds) if e.state != "budget-set"]
        notes = load_result(doc["output"]).metadata["notes"] if code == 0 else None
        outcomes.append((code, doc["status"], sorted(doc), states, notes))
    assert outcomes[0][0] == 0, outcomes
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][3] == ["committed"]
    from dpdist.data.validation import READING_NOTES

    assert READING_NOTES["fill"] in outcomes[0][4]  # read per the Zarr specification, and said so


def test_a_store_that_lost_a_chunk_its_manifest_records_is_refused_before_reserving(tmp_path, capsys):
    """The manifest is public (it says every chunk was written), so the refusal is decided
    before anything is reserved or read, and its message names no chunk."""
    import zarr

    from dpdist.data.validation import write_chunk_manifest
    from tests.ops.conftest import write_dataset

    ds = write_dataset(str(tmp_path / "lost.zarr"))
    write_chunk_manifest(zarr.open_array(ds, mode="r+"))
    os.remove(os.path.join(ds, "c", "2", "0"))
    ledger = str(tmp_path / "ledger.sqlite")
    job = tmp_path / "job.toml"
    job.write_text(job_toml(ds, str(tmp_path / "out-{run}.zarr"), epsilon=0.25, ledger=ledger))
    assert cli(capsys, "budget", "set", ds, "--epsilon", "1.0", "--delta", "1e-6", "--ledger", ledger)[0] == 0
    code, text, _ = cli(capsys, "run", str(job), "--json")
    doc = json.loads(text)
    assert code == 2 and "lost chunk files" in doc["error"]["message"] and "c/2" not in doc["error"]["message"]
    with open_ledger(ledger) as led:
        assert [e.state for e in led.history(ds)] == ["budget-set"]
    assert not list(tmp_path.glob("out-*"))
