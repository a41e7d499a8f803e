"""dpdist: differentially private covariance, sparse PCA and second moments at scale.

Estimators follow scikit-learn conventions: parameters are validated in ``fit`` before any
data is read, and results are set as ``*_`` attributes, with the full privacy record in
``release_``.
"""

from dpdist import baselines  # noqa: F401  (dpdist.baselines.X)
from dpdist._version import __version__
from dpdist.algorithms.compare import compare_methods
from dpdist.algorithms.expmech_pca.estimator import ExpMechSparsePCA
from dpdist.algorithms.second_moment.estimator import SecondMoment
from dpdist.algorithms.sparse_covariance.estimator import SparseCovariance
from dpdist.algorithms.sparse_covariance_pca import SparseCovariancePCA
from dpdist.algorithms.sparse_pca.estimator import SparsePCA, SpectralNorm
from dpdist.data.results import load_result
from dpdist.exceptions import (
    BudgetExceeded,
    DataConversionWarning,
    InfrastructureError,
    NoPrivateResult,
    PrivacyWarning,
    UtilityWarning,
    ValidationError,
)
from dpdist.algorithms.plan import Plan

__all__ = [
    "BudgetExceeded",
    "DataConversionWarning",
    "ExpMechSparsePCA",
    "InfrastructureError",
    "NoPrivateResult",
    "Plan",
    "PrivacyWarning",
    "SecondMoment",
    "SparseCovariance",
    "SparseCovariancePCA",
    "SparsePCA",
    "SpectralNorm",
    "UtilityWarning",
    "ValidationError",
    "__version__",
    "compare_methods",
    "load_result",
]
