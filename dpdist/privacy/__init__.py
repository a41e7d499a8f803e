"""Privacy core: budgets, calibration, noise and releases. Pure NumPy/SciPy; no dask, no zarr."""

from dpdist.privacy.budget import MAX_EPSILON, ApproxDP, check_delta, check_epsilon
from dpdist.privacy.noise.streams import NoiseSeed, resolve_random_state
from dpdist.privacy.release import Release
from dpdist.privacy.zcdp import MAX_RHO, ZCDP

__all__ = [
    "MAX_EPSILON",
    "MAX_RHO",
    "ApproxDP",
    "NoiseSeed",
    "Release",
    "ZCDP",
    "check_delta",
    "check_epsilon",
    "resolve_random_state",
]
