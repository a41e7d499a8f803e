"""Exit codes, one-line errors, --json documents, the rejection record and output checks.

Errors that are untyped in the library today (a truncated zarr.json, a corrupt chunk) exit 1
with one line; an epsilon above the largest supported one is refused with exit 2.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import zarr

import dpdist
from dpdist.cli.main import EXIT_CODES, build_parser, main
from dpdist.exceptions import DpdistError

README = Path(__file__).resolve().parents[2] / "README.md"
COV = ["--k", "2", "--epsilon", "1", "--delta", "1e-6", "--sigma", "1", "--scheduler", "synchronous"]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A small valid store, and copies with a truncated zarr.json and with a corrupt chunk."""
    root = tmp_path_factory.mktemp("stores")
    x = np.random.default_rng(0).standard_normal((2_000, 6))
    paths = {}
    for name in ("ok", "truncated", "corrupt"):
        z = zarr.create_array(str(root / f"{name}.zarr"), shape=x.shape, chunks=(500, 6), dtype="f8")
        z[...] = x
        paths[name] = str(root / f"{name}.zarr")
    meta = Path(paths["truncated"]) / "zarr.json"
    meta.write_text(meta.read_text()[:50])
    (Path(paths["corrupt"]) / "c" / "1" / "0").write_bytes(b"not a zstd frame")
    return paths


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def _spy_fit(monkeypatch, cls=dpdist.SparseCovariance) -> list:
    calls = []
    real = cls.fit

    def fit(self, X, y=None):
        calls.append(X)
        return real(self, X, y)

    monkeypatch.setattr(cls, "fit", fit)
    return calls


def _unwritable_dir(tmp_path: Path) -> Path:
    """A directory this process cannot create entries in: a read-only one, or (as root, who
    ignores mode bits) a read-only file system such as /sys."""
    d = tmp_path / "ro"
    d.mkdir()
    d.chmod(0o555)
    for candidate in (d, Path("/sys")):
        try:
            (candidate / ".dpdist-probe").mkdir()
        except OSError:
            return candidate
        (candidate / ".dpdist-probe").rmdir()
    pytest.skip("no unwritable directory available to this user")


@pytest.mark.parametrize("case", ["read-only directory", "missing parent", "existing output", "existing record"])
def test_output_is_checked_before_anything_is_read(store, tmp_path, monkeypatch, capsys, case):
    """The input's chunk is corrupt: had any data been read, the error would be about it."""
    out = {"read-only directory": lambda: _unwritable_dir(tmp_path) / "o.zarr",
           "missing parent": lambda: tmp_path / "nope" / "o.zarr",
           "existing output": lambda: tmp_path / "o.zarr",
           "existing record": lambda: tmp_path / "o.zarr"}[case]()
    if case == "existing output":
        out.mkdir()
    if case == "existing record":
        Path(f"{out}.rejected.json").write_text("{}")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    calls = _spy_fit(monkeypatch)
    rc = main(["covariance", store["corrupt"], *COV, "--output", str(out)])
    line = _one_line(capsys.readouterr().err)
    assert rc == 2 and calls == []
    assert {"read-only directory": "not writable", "missing parent": "does not exist",
            "existing output": "already exists", "existing record": "rejected.json"}[case] in line
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def test_overwrite_replaces_an_existing_output(store, tmp_path, capsys):
    out = tmp_path / "o.zarr"
    out.mkdir()
    assert main(["covariance", store["ok"], *COV, "--random-state", "1", "--output", str(out), "--overwrite"]) == 0
    assert dpdist.load_result(out).covariance.shape == (6, 6)


