"""Shared helpers of the audit case modules (:mod:`dpdist.testing.mechanisms`)."""

from __future__ import annotations

import contextlib
import warnings
from typing import Any, Callable

import numpy as np

__all__: list[str] = []

Mechanism = Callable[[Any, int, int], np.ndarray]


def _seed(seed: int):
    from dpdist.privacy.noise.streams import NoiseSeed

    return NoiseSeed(int(seed) & ((1 << 128) - 1), seeded=True)


def _own(source, mech):
    """The noise source the trials run: ``source``, or the package's own ``mech``."""
    return mech if source is None else source


@contextlib.contextmanager
def _seeded_fits_are_expected():
    """Silence the PrivacyWarning of the seeded fits these audits run on purpose (one per
    trial otherwise)."""
    from dpdist.exceptions import PrivacyWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        yield


def _scale_for(target: float, unit: float) -> float:
    """Linear rescaling helper: the epsilon that makes a component claim equal ``target``."""
    return target / unit


def _exact_second_moment(X: np.ndarray, clip: float, row_clip: float | None = None) -> np.ndarray:
    """The clipped second moment (1/n) Y^T Y through the engine (computed once per dataset);
    with ``row_clip``, the rows scaled to that L2 norm after the entry clip."""
    import dask.array as da

    from dpdist.engine.gram import clipped_second_moment

    return np.asarray(clipped_second_moment(da.from_array(np.asarray(X, float)), clip, row_clip=row_clip)
                      .compute(scheduler="synchronous"))
