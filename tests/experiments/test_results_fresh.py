"""Committed results describe today's code: every results file under benchmarks/results/
records, per method, the fingerprint of the noise scales, thresholds, clips and selection
shares its numbers were measured with; these tests recompute the fingerprints from the code
and fail, naming the file, the method and the fields, when a result no longer matches."""

from __future__ import annotations

import json
import pathlib

import pytest

import dpdist
import dpdist.algorithms.fingerprint as afp
import dpdist.algorithms.measured as measured
import dpdist.experiments.empirical as emp
import dpdist.experiments.fingerprint as fp

RESULTS = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "results"

#: Timing benchmarks (wall times of the engine, no method's measured accuracy): nothing to fingerprint.
TIMINGS = ("quiet", "scaling")


def _files():
    return sorted(p.relative_to(RESULTS).as_posix() for p in RESULTS.rglob("*.json"))


def _check(name):
    return fp.check_result(json.loads((RESULTS / name).read_text()))


@pytest.mark.parametrize("name", _files())
def test_every_committed_result_matches_todays_code(name):
    report = _check(name)
    if name.split("/")[0] in TIMINGS:
        assert report == {}, f"{name}: a timing benchmark holds method results {sorted(report)}"
        return
    assert report, f"{name}: no method results found: a results file the fingerprint check cannot read"
    bad = {m: r for m, r in report.items() if r["status"] != "fresh"}
    assert not bad, f"{name} no longer describes the code: " + "; ".join(
        f"{m}: {r['status']}" + "".join(f"\n    {line}" for line in r["differences"]) for m, r in bad.items()
    ) + "\nregenerate it with its command (benchmarks/results/README.md) and stamp it"


def test_the_fingerprint_reads_the_calibration(monkeypatch):
    """A changed constant of the threshold rule (the Bickel-Levina constant) changes the fingerprint in exactly that field,
    and the check names it; a fresh copy is fresh."""
    before = fp.method_fingerprint("thresholded")
    result = {"methods": {"thresholded": {}}, "fingerprints": {"thresholded": before}}
    assert fp.check_result(result) == {"thresholded": {"status": "fresh", "differences": []}}
    monkeypatch.setattr("dpdist.algorithms.baselines.thresholded.SAMPLING_CONSTANT", 5.0)
    report = fp.check_result(result)["thresholded"]
    assert report["status"] == "stale"
    assert len(report["differences"]) == 3 and all(line.startswith("threshold at (") for line in report["differences"])


def test_values_are_rounded_and_the_digest_covers_them():
    f = fp.method_fingerprint("privcov")
    assert f["values"][0]["noise_scale"] == float(f"{f['values'][0]['noise_scale']:.10g}")
    changed = json.loads(json.dumps(f))
    changed["values"][0]["noise_scale"] *= 1.001
    assert afp._digest(changed) != f["digest"] == afp._digest(f)
    assert "nothing_to_fingerprint" in fp.method_fingerprint("opendp")
    with pytest.raises(dpdist.ValidationError, match="no fingerprint for method 'nope'"):
        fp.method_fingerprint("nope")


@pytest.fixture
def fresh_entry(monkeypatch):
    """A table entry for the thresholded estimator stamped with today's fingerprint."""
    monkeypatch.setattr(afp, "_CACHE", {})
    entry = {"instance_family": "construction1 (k=20)", "target": "||M - Sigma||_op <= 0.25 sigma^2",
             "epsilon": 1.0, "delta": 1e-6, "beta": 0.1, "mode": "simulated", "source": "x.json",
             "date": "2026-12-01", "points": [(100, 5e4), (1000, 6e4)],
             "fingerprint": fp.method_fingerprint("thresholded")}
    monkeypatch.setattr(measured, "TABLE", {("thresholded", "simulated"): entry})
    return entry


def test_the_plan_quotes_a_fresh_table(fresh_entry):
    (e,) = dpdist.baselines.ThresholdedCovariance(sigma=1.0).plan(10**6, 1000).empirical
    assert e["n_star"] == 6e4 and e["fingerprint"] == "matches this code"


