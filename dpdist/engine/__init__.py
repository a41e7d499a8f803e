"""Engine: exact chunked statistics on dask arrays. No privacy formulas live here."""

from dpdist.engine.runtime import check_scheduler, client_for, compute

__all__ = ["check_scheduler", "client_for", "compute"]
