"""Noise: keyed, positioned random streams and the samplers built on them.

Everything here is pure NumPy/SciPy and can be reviewed without reading the engine.

Seeding
-------
One ``random_state`` enters a fit and is resolved once into a :class:`NoiseSeed`: 128 bits of
root entropy, from the operating system (``secrets``) when ``random_state is None`` or from
the user's integer (then the release is marked *seeded* and not private: seeded noise is for
tests and reproduction only).

A noise seed never drives two fits: ``None`` draws fresh entropy for every fit, and
a :class:`NoiseSeed` object passed as ``random_state`` is consumed by the first fit that
resolves it; a second fit refuses it (two releases with the same noise reveal the difference
of their exact statistics). An int may be reused on purpose (reproduction); such releases
are seeded, hence marked not private.

From the root, each *purpose* (say ``"privcov/select"``) gets its own 256-bit ChaCha20 key,
and each *index* (say a row of the covariance) its own 2**64-long stretch of that key's
keystream, addressed through ChaCha's 128-bit block counter: ``counter = index << 64 |
2 * position``. A draw is therefore a pure function of ``(root, purpose, index, position)``:
a tile of any shape, on any worker, regenerates exactly the values that a single-threaded
run would use for the same entries. The storage layout (chunks, tiles, workers) cannot
change the noise, and two tiles never share a value.

Generator: ChaCha20 (``randomgen.ChaCha``, 20 rounds) is a cryptographically secure
stream cipher used as a counter-mode generator. Measured on this project's 2-core machine:
about 3.2e7 doubles/s per core, against 5.2e7 for NumPy's PCG64 (see benchmarks/); the cost
is small next to the Gram matrix, so the secure generator is the default and only choice.

Each uniform consumes exactly one 64-bit word (``(w >> 11) + 0.5) * 2**-53``, which lies in
the open interval (0, 1)), and every float sampler below is an inverse-CDF transform of one
uniform, so positions count draws exactly. :func:`chacha20_words` computes the same words at
scattered ``(index, position)`` pairs, vectorised.

What releases use, and what they do not
---------------------------------------
Every released value is drawn float-safe on a public lattice by the mechanism objects
(:mod:`dpdist.privacy.mechanisms`, :mod:`dpdist.privacy.noise.lattice`; PrivPCA's projector by the
exact order-statistics sampler of :mod:`dpdist.privacy.noise.topk_sampler`), from the keyed streams
of this module (:class:`NoiseSeed`, :func:`chacha20_words`). No release uses the float
samplers here (:func:`laplace_from_uniform`, :func:`gaussian_from_uniform`,
:func:`bounded_laplace_from_uniform`): floating-point inverse-CDF noise leaks through the
low-order bits of its output (Mironov, CCS 2012). They are the noise model of the simulator
(:mod:`dpdist.simulate`, which releases nothing) and the reference laws that
``dpdist audit`` checks (the ``primitives/...`` cases of :mod:`dpdist.testing.mechanisms`).
"""

from __future__ import annotations

import hashlib
import math
import secrets
import threading
from dataclasses import dataclass

import numpy as np
from randomgen import ChaCha
from scipy import special

from dpdist.exceptions import ValidationError

__all__ = [
    "GENERATOR_NAME",
    "NoiseSeed",
    "check_random_state",
    "resolve_random_state",
    "laplace_from_uniform",
    "gaussian_from_uniform",
    "bounded_laplace_from_uniform",
    "chacha20_words",
]

GENERATOR_NAME = "ChaCha20 (randomgen.ChaCha, rounds=20), keyed per purpose, counter per index"
_MASK64 = (1 << 64) - 1
_LOCAL = threading.local()
#: Longest span of a stream drawn whole to serve scattered positions (64 Ki words = 512 KiB).
_SPAN = 1 << 16


