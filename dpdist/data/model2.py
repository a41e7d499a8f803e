"""Model-2 generator: Gaussian data whose covariance is k-RCS with a k-sparse top eigenvector.

The covariance is the sparse spiked model

.. math::  \\Sigma = \\lambda_2 I_d + (\\lambda_1 - \\lambda_2)\\, v v^\\top,
           \\qquad \\lambda_2 = (1 - \\gamma) \\lambda_1,

with ``v`` a unit vector supported on ``k`` coordinates. It satisfies Model 2 of the COLT
2026 paper (Section 1.1) exactly:

- ``Sigma`` is k-RCS: a row inside ``supp(v)`` has its ``k`` non-zeros in the support
  block, a row outside has only its diagonal (Definition 1);
- its eigenvalues are ``lambda1`` (eigenvector ``v``, multiplicity one) and ``lambda2``
  (multiplicity d - 1), so ``lambda_2(Sigma) = (1 - gap) lambda_1(Sigma)`` with the
  *relative* gap ``gamma = gap`` of Model 1, and the *absolute* eigengap is
  ``lambda1 - lambda2 = gap * lambda1``;
- ``nnz(v1) = k``;
- the samples ``x ~ N(0, Sigma)`` are ``sigma``-sub-Gaussian with ``sigma^2 =
  ||Sigma||_op = lambda1`` (for every unit ``u``, ``<x, u> ~ N(0, u^T Sigma u)`` and
  ``u^T Sigma u <= lambda1``).

Model 1 states gamma in [0, 1/2); a generator gap >= 1/2 still satisfies Model 1 for every
gamma < 1/2 (the condition ``lambda_2 <= (1 - gamma) lambda_1`` only gets easier).

Sampling is lazy and chunk by chunk: ``x = sqrt(lambda2) g + sqrt(lambda1 - lambda2) h v``
with ``g ~ N(0, I_d)``, ``h ~ N(0, 1)``. The draws of row chunk ``r`` and column chunk ``c``
come from their own generator, ``SeedSequence(root, spawn_key=(1, r, c))`` for ``g`` and
``(2, r)`` for ``h`` (``(0,)`` picks the support and signs of ``v``), so every chunk is a pure
function of the root seed and its position, whatever computes it (the chunk grid is part of
the dataset's definition: another ``chunks`` gives other draws of the same law). This is synthetic data:
its seeding has nothing to do with privacy noise (which uses :mod:`dpdist.privacy.noise.streams`).

:func:`make_construction2` gives a second, random Model-2 instance: Construction 2 of the
paper (the spiked inverse-Wishart prior of Appendix E) on a k-support, whose top eigenvector
is k-sparse but not flat; with ``k = d`` it is the dense lower-bound instance itself.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from typing import Any

import dask.array as da
import numpy as np
import scipy.sparse as sp

from dpdist.data.validation import write_chunk_manifest
from dpdist.exceptions import ValidationError

__all__ = ["DEFAULT_ROW_CHUNK", "Model2", "load_model2_truth", "make_construction2", "make_model2"]

#: Rows per chunk when ``chunks`` is not given.
DEFAULT_ROW_CHUNK = 10_000


def _check_int(value: Any, name: str, low: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValidationError(f"{name} must be an integer >= {low}, got {value!r}")
    if int(value) < low:
        raise ValidationError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def _block_sample(
    shape: tuple[int, int],
    row_block: int,
    col_block: int,
    col_start: int,
    entropy: int,
    v: np.ndarray,
    lambda1: float,
    lambda2: float,
    dtype: str,
) -> np.ndarray:
    """One chunk of sparse-spike samples (rows of row chunk ``row_block``, columns from ``col_start``)."""
    rows, cols = shape
    g_rng = np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=(1, row_block, col_block)))
    h_rng = np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=(2, row_block)))
    x = math.sqrt(lambda2) * g_rng.standard_normal((rows, cols))
    v_part = v[col_start : col_start + cols]
    if np.any(v_part):
        h = h_rng.standard_normal(rows)
        x += math.sqrt(lambda1 - lambda2) * np.outer(h, v_part)
    return x.astype(dtype, copy=False)


def _block_sample_factor(
    shape: tuple[int, int],
    row_block: int,
    col_block: int,
    col_start: int,
    entropy: int,
    support: np.ndarray,
    factor: np.ndarray,
    base_sd: float,
    dtype: str,
) -> np.ndarray:
    """One chunk of samples with covariance ``base_sd^2 I`` off ``support`` and
    ``factor @ factor.T`` on it (the support's draws come from the row chunk's stream
    ``(2, r)``, shared by all its column chunks)."""
    rows, cols = shape
    g_rng = np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=(1, row_block, col_block)))
    x = base_sd * g_rng.standard_normal((rows, cols))
    inside = np.flatnonzero((support >= col_start) & (support < col_start + cols))
    if inside.size:
        z_rng = np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=(2, row_block)))
        xs = z_rng.standard_normal((rows, len(support))) @ factor.T
        x[:, support[inside] - col_start] = xs[:, inside]
    return x.astype(dtype, copy=False)


def _lazy_samples(token: str, n: int, d: int, row_chunk: int, col_chunk: int, fn, args: tuple, dtype: str) -> da.Array:
    """A dask array whose chunk (r, c) is ``fn((rows, cols), r, c, col_start, *args)``."""
    row_chunks = tuple([row_chunk] * (n // row_chunk) + ([n % row_chunk] if n % row_chunk else []))
    col_chunks = tuple([col_chunk] * (d // col_chunk) + ([d % col_chunk] if d % col_chunk else []))
    name = f"{token}-{da.core.tokenize(token, n, d, row_chunks, col_chunks, args, dtype)}"
    col_starts = np.concatenate([[0], np.cumsum(col_chunks)[:-1]])
    graph: dict = {}
    for r, rows in enumerate(row_chunks):
        for c, cols in enumerate(col_chunks):
            graph[(name, r, c)] = (fn, (rows, cols), r, c, int(col_starts[c]), *args)
    return da.Array(graph, name, chunks=(row_chunks, col_chunks), dtype=np.dtype(dtype))


def _resolve_common(n_samples, n_features, k, chunks, random_state, dtype) -> tuple:
    n = _check_int(n_samples, "n_samples", 1)
    d = _check_int(n_features, "n_features", 2)
    k = _check_int(k, "k", 1)
    if k > d:
        raise ValidationError(f"k must satisfy 1 <= k <= n_features = {d}, got k={k}")
    if dtype not in ("float64", "float32"):
        raise ValidationError(f"dtype must be 'float64' or 'float32', got {dtype!r}")
    if random_state is None:
        entropy = int(np.random.SeedSequence().entropy)
    elif isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool) and random_state >= 0:
        entropy = int(random_state)
    else:
        raise ValidationError(f"random_state must be None or a non-negative int, got {random_state!r}")
    if chunks is None:
        row_chunk, col_chunk = min(n, DEFAULT_ROW_CHUNK), d
    elif isinstance(chunks, (int, np.integer)):
        row_chunk, col_chunk = int(chunks), d
    else:
        row_chunk, col_chunk = (int(c) for c in chunks)
    if row_chunk < 1 or col_chunk < 1:
        raise ValidationError(f"chunks must be positive, got {chunks!r}")
    return n, d, k, entropy, min(row_chunk, n), min(col_chunk, d)


def _block_covariance(d: int, support: np.ndarray, block: np.ndarray, off_diagonal_level: float) -> sp.csr_array:
    """CSR ``off_diagonal_level * I`` off ``support`` and ``block`` on ``support x support``."""
    outside = np.setdiff1d(np.arange(d), support)
    bi, bj = np.meshgrid(support, support, indexing="ij")
    rows = np.concatenate([outside, bi.ravel()])
    cols = np.concatenate([outside, bj.ravel()])
    vals = np.concatenate([np.full(len(outside), off_diagonal_level), np.asarray(block).ravel()])
    cov = sp.csr_array(sp.coo_array((vals, (rows, cols)), shape=(d, d)))
    cov.sum_duplicates()
    cov.eliminate_zeros()
    return cov


@dataclass(frozen=True)
class Model2:
    """A Model-2 instance: the lazy samples and the truth they were drawn from.

    Attributes
    ----------
    X : dask.array.Array
        ``(n_samples, n_features)`` lazy samples, i.i.d. ``N(0, covariance)``.
    covariance : scipy.sparse.csr_array
        The k-RCS covariance.
    v1 : ndarray of shape (n_features,)
        Unit top eigenvector, ``k`` non-zeros (sign: largest-magnitude entry positive for
        Construction 2; random signs for the sparse spike).
    support : ndarray of int
        Sorted support of ``v1``.
    lambda1, lambda2 : float
        Top and second eigenvalue.
    gap : float
        Relative eigengap gamma: ``lambda2 = (1 - gap) lambda1``; the absolute eigengap is
        :attr:`eigengap`.
    sigma2 : float
        Sub-Gaussian variance proxy ``sigma^2 = ||Sigma||_op = lambda1``.
    k : int
        Sparsity of ``v1`` and row sparsity of ``covariance``.
    random_state : int or None
        Root seed of the samples.
    model : str
        ``"model2-sparse-spike"`` or ``"construction2-inverse-wishart"``.
    """

    X: da.Array
    covariance: sp.csr_array
    v1: np.ndarray
    support: np.ndarray
    lambda1: float
    lambda2: float
    gap: float
    sigma2: float
    k: int
    random_state: int | None = None
    entropy: int = field(default=0, repr=False)
    model: str = "model2-sparse-spike"

    @property
    def sigma(self) -> float:
        """Sub-Gaussian scale ``sigma = sqrt(lambda1)``."""
        return math.sqrt(self.sigma2)

    @property
    def eigengap(self) -> float:
        """Absolute eigengap ``lambda1 - lambda2``."""
        return self.lambda1 - self.lambda2

    @property
    def n_samples(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])

    def parameters(self) -> dict:
        """Public model parameters (JSON-compatible)."""
        return {
            "model": self.model,
            "n_samples": self.n_samples,
            "n_features": self.n_features,
            "k": self.k,
            "lambda1": self.lambda1,
            "lambda2": self.lambda2,
            "gap": self.gap,
            "eigengap": self.eigengap,
            "sigma2": self.sigma2,
            "support": [int(i) for i in self.support],
            "random_state": self.random_state,
            "entropy": str(self.entropy),
            "dtype": str(self.X.dtype),
        }

    def sin2_error(self, u: np.ndarray) -> float:
        """``sin^2`` of the angle between ``u`` (any non-zero vector, or a (1, d) array) and ``v1``."""
        u = np.asarray(u, dtype=np.float64).ravel()
        nu = float(np.linalg.norm(u))
        if nu == 0:
            return 1.0
        c = float(u @ self.v1) / nu
        return max(0.0, 1.0 - c * c)

    def write_zarr(self, path: str | os.PathLike, *, overwrite: bool = False, scheduler: str | None = None) -> str:
        """Write the samples (chunk by chunk) and the truth as a Zarr group at ``path``.

        Layout: ``path/X`` the samples (same chunks as :attr:`X`, with its chunk manifest:
        :func:`~dpdist.data.validation.write_chunk_manifest`), ``path/truth/covariance``
        (CSR parts ``data``, ``indices``, ``indptr``), ``path/truth/v1``, and the model
        parameters in ``attrs["model2"]``. ``scheduler`` is a dask local scheduler name
        (default: dask's default). ``dpdist`` commands accept ``path`` directly (they read
        ``path/X``). Read the truth back with :func:`load_model2_truth`.
        """
        import zarr

        path = os.fspath(path)
        if os.path.exists(path) and not overwrite:
            raise ValidationError(f"output {path!r} already exists (pass overwrite=True)")
        root = zarr.open_group(path, mode="w")
        root.attrs["model2"] = json.loads(json.dumps(self.parameters()))
        arr = root.create_array("X", shape=self.X.shape, chunks=tuple(c[0] for c in self.X.chunks), dtype=self.X.dtype,
                                config={"write_empty_chunks": True})
        kwargs = {} if scheduler is None else {"scheduler": scheduler}
        da.store(self.X, arr, lock=False, compute=True, **kwargs)
        write_chunk_manifest(arr)  # readers check the store's listing against it
        truth = root.create_group("truth")
        cov = truth.create_group("covariance")
        cov.attrs["format"] = "csr"
        cov.attrs["shape"] = list(self.covariance.shape)
        for part in ("data", "indices", "indptr"):
            a = np.asarray(getattr(self.covariance, part))
            cov.create_array(part, shape=a.shape, dtype=a.dtype)[...] = a
        truth.create_array("v1", shape=self.v1.shape, dtype=self.v1.dtype)[...] = self.v1
        return path


def load_model2_truth(path: str | os.PathLike) -> dict:
    """Read back what :meth:`Model2.write_zarr` saved beside the samples.

    Returns a dict with ``covariance`` (CSR), ``v1`` and the parameters of
    :meth:`Model2.parameters`.
    """
    import zarr

    root = zarr.open_group(os.fspath(path), mode="r")
    if "model2" not in root.attrs:
        raise ValidationError(f"{os.fspath(path)!r} was not written by Model2.write_zarr")
    params = dict(root.attrs["model2"])
    cov = root["truth/covariance"]
    params["covariance"] = sp.csr_array(
        (cov["data"][...], cov["indices"][...], cov["indptr"][...]), shape=tuple(cov.attrs["shape"])
    )
    params["v1"] = root["truth/v1"][...]
    return params


def make_model2(
    n_samples: int,
    n_features: int,
    k: int,
    *,
    gap: float = 0.5,
    lambda1: float = 2.0,
    chunks: int | tuple[int, int] | None = None,
    random_state: int | None = None,
    dtype: str = "float64",
) -> Model2:
    """Lazy Gaussian samples from Model 2 (k-sparse PCA model) with their truth.

    ``Sigma = lambda2 I + (lambda1 - lambda2) v v^T`` with ``v`` flat on a random support
    (entries ``+-1/sqrt(k)``); see the module docstring for the parameters it satisfies.

    Parameters
    ----------
    n_samples, n_features : int
        Shape of the data (n >= 1, d >= 2).
    k : int
        Sparsity of the top eigenvector, ``1 <= k <= d``.
    gap : float
        Relative eigengap gamma in (0, 1): ``lambda2 = (1 - gap) * lambda1``.
    lambda1 : float
        Top eigenvalue (> 0). ``sigma^2 = lambda1``.
    chunks : int or (int, int), optional
        Rows per chunk, or (rows, columns) per chunk. Default: ``DEFAULT_ROW_CHUNK`` rows,
        all columns.
    random_state : int, optional
        Root seed (``None``: fresh OS entropy, recorded in :attr:`Model2.entropy`). It picks
        the support and the signs of ``v1`` and every chunk of samples.
    dtype : {"float64", "float32"}
        Sample dtype.

    Returns
    -------
    Model2

    Examples
    --------
    >>> m = make_model2(1000, 50, 3, gap=0.5, random_state=0)
    >>> m.X.shape, m.k, m.lambda2
    ((1000, 50), 3, 1.0)
    """
    n, d, k, entropy, row_chunk, col_chunk = _resolve_common(n_samples, n_features, k, chunks, random_state, dtype)
    gap = float(gap)
    if not (0.0 < gap < 1.0):
        raise ValidationError(f"gap must lie in the open interval (0, 1), got {gap!r}")
    lambda1 = float(lambda1)
    if not (math.isfinite(lambda1) and lambda1 > 0):
        raise ValidationError(f"lambda1 must be finite and > 0, got {lambda1!r}")

    rng = np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=(0,)))
    support = np.sort(rng.choice(d, size=k, replace=False)).astype(np.int64)
    signs = rng.choice(np.array([-1.0, 1.0]), size=k)
    v = np.zeros(d)
    v[support] = signs / math.sqrt(k)
    lambda2 = (1.0 - gap) * lambda1
    block = lambda2 * np.eye(k) + (lambda1 - lambda2) * np.outer(v[support], v[support])
    covariance = _block_covariance(d, support, block, lambda2)
    X = _lazy_samples("model2", n, d, row_chunk, col_chunk, _block_sample, (entropy, v, lambda1, lambda2, dtype), dtype)
    return Model2(
        X=X,
        covariance=covariance,
        v1=v,
        support=support,
        lambda1=lambda1,
        lambda2=lambda2,
        gap=gap,
        sigma2=lambda1,
        k=k,
        random_state=None if random_state is None else int(random_state),
        entropy=entropy,
    )


def make_construction2(
    n_samples: int,
    n_features: int,
    *,
    k: int | None = None,
    gamma: float = 0.3,
    chunks: int | tuple[int, int] | None = None,
    random_state: int | None = None,
    dtype: str = "float64",
) -> Model2:
    """Construction 2 of the COLT 2026 paper (spiked inverse-Wishart), on a k-support.

    On a random support S of size ``k`` (``k = d`` by default: the dense instance of
    Appendix E), ``Sigma_S = r M^{1/2} A^{-1} M^{1/2}`` with ``M = (1 - gamma) I_k + gamma u
    u^T`` (``u`` a random unit vector), ``A = W / nu``, ``W ~ Wishart(nu, I_k)`` (Bartlett,
    the law of ``G^T G`` in eq. (24)), ``nu = ceil(1600 k / gamma^2)``, ``r = (nu - k - 1) /
    nu``. Off S, ``Sigma = r (1 - gamma) I`` (the bulk level of ``r M``). Rows are
    ``N(0, Sigma)``.

    With ``k < d`` the covariance is k-RCS and, on Lemma 23's event (probability >= 1 - 2
    exp(-k/2); it holds for every seed we tried), ``1/5 I <= Sigma_S <= 11/10 I``,
    ``lambda_1(Sigma_S) >= r (1 - gamma/5) > r (1 - gamma)`` so ``v1`` is supported on S, and
    the absolute eigengap is at least ``3/100``. The attributes record the exact spectrum:
    ``lambda1``, ``lambda2``, ``gap = 1 - lambda2/lambda1``, ``sigma2 = lambda1``.

    Parameters
    ----------
    n_samples, n_features : int
    k : int, optional
        Support size (default ``n_features``).
    gamma : float
        Construction 2's spike strength, in (0.1, 0.5).
    chunks, random_state, dtype
        As for :func:`make_model2`.

    Raises
    ------
    ValidationError
        Bad parameters, or (never observed) a draw whose top eigenvector leaves S.
    """
    from scipy import stats

    d_int = _check_int(n_features, "n_features", 2)
    k = d_int if k is None else k
    n, d, k, entropy, row_chunk, col_chunk = _resolve_common(n_samples, n_features, k, chunks, random_state, dtype)
    gamma = float(gamma)
    if not (0.1 < gamma < 0.5):
        raise ValidationError(f"gamma must lie in the open interval (0.1, 0.5) (Construction 2), got {gamma!r}")
    rng = np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=(0,)))
    support = np.sort(rng.choice(d, size=k, replace=False)).astype(np.int64)
    u = rng.standard_normal(k)
    u /= np.linalg.norm(u)
    nu = math.ceil(1600 * k / gamma**2)
    r = (nu - k - 1) / nu
    W = np.atleast_2d(stats.wishart(df=nu, scale=np.eye(k)).rvs(random_state=rng))
    A = W / nu
    m_half = math.sqrt(1 - gamma) * np.eye(k) + (1 - math.sqrt(1 - gamma)) * np.outer(u, u)
    block = r * m_half @ np.linalg.solve(A, m_half)
    block = 0.5 * (block + block.T)
    off_level = r * (1 - gamma)
    vals, vecs = np.linalg.eigh(block)
    lambda1 = float(vals[-1])
    lambda2 = float(vals[-2]) if k > 1 else -math.inf
    if k < d:
        lambda2 = max(lambda2, off_level)
    if not lambda1 > lambda2:
        raise ValidationError("this draw's top eigenvector is not unique on the support; use another random_state")
    v = np.zeros(d)
    top = vecs[:, -1]
    v[support] = top if top[np.argmax(np.abs(top))] > 0 else -top
    factor = np.linalg.cholesky(block)
    covariance = _block_covariance(d, support, block, off_level)
    X = _lazy_samples("construction2", n, d, row_chunk, col_chunk, _block_sample_factor,
                      (entropy, support, factor, math.sqrt(off_level), dtype), dtype)
    return Model2(
        X=X,
        covariance=covariance,
        v1=v,
        support=support,
        lambda1=lambda1,
        lambda2=lambda2,
        gap=1.0 - lambda2 / lambda1,
        sigma2=lambda1,
        k=k,
        random_state=None if random_state is None else int(random_state),
        entropy=entropy,
        model="construction2-inverse-wishart",
    )
