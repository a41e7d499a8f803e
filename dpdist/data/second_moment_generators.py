"""Synthetic inputs for second-moment estimation (the distributions of MS25, Appendix D), chunked.

Every generator returns a :class:`SyntheticData`: a lazy dask array ``X`` plus the
population second moment it was drawn from. Rows are produced in fixed *generation blocks*
of :data:`GENERATION_BLOCK` rows; block b draws from its own stream
``SeedSequence(random_state, spawn_key=(0, b))`` (public parameters such as a random basis
come from ``spawn_key=(1,)``). A dask chunk generates the blocks it overlaps and keeps its
rows, so the values depend on ``(random_state, n, parameters)`` only, never on
``chunk_rows`` or the scheduler. Write to Zarr chunk by chunk with :func:`to_zarr`.

These seeds drive *data* generation only; privacy noise never uses them.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Callable

import dask.array as da
import numpy as np

from dpdist.data.validation import write_chunk_manifest
from dpdist.exceptions import ValidationError

__all__ = [
    "GENERATION_BLOCK",
    "SyntheticData",
    "anisotropic_gaussian",
    "ellipsoid",
    "lambda_circ_v",
    "lambda_v",
    "outlier_mixture",
    "pareto6_moment",
    "pareto6_from_uniform",
    "to_zarr",
    "uniform_sphere",
]

#: Rows per generation block (part of each generator's definition: changing it changes the data).
GENERATION_BLOCK = 4096


@dataclass(frozen=True)
class SyntheticData:
    """A generated data set.

    Attributes
    ----------
    X : dask.array.Array
        (n, d) float64 rows, lazy.
    second_moment : ndarray
        The population second moment E[x x^T] of the distribution the rows were drawn from
        (for a mixture, of the mixture).
    info : dict
        Generator name and parameters, and distribution facts (e.g. ``clean_second_moment``,
        ``radius`` when the support is bounded).
    """

    X: da.Array
    second_moment: np.ndarray
    info: dict = field(default_factory=dict)


def _check_seed(random_state) -> int:
    if isinstance(random_state, bool) or not isinstance(random_state, (int, np.integer)) or random_state < 0:
        raise ValidationError(f"random_state must be a non-negative int for a generator, got {random_state!r}")
    return int(random_state)


def _check_n(n: int) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValidationError(f"n_samples must be an integer >= 1, got {n!r}")
    return int(n)


def _param_rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(1,)))


def _block_rng(seed: int, b: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(0, int(b))))


def _rows(seed: int, start: int, stop: int, block_fn: Callable) -> np.ndarray:
    """Rows start..stop-1, built from the generation blocks they fall in."""
    G = GENERATION_BLOCK
    parts = []
    for b in range(start // G, (stop - 1) // G + 1):
        lo = b * G
        rows = block_fn(_block_rng(seed, b), G, lo)
        parts.append(rows[max(start, lo) - lo : min(stop, lo + G) - lo])
    return np.concatenate(parts, axis=0)


def _lazy(n: int, d: int, seed: int, chunk_rows: int, block_fn: Callable) -> da.Array:
    if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, (int, np.integer)) or chunk_rows < 1:
        raise ValidationError(f"chunk_rows must be an integer >= 1, got {chunk_rows!r}")
    sizes = [chunk_rows] * (n // chunk_rows) + ([n % chunk_rows] if n % chunk_rows else [])

    def make(block_info=None):
        start, stop = block_info[None]["array-location"][0]
        return _rows(seed, start, stop, block_fn)

    return da.map_blocks(make, chunks=(tuple(sizes), (d,)), dtype=np.float64, meta=np.empty((0, 0)))


def uniform_sphere(rng: np.random.Generator, count: int, d: int) -> np.ndarray:
    """``count`` points uniform on S^{d-1} (normalised standard Gaussians)."""
    g = rng.standard_normal((count, d))
    return g / np.linalg.norm(g, axis=1, keepdims=True)


def pareto6_from_uniform(u: np.ndarray, bound: float) -> np.ndarray:
    """Truncated Pareto P6 on [1, B] by inverse CDF: x = (1 - U (1 - B^-5))^(-1/5) (MS25 Appendix D.2)."""
    return (1.0 - np.asarray(u) * (1.0 - bound**-5.0)) ** (-0.2)


def pareto6_moment(k: float, bound: float) -> float:
    """E[lambda^k] = (5 B^5 / (B^5 - 1)) (1 - B^(k-5)) / (5 - k) for P6 on [1, B], k != 5."""
    B = float(bound)
    return 5.0 * B**5 / (B**5 - 1.0) * (1.0 - B ** (k - 5.0)) / (5.0 - k)


def _random_basis(seed: int, d: int) -> np.ndarray:
    q, r = np.linalg.qr(_param_rng(seed).standard_normal((d, d)))
    return q * np.sign(np.diag(r))


def ellipsoid(
    n_samples: int,
    n_features: int,
    *,
    eigenvalues: np.ndarray | None = None,
    condition: float = 1e6,
    random_state: int = 0,
    chunk_rows: int = 65536,
) -> SyntheticData:
    """x = A^{1/2} v, v ~ Unif(S^{d-1}) (MS25 Appendix D.1).

    The paper says "uniform over the surface", but its moment computation E[x x^T] = A / d
    holds for this push-forward of the uniform law on the sphere, not for the surface-area
    measure on the ellipsoid, so the push-forward is what is drawn.

    A = Q diag(eigenvalues) Q^T with Q a random orthonormal basis; by default the eigenvalues
    are log-spaced from 1/condition to 1. Sigma_D = A / d, R = sqrt(lambda_max(A)).
    """
    n, d, seed = _check_n(n_samples), int(n_features), _check_seed(random_state)
    ev = np.logspace(-math.log10(condition), 0.0, d) if eigenvalues is None else np.asarray(eigenvalues, float)
    if ev.shape != (d,) or not np.all(ev > 0):
        raise ValidationError(f"eigenvalues must be {d} positive numbers, got {eigenvalues!r}")
    q = _random_basis(seed, d)
    root = (q * np.sqrt(ev)) @ q.T

    def block(rng, count, start):
        return uniform_sphere(rng, count, d) @ root.T

    A = (q * ev) @ q.T
    return SyntheticData(
        _lazy(n, d, seed, chunk_rows, block), A / d,
        {"generator": "ellipsoid", "A": A, "radius": float(np.sqrt(ev.max())), "eigenvalues": ev,
         "n_samples": n, "random_state": seed},
    )


def lambda_v(
    n_samples: int, n_features: int, *, bound: float = 10.0, random_state: int = 0, chunk_rows: int = 65536
) -> SyntheticData:
    """x = lambda v, lambda ~ P6 on [1, B], v ~ Unif(S^{d-1}) (the paper's "lambda v"): Sigma_D = (sigma6^2/d) I."""
    n, d, seed = _check_n(n_samples), int(n_features), _check_seed(random_state)

    def block(rng, count, start):
        lam = pareto6_from_uniform(rng.random(count), bound)
        return lam[:, None] * uniform_sphere(rng, count, d)

    s2 = pareto6_moment(2, bound)
    return SyntheticData(
        _lazy(n, d, seed, chunk_rows, block), s2 / d * np.eye(d),
        {"generator": "lambda_v", "bound": bound, "radius": float(bound), "sigma6_sq": s2, "n_samples": n,
         "random_state": seed},
    )


def lambda_circ_v(
    n_samples: int, n_features: int, *, bound: float = 10.0, random_state: int = 0, chunk_rows: int = 65536
) -> SyntheticData:
    """x = [lambda; v] in R^{d+1} (the paper's "lambda o v"): Sigma_D = diag(sigma6^2, I_d / d), ||x|| <= sqrt(B^2+1)."""
    n, d, seed = _check_n(n_samples), int(n_features), _check_seed(random_state)

    def block(rng, count, start):
        lam = pareto6_from_uniform(rng.random(count), bound)
        return np.concatenate([lam[:, None], uniform_sphere(rng, count, d)], axis=1)

    s2 = pareto6_moment(2, bound)
    sigma = np.diag(np.r_[s2, np.full(d, 1.0 / d)])
    return SyntheticData(
        _lazy(n, d + 1, seed, chunk_rows, block), sigma,
        {"generator": "lambda_circ_v", "bound": bound, "radius": float(math.sqrt(bound**2 + 1)), "sigma6_sq": s2,
         "n_samples": n, "random_state": seed},
    )


def anisotropic_gaussian(
    n_samples: int, scales=(1.0, 10.0, 100.0, 1000.0), *, random_state: int = 0, chunk_rows: int = 65536
) -> SyntheticData:
    """x = diag(s) g, g ~ N(0, I) (a sanity case, not in the paper): Sigma = diag(s^2). Unbounded (no radius)."""
    n, seed = _check_n(n_samples), _check_seed(random_state)
    s = np.asarray(scales, dtype=np.float64)
    d = s.size

    def block(rng, count, start):
        return rng.standard_normal((count, d)) * s

    return SyntheticData(
        _lazy(n, d, seed, chunk_rows, block), np.diag(s**2),
        {"generator": "anisotropic_gaussian", "scales": s, "n_samples": n, "random_state": seed},
    )


def outlier_mixture(
    n_samples: int,
    scales=(1.0, 10.0, 100.0, 1000.0),
    *,
    eta: float,
    f: float,
    kind: str = "point",
    random_state: int = 0,
    chunk_rows: int = 65536,
) -> SyntheticData:
    """(1 - eta) n rows of D = N(0, diag(s^2)) and eta n outliers (MS25 Section 4.2).

    The paper's appendix on mixtures with stochastic outliers is referenced but missing, so
    these outlier laws are this package's own: high-leverage points at the bottom eigenvector
    (the scenario MS25 uses against Brown et al.) and Gaussian outliers.

    ``kind="point"``: outliers +-s u_min with s^2 = f K lambda_min(Sigma_D), K = 1/(7 eta) + 1
    (compliant, Sigma_out <= K Sigma_D, when f <= 1; violating when f >> 1).
    ``kind="stochastic"``: outliers ~ N(0, f K Sigma_D).
    Row i is an outlier iff floor((i+1) eta) > floor(i eta): exactly floor(n eta) outliers,
    evenly spread, independent of chunking. ``info["clean_second_moment"]`` is Sigma_D and
    ``info["outlier_rows"]`` a function of (start, stop) marking the outliers.
    """
    n, seed = _check_n(n_samples), _check_seed(random_state)
    if not (0.0 < float(eta) < 1.0):
        raise ValidationError(f"eta must lie in (0, 1), got {eta!r}")
    if not (float(f) > 0):
        raise ValidationError(f"f must be > 0, got {f!r}")
    if kind not in ("point", "stochastic"):
        raise ValidationError(f"kind must be 'point' or 'stochastic', got {kind!r}")
    s = np.asarray(scales, dtype=np.float64)
    d = s.size
    sigma_d = np.diag(s**2)
    j = int(np.argmin(s))
    lam_min = float(s[j] ** 2)
    K = 1.0 / (7.0 * eta) + 1.0
    mag = math.sqrt(f * K * lam_min)
    u = np.zeros(d)
    u[j] = 1.0
    sigma_out = mag**2 * np.outer(u, u) if kind == "point" else f * K * sigma_d

    def is_outlier(start: int, stop: int) -> np.ndarray:
        i = np.arange(start, stop, dtype=np.float64)
        return np.floor((i + 1) * eta) > np.floor(i * eta)

    def block(rng, count, start):
        rows = rng.standard_normal((count, d)) * s
        signs = np.where(rng.random(count) < 0.5, -1.0, 1.0)
        out_rows = mag * signs[:, None] * u if kind == "point" else rng.standard_normal((count, d)) * (s * math.sqrt(f * K))
        mask = is_outlier(start, start + count)
        rows[mask] = out_rows[mask]
        return rows

    return SyntheticData(
        _lazy(n, d, seed, chunk_rows, block), (1 - eta) * sigma_d + eta * sigma_out,
        {"generator": "outlier_mixture", "eta": eta, "f": f, "kind": kind, "K": K, "outlier_norm": mag,
         "clean_second_moment": sigma_d, "outlier_second_moment": sigma_out, "outlier_rows": is_outlier,
         "n_samples": n, "random_state": seed},
    )


def to_zarr(data: SyntheticData | da.Array, path: str | os.PathLike, *, overwrite: bool = False) -> str:
    """Write the rows to a Zarr array at ``path``, chunk by chunk (``dask.array.to_zarr``), with
    its chunk manifest (:func:`~dpdist.data.validation.write_chunk_manifest`)."""
    X = data.X if isinstance(data, SyntheticData) else data
    path = os.fspath(path)
    if os.path.exists(path) and not overwrite:
        raise ValidationError(f"{path!r} already exists (pass overwrite=True)")
    import zarr

    da.to_zarr(X, path, overwrite=overwrite, config={"write_empty_chunks": True})
    write_chunk_manifest(zarr.open_array(path, mode="r+"))
    return path
