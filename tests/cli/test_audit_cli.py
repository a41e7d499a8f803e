"""``dpdist audit``: the table, the JSON file, the options, the exit status."""

from __future__ import annotations

import dataclasses
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
    # a "real" (noise_multiplier 1) case whose noise is secretly halved: refuted, exit 1
    monkeypatch.setitem(mechanisms.CASES, "primitives/laplace",
                        lambda noise_multiplier=1.0: dataclasses.replace(real(0.5), noise_multiplier=1.0))
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