def _chacha(key: int, counter: int) -> ChaCha:
    """A ChaCha20 bit generator at ``(key, counter)``; re-seeds one per thread (cheaper than
    constructing a new one for every stream)."""
    bg = getattr(_LOCAL, "bg", None)
    if bg is None:
        bg = _LOCAL.bg = ChaCha(key=key, counter=counter)
    else:
        bg.seed(key=key, counter=counter)
    return bg


@dataclass(frozen=True)
class NoiseSeed:
    """Root of every noise stream of one fit.

    Parameters
    ----------
    entropy : int
        128-bit root entropy.
    seeded : bool
        True when the entropy came from a user-supplied ``random_state`` (reproducible,
        for tests only); False when it came from the operating system.
    """

    entropy: int
    seeded: bool

    def key(self, purpose: str) -> int:
        """The 256-bit ChaCha key of ``purpose`` (a stable string naming the noise's role)."""
        tag = int.from_bytes(hashlib.sha256(purpose.encode("utf-8")).digest()[:8], "little")
        words = np.random.SeedSequence(self.entropy, spawn_key=(tag,)).generate_state(4, np.uint64)
        return sum(int(w) << (64 * i) for i, w in enumerate(words))

    def raw(self, key: int, index: int, start: int, count: int) -> np.ndarray:
        """``count`` 64-bit words of stream ``index`` under ``key``, from position ``start``."""
        if not (0 <= index <= _MASK64) or start < 0 or start + count > (1 << 62):
            raise ValueError("stream index or position out of range")
        return _chacha(key, (int(index) << 64) | (2 * int(start))).random_raw(int(count))

    def uniforms(self, purpose: str | int, index: int, start: int, count: int) -> np.ndarray:
        """Uniforms in the open interval (0, 1) at positions ``start .. start+count-1``.

        ``purpose`` may be a precomputed key (an int from :meth:`key`) to save the key
        derivation in hot loops.
        """
        key = self.key(purpose) if isinstance(purpose, str) else purpose
        words = self.raw(key, index, start, count)
        return ((words >> np.uint64(11)).astype(np.float64) + 0.5) * (2.0 ** -53)

    def uniforms_at(self, purpose: str | int, index: int, positions: np.ndarray) -> np.ndarray:
        """Uniforms at arbitrary ``positions`` of stream ``index`` (same values as :meth:`uniforms`).

        Draws the contiguous span covering the positions when it is short (at most
        :data:`_SPAN` words), else one position at a time.
        """
        key = self.key(purpose) if isinstance(purpose, str) else purpose
        positions = np.asarray(positions, dtype=np.int64)
        if positions.size == 0:
            return np.empty(positions.shape)
        lo, hi = int(positions.min()), int(positions.max())
        if hi - lo < _SPAN:
            return self.uniforms(key, index, lo, hi - lo + 1)[positions - lo]
        out = np.empty(positions.shape, dtype=np.float64)
        for i, p in enumerate(positions.ravel()):
            out.flat[i] = self.uniforms(key, index, int(p), 1)[0]
        return out

    @property
    def consumed(self) -> bool:
        """True once a fit resolved this object (:func:`resolve_random_state`)."""
        return bool(self.__dict__.get("_consumed", False))

    def describe(self) -> dict:
        """Public description for a release. The root entropy is recorded only when seeded."""
        d = {"mode": "seeded" if self.seeded else "os-entropy", "generator": GENERATOR_NAME}
        if self.seeded:
            d["random_state"] = self.entropy
        return d


def check_random_state(random_state) -> None:
    """Validate a user ``random_state`` without resolving (or consuming) it."""
    if random_state is None:
        return
    if isinstance(random_state, NoiseSeed):
        if random_state.consumed:
            raise ValidationError(
                "this NoiseSeed already drove a fit: a noise seed cannot drive two fits (identical noise "
                "would reveal the difference of the two exact statistics); pass random_state=None"
            )
        return
    _int_seed(random_state)


