"""Job files over a Parquet dataset: [dataset] columns selects what the estimator reads, and the
budget is kept under the dataset's URL."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("pyarrow", reason="pyarrow not installed (pip install 'dpdist[formats]')")
pd = pytest.importorskip("pandas", reason="pandas not installed (pip install 'dpdist[formats]')")

from dpdist.cli.main import main  # noqa: E402
from dpdist.data.results import load_result  # noqa: E402
from dpdist.data.validation import canonical_location  # noqa: E402
from dpdist.ops.job import load_job  # noqa: E402
from dpdist.ops.ledger import open_ledger  # noqa: E402
from dpdist.privacy.budget import ApproxDP  # noqa: E402
from tests.ops.conftest import job_toml  # noqa: E402


def test_a_job_reads_the_columns_it_names_of_a_parquet_dataset(tmp_path, capsys):
    X = np.random.default_rng(2).standard_normal((800, 3))
    data = str(tmp_path / "claims.parquet")
    pd.DataFrame(X, columns=["x", "y", "z"]).assign(label="text").to_parquet(data, row_group_size=200)
    ledger = str(tmp_path / "ledger.sqlite")
    with open_ledger(ledger) as led:
        led.set_budget(data, ApproxDP(1.0, 1e-6))
    text = job_toml(data, str(tmp_path / "cov-{run}.zarr"), epsilon=0.5, ledger=ledger)
    assert 'name = "tiny"\n' in text
    every = tmp_path / "every.toml"
    every.write_text(text)
    chosen = tmp_path / "chosen.toml"
    chosen.write_text(text.replace('name = "tiny"\n', 'name = "tiny"\ncolumns = ["z", "x"]\n'))
    assert load_job(str(chosen)).columns == ("z", "x")

    assert main(["plan", str(every)]) == 2  # every column: the text one is refused by its type
    assert "column 'label' has type" in capsys.readouterr().err
    capsys.readouterr()
    assert main(["run", str(chosen), "--json"]) == 0, capsys.readouterr().err
    res = json.loads(capsys.readouterr().out)
    assert load_result(res["output"]).covariance.shape == (2, 2)
    with open_ledger(ledger) as led:
        [entry] = [e for e in led.history(canonical_location(data)) if e.state == "committed"]
    assert entry.checksum == res["checksum"]


def test_job_columns_must_be_names(tmp_path):
    text = job_toml("data.parquet", "out.zarr").replace('name = "tiny"\n', 'name = "tiny"\ncolumns = "x"\n')
    (tmp_path / "job.toml").write_text(text)
    with pytest.raises(Exception, match="dataset.columns: must be a non-empty list of column names"):
        load_job(str(tmp_path / "job.toml"))
