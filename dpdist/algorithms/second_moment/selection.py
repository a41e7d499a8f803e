"""The zCDP initialisation of RecDPSME: the radius grid and the lambda buckets, the rules that
select from their noisy histograms, and the row partitions into groups (all post-processing or
data-independent).
"""

from __future__ import annotations

import math

import numpy as np

from dpdist.exceptions import NoPrivateResult
from dpdist.privacy.noise.streams import NoiseSeed
from dpdist.privacy.noise.partition import GroupPartition


PURPOSE_PARTITION = "second-moment/partition"


# ---------------------------------------------------------------------------------------
# zCDP initialisation: grids, partitions and selection rules (post-processing)
# ---------------------------------------------------------------------------------------


def radius_grid(radius_range: tuple[float, float]) -> np.ndarray:
    """Public geometric edges b_j = lo 2^j, j = 0..K, with K = ceil(log2(hi/lo))."""
    lo, hi = radius_range
    K = max(1, math.ceil(math.log2(hi / lo)))
    return lo * 2.0 ** np.arange(K + 1)


def select_radius(noisy_counts: np.ndarray, edges: np.ndarray, sigma: float, xi: float) -> tuple[float, bool]:
    """R_hat = b_J for the least J whose noisy count above b_J is <= tau_J.

    ``noisy_counts`` has K + 2 bins: [0, b_0), [b_0, b_1), ..., [b_K, inf); the count above
    b_J is the sum of the K + 1 - J bins J+1 .. K+1, each noised independently with standard
    deviation ``sigma``, so its noise has standard deviation sigma sqrt(K + 1 - J). The
    threshold is sized for that sum: tau_J = sigma sqrt(K + 1 - J) sqrt(2 ln(2K/xi)). At the
    first edge b_J0 with no row at or above it the noisy sum is a centred Gaussian of that
    standard deviation (rounded to a lattice 2^-28 times finer), which exceeds tau_J0 with
    probability at most about xi / (4K) (Pr[Z > z] <= exp(-z^2/2) / 2), so R_hat <= b_J0 <=
    2 max ||x_i|| (when the largest norm is inside the
    grid) except with that probability. (A threshold sized for one bin, sigma sqrt(2
    ln(2K/xi)), let R_hat overshoot the largest norm by a factor of 2 or more in about a
    quarter of the runs at 200,000 rows and rho = 0.5, some by 1e7.)

    Post-processing of the noisy histogram. Returns (R_hat, capped): ``capped`` is True when
    no J qualified and R_hat = b_K (the top edge).
    """
    edges = np.asarray(edges, dtype=np.float64)
    K = len(edges) - 1
    z = math.sqrt(2.0 * math.log(2.0 * max(K, 1) / xi))
    above = np.cumsum(np.asarray(noisy_counts, dtype=np.float64)[::-1])[::-1]  # above[i] = sum bins i..
    for J in range(K + 1):
        if above[J + 1] <= sigma * math.sqrt(K + 1 - J) * z:
            return float(edges[J]), False
    return float(edges[K]), True


def lambda_buckets(radius: float, alpha: float, floor_ratio: float) -> np.ndarray:
    """Ascending edges of the buckets [(1-a)^{j+1}, (1-a)^j) that cover [floor_ratio R^2, R^2].

    Value v lies in bucket j = ceil(ln v / ln(1-a)) - 1. With edges e_0 < ... < e_B the bins
    are the underflow (-inf, e_0) (it holds 0), the B buckets, and an overflow [e_B, inf).
    """
    q = 1.0 - alpha
    top = radius**2
    j_top = math.ceil(math.log(top) / math.log(q)) - 1
    j_bot = math.ceil(math.log(floor_ratio * top) / math.log(q)) - 1
    return q ** np.arange(j_bot + 1, j_top - 1, -1, dtype=np.float64)


def select_lambda(noisy_counts: np.ndarray, edges: np.ndarray, alpha: float) -> tuple[float, float]:
    """Argmax bucket's lower edge l, and lambda_hat = l / (1 + alpha).

    The released bucket may exceed lambda_min by up to its width, hence the division.

    Raises :class:`NoPrivateResult` when the argmax is the underflow bin.
    """
    noisy_counts = np.asarray(noisy_counts, dtype=np.float64)
    i = int(np.argmax(noisy_counts))
    if i == 0:
        raise NoPrivateResult(
            "private lambda_min estimate failed: the noisy histogram's largest bin is the "
            "underflow (groups of m rows look singular); pass lambda_min, a larger m, or more rho",
            stage="init-lambda",
        )
    low = float(edges[i - 1])
    return low, low / (1.0 + alpha)


def group_partition(
    seed: NoiseSeed, n_samples: int, group_size: int, purpose: str = PURPOSE_PARTITION
) -> GroupPartition:
    """A data-independent split into k = floor(n/m) disjoint groups of m rows (Algorithms 3-4).

    Row i goes to group pi(i) // m, with pi a permutation of [0, n) keyed by the seed (a
    Feistel network, see :mod:`dpdist.privacy.noise.partition`); rows with pi(i) >= k m are unused
    (-1). The returned object computes the labels of any row range, so each row block gets
    its own on the worker that reads it: nothing of size n is built on the client. This
    samples without replacement, unlike Definition 1.1, and the permutation is
    pseudorandom, not exactly uniform (its distribution is stated in that module).
    """
    return GroupPartition(seed, int(n_samples), int(group_size), purpose)


def random_groups(
    seed: NoiseSeed, n_samples: int, group_size: int, purpose: str = PURPOSE_PARTITION
) -> tuple[np.ndarray, int]:
    """The labels of :func:`group_partition` for all n rows at once (8 n bytes: for tests and
    small inputs; the estimators evaluate the partition per row block), and k."""
    partition = group_partition(seed, n_samples, group_size, purpose)
    return partition(0, int(n_samples)), partition.n_groups