def resolve_random_state(random_state) -> NoiseSeed:
    """Resolve a user ``random_state`` once per fit into a :class:`NoiseSeed`.

    ``None`` draws 128 bits from the operating system's CSPRNG (``secrets``): the default
    and the only mode fit for releasing data. A non-negative ``int`` seeds the streams
    reproducibly; the release records it as *seeded* (not private). A ``NoiseSeed`` object
    passes through once: it is marked consumed, and a second fit resolving it raises
    :class:`~dpdist.exceptions.ValidationError`. NumPy ``Generator``/``RandomState``
    objects are refused: their state cannot key per-tile streams reproducibly across workers.
    """
    if random_state is None:
        return NoiseSeed(secrets.randbits(128), seeded=False)
    check_random_state(random_state)
    if isinstance(random_state, NoiseSeed):
        object.__setattr__(random_state, "_consumed", True)
        return random_state
    return NoiseSeed(_int_seed(random_state), seeded=True)


def _int_seed(random_state) -> int:
    if isinstance(random_state, (bool, np.bool_)):
        raise ValidationError(f"random_state must be None or a non-negative int, got {random_state!r}")
    if isinstance(random_state, (int, np.integer)) and int(random_state) >= 0:
        return int(random_state)
    raise ValidationError(
        f"random_state must be None (OS entropy) or a non-negative int (a reproducible seed "
        f"for tests), got {random_state!r}"
    )


def laplace_from_uniform(u: np.ndarray, scale: float) -> np.ndarray:
    """Laplace(0, ``scale``) by inverse CDF of uniforms ``u`` in (0, 1)."""
    c = np.asarray(u, dtype=np.float64) - 0.5
    return -scale * np.sign(c) * np.log1p(-2.0 * np.abs(c))


def gaussian_from_uniform(u: np.ndarray, sigma: float) -> np.ndarray:
    """N(0, ``sigma``**2) by inverse CDF of uniforms ``u`` in (0, 1)."""
    return sigma * special.ndtri(np.asarray(u, dtype=np.float64))


def bounded_laplace_from_uniform(u: np.ndarray, scale: float, bound: float) -> np.ndarray:
    """Laplace(0, ``scale``) conditioned on ``|X| <= bound``, by inverse CDF (no rejection loop).

    The sign is ``sign(u - 1/2)`` and the magnitude an Exponential(``scale``) truncated to
    [0, ``bound``], drawn from ``v = |2u - 1|`` as ``-scale * log(1 - v (1 - exp(-bound/scale)))``.
    """
    if not (scale > 0 and bound > 0):
        raise ValueError("bounded Laplace needs scale > 0 and bound > 0")
    c = np.asarray(u, dtype=np.float64) - 0.5
    v = 2.0 * np.abs(c)
    mass = -math.expm1(-bound / scale)  # 1 - exp(-bound/scale), accurate for small ratios
    mag = -scale * np.log1p(-v * mass)
    return np.sign(c) * np.minimum(mag, bound)


_MASK32 = np.uint64(0xFFFFFFFF)
_CONSTANTS = np.array([0x61707865, 0x3320646E, 0x79622D32, 0x6B206574], dtype=np.uint32)
#: Lanes per vectorised ChaCha batch (keeps the 16 x lanes state in cache).
_LANES = 8192


# ---------------------------------------------------------------------------------------
# ChaCha20 at arbitrary (index, position) pairs, vectorised: the words NoiseSeed.raw gives
# ---------------------------------------------------------------------------------------


def _rotl(x: np.ndarray, n: int, tmp: np.ndarray) -> None:
    np.left_shift(x, np.uint32(n), out=tmp)
    np.right_shift(x, np.uint32(32 - n), out=x)
    np.bitwise_or(x, tmp, out=x)


def _quarter_rounds(a, b, c, d, tmp) -> None:
    """Four ChaCha quarter rounds at once (rows of a, b, c, d), in place."""
    for x, y, z, n in ((a, b, d, 16), (c, d, b, 12), (a, b, d, 8), (c, d, b, 7)):
        x += y
        z ^= x
        _rotl(z, n, tmp)


