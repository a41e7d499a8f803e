"""Data layer: Zarr, Parquet, CSV and .npy input, conversion to Zarr, results, validation and
synthetic generators."""

from dpdist.data.convert import convert
from dpdist.data.validation import as_dask_array, open_zarr_array

__all__ = ["as_dask_array", "convert", "open_zarr_array"]
