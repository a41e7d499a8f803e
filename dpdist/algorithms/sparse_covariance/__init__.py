"""Algorithm 1 of the COLT 2026 paper (PrivCov): private sparse covariance by per-row noisy
top-k selection; by default (``selection="gumbel"``) each row's top k by Gumbel keys (the
peeling exponential mechanism) with a Gaussian release of the selected values and zCDP
accounting (docs/privacy/privcov.md), with the same release after a Laplace selection
(``selection="laplace"``), or as the paper writes it (``selection="paper"``).

:class:`SparseCovariance` is the estimator: it validates its parameters once, plans, and exposes
the release (:func:`~dpdist.algorithms.sparse_covariance.release.release_privcov`) as ``*_``
attributes; ``private_sparse_covariance`` is its functional form, returning the
:class:`~dpdist.privacy.release.Release`.
"""

from dpdist.algorithms.sparse_covariance.estimator import SparseCovariance, private_sparse_covariance
from dpdist.algorithms.sparse_covariance.plan import SparseCovariancePlan
from dpdist.algorithms.sparse_covariance.release import (
    MECHANISM,
    MECHANISM_ZCDP,
    SELECTIONS,
    assemble_privcov,
)

__all__ = [
    "MECHANISM",
    "MECHANISM_ZCDP",
    "SELECTIONS",
    "SparseCovariance",
    "SparseCovariancePlan",
    "assemble_privcov",
    "private_sparse_covariance",
]