def _chacha20_blocks(key_words: list[int], index: np.ndarray, block: np.ndarray) -> np.ndarray:
    """The 16 output words (uint32, shape (16, n)) of ChaCha20 blocks ``(index, block)``.

    Same block layout as ``randomgen.ChaCha`` with ``counter = index << 64 | 2 position``:
    the 128-bit block counter ``(index << 60) | block`` fills words 12-15 (little endian).
    """
    n = index.size
    x = np.empty((16, n), dtype=np.uint32)
    x[0:4] = _CONSTANTS[:, None]
    for i in range(8):
        x[4 + i] = key_words[i]
    x[12] = (block & _MASK32).astype(np.uint32)
    x[13] = (((block >> np.uint64(32)) | (index << np.uint64(28))) & _MASK32).astype(np.uint32)
    x[14] = ((index >> np.uint64(4)) & _MASK32).astype(np.uint32)
    x[15] = (index >> np.uint64(36)).astype(np.uint32)
    inp = x.copy()
    tmp = np.empty((4, n), dtype=np.uint32)
    a, b, c, d = x[0:4], x[4:8], x[8:12], x[12:16]
    for _ in range(10):
        _quarter_rounds(a, b, c, d, tmp)  # column round
        b[:] = b[[1, 2, 3, 0]]
        c[:] = c[[2, 3, 0, 1]]
        d[:] = d[[3, 0, 1, 2]]
        _quarter_rounds(a, b, c, d, tmp)  # diagonal round
        b[:] = b[[3, 0, 1, 2]]
        c[:] = c[[2, 3, 0, 1]]
        d[:] = d[[1, 2, 3, 0]]
    x += inp
    return x


def chacha20_words(seed: NoiseSeed | None, key: int, index: np.ndarray, position: np.ndarray) -> np.ndarray:
    """64-bit words of the keyed streams at arbitrary ``(index, position)`` pairs (broadcast).

    Equal to ``seed.raw(key, index, position, 1)`` for every pair (tested), computed for all
    pairs at once: each distinct ChaCha block is computed once, in vectorised NumPy (about
    3e6 scattered words/s/core, against ~1e5 for one ``NoiseSeed.raw`` call per pair, each
    re-keying the generator). ``seed`` only documents where ``key`` comes from
    (:meth:`NoiseSeed.key`).
    """
    del seed
    index, position = np.broadcast_arrays(np.asarray(index, dtype=np.uint64), np.asarray(position, dtype=np.uint64))
    shape = index.shape
    index, position = index.ravel(), position.ravel()
    out = np.empty(index.size, dtype=np.uint64)
    if index.size == 0:
        return out.reshape(shape)
    block = position >> np.uint64(3)
    order = np.lexsort((block, index))
    bi, bb = index[order], block[order]
    new = np.empty(bi.size, dtype=bool)
    new[0] = True
    new[1:] = (bi[1:] != bi[:-1]) | (bb[1:] != bb[:-1])
    ui, ub = bi[new], bb[new]
    which = np.empty(index.size, dtype=np.intp)
    which[order] = np.cumsum(new) - 1
    key_words = [(int(key) >> (32 * i)) & 0xFFFFFFFF for i in range(8)]
    blocks = np.empty((16, ui.size), dtype=np.uint32)
    for s in range(0, ui.size, _LANES):
        blocks[:, s : s + _LANES] = _chacha20_blocks(key_words, ui[s : s + _LANES], ub[s : s + _LANES])
    w = (position & np.uint64(7)).astype(np.intp) * 2
    lo = blocks[w, which].astype(np.uint64)
    hi = blocks[w + 1, which].astype(np.uint64)
    out[:] = lo | (hi << np.uint64(32))
    return out.reshape(shape)
