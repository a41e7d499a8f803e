"""Model-1 synthetic data: Gaussian samples with a random k-RCS covariance, generated chunk
by chunk (lazily, or written in parallel into Zarr), with the true covariance saved beside.

The covariance is built in factor form ``Sigma = diag(s^2) + F^T F`` with a sparse factor F,
so that a chunk of rows is ``Z * s + G F`` (Z, G standard normal) and no d x d matrix is
ever formed:

- ``"block"``: block-diagonal, blocks of size k drawn as in Construction 1 of the COLT 2026
  paper (``InvWishart((k-1) I_k, 2k)``); F holds each block's Cholesky factor.
- ``"banded"``: ``Sigma_ij = +/-rho`` for ``0 < |i-j| <= w`` with ``w = (k-1)//2``;
  ``"graph"``: a random graph of maximum degree k-1 (union of k-1 random matchings) with
  random signed weights. Both use one factor row ``sqrt(|rho_e|) (e_i + sign_e e_j)`` per
  edge, and s_i^2 = 1 - sum of |rho_e| over edges at i, so the diagonal is 1.

Every row has at most k non-zeros (k-RCS). Gaussian samples with covariance Sigma are
sigma-sub-Gaussian in the sense of Model 1 with ``sigma^2 = ||Sigma||_op`` (paper, after
Construction 1), which :class:`Model1` records as ``sigma2``.

Each chunk of rows draws from its own stream, ``SeedSequence(seed, spawn_key=(chunk,))``,
the same streams ``SeedSequence(seed).spawn`` would give, keyed by the chunk's index in a
fixed chunking (``chunk_rows``), so the data do not depend on the scheduler.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import dask.array as da
import numpy as np
import scipy.sparse as sp
from scipy import stats
from scipy.sparse import linalg as splinalg

from dpdist.data.validation import write_chunk_manifest
from dpdist.exceptions import ValidationError

__all__ = ["Model1", "STRUCTURES", "load_truth", "make_model1"]

STRUCTURES = ("block", "banded", "graph")


@dataclass
class Model1:
    """A k-RCS covariance in factor form, and its sampler.

    Attributes
    ----------
    covariance : scipy.sparse.csr_array
        The true Sigma (d x d).
    k : int
        Maximum non-zeros per row (k-RCS level).
    sigma2 : float
        ``||Sigma||_op``: the sub-Gaussian parameter sigma^2 of Model 1 for Gaussian samples.
    structure : str
    diag_std : ndarray (d,)
    factor : scipy.sparse.csr_array (m, d)
    seed : int
    """

    covariance: sp.csr_array
    k: int
    sigma2: float
    structure: str
    diag_std: np.ndarray
    factor: sp.csr_array
    seed: int
    eigengap: float = field(default=float("nan"))

    @property
    def n_features(self) -> int:
        return self.covariance.shape[0]

    def sample_chunk(self, chunk_index: int, n_rows: int) -> np.ndarray:
        """Rows of chunk ``chunk_index`` (its own stream spawned from ``seed``)."""
        rng = np.random.default_rng(np.random.SeedSequence(self.seed, spawn_key=(1, int(chunk_index))))
        d, m = self.n_features, self.factor.shape[0]
        out = rng.standard_normal((n_rows, d)) * self.diag_std
        g = rng.standard_normal((n_rows, m))
        out += np.asarray(sp.csr_array(self.factor).T.dot(g.T).T)
        return out

    def samples(self, n_samples: int, *, chunk_rows: int = 100_000) -> da.Array:
        """A lazy ``n_samples x d`` dask array of samples, ``chunk_rows`` rows a chunk."""
        if n_samples < 1:
            raise ValidationError(f"n_samples must be >= 1, got {n_samples}")
        chunk_rows = int(max(1, min(chunk_rows, n_samples)))
        sizes = [chunk_rows] * (n_samples // chunk_rows)
        if n_samples % chunk_rows:
            sizes.append(n_samples % chunk_rows)

        def block(block_id=None, block_info=None):
            i = block_id[0]
            return self.sample_chunk(i, sizes[i])

        return da.map_blocks(
            block, chunks=(tuple(sizes), (self.n_features,)), dtype=np.float64, meta=np.empty((0, 0))
        )

    def write_zarr(self, path: str, n_samples: int, *, chunk_rows: int = 100_000, scheduler=None,
                   overwrite: bool = False) -> str:
        """Write ``n_samples`` rows to a Zarr group at ``path`` chunk by chunk in parallel.

        The group holds ``X`` (the samples, chunked ``chunk_rows`` x d, with its chunk manifest:
        :func:`~dpdist.data.validation.write_chunk_manifest`) and ``truth/`` (the
        covariance as CSR arrays) with the model's parameters in ``attrs["model"]``. Written
        into a temporary directory and renamed, so a failure leaves nothing at ``path``.
        ``scheduler`` is what dask's ``compute`` takes (a name such as ``"threads"`` or ``"sync"``,
        a ``distributed.Client``; default: dask's default): writing synthetic data draws no noise
        and needs none of the estimators' runtime.
        """
        import shutil
        import tempfile

        import zarr

        path = os.path.abspath(path)
        parent = os.path.dirname(path)
        if not os.path.isdir(parent):
            raise ValidationError(f"output directory {parent!r} does not exist")
        if os.path.exists(path) and not overwrite:
            raise ValidationError(f"{path!r} already exists (pass overwrite=True to replace it)")
        tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.tmp-", dir=parent)
        try:
            root = zarr.open_group(tmp, mode="w")
            root.attrs["model"] = self.describe() | {"n_samples": int(n_samples)}
            X = self.samples(n_samples, chunk_rows=chunk_rows)
            # every chunk file written (also all-zero ones), and recorded so in the chunk manifest
            arr = root.create_array("X", shape=X.shape, chunks=(X.chunks[0][0], X.shape[1]), dtype="float64",
                                    config={"write_empty_chunks": True})
            kwargs = {} if scheduler is None else {"scheduler": scheduler}
            da.store(X, arr, lock=False, compute=True, **kwargs)  # dask's own scheduling: nothing private here
            write_chunk_manifest(arr)
            truth = root.create_group("truth")
            cov = sp.csr_array(self.covariance)
            truth.attrs["format"] = "csr"
            truth.attrs["shape"] = list(cov.shape)
            for part in ("data", "indices", "indptr"):
                a = np.asarray(getattr(cov, part))
                truth.create_array(part, shape=a.shape, dtype=a.dtype)[...] = a
            if os.path.exists(path):
                shutil.rmtree(path)
            os.rename(tmp, path)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return path

    def describe(self) -> dict:
        return {
            "model": "Model 1 (k-sparse covariance), Gaussian samples",
            "structure": self.structure,
            "n_features": self.n_features,
            "k": self.k,
            "sigma2": self.sigma2,
            "seed": self.seed,
        }


def load_truth(path: str) -> sp.csr_array:
    """The true covariance saved by :meth:`Model1.write_zarr`."""
    import zarr

    g = zarr.open_group(os.fspath(path), mode="r")["truth"]
    return sp.csr_array((g["data"][...], g["indices"][...], g["indptr"][...]), shape=tuple(g.attrs["shape"]))


def _edge_model(edges: np.ndarray, weights: np.ndarray, d: int) -> tuple[np.ndarray, sp.csr_array]:
    m = len(edges)
    mag = np.sqrt(np.abs(weights))
    rows = np.repeat(np.arange(m), 2)
    cols = edges.ravel()
    vals = np.column_stack([mag, np.sign(weights) * mag]).ravel()
    F = sp.csr_array((vals, (rows, cols)), shape=(m, d))
    load = np.zeros(d)
    np.add.at(load, edges[:, 0], np.abs(weights))
    np.add.at(load, edges[:, 1], np.abs(weights))
    if np.any(load >= 1):
        raise ValidationError("edge weights too large: the diagonal would not stay positive")
    return np.sqrt(1 - load), F


def make_model1(n_features: int, k: int, *, structure: str = "banded", strength: float = 0.8,
                random_state: int = 0) -> Model1:
    """Draw a Model-1 covariance.

    Parameters
    ----------
    n_features : int
        d.
    k : int
        Row sparsity (k-RCS); k >= 2 for "block" (k must divide d) and "banded" (k >= 3 odd
        uses the full band; k even uses w = (k-1)//2).
    structure : {"block", "banded", "graph"}
    strength : float in (0, 1)
        For "banded"/"graph": the total |off-diagonal| mass per row is at most ``strength``
        (so Sigma is diagonally dominant, hence positive definite, with unit diagonal).
    random_state : int
        Seed of the covariance and (by spawned streams) of the samples.
    """
    d = int(n_features)
    k = int(k)
    if d < 2 or not (1 <= k <= d):
        raise ValidationError(f"need d >= 2 and 1 <= k <= d, got d={d}, k={k}")
    if structure not in STRUCTURES:
        raise ValidationError(f"structure must be one of {STRUCTURES}, got {structure!r}")
    if not (0 < strength < 1):
        raise ValidationError(f"strength must lie in (0, 1), got {strength}")
    rng = np.random.default_rng(np.random.SeedSequence(random_state, spawn_key=(0,)))
    if structure == "block":
        if k < 2 or d % k:
            raise ValidationError(f"'block' needs k >= 2 dividing d, got d={d}, k={k}")
        blocks = stats.invwishart(df=2 * k, scale=(k - 1) * np.eye(k)).rvs(size=d // k, random_state=rng)
        blocks = np.asarray(blocks).reshape(d // k, k, k)
        chol = np.linalg.cholesky(blocks)  # Sigma_b = L L^T; factor rows are L^T rows
        F = sp.block_diag([L.T for L in chol], format="csr")
        diag_std = np.zeros(d)
    else:
        if structure == "banded":
            w = (k - 1) // 2
            pairs = [(i, i + o) for o in range(1, w + 1) for i in range(d - o)]
            deg = 2 * w
        else:
            pairs_set: set[tuple[int, int]] = set()
            for _ in range(k - 1):
                perm = rng.permutation(d)
                for a, b in zip(perm[0::2], perm[1::2]):
                    pairs_set.add((min(a, b), max(a, b)))
            pairs = sorted(pairs_set)
            deg = k - 1
        edges = np.array(pairs, dtype=np.int64).reshape(-1, 2)
        if len(edges) == 0:
            F = sp.csr_array((0, d))
            diag_std = np.ones(d)
        else:
            mags = strength / max(deg, 1) * rng.uniform(0.5, 1.0, size=len(edges))
            signs = rng.choice([-1.0, 1.0], size=len(edges))
            diag_std, F = _edge_model(edges, mags * signs, d)
    cov = sp.csr_array(sp.diags(diag_std**2) + F.T @ F)
    cov.eliminate_zeros()
    cov.sort_indices()
    if d > 2:
        top = splinalg.eigsh(cov, k=2, which="LA", return_eigenvectors=False)
        top = np.sort(top)[::-1]
    else:
        top = np.sort(np.linalg.eigvalsh(cov.toarray()))[::-1]
    sigma2 = float(top[0])
    gap = float(1 - top[1] / top[0]) if top[0] > 0 else float("nan")
    return Model1(cov, k, sigma2, structure, diag_std, sp.csr_array(F), int(random_state), gap)
