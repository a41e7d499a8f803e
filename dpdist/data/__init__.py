"""Data layer: Zarr input/output, validation and synthetic generators."""

from dpdist.data.validation import as_dask_array, open_zarr_array

__all__ = ["as_dask_array", "open_zarr_array"]
