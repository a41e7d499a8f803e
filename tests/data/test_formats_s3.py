"""A Parquet dataset on S3 (moto's server on 127.0.0.1) read in row chunks, through the Python
API and the command line."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pyarrow", reason="pyarrow not installed (pip install 'dpdist[formats]')")
pd = pytest.importorskip("pandas", reason="pandas not installed (pip install 'dpdist[formats]')")

import dpdist  # noqa: E402
import dpdist.data.formats as formats  # noqa: E402
from dpdist.cli.main import main  # noqa: E402
from dpdist.data import as_dask_array  # noqa: E402
from tests.ops.test_s3 import BUCKET, s3_env  # noqa: E402,F401  (moto's server, the AWS environment)


def test_a_parquet_dataset_on_s3_fits_from_python_and_the_cli(s3_env, tmp_path, monkeypatch):  # noqa: F811
    import fsspec

    monkeypatch.setattr(formats, "DEFAULT_ROW_CHUNK_BYTES", 2400)  # several chunks
    X = np.random.default_rng(8).standard_normal((900, 3))
    frame = pd.DataFrame(X, columns=["x", "y", "z"]).assign(label=[f"r{i}" for i in range(900)])
    url = f"s3://{BUCKET}/tables/data.parquet"
    fs = fsspec.filesystem("s3")
    for i, part in enumerate((frame.iloc[:500], frame.iloc[500:])):
        with fs.open(f"{url}/part.{i}.parquet", "wb") as fh:
            part.to_parquet(fh, row_group_size=100)
    arr = as_dask_array(url, columns=["x", "y", "z"])
    assert arr.numblocks[0] > 1
    np.testing.assert_array_equal(arr.compute(), X)

    def est():
        return dpdist.SparseCovariance(2, 1.0, 1e-5, clip=3.0, random_state=4, scheduler="synchronous")

    reference = est().fit(X).covariance_.toarray()
    np.testing.assert_array_equal(est().fit(arr).covariance_.toarray(), reference)
    out = tmp_path / "cov.zarr"
    assert main(["covariance", url, "--columns", "x,y,z", "--k", "2", "--epsilon", "1", "--delta", "1e-5",
                 "--clip", "3", "--random-state", "4", "--scheduler", "synchronous", "--output", str(out)]) == 0
    np.testing.assert_array_equal(dpdist.load_result(out).covariance.toarray(), reference)
    with pytest.raises(dpdist.ValidationError, match="column 'label' has type (large_)?string"):
        as_dask_array(url)  # the schema, read from the footers on S3, refuses the text column
