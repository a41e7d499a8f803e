"""`dpdist budget`: set only names real datasets, show and history refuse unknown ones and never
create a ledger, a total below what is spent needs --force, history is in time order."""

from __future__ import annotations

import json
import os

import pytest

from dpdist.cli.main import main
from dpdist.ops.ledger import open_ledger
from dpdist.privacy.budget import ApproxDP


def cli(capsys, *args):
    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def here(tmp_path, monkeypatch):
    """An empty working directory holding one dataset directory, and a ledger path (no file yet)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "claims.zarr").mkdir()
    return tmp_path, str(tmp_path / "ledger.sqlite")


def test_set_refuses_a_name_that_is_no_dataset_and_writes_nothing(here, capsys):
    root, ledger = here
    code, _, err = cli(capsys, "budget", "set", "claims", "--epsilon", "1", "--delta", "1e-6", "--ledger", ledger)
    assert code == 2 and "'claims' is not an existing path, a URL, or a dataset or name in the ledger" in err
    assert sorted(os.listdir(root)) == ["claims.zarr"]  # no ledger file, no ./claims
    # with a ledger that holds other datasets, the same
    with open_ledger(ledger) as led:
        led.set_budget(str(root / "claims.zarr"), ApproxDP(1.0, 1e-6))
    code, _, err = cli(capsys, "budget", "set", "claims", "--epsilon", "1", "--delta", "1e-6", "--ledger", ledger)
    assert code == 2 and "'claims' is not an existing path" in err
    with open_ledger(ledger) as led:
        assert [d["dataset"] for d in led.datasets()] == [str(root / "claims.zarr")]


def test_set_takes_an_existing_path_a_url_or_a_name_the_ledger_holds(here, capsys):
    root, ledger = here
    lf = ("--ledger", ledger)
    assert cli(capsys, "budget", "set", "claims.zarr", "--epsilon", "1", "--delta", "1e-6", "--name", "claims",
               "--owner", "alice", *lf)[0] == 0
    assert cli(capsys, "budget", "set", "s3://bucket/x.zarr", "--rho", "0.5", *lf)[0] == 0
    code, text, err = cli(capsys, "budget", "set", "claims", "--epsilon", "2", "--delta", "1e-6", "--json", *lf)
    assert code == 0, err
    status = json.loads(text)
    assert (status["dataset"], status["name"], status["owner"]) == (str(root / "claims.zarr"), "claims", "alice")
    assert status["total"]["epsilon"] == "2.0"
    with open_ledger(ledger) as led:
        assert sorted(d["dataset"] for d in led.datasets()) == [str(root / "claims.zarr"), "s3://bucket/x.zarr"]


def test_set_below_what_is_spent_needs_force_and_keeps_the_owner(here, capsys):
    root, ledger = here
    ds = str(root / "claims.zarr")
    with open_ledger(ledger) as led:
        led.set_budget(ds, ApproxDP(1.0, 1e-6), owner="alice")
        led.reserve(ds, ApproxDP(0.6, 1e-8)).commit(output="o", checksum="c")
    code, _, err = cli(capsys, "budget", "set", ds, "--epsilon", "0.5", "--delta", "1e-6", "--ledger", ledger)
    assert code == 2 and "below what its committed and open charges already spend" in err and "--force" in err
    with open_ledger(ledger) as led:
        assert led.total(ds) == ApproxDP(1.0, 1e-6)
    code, text, err = cli(capsys, "budget", "set", ds, "--epsilon", "0.5", "--delta", "1e-6", "--force", "--json",
                          "--ledger", ledger)
    assert code == 0, err
    status = json.loads(text)
    assert (status["total"]["epsilon"], status["remaining"]["epsilon"], status["owner"]) == ("0.5", "0", "alice")


def test_show_and_history_of_an_unknown_dataset_exit_2_naming_it(here, capsys):
    root, ledger = here
    with open_ledger(ledger) as led:
        led.set_budget(str(root / "claims.zarr"), ApproxDP(1.0, 1e-6), name="claims")
    for action in ("show", "history"):
        code, out, err = cli(capsys, "budget", action, "claimz", "--ledger", ledger)
        assert code == 2 and out == "", action
        assert f"dataset 'claimz' ({root / 'claimz'}) is not in the ledger" in err, action
        assert cli(capsys, "budget", action, "claims", "--ledger", ledger)[0] == 0, action


def test_show_and_history_never_create_a_ledger(here, capsys):
    root, ledger = here
    for args in (("show",), ("show", "claims.zarr"), ("history", "claims.zarr")):
        code, _, err = cli(capsys, "budget", *args, "--ledger", ledger)
        assert code == 2 and f"there is no ledger at {ledger!r}" in err, args
    assert sorted(os.listdir(root)) == ["claims.zarr"]
    code, _, err = cli(capsys, "budget", "show")  # the default ledger, under $XDG_DATA_HOME
    assert code == 2 and "there is no ledger at" in err
    assert not os.path.exists(os.environ["XDG_DATA_HOME"])


def test_history_lists_entries_in_time_order(here, capsys):
    """A reservation made before a budget change and committed after it is listed at its
    commit, after the change (the listing's time column is when each entry took its state)."""
    root, ledger = here
    ds = str(root / "claims.zarr")
    with open_ledger(ledger) as led:
        led.set_budget(ds, ApproxDP(1.0, 1e-6))
        r = led.reserve(ds, ApproxDP(0.1, 1e-8), job="slow-job")
        led.set_budget(ds, ApproxDP(2.0, 1e-6))
        r.commit(output="o", checksum="c")
        led.reserve(ds, ApproxDP(0.1, 1e-8), job="fast-job").refund("failed early")
    code, text, _ = cli(capsys, "budget", "history", ds, "--json", "--ledger", ledger)
    entries = json.loads(text)
    assert [(e["state"], e["job"]) for e in entries] == [
        ("budget-set", None), ("budget-set", None), ("committed", "slow-job"), ("refunded", "fast-job")]
    code, text, _ = cli(capsys, "budget", "history", ds, "--ledger", ledger)
    rows = text.strip().splitlines()[1:]
    assert [row.split()[3] for row in rows] == ["budget-set", "budget-set", "committed", "refunded"]
    times = [" ".join(row.split()[1:3]) for row in rows]
    assert times == sorted(times)
