"""ExpMechPCA (COLT 2026, Algorithm 4, Appendix F): exhaustive exponential-mechanism sparse PCA.

:func:`expmech_pca` does the math and returns a :class:`~dpdist.privacy.release.Release`;
:class:`ExpMechSparsePCA` is the scikit-learn-style wrapper.
"""

from dpdist.algorithms.expmech_pca.estimator import ExpMechSparsePCA
from dpdist.algorithms.expmech_pca.plan import ExpMechPlan
from dpdist.algorithms.expmech_pca.release import DEFAULT_MAX_SUBSETS, expmech_pca, leading_eigenvector
from dpdist.privacy.mechanisms.expmech import BLOCK_PURPOSE, SELECT_PURPOSE

__all__ = ["BLOCK_PURPOSE", "DEFAULT_MAX_SUBSETS", "ExpMechPlan", "ExpMechSparsePCA", "SELECT_PURPOSE", "expmech_pca",
           "leading_eigenvector"]