def test_the_plan_refuses_a_stale_table(fresh_entry, monkeypatch):
    monkeypatch.setattr("dpdist.algorithms.baselines.thresholded.SAMPLING_CONSTANT", 5.0)
    assert dpdist.baselines.ThresholdedCovariance(sigma=1.0).plan(10**6, 1000).empirical == ()
    assert emp.measured_n_star("thresholded", 1000) is None
    status = emp.table_status("thresholded")
    assert status["status"] == "stale" and status["differences"][0].startswith("threshold at (")


def test_an_unfingerprinted_entry_is_quoted_as_not_checked(fresh_entry):
    fresh_entry["fingerprint"] = None
    (e,) = dpdist.baselines.ThresholdedCovariance(sigma=1.0).plan(10**6, 1000).empirical
    assert e["n_star"] == 6e4 and e["fingerprint"].startswith("not recorded")


def _write(path, result):
    path.write_text(json.dumps(result))
    return path


def test_the_check_command_names_the_stale_method_and_fails(tmp_path, capsys):
    from dpdist.cli.main import main

    stale = json.loads(json.dumps(fp.method_fingerprint("privcov")))
    stale["values"][0]["noise_scale"] = 1.299052866  # what an older calibration gave
    stale["digest"] = afp._digest(stale)
    _write(tmp_path / "old.json", {"methods": {"privcov": {}, "wang_xu": {}},
                                   "fingerprints": {"privcov": stale, "wang_xu": fp.method_fingerprint("wang_xu")}})
    rc = main(["experiment", "fingerprint", "--check", "--results", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 1
    assert "old.json" in out and "privcov              stale" in out and "wang_xu              fresh" in out
    assert "noise_scale at (n_samples=1e+06, n_features=200, epsilon=1, delta=1e-06): 1.299052866 ->" in out


def test_write_stamps_todays_fingerprints_and_refuses_a_non_result(tmp_path, capsys):
    from dpdist.cli.main import main

    good = _write(tmp_path / "a.json", {"methods": {"thresholded": {"rows": []}}})
    bad = _write(tmp_path / "b.json", {"timing": 1.0})
    rc = main(["experiment", "fingerprint", "--write", str(good), str(bad)])
    assert rc == 2 and "no method results" in capsys.readouterr().err
    assert json.loads(good.read_text()) == {"methods": {"thresholded": {"rows": []}}}  # nothing written
    assert main(["experiment", "fingerprint", "--write", str(good)]) == 0
    stamped = json.loads(good.read_text())
    assert stamped["fingerprints"] == {"thresholded": fp.method_fingerprint("thresholded")}
    assert "code_revision" in stamped
    # a file that records the commit that produced it keeps it; the stamping commit is recorded apart
    _write(good, {"methods": {"thresholded": {"rows": []}}, "code_revision": "abc1234"})
    assert main(["experiment", "fingerprint", "--write", str(good)]) == 0
    restamped = json.loads(good.read_text())
    assert restamped["code_revision"] == "abc1234" and restamped["fingerprints_revision"]
    bad.unlink()
    capsys.readouterr()
    assert main(["experiment", "fingerprint", "--check", "--results", str(tmp_path)]) == 0
    assert "thresholded          fresh" in capsys.readouterr().out


def test_one_command_writes_one_named_file_with_its_provenance(tmp_path, capsys):
    from dpdist.cli.main import main

    rc = main(["experiment", "sample-complexity", "--smoke", "--methods", "thresholded,thresholded_pca", "--reps",
               "3", "--rtol", "0.5", "--dims", "24", "--dims-for", "thresholded_pca=20", "--output", "ref.json",
               "--out", str(tmp_path)])
    assert rc == 0, capsys.readouterr().err
    data = json.loads((tmp_path / "ref.json").read_text())
    assert [r["d"] for r in data["methods"]["thresholded"]["rows"]] == [24]
    assert [r["d"] for r in data["methods"]["thresholded_pca"]["rows"]] == [20]
    assert data["commands"] == ["dpdist experiment sample-complexity --smoke --methods thresholded,thresholded_pca "
                                "--reps 3 --rtol 0.5 --dims 24 --dims-for thresholded_pca=20 --output ref.json "
                                f"--out {tmp_path}"]
    assert set(data["fingerprints"]) == {"thresholded", "thresholded_pca"}
    assert fp.check_result(data) == {m: {"status": "fresh", "differences": []} for m in data["fingerprints"]}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ref.json", "ref_covariance.png", "ref_pca.png"]
