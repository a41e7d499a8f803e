"""The measured n* that plan() quotes is package data: read without the experiments package."""

from __future__ import annotations

import fnmatch
import pathlib
import subprocess
import sys
import tomllib

import dpdist.algorithms.measured as measured

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_plan_quotes_the_measured_n_star_without_importing_the_experiments():
    code = ("import sys, dpdist\n"
            "plan = dpdist.SparseCovariance(20, 1.0, 1e-6, sigma=1.0, selection='paper').plan(10**9, 2000)\n"
            "assert [e['method'] for e in plan.empirical] == ['privcov'], plan.empirical\n"
            "print(sorted(m for m in sys.modules if m.startswith('dpdist.experiments')))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_data_file_is_shipped_as_package_data():
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["dpdist"]
    name = f"algorithms/{measured.DATA_FILE}"
    assert (ROOT / "dpdist" / name).is_file()
    assert any(fnmatch.fnmatch(name, g) for g in globs), globs


def test_write_table_writes_what_load_table_reads(tmp_path):
    from dpdist.experiments.empirical import SOURCES, build_table, write_table

    sources = [ROOT / s for s in SOURCES]
    path = write_table(tmp_path / "table.json", sources)
    table = measured.load_table(pathlib.Path(path).read_text())
    assert table == build_table(sources) == measured.TABLE
    assert all(isinstance(p, tuple) for entry in table.values() for p in entry["points"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["table.json"]


def test_every_estimator_of_the_package_is_in_the_fingerprints_table():
    """The fingerprints find the estimators by name in a table the classes fill as they are
    defined; a class defined outside the package (a user's subclass) does not replace them."""
    import dpdist
    from dpdist.algorithms._base import Estimator
    from dpdist.algorithms.fingerprint import ESTIMATORS

    public = [getattr(dpdist, n) for n in dpdist.__all__]
    public += [getattr(dpdist.baselines, n) for n in dpdist.baselines.__all__]
    for cls in public:
        if isinstance(cls, type) and issubclass(cls, Estimator):
            assert ESTIMATORS[cls.__name__] is cls

    class SparseCovariance(dpdist.SparseCovariance):
        pass

    assert ESTIMATORS["SparseCovariance"] is dpdist.SparseCovariance
