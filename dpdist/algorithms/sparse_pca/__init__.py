"""PrivNorm (Algorithm 3) and PrivPCA (Algorithm 2) of the COLT 2026 paper, and Theorem 3.

:func:`private_norm` releases the operator norm of the thresholded FriendlyCore average
``T_5tau(Sigma_bar)``; :func:`sparse_pca` releases the leading k-sparse principal component by
PrivPCA (Algorithm 2), after PrivNorm on the same data (Theorem 3, splitting the budget) when
no ``lambda_hat`` is given. The functions are the functional forms of the estimators
:class:`SpectralNorm` and :class:`SparsePCA`: each builds its estimator and returns the release
of its fit.

Execution (see :mod:`dpdist.engine.privpca`): pass 1 computes the batch statistics (good-set
ingredients, friend counts, weights) and keeps them where they were computed; the private
tests run there and only their noised outcomes come back; pass 2 computes
``T_5tau(Sigma_bar)`` (again kept there), and the final release (a noised norm, or the top
eigenvector of the noised, top-k^2 projector) is the only value that comes back. PrivNorm and
PrivPCA use the same batches, tau, friend counts and Sigma_bar (deterministic functions of the
data), so :func:`sparse_pca` reads the data twice in total, not four times; their noises are
independent (distinct noise purposes).
"""

from dpdist.algorithms.sparse_pca.estimator import SparsePCA, SpectralNorm, private_norm, sparse_pca
from dpdist.algorithms.sparse_pca.plan import SparsePCAPlan, SpectralNormPlan

__all__ = ["SparsePCA", "SparsePCAPlan", "SpectralNorm", "SpectralNormPlan", "private_norm", "sparse_pca"]
