"""The clipped-mean Gaussian mechanism and the engine's exact integer row sum."""

from __future__ import annotations

import math

import dask.array as da
import numpy as np
import pytest

from dpdist.engine.mean import block_norm_clip_units, clipped_row_sum
from dpdist.exceptions import ValidationError
from dpdist.privacy.accounting import release_guarantee
from dpdist.privacy.events import GaussianEvent
from dpdist.privacy.mechanisms.gaussian import analytic_gaussian_sigma, classic_gaussian_sigma
from dpdist.privacy.mechanisms.mean import PURPOSE_MEAN, ClippedMeanMechanism
from dpdist.privacy.noise.streams import NoiseSeed
from tests.privacy.balle_wang import assert_smallest_sigma


def _oracle_units(X, clip, unit):
    """NumPy oracle: rows scaled to norm <= clip, rounded to multiples of unit."""
    norms = np.linalg.norm(X, axis=1)
    scale = np.minimum(1.0, clip / np.where(norms > 0, norms, 1.0))
    return np.rint(X * scale[:, None] / unit).astype(np.int64)


def test_rows_are_clipped_rounded_and_bounded_exactly():
    mech = ClippedMeanMechanism.calibrate(1.0, 1e-6, 100, 3, 2.0)
    rng = np.random.default_rng(0)
    X = rng.normal(0, 3, (50, 3))
    X[0] = [1e300, -1e300, 1e300]  # the norm overflows: a zero row, never an unbounded one
    X[1] = [np.nan, 0, 0]
    X[2] = [0, np.inf, 0]
    m = block_norm_clip_units(X, mech.clip, mech.unit, mech.norm_bound_sq)
    assert m.dtype == np.int64
    np.testing.assert_array_equal(m[:3], 0)
    np.testing.assert_array_equal(m[3:], _oracle_units(X[3:], mech.clip, mech.unit))
    assert int((m * m).sum(axis=1).max()) <= mech.norm_bound_sq
    # the bound is the clip plus the rounding, in lattice units
    assert math.sqrt(mech.norm_bound_sq) <= mech.clip / mech.unit + math.sqrt(3) / 2 + 1


def test_the_integer_row_sum_does_not_depend_on_the_chunks():
    mech = ClippedMeanMechanism.calibrate(1.0, 1e-6, 1000, 5, 4.0)
    X = np.random.default_rng(1).normal(2, 2, (1000, 5))
    sums = [clipped_row_sum(da.from_array(X, chunks=c), mech.clip, mech.unit, mech.norm_bound_sq).compute(
        scheduler="synchronous") for c in ((1000, 5), (7, 2), (333, 3))]
    for s in sums[1:]:
        np.testing.assert_array_equal(s, sums[0])
    np.testing.assert_array_equal(sums[0], _oracle_units(X, mech.clip, mech.unit).sum(axis=0))


def test_calibration_event_and_lattice_noise():
    n, d, C = 500, 4, 3.0
    mech = ClippedMeanMechanism.calibrate(2.0, 1e-5, n, d, C)
    assert mech.sensitivity == 2 * C / n
    assert mech.sigma == pytest.approx(analytic_gaussian_sigma(2 * C / n, 2.0, 1e-5), rel=1e-12)
    assert mech.event() == GaussianEvent(mech.sigma / mech.sensitivity)
    assert mech.lattice_multiplier >= mech.sigma / mech.sensitivity
    # the event certifies the budget it was calibrated for
    assert release_guarantee([mech.event()], delta=1e-5).epsilon <= 2.0 * (1 + 1e-9)
    # the noise added to the mean is the calibrated sigma, up to the lattice factor
    assert mech.sigma <= mech.noise_scales()["gaussian"] <= mech.sigma * (1 + (math.sqrt(d) + 2) * mech.unit / (2 * C))
    assert mech.describe()["purposes"] == {"gaussian": PURPOSE_MEAN}
    small = ClippedMeanMechanism.calibrate(0.5, 1e-5, n, d, C)  # epsilon < 1: still the exact rule
    assert_smallest_sigma(small.sigma, 2 * C / n, 0.5, 1e-5)
    assert small.sigma < classic_gaussian_sigma(2 * C / n, 0.5, 1e-5)


def test_release_is_seeded_and_has_the_calibrated_spread():
    mech = ClippedMeanMechanism.calibrate(1.0, 1e-6, 200, 2, 1.0)
    S = np.zeros((5_000, 2), dtype=np.int64)
    a = mech.release(NoiseSeed(3, seeded=True))(S)
    b = mech.release(NoiseSeed(3, seeded=True))(S)
    np.testing.assert_array_equal(a, b)
    assert np.std(a) == pytest.approx(mech.noise_scales()["gaussian"], rel=0.03)
    # a real fit reads stream 0: the (d,) release equals row 0 of the (T, d) one
    np.testing.assert_array_equal(mech.release(NoiseSeed(3, seeded=True))(S[0]), a[0])
    # released values are lattice points of the sum, divided by n (to one rounding)
    units = a * 200 / mech.unit
    assert np.abs(units - np.rint(units)).max() < 1e-6


def test_sizes_whose_sums_could_overflow_are_refused():
    with pytest.raises(ValidationError, match="overflow"):
        ClippedMeanMechanism.calibrate(1.0, 1e-6, 2**60, 4, 1.0)
    with pytest.raises(ValidationError, match="mean_clip"):
        ClippedMeanMechanism.calibrate(1.0, 1e-6, 10, 4, -1.0)
