"""``dpdist audit``: the table, the JSON file, the options, the exit status."""

from __future__ import annotations

import json

import pytest

from dpdist.cli.main import main


def test_audit_prints_the_table_and_writes_json(tmp_path, capsys):
    out = tmp_path / "table.json"
    args = ["audit", "--mechanism", "primitives/laplace", "--mechanism", "privnorm-privpca/count-test",
            "--trials", "4000", "--confidence", "0.9", "--include-twins", "--output", str(out)]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "primitives/laplace [twin x0.5]" in text and "FLAGGED" in text and "pass" in text
    table = json.loads(out.read_text())
    rows = table["rows"]
    assert table["confidence"] == 0.9 and len(rows) == 4
    assert [r["twin"] for r in rows] == [False, True, False, True]
    for r in rows:
        assert r["trials"] == 4000 and r["confidence"] == 0.9 and r["as_expected"]
        assert r["passed"] == (not r["twin"])
        assert (r["lower_bound"] <= r["claimed"]) == r["passed"]
        assert set(r["audit"]) >= {"count0", "count1", "interval0", "interval1", "threshold", "n_evaluation"}


def test_audit_selects_a_family_and_prints_json(capsys):
    assert main(["audit", "--mechanism", "second-moment", "--trials", "400", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["family"] for r in rows} == {"second-moment"} and len(rows) == 4
    assert all(r["notion"] == "zcdp" and r["claimed_delta"] == 1e-3 for r in rows)


def test_audit_exit_status_is_one_when_a_claim_is_refuted(capsys, monkeypatch):
    import dpdist.testing.mechanisms as mechanisms

    real = mechanisms.CASES["primitives/laplace"]
    # the package's own case whose noise is secretly halved: refuted, exit 1
    monkeypatch.setitem(mechanisms.CASES, "primitives/laplace", lambda source=None: real(0.5 * real().source))
    assert main(["audit", "--mechanism", "primitives/laplace", "--trials", "4000"]) == 1
    assert "UNEXPECTED" in capsys.readouterr().out


@pytest.mark.parametrize("bad, message", [
    (["--mechanism", "nope"], "unknown mechanism"),
    (["--trials", "2"], "--trials"),
    (["--confidence", "1.5"], "--confidence"),
])
def test_audit_refuses_bad_options(bad, message, capsys):
    assert main(["audit", *bad]) == 2
    assert message in capsys.readouterr().err


def test_audit_does_not_repeat_vacuous_release_warnings():
    """The Analyze Gauss estimator audit fits on a small pair on purpose, and each trial's plan
    is vacuous there: the command prints its table, not one warning line per trial (80 lines at
    40 trials before). Run as the user runs it (a process of its own: pytest would capture the
    warnings in-process)."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "dpdist.cli.main", "audit", "--mechanism", "analyze-gauss",
                           "--trials", "40"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "analyze-gauss/estimator" in proc.stdout
    assert "VACUOUS" not in proc.stderr


def test_include_twins_names_a_twins_module_that_cannot_be_imported(capsys):
    """The twins are not part of the installed package: --include-twins imports the module
    named by --twins-module and refuses clearly when it is not importable."""
    assert main(["audit", "--mechanism", "primitives/laplace", "--trials", "40", "--include-twins",
                 "--twins-module", "no_such_twins_module"]) == 2
    err = capsys.readouterr().err
    assert "cannot import the twins module 'no_such_twins_module'" in err and "--twins-module" in err


def test_the_default_twins_module_is_the_checkouts(capsys):
    """From the root of a source checkout (pytest's working directory) the default module
    registers one twin per case, as before the twins moved out of the package."""
    assert main(["audit", "--mechanism", "primitives/laplace", "--trials", "4000", "--include-twins", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["mechanism"] for r in rows] == ["primitives/laplace", "primitives/laplace [twin x0.5]"]
    assert [(r["twin"], r["variant"], r["expected"]) for r in rows] == [(False, "", "pass"),
                                                                          (True, "twin x0.5", "flagged")]
