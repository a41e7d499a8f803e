"""Keyed partitions: exact structure for every key, chunking invariance, near-uniformity."""

from __future__ import annotations

import numpy as np
import pytest

from dpdist.privacy.noise.streams import NoiseSeed
from dpdist.privacy.noise.partition import GroupPartition, KeyedPermutation

from tests.conftest import LONG


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 16, 17, 63, 64, 65, 1000, 4096, 4097, 100_003])
def test_keyed_permutation_is_a_permutation_of_range_n(n):
    pi = KeyedPermutation(NoiseSeed(3, True), "t", n)
    assert np.array_equal(np.sort(pi(np.arange(n))), np.arange(n))


def test_groups_have_exactly_m_rows_and_the_rest_is_unused():
    n, m = 10_007, 13
    labels = GroupPartition(NoiseSeed(5, True), n, m, "t")(0, n)
    k = n // m
    assert np.array_equal(np.bincount(labels[labels >= 0], minlength=k), np.full(k, m))
    assert (labels == -1).sum() == n - k * m and labels.max() == k - 1


def test_labels_do_not_depend_on_how_the_rows_are_chunked():
    n = 50_000
    part = GroupPartition(NoiseSeed(9, True), n, 7, "t")
    whole = part(0, n)
    for bounds in ([0, 1, 2, 30_000, n], [0, 12_345, 12_346, 40_000, n]):
        pieces = [part(a, b) for a, b in zip(bounds[:-1], bounds[1:])]
        assert np.array_equal(np.concatenate(pieces), whole)


def test_the_partition_depends_on_the_seed_and_purpose_only():
    n = 2000
    a = GroupPartition(NoiseSeed(1, True), n, 10, "p")(0, n)
    assert np.array_equal(a, GroupPartition(NoiseSeed(1, True), n, 10, "p")(0, n))
    assert not np.array_equal(a, GroupPartition(NoiseSeed(2, True), n, 10, "p")(0, n))
    assert not np.array_equal(a, GroupPartition(NoiseSeed(1, True), n, 10, "q")(0, n))


def test_out_of_range_arguments_are_refused():
    with pytest.raises(ValueError):
        KeyedPermutation(NoiseSeed(1, True), "t", 0)
    with pytest.raises(ValueError):
        KeyedPermutation(NoiseSeed(1, True), "t", 10)(np.array([10]))
    with pytest.raises(ValueError):
        GroupPartition(NoiseSeed(1, True), 10, 11, "t")


@pytest.mark.statistical
def test_one_and_two_row_statistics_match_a_uniform_partition():
    # Over independent keys, a uniform partition of n = k m rows puts row i at each position
    # with probability 1/n, and rows 0 and 1 in the same group with probability
    # (m - 1)/(n - 1). Tolerances: 5 binomial standard deviations (two-sided false alarm
    # < 1e-6 each); chi-square of the position of row 0 below its 1 - 1e-6 quantile.
    from scipy import stats

    n, m = 60, 6
    trials = 20_000 if LONG else 1_500
    pos0 = np.empty(trials, dtype=np.int64)
    same = 0
    for t in range(trials):
        part = GroupPartition(NoiseSeed(10_000 + t, True), n, m, "uniformity")
        pos0[t] = part.permutation(np.array([0]))[0]
        labels = part(0, 2)
        same += int(labels[0] == labels[1])
    p = (m - 1) / (n - 1)
    assert abs(same - trials * p) <= 5 * np.sqrt(trials * p * (1 - p))
    counts = np.bincount(pos0, minlength=n)
    chi2 = ((counts - trials / n) ** 2 / (trials / n)).sum()
    assert chi2 <= stats.chi2.ppf(1 - 1e-6, df=n - 1)
