"""Every path that releases pays: the direct commands charge the ledger named by --ledger or
DPDIST_LEDGER (reserve before reading, commit with the output, as `dpdist run`), refuse a
dataset whose budget is in the default ledger when no ledger is configured, and record in the
release whether it was charged; deploy/etl-job.sh goes through `dpdist run`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import dpdist
from dpdist.cli.main import main
from dpdist.data.publish import result_checksum
from dpdist.ops.ledger import default_ledger_path, open_ledger
from dpdist.privacy.budget import ApproxDP
from dpdist.privacy.zcdp import ZCDP
from tests.ops.conftest import write_dataset

SCRIPT = Path(__file__).resolve().parents[2] / "deploy" / "etl-job.sh"
COV = ["--k", "2", "--sigma", "1", "--scheduler", "synchronous", "--no-progress"]


@pytest.fixture
def data(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("DPDIST_LEDGER", raising=False)
    (tmp_path / "out").mkdir()
    return write_dataset(str(tmp_path / "x.zarr"), n=1000, d=5)


def cli(capsys, *args):
    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def charges(ledger: str, dataset: str) -> list:
    with open_ledger(ledger) as led:
        return [(e.state, e.outcome) for e in led.history(dataset) if e.state != "budget-set"]


def etl_job(dataset: str, out: Path, ledger: str, epsilon: str) -> subprocess.CompletedProcess:
    """deploy/etl-job.sh as systemd runs it (empty environment, PATH=/usr/bin:/bin)."""
    if not (Path(sys.prefix) / "bin" / "dpdist").exists():
        pytest.skip("dpdist is not installed as an executable in this Python's environment")
    env = {"PATH": "/usr/bin:/bin", "DPDIST_VENV": sys.prefix, "DPDIST_INPUT": dataset, "DPDIST_OUTPUT_DIR": str(out),
           "DPDIST_K": "2", "DPDIST_EPSILON": epsilon, "DPDIST_DELTA": "1e-7", "DPDIST_SIGMA": "1",
           "DPDIST_SCHEDULER": "synchronous", "DPDIST_LEDGER": ledger}
    return subprocess.run(["/usr/bin/env", "-i", *(f"{k}={v}" for k, v in env.items()), "bash", str(SCRIPT)],
                          capture_output=True, text=True, timeout=300)


def test_budget_set_three_direct_runs_two_etl_runs_spend_exactly_the_budget(data, tmp_path, capsys, monkeypatch):
    """A budget of (1, 1e-6); three `dpdist covariance` runs at epsilon 1 and two etl-job runs:
    the first release spends the whole epsilon, the four others are refused with exit 3 before
    reading anything, and only one result exists."""
    ledger = str(tmp_path / "ledger.sqlite")
    out = tmp_path / "out"
    assert cli(capsys, "budget", "set", data, "--epsilon", "1", "--delta", "1e-6", "--ledger", ledger)[0] == 0
    monkeypatch.setenv("DPDIST_LEDGER", ledger)
    codes = [cli(capsys, "covariance", data, *COV, "--epsilon", "1", "--delta", "1e-7", "--output",
                 str(out / f"direct-{i}.zarr"))[0] for i in range(3)]
    etl = [etl_job(data, out, ledger, "1") for _ in range(2)]
    assert codes + [p.returncode for p in etl] == [0, 3, 3, 3, 3], [p.stderr for p in etl]
    assert all(json.loads(p.stdout)["status"] == "refused" for p in etl)
    assert sorted(os.listdir(out)) == ["direct-0.zarr"]
    assert charges(ledger, data) == [("committed", "released")] + [("refused", "refused")] * 4
    with open_ledger(ledger) as led:
        used = led.remaining(data)
    # the release's events, accounted at the whole delta of 1e-6 (its cost used 1e-7), need a
    # little less than the epsilon of 1 it was charged: not enough for another run at 1
    assert used.accounted_by and 0.0 < float(used.remaining()["epsilon"]) < 0.2
    assert float(used.remaining()["delta"]) == 1e-6


def test_direct_runs_and_etl_runs_draw_on_one_budget(data, tmp_path, capsys, monkeypatch):
    """(1, 1e-6) at 0.25 a release: three direct runs and an etl run are released and committed
    with their outputs (their events compose to about half the epsilon); a fourth direct run
    asking for 0.6 does not fit (exit 3)."""
    ledger = str(tmp_path / "ledger.sqlite")
    out = tmp_path / "out"
    with open_ledger(ledger) as led:
        led.set_budget(data, ApproxDP(1.0, 1e-6))
    for i in range(3):
        args = ["covariance", data, *COV, "--epsilon", "0.25", "--delta", "1e-7", "--output", str(out / f"d{i}.zarr")]
        code, text, err = cli(capsys, *args, "--ledger", ledger, "--json")
        assert code == 0, err
        meta = json.loads(text)
        assert meta["ledger"]["recorded"] is True and meta["ledger"]["source"] == "--ledger"
    proc = etl_job(data, out, ledger, "0.25")
    assert proc.returncode == 0, proc.stderr
    code, _, err = cli(capsys, "covariance", data, *COV, "--epsilon", "0.6", "--delta", "1e-7", "--output",
                       str(out / "d3.zarr"), "--ledger", ledger)
    assert code == 3 and "exceed its budget" in err
    with open_ledger(ledger) as led:
        committed = [e for e in led.history(data) if e.state == "committed"]
        assert 0.4 < float(led.remaining(data).remaining()["epsilon"]) < 0.6
    assert len(committed) == 4 and sorted(os.listdir(out)) == sorted(Path(e.output).name for e in committed)
    for e in committed:  # each output is the one its entry was committed with
        assert result_checksum(e.output) == e.checksum


def test_a_budget_in_the_default_ledger_refuses_an_unconfigured_run(data, tmp_path, capsys):
    """No --ledger, no DPDIST_LEDGER, and the dataset has a budget in the default ledger:
    refused with exit 3, naming both ways out; --no-ledger runs and the release records it."""
    with open_ledger(default_ledger_path()) as led:
        led.set_budget(data, ApproxDP(1.0, 1e-6))
    out = tmp_path / "out" / "cov.zarr"
    args = ["covariance", data, *COV, "--epsilon", "1", "--delta", "1e-7", "--output", str(out)]
    code, _, err = cli(capsys, *args)
    assert code == 3
    assert "--ledger" in err and "DPDIST_LEDGER" in err and "--no-ledger" in err and "nothing was read" in err
    assert not out.exists() and charges(default_ledger_path(), data) == []
    code, text, err = cli(capsys, *args, "--no-ledger", "--json")
    assert code == 0, err
    recorded = dpdist.load_result(out).metadata["ledger"]
    assert recorded == json.loads(text)["ledger"] and recorded["recorded"] is False and "--no-ledger" in recorded["reason"]
    assert charges(default_ledger_path(), data) == []


def test_without_any_budget_an_unconfigured_run_says_it_is_recorded_nowhere(data, tmp_path, capsys):
    out = tmp_path / "out" / "cov.zarr"
    code, text, err = cli(capsys, "covariance", data, *COV, "--epsilon", "1", "--delta", "1e-7", "--output", str(out))
    assert code == 0, err
    assert "NOT RECORDED in any ledger" in text
    assert dpdist.load_result(out).metadata["ledger"]["recorded"] is False
    assert not os.path.exists(default_ledger_path())  # looking did not create it


@pytest.mark.parametrize("extra, message", [
    (["--random-state", "3"], "seed"),
    (["--no-ledger"], "--no-ledger contradicts DPDIST_LEDGER"),
    (["--tile-size", "0"], "--tile-size"),
])
def test_with_a_ledger_what_cannot_be_charged_is_refused_before_the_reservation(data, tmp_path, capsys, monkeypatch,
                                                                                extra, message):
    ledger = str(tmp_path / "ledger.sqlite")
    with open_ledger(ledger) as led:
        led.set_budget(data, ApproxDP(5.0, 1e-6))
    monkeypatch.setenv("DPDIST_LEDGER", ledger)
    code, _, err = cli(capsys, "covariance", data, *COV, "--epsilon", "1", "--delta", "1e-7", *extra,
                       "--output", str(tmp_path / "out" / "cov.zarr"))
    assert code == 2 and message in err
    assert charges(ledger, data) == [] and os.listdir(tmp_path / "out") == []


def test_a_not_private_method_cannot_be_charged(data, tmp_path, capsys):
    ledger = str(tmp_path / "ledger.sqlite")
    with open_ledger(ledger) as led:
        led.set_budget(data, ApproxDP(5.0, 1e-6))
    code, _, err = cli(capsys, "covariance", data, "--method", "thresholded", "--sigma", "1", "--scheduler",
                       "synchronous", "--ledger", ledger, "--output", str(tmp_path / "out" / "t.zarr"))
    assert code == 2 and "NOT PRIVATE" in err and charges(ledger, data) == []


def test_a_pinned_ledger_without_a_budget_for_the_dataset_refuses(data, tmp_path, capsys):
    code, _, err = cli(capsys, "covariance", data, *COV, "--epsilon", "1", "--delta", "1e-7",
                       "--ledger", str(tmp_path / "ledger.sqlite"), "--output", str(tmp_path / "out" / "c.zarr"))
    assert code == 3 and "no privacy budget" in err and os.listdir(tmp_path / "out") == []


def test_pca_second_moment_and_norm_are_charged(data, tmp_path, capsys):
    """Each releasing command commits its cost with its output; a rejection (norm at this size)
    commits what it spent and publishes nothing."""
    ledger = str(tmp_path / "ledger.sqlite")
    zledger = str(tmp_path / "zcdp.sqlite")
    out = tmp_path / "out"
    with open_ledger(ledger) as led:
        led.set_budget(data, ApproxDP(5.0, 1e-5))
    with open_ledger(zledger) as led:
        led.set_budget(data, ZCDP(1.0))
    run = ["--scheduler", "synchronous", "--no-progress"]
    code, _, err = cli(capsys, "pca", data, "--method", "expmech", "--k", "2", "--epsilon", "1", "--delta", "1e-7",
                       "--sigma", "1", *run, "--ledger", ledger, "--output", str(out / "pc.zarr"))
    assert code == 0, err
    code, _, err = cli(capsys, "second-moment", data, "--rho", "0.3", "--m", "20", "--radius", "8", *run,
                       "--ledger", zledger, "--output", str(out / "m2.zarr"))
    assert code == 0, err
    code, _, err = cli(capsys, "norm", data, "--k", "2", "--epsilon", "1", "--delta", "1e-7", "--gap", "0.5",
                       "--sigma", "1", "--n-batches", "20", *run, "--ledger", ledger, "--output", str(out / "n.zarr"))
    assert code == 4, err
    assert sorted(os.listdir(out)) == ["m2.zarr", "n.zarr.rejected.json", "pc.zarr"]
    rejected = json.loads((out / "n.zarr.rejected.json").read_text())
    assert rejected["ledger"]["recorded"] is True and rejected["ledger"]["source"] == "--ledger"
    with open_ledger(ledger) as led:
        entries = [e for e in led.history(data) if e.state != "budget-set"]
    assert [(e.state, e.outcome, e.job) for e in entries] == [
        ("committed", "released", "dpdist pca"), ("committed", "no-private-result", "dpdist norm")]
    assert entries[0].checksum == result_checksum(str(out / "pc.zarr"))
    assert dpdist.load_result(out / "pc.zarr").metadata["ledger"]["entry"] == entries[0].id
    assert charges(zledger, data) == [("committed", "released")]


def test_the_demo_charges_no_ledger_and_its_releases_say_why(tmp_path, capsys, monkeypatch):
    """The demo reads only the synthetic rows it generates: it charges no ledger (even a pinned
    one) and its kept releases and summary record that, with the reason."""
    ledger = tmp_path / "ledger.sqlite"
    monkeypatch.setenv("DPDIST_LEDGER", str(ledger))
    work = tmp_path / "demo"
    code, text, err = cli(capsys, "demo", "--n-samples", "3000", "--n-features", "6", "--k", "2", "--scheduler",
                          "synchronous", "--no-progress", "--workdir", str(work), "--json")
    assert code == 0, err
    summary = json.loads(text)
    assert summary["ledger"]["recorded"] is False and "synthetic" in summary["ledger"]["reason"]
    for name in ("privcov", "wang-xu"):
        assert dpdist.load_result(work / f"{name}.zarr").metadata["ledger"] == summary["ledger"]
    assert not ledger.exists()
