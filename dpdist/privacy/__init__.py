"""Privacy core, pure NumPy/SciPy (no dask, no zarr): what a privacy reviewer reads.

:mod:`~dpdist.privacy.noise` holds the noise primitives (the only code that draws random
numbers), :mod:`~dpdist.privacy.mechanisms` one module per mechanism (its calibration, noise
callables and events), and the modules beside them the guarantees (:mod:`~dpdist.privacy.budget`,
:mod:`~dpdist.privacy.zcdp`), events and accounting, the float factors of sensitivities and the
:class:`~dpdist.privacy.release.Release` record.
"""

from dpdist.privacy.budget import MAX_EPSILON, ApproxDP, check_delta, check_epsilon
from dpdist.privacy.noise.streams import NoiseSeed, resolve_random_state
from dpdist.privacy.release import Release
from dpdist.privacy.zcdp import MAX_RHO, ZCDP, Guarantee

__all__ = [
    "MAX_EPSILON",
    "MAX_RHO",
    "ApproxDP",
    "Guarantee",
    "NoiseSeed",
    "Release",
    "ZCDP",
    "check_delta",
    "check_epsilon",
    "resolve_random_state",
]
