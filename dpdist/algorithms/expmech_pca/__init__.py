"""ExpMechPCA (COLT 2026, Algorithm 4, Appendix F): exhaustive exponential-mechanism sparse PCA.

:class:`ExpMechSparsePCA` is the scikit-learn-style estimator; :func:`expmech_pca`, its
functional form, builds it and returns the :class:`~dpdist.privacy.release.Release` of its fit.
"""

from dpdist.algorithms.expmech_pca.estimator import ExpMechSparsePCA, expmech_pca
from dpdist.algorithms.expmech_pca.plan import ExpMechPlan
from dpdist.algorithms.expmech_pca.release import DEFAULT_MAX_SUBSETS, leading_eigenvector
from dpdist.privacy.mechanisms.expmech import BLOCK_PURPOSE, SELECT_PURPOSE

__all__ = ["BLOCK_PURPOSE", "DEFAULT_MAX_SUBSETS", "ExpMechPlan", "ExpMechSparsePCA", "SELECT_PURPOSE", "expmech_pca",
           "leading_eigenvector"]
