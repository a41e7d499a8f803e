"""``dpdist experiment``: parses, runs the short form, prints the fitted exponents and files."""

from __future__ import annotations

import json

from dpdist.cli.main import main


def test_sample_complexity_command_short_form(tmp_path, capsys):
    rc = main(["experiment", "sample-complexity", "--smoke", "--methods", "thresholded,wang_xu", "--reps", "4",
               "--rtol", "0.5", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0 and "[SIMULATED]" in out and "exponent of d" in out and "wrote" in out
    data = json.loads((tmp_path / "sample_complexity_simulated.json").read_text())
    assert set(data["methods"]) == {"thresholded", "wang_xu"}


def test_bad_method_is_a_usage_error(tmp_path, capsys):
    rc = main(["experiment", "sample-complexity", "--smoke", "--methods", "bogus", "--out", str(tmp_path)])
    assert rc == 2 and "unknown method" in capsys.readouterr().err


def test_sample_complexity_k_sweep_short_form(tmp_path, capsys):
    rc = main(["experiment", "sample-complexity", "--smoke", "--methods", "thresholded,wang_xu", "--ks", "4,8,16",
               "--dims", "48", "--reps", "4", "--rtol", "0.5", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0 and "exponent of k" in out and "plan() bound" in out and "measured - bound" in out
    data = json.loads((tmp_path / "sample_complexity_k_simulated.json").read_text())
    assert data["ks"] == [4, 8, 16] and data["commands"][0].endswith("--out " + str(tmp_path))
    rc = main(["experiment", "sample-complexity", "--smoke", "--methods", "wang_xu", "--epsilons", "0.5,one",
               "--out", str(tmp_path)])
    assert rc == 2 and "--epsilons takes comma-separated numbers" in capsys.readouterr().err


def test_experiments_run_without_progress_bars(tmp_path, monkeypatch):
    """An experiment makes thousands of fits: while it runs, dask's configuration turns the
    fits' progress bars off (a terminal would otherwise show one bar per fit)."""
    import dask

    import dpdist.experiments.validation as validation

    seen = []

    def fake_run(**kwargs):
        seen.append(dask.config.get("dpdist.progress"))
        return {"methods": {}, "files": [], "shift_found": False}

    monkeypatch.setattr(validation, "run_validation", fake_run)
    assert dask.config.get("dpdist.progress") is None
    rc = main(["experiment", "validate-simulation", "--smoke", "--json", "--out", str(tmp_path)])
    assert rc == 0 and seen == [False]
    assert dask.config.get("dpdist.progress") is None  # restored afterwards