@pytest.mark.parametrize("case", ["huge epsilon", "truncated zarr.json", "corrupt chunk", "unreachable scheduler"])
def test_failures_are_one_line_and_write_nothing(store, tmp_path, capsys, case):
    import dask
    import distributed  # noqa: F401  (its config defaults must be loaded before dask.config.set)

    argv = {
        "huge epsilon": ["covariance", store["ok"], "--k", "2", "--epsilon", "1e308", "--delta", "1e-6", "--sigma", "1",
                         "--scheduler", "synchronous"],
        "truncated zarr.json": ["covariance", store["truncated"], *COV],
        "corrupt chunk": ["covariance", store["corrupt"], *COV],
        "unreachable scheduler": ["covariance", store["ok"], "--k", "2", "--epsilon", "1", "--delta", "1e-6",
                                  "--sigma", "1", "--scheduler", "tcp://127.0.0.1:9"],
    }[case]
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        rc = main([*argv, "--output", str(tmp_path / "o.zarr")])
    line = _one_line(capsys.readouterr().err)
    assert line.startswith("dpdist covariance: ") and "Traceback" not in line
    # the exit codes of dpdist --help: 2 validation, 5 infrastructure; a damaged store may still give 1
    assert rc in {"huge epsilon": (2,), "truncated zarr.json": (1, 2, 5), "corrupt chunk": (1, 5),
                  "unreachable scheduler": (5,)}[case], line
    if rc == 5:
        assert "nothing was" in line and "spent" in line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("epsilon", ["1e5", "1e100", "1e308"])
def test_huge_epsilon_computes_or_is_refused_before_reading(store, tmp_path, capsys, epsilon):
    # the corrupt store fails on reading its second chunk: a refusal naming the largest epsilon
    # with exit 2 shows the data were never read
    out = tmp_path / "o.zarr"
    source = store["ok"] if epsilon == "1e5" else store["corrupt"]
    rc = main(["covariance", source, "--k", "2", "--epsilon", epsilon, "--delta", "1e-6", "--sigma", "1",
               "--scheduler", "synchronous", "--random-state", "0", "--output", str(out)])
    err = capsys.readouterr().err
    if epsilon == "1e5":
        assert rc == 0, err
        cov = dpdist.load_result(out).covariance
        assert np.isfinite(cov.toarray() if hasattr(cov, "toarray") else cov).all()
        return
    line = _one_line(err)
    assert rc == 2 and "largest epsilon dpdist supports, 1e+06" in line and f"--epsilon {float(epsilon):g}" in line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("address", ["tpc://127.0.0.1:8786", "localhost"])
def test_a_bad_scheduler_address_is_refused_before_connecting(store, tmp_path, monkeypatch, capsys, address):
    from dpdist.engine import scheduler

    tried = []
    monkeypatch.setattr(scheduler, "connect", lambda *a: tried.append(a))
    rc = main(["covariance", store["ok"], "--k", "2", "--epsilon", "1", "--delta", "1e-6", "--sigma", "1",
               "--scheduler", address, "--output", str(tmp_path / "o.zarr")])
    line = _one_line(capsys.readouterr().err)
    assert rc == 2 and tried == [] and f"scheduler {address!r} is not a dask scheduler address" in line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("dtype", ["int32", "bool", "complex64"])
