"""Keyed random partitions of the rows, evaluated per row, anywhere.

The private lambda_min step of RecDPSME (MS25 Algorithm 4) and the subsample-and-aggregate
baseline (MS25 Algorithm 3) split the n rows into k = floor(n/m) disjoint groups of m rows.
Building a permutation of n rows on the client takes 8 n bytes (and an n log n sort), which
an out-of-core input cannot afford. Here row i's group is a pure function of
``(seed, purpose, n, m, i)``: every row block computes its own rows' groups on the worker
that reads it, the same way whatever the chunking.

Construction
------------
``pi`` is a keyed pseudorandom permutation of ``[0, n)``:

* a balanced Feistel network (Luby and Rackoff 1988) on ``[0, 4^h)`` with
  ``h = max(1, ceil(log2(n) / 2))`` (so ``n <= 4^h < 4 n`` for n >= 2): a value x is split into
  halves ``(L, R) = (x >> h, x mod 2^h)`` and each of :data:`ROUNDS` rounds maps
  ``(L, R) -> (R, L xor T_j[R])``, where ``T_j`` is a table of ``2^h`` values of h bits, the
  low h bits of the ChaCha20 keystream of stream j under the key of ``purpose``
  (:meth:`~dpdist.privacy.noise.streams.NoiseSeed.raw`; 2^h divides 2^64, so each entry is uniform on
  ``[0, 2^h)``). Every round is a bijection, so the network permutes ``[0, 4^h)`` for every
  key;
* cycle-walking (Black and Rogaway 2002) restricts it to ``[0, n)``: ``pi(i)`` is the first
  value in ``F(i), F(F(i)), ...`` below n. It is a permutation of ``[0, n)`` and costs
  ``4^h / n < 4`` applications of F per row on average.

Row i joins group ``pi(i) // m`` when ``pi(i) < k m`` and no group (-1) otherwise: exactly k
groups of exactly m rows, and ``n - k m`` unused rows, for every key.

Distribution
------------
Groups are disjoint, as in MS25's Algorithms 3 and 4 (its definition of subsamplability
samples with replacement; the tests estimate beta with the scheme actually used). The partition depends on the seed only, never on the data, which is all the privacy
analyses need (one replaced row changes at most one group). It is *not* uniformly
distributed over the partitions of ``[0, n)`` into k groups of m: it is the push-forward of
the uniform distribution of the round tables (ChaCha20 modelled as a pseudorandom function)
through the construction above, supported on at most ``2^(ROUNDS h 2^h)`` permutations
(fewer than n! for large n). With truly random round tables, Luby and Rackoff's theorem
bounds the statistical distance between the images of any q inputs under a 3- or 4-round
network and q distinct uniform values by ``q^2 / 2^h``; Patarin (CRYPTO 2004) shows that
5 or more rounds stay indistinguishable up to about ``2^h`` inputs. With q = m rows per group
(m << 2^h = Theta(sqrt(n)) in the regimes used), each group's membership is close to a
uniform m-subset; the tests check the pair co-membership rate and the image marginals
against the uniform values. Cycle-walking maps a uniform permutation of ``[0, 4^h)`` to a
uniform permutation of ``[0, n)``, so it adds no distance of its own.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from dpdist.privacy.noise.streams import NoiseSeed

__all__ = ["ROUNDS", "MAX_ROWS", "GroupPartition", "KeyedPermutation"]

#: Feistel rounds (4 give a strong pseudorandom permutation; more only bring it closer).
ROUNDS = 8
#: Largest n supported (round tables of 2^20 entries, 32 MiB for all rounds).
MAX_ROWS = 1 << 40


@functools.lru_cache(maxsize=8)
def _round_tables(seed: NoiseSeed, purpose: str, half_bits: int, rounds: int) -> np.ndarray:
    key = seed.key(purpose)
    mask = np.uint64((1 << half_bits) - 1)
    size = 1 << half_bits
    return np.stack([(seed.raw(key, j, 0, size) & mask).astype(np.uint32) for j in range(rounds)])


@dataclass(frozen=True)
class KeyedPermutation:
    """A permutation ``pi`` of ``[0, n)`` keyed by ``(seed, purpose)``, evaluated pointwise.

    See the module docstring for the construction and its distribution. Instances are small
    and picklable; the round tables are rebuilt (and cached) in each process that uses them.
    """

    seed: NoiseSeed
    purpose: str
    n: int
    rounds: int = ROUNDS

    def __post_init__(self) -> None:
        if not (1 <= int(self.n) <= MAX_ROWS):
            raise ValueError(f"a keyed permutation needs 1 <= n <= {MAX_ROWS}, got n={self.n}")
        if int(self.rounds) < 4:
            raise ValueError("a keyed permutation needs at least 4 Feistel rounds")

    @property
    def half_bits(self) -> int:
        """h: the network permutes ``[0, 4^h)``, the least such domain (h >= 1) holding n values."""
        return max(1, math.ceil(math.ceil(math.log2(int(self.n))) / 2)) if self.n > 1 else 1

    def _feistel(self, x: np.ndarray) -> np.ndarray:
        h = self.half_bits
        tables = _round_tables(self.seed, self.purpose, h, int(self.rounds))
        left = (x >> np.uint64(h)).astype(np.uint32)
        right = (x & np.uint64((1 << h) - 1)).astype(np.uint32)
        for table in tables:
            left, right = right, left ^ table[right]
        return (left.astype(np.uint64) << np.uint64(h)) | right.astype(np.uint64)

    def __call__(self, index: np.ndarray) -> np.ndarray:
        """``pi(index)`` (int64), for indices in ``[0, n)``."""
        x = np.asarray(index, dtype=np.int64)
        if x.size and (x.min() < 0 or x.max() >= self.n):
            raise ValueError(f"indices must lie in [0, {self.n})")
        y = self._feistel(x.astype(np.uint64).ravel())
        out = np.flatnonzero(y >= np.uint64(self.n))
        while out.size:  # cycle-walking: apply F again to the values that left [0, n)
            y[out] = self._feistel(y[out])
            out = out[y[out] >= np.uint64(self.n)]
        return y.astype(np.int64).reshape(x.shape)


@dataclass(frozen=True)
class GroupPartition:
    """A data-independent split of n rows into ``n_groups = n // m`` groups of m rows.

    Row i's group is ``pi(i) // m`` for ``pi(i) < n_groups m`` and -1 (unused) otherwise, with
    ``pi`` the :class:`KeyedPermutation` of ``(seed, purpose, n)``. Calling the instance with
    a row range returns that range's labels, so each row block computes its own on the
    worker that reads it; the result does not depend on the chunking.
    """

    seed: NoiseSeed
    n: int
    group_size: int
    purpose: str

    def __post_init__(self) -> None:
        if not (1 <= int(self.group_size) <= int(self.n)):
            raise ValueError(f"group_size must lie in [1, n={self.n}], got {self.group_size}")

    @property
    def n_groups(self) -> int:
        return int(self.n) // int(self.group_size)

    @property
    def permutation(self) -> KeyedPermutation:
        return KeyedPermutation(self.seed, self.purpose, int(self.n))

    def __call__(self, start: int, stop: int) -> np.ndarray:
        """Group labels (int64, -1 for unused rows) of rows ``start .. stop-1``."""
        pos = self.permutation(np.arange(int(start), int(stop), dtype=np.int64))
        m = int(self.group_size)
        labels = pos // m
        labels[pos >= self.n_groups * m] = -1
        return labels