def test_input_dtypes_are_converted_with_one_line_or_refused(tmp_path, capsys, dtype):
    z = zarr.create_array(str(tmp_path / "x.zarr"), shape=(200, 4), chunks=(100, 4), dtype=dtype)
    z[...] = (np.arange(800).reshape(200, 4) % 3).astype(dtype)
    out = tmp_path / "o.zarr"
    rc = main(["covariance", str(tmp_path / "x.zarr"), *COV, "--output", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    if dtype == "complex64":
        assert rc == 2 and _one_line("\n".join(err)).startswith(
            "dpdist covariance: error: Complex data not supported: X has dtype complex64, which dpdist does not read")
        assert not out.exists()
        return
    assert rc == 0
    notes = [line for line in err if "dtype" in line]
    assert notes == [f"dpdist covariance: note: X has dtype {dtype}; converted to float64"]
    assert not any("Warning" in line or "est.fit" in line for line in err), err


@pytest.mark.parametrize(("argv", "expected", "python_words"), [
    (["second-moment", "X", "--rho", "1", "--m", "1", "--radius", "5", "--lambda-min", "-1", "--output", "O"],
     "--lambda-min must be a finite real number > 0, got -1.0", "lambda_min"),
    (["second-moment", "X", "--rho", "1", "--m", "1", "--radius", "5", "--output", "O"],
     "the private --lambda-min step needs m >= n_features (groups of m rows are singular otherwise), got --m 1, "
     "n_features=6; pass a public --lambda-min", "lambda_min"),
    (["covariance", "X", "--k", "9", "--epsilon", "1", "--delta", "1e-6", "--sigma", "1", "--output", "O"],
     "got --k 9", "k=9"),
    (["covariance", "X", "--k", "2", "--epsilon", "1", "--delta", "1e-6", "--sigma", "1", "--output", "EXISTS"],
     "already exists (pass --overwrite to replace it)", "overwrite=True"),
    (["generate", "EXISTS", "--n-samples", "10"], "already exists (pass --overwrite to replace it)", "overwrite=True"),
    (["second-moment", "--plan", "--n-samples", "100", "--n-features", "5", "--rho", "1", "--m", "3"],
     "`dpdist second-moment --plan` needs option(s): --radius, --lambda-min", "lambda_min"),
])
def test_errors_name_flags_not_python_parameters(store, tmp_path, capsys, argv, expected, python_words):
    (tmp_path / "exists.zarr").mkdir()
    subst = {"X": store["ok"], "O": str(tmp_path / "o.zarr"), "EXISTS": str(tmp_path / "exists.zarr")}
    rc = main([subst.get(a, a) for a in argv])
    line = _one_line(capsys.readouterr().err)
    assert rc == 2 and expected in line and python_words not in line, line


def test_flag_words_leave_quoted_text_alone():
    from dpdist.cli.main import _FlagWords

    parser = build_parser()
    words = _FlagWords(parser, parser.parse_args(["second-moment", "x", "--rho", "1", "--m", "2"]))
    assert (words("output '/d/m=3/lambda_min.zarr' exists (pass overwrite=True); got m=1")
            == "output '/d/m=3/lambda_min.zarr' exists (pass --overwrite); got --m 1")


def test_unexpected_errors_are_one_line_with_a_hint(store, tmp_path, monkeypatch, capsys):
    def boom(self, X, y=None):
        raise RuntimeError("first line\nsecond line")

    monkeypatch.setattr(dpdist.SparseCovariance, "fit", boom)
    argv = ["covariance", store["ok"], *COV, "--output", str(tmp_path / "o.zarr")]
    monkeypatch.delenv("DPDIST_DEBUG", raising=False)
    assert main(argv) == 1
    line = _one_line(capsys.readouterr().err)
    assert "internal error: RuntimeError: first line second line" in line and "--debug" in line
    assert main([*argv, "--debug"]) == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and err.strip().endswith("for the traceback)")
    monkeypatch.setenv("DPDIST_DEBUG", "1")
    assert main(argv) == 1
    assert "Traceback" in capsys.readouterr().err

    def storage(self, X, y=None):
        raise OSError(5, "Input/output error")

    monkeypatch.delenv("DPDIST_DEBUG")
    monkeypatch.setattr(dpdist.SparseCovariance, "fit", storage)
    assert main(argv) == 5
    assert "infrastructure failure" in _one_line(capsys.readouterr().err)


def test_usage_errors_exit_2_in_one_line_with_json(capsys):
    assert main(["covariance", "--epsilon", "x", "--json"]) == 2
    captured = capsys.readouterr()
    assert "invalid float value" in _one_line(captured.err)
    doc = json.loads(captured.out)
    assert doc["error"]["exit_code"] == 2 and doc["error"]["type"] == "UsageError"
    assert main(["no-such-command"]) == 2
    assert "invalid choice" in _one_line(capsys.readouterr().err)


def test_no_private_result_records_the_spent_budget(tmp_path, capsys):
    """PrivNorm's private test rejects at this size (seeded: reproducible): exit 4, the record
    beside the requested output says what was spent, and the output is not written."""
    from dpdist.data.model2 import make_model2

    data = make_model2(20_000, 12, 2, gap=0.6, lambda1=4.0, chunks=5_000, random_state=0).write_zarr(tmp_path / "m2")
    out = tmp_path / "pp.zarr"
    argv = ["pca", str(data), "--method", "privpca", "--k", "2", "--epsilon", "1", "--delta", "1e-6", "--gap", "0.6",
            "--sigma", "2", "--random-state", "0", "--scheduler", "synchronous", "--output", str(out), "--json"]
    assert main(argv) == 4
    captured = capsys.readouterr()
    record_path = f"{out}.rejected.json"
    doc = json.loads(captured.out)
    assert doc == {"status": "no-private-result", "exit_code": 4, "error": doc["error"], "rejected_record": record_path}
    assert "no private result" in captured.err and record_path in captured.err
    record = json.loads(Path(record_path).read_text())
    assert record["status"] == "rejected" and record["exit_code"] == 4 and record["stage"].startswith("privnorm/")
    # the mechanism's own record: the private mean's share (0.1) and PrivNorm's half of the rest
    # (norm_fraction 0.5) were spent
    assert record["privacy_spent"] == {"type": "approx-dp", "epsilon": 0.55, "delta": 5.5e-7}
    assert record["release"]["status"] == "rejected" and record["command"][:2] == ["dpdist", "pca"]
    assert not out.exists()
    # a second attempt is refused before spending: the record must be moved away first
    assert main(argv) == 2
    assert "rejected.json" in capsys.readouterr().err


def test_an_early_rejection_records_what_the_mechanism_spent(tmp_path, capsys, monkeypatch):
    """RecDPSME's private lambda_min step rejects on singular data: its NoPrivateResult carries
    the release of the two initialisation steps (rho/20 each at init_fraction 0.1), and the
    record says exactly that. A rejection that carried no release would count the whole
    requested budget."""
    x = np.random.default_rng(0).standard_normal((4_000, 4))
    x[:, 3] = x[:, 2]
    z = zarr.create_array(str(tmp_path / "s.zarr"), shape=x.shape, chunks=(2_000, 4), dtype="f8")
    z[...] = x
    out = tmp_path / "m2.zarr"
    argv = ["second-moment", str(tmp_path / "s.zarr"), "--rho", "1", "--m", "4", "--random-state", "0",
            "--scheduler", "synchronous", "--output", str(out)]
    assert main(argv) == 4
    record = json.loads(Path(f"{out}.rejected.json").read_text())
    spent = record["privacy_spent"]
    assert (spent["type"], spent["rho"]) == ("zcdp", pytest.approx(0.1))
    assert [b["step"] for b in spent["breakdown"]] == ["init radius", "init lambda_min"]
    assert record["stage"] == "init-lambda" and not out.exists()

    def reject_without_release(self, X, y=None):
        raise dpdist.NoPrivateResult("bottom", stage="test")

    monkeypatch.setattr(dpdist.SecondMoment, "fit", reject_without_release)
    Path(f"{out}.rejected.json").unlink()
    assert main(argv) == 4
    record = json.loads(Path(f"{out}.rejected.json").read_text())
    assert record["privacy_spent"] == {"type": "zcdp", "rho": 1.0} and "whole requested budget" in record["privacy_spent_rule"]
    capsys.readouterr()


def test_json_on_every_command(store, tmp_path, capsys):
    """stdout is exactly one JSON document for every command."""
    g = tmp_path / "g.zarr"
    runs = {
        "generate": ["generate", str(g), "--n-samples", "3000", "--n-features", "6", "--chunk-rows", "1000",
                     "--scheduler", "synchronous"],
        "convert": ["convert", str(g), str(tmp_path / "g32.zarr"), "--scheduler", "synchronous"],
        "covariance": ["covariance", str(g), *COV, "--output", str(tmp_path / "c.zarr")],
        "pca": ["pca", "--method", "expmech", "--plan", "--n-samples", "10000", "--n-features", "6", "--k", "2",
                "--epsilon", "1", "--delta", "1e-6", "--sigma", "1"],
        "norm": ["norm", str(g), "--plan", "--k", "2", "--epsilon", "1", "--delta", "1e-6", "--gap", "0.5",
                 "--sigma", "1", "--n-batches", "50"],
        "second-moment": ["second-moment", "--plan", "--rho", "1", "--m", "10", "--radius", "100", "--lambda-min",
                          "1", "--n-samples", "10000", "--n-features", "4"],
        "demo": ["demo", "--n-samples", "3000", "--n-features", "6", "--scheduler", "synchronous"],
        "audit": ["audit", "--mechanism", "primitives/laplace", "--trials", "200"],
        "experiment": ["experiment", "second-moment-curves", "--smoke", "--out", str(tmp_path / "exp")],
    }
    # the job-file and ledger commands print JSON documents too: tests/ops/test_run_cli.py
    runs.update(dict.fromkeys(("budget", "plan", "run", "report")))
    assert set(runs) == set(build_parser()._subparsers._group_actions[0].choices)
    docs = {}
    for name, argv in runs.items():
        if argv is None:
            continue
        assert main([*argv, "--json"]) == 0, name
        docs[name] = json.loads(capsys.readouterr().out)
    assert docs["generate"]["output"] == str(g) and docs["generate"]["n_samples"] == 3000
    assert docs["convert"]["output"] == str(tmp_path / "g32.zarr") and docs["convert"]["dtype"] == "float32"
    assert (docs["convert"]["n_samples"], docs["convert"]["n_features"]) == (3000, 6)
    assert all(f.startswith(str(tmp_path / "exp")) for f in docs["experiment"]["files"])
    assert docs["covariance"]["output"] == str(tmp_path / "c.zarr") and docs["covariance"]["privacy"]["epsilon"] == 1
    assert docs["norm"]["n_samples"] == 3000 and docs["pca"]["n_subsets"] == 15
    assert docs["second-moment"]["n_levels"] >= 1
    assert docs["demo"]["privacy_total"] == {"type": "approx-dp", "epsilon": 4.0, "delta": 2e-6}
    assert [r["private"] for r in docs["demo"]["releases"]] == [True, True, False] and not docs["demo"]["kept"]
    assert docs["audit"][0]["mechanism"] == "primitives/laplace"


def test_exit_codes_are_documented_in_help_and_readme(capsys):
    codes = {0, 1, 130, 143} | {cls.exit_code for cls in _subclasses(DpdistError)}
    assert {code for code, _ in EXIT_CODES} == codes
    with pytest.raises(SystemExit):
        main(["--help"])
    help_text = capsys.readouterr().out
    readme = README.read_text()
    for code, text in EXIT_CODES:
        assert re.search(rf"^  {code}\s+{re.escape(text[:30])}", help_text, re.M), code
        assert re.search(rf"^\| {code} \| ", readme, re.M), code
    assert "--json" in help_text and "DPDIST_DEBUG" in help_text


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def test_privacy_banners_once_each_from_metadata_or_warning(store, tmp_path, monkeypatch, capsys):
    from dpdist.exceptions import PrivacyWarning, SeededReleaseWarning

    # seeded: from the metadata alone; stdout (JSON) stays one document
    assert main(["covariance", store["ok"], *COV, "--random-state", "3", "--output", str(tmp_path / "a"), "--json"]) == 0
    captured = capsys.readouterr()
    json.loads(captured.out)
    assert [ln for ln in captured.err.splitlines() if "!!" in ln and "VACUOUS" not in ln] == [
        "dpdist covariance: !! SEEDED noise (--random-state): reproducible, so NOT a private release; for tests only"]
    # NOT PRIVATE baseline
    assert main(["covariance", store["ok"], "--method", "thresholded", "--sigma", "1", "--scheduler", "synchronous",
                 "--output", str(tmp_path / "b")]) == 0
    assert "!! NOT PRIVATE: " in capsys.readouterr().err
    # a library that flags a seeded release with a SeededReleaseWarning too: still one banner;
    # another kind of PrivacyWarning is shown as it is
    real = dpdist.SparseCovariance.fit

    def warn_then_fit(self, X, y=None):
        import warnings

        warnings.warn("the noise is seeded: this release is not private", SeededReleaseWarning)
        warnings.warn("something new", PrivacyWarning)
        return real(self, X, y)

    monkeypatch.setattr(dpdist.SparseCovariance, "fit", warn_then_fit)
    assert main(["covariance", store["ok"], *COV, "--random-state", "3", "--output", str(tmp_path / "c")]) == 0
    banners = [ln for ln in capsys.readouterr().err.splitlines() if "!!" in ln and "VACUOUS" not in ln]
    assert len(banners) == 2 and "SEEDED" in banners[0] and banners[1].endswith("!! WARNING: something new")


def test_unsafe_no_privacy_banner(tmp_path, capsys):
    from dpdist.data.second_moment_generators import anisotropic_gaussian, to_zarr

    to_zarr(anisotropic_gaussian(4_000, random_state=1, chunk_rows=2_000), tmp_path / "x.zarr")
    assert main(["second-moment", str(tmp_path / "x.zarr"), "--method", "subsample-aggregate", "--epsilon", "1",
                 "--delta", "1e-7", "--m", "100", "--unsafe-no-privacy", "--scheduler", "synchronous",
                 "--output", str(tmp_path / "o.zarr")]) in (0, 4)
    err = capsys.readouterr().err
    assert "!! --unsafe-no-privacy" in err and "NOT PRIVATE" in err



def test_missing_chunks_follow_the_public_record_not_the_listing(tmp_path, capsys):
    """A store whose chunk manifest records a chunk it lost is refused (exit 2, naming no
    chunk) before anything is read or written, and --missing-chunks fill reads the gap as the
    fill value; a store without a manifest is read per the Zarr specification by default and
    refused by --missing-chunks raise, whatever its chunks."""
    from dpdist.data.validation import READING_NOTES, write_chunk_manifest

    x = np.random.default_rng(1).standard_normal((2_000, 6))
    for name in ("holey", "plain"):
        z = zarr.create_array(str(tmp_path / f"{name}.zarr"), shape=x.shape, chunks=(500, 6), dtype="f8")
        z[...] = x
    write_chunk_manifest(zarr.open_array(str(tmp_path / "holey.zarr"), mode="r+"))
    (tmp_path / "holey.zarr" / "c" / "2" / "0").unlink()
    (tmp_path / "plain.zarr" / "c" / "2" / "0").unlink()
    out = tmp_path / "c.zarr"
    argv = ["covariance", str(tmp_path / "holey.zarr"), *COV, "--output", str(out)]
    assert main(argv) == 2
    err = _one_line(capsys.readouterr().err)
    assert "lost chunk files" in err and "c/2" not in err and not out.exists()
    assert main([*argv, "--missing-chunks", "fill"]) == 0
    res = dpdist.load_result(out)
    assert res.covariance.shape == (6, 6) and READING_NOTES["fill"] in res.metadata["notes"]
    plain = ["covariance", str(tmp_path / "plain.zarr"), *COV]
    assert main([*plain, "--output", str(tmp_path / "p.zarr")]) == 0
    assert READING_NOTES["fill"] in dpdist.load_result(tmp_path / "p.zarr").metadata["notes"]
    capsys.readouterr()
    assert main([*plain, "--missing-chunks", "raise", "--output", str(tmp_path / "q.zarr")]) == 2
    assert "carries no chunk manifest" in _one_line(capsys.readouterr().err)
