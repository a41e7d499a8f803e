"""One module per mechanism, named by its algorithm's key: its calibration from public
parameters, the frozen mechanism object that holds its float-safe noise laws and purpose keys
and hands out its noise callables, and the events it states.

``privcov`` (SparseCovariance), ``privpca`` (SparsePCA and SpectralNorm), ``expmech``
(ExpMechSparsePCA), ``gaussian`` (the Wang-Xu and Analyze Gauss baselines, and the symmetric
Gaussian release the second-moment levels reuse), ``second_moment`` (SecondMoment),
``subsample_aggregate`` (its baseline) and ``mean`` (the private centring). ``privcov`` and
``privpca`` are small packages, being too long for one module. Each writes its privacy argument
once (guarantee, sensitivity, lemma, deviations, float factor, lattice); the algorithms wire the
engine to these objects, releases record their events and descriptions, and the audits of
:mod:`dpdist.testing` call them. :mod:`~dpdist.privacy.mechanisms.base` holds what they share;
the samplers they call are in :mod:`dpdist.privacy.noise`.
"""

from dpdist.privacy.mechanisms.base import Mechanism, lattice_law
from dpdist.privacy.mechanisms.expmech import ExpMechMechanism
from dpdist.privacy.mechanisms.privpca.mechanism import (
    FriendlyTestMechanism,
    PrivNormMechanism,
    PrivPCAMechanism,
)
from dpdist.privacy.mechanisms.gaussian import SymmetricGaussianMechanism, analyze_gauss_mechanism, wang_xu_mechanism
from dpdist.privacy.mechanisms.mean import ClippedMeanMechanism
from dpdist.privacy.mechanisms.privcov.mechanism import (
    PrivCovGumbelMechanism,
    PrivCovMechanism,
    PrivCovZCDPMechanism,
    privcov_gumbel_mechanism,
    privcov_mechanism,
    privcov_zcdp_mechanism,
)
from dpdist.privacy.mechanisms.second_moment import GaussianHistogramMechanism, histogram_mechanism, level_mechanisms
from dpdist.privacy.mechanisms.subsample_aggregate import (
    SubsampleAggregateMechanism,
    subsample_aggregate_mechanism,
)

__all__ = [
    "ClippedMeanMechanism", "ExpMechMechanism", "FriendlyTestMechanism", "GaussianHistogramMechanism", "Mechanism",
    "PrivCovGumbelMechanism", "PrivCovMechanism", "PrivCovZCDPMechanism", "PrivNormMechanism", "PrivPCAMechanism",
    "SubsampleAggregateMechanism",
    "SymmetricGaussianMechanism",
    "analyze_gauss_mechanism", "histogram_mechanism", "lattice_law", "level_mechanisms", "privcov_mechanism",
    "privcov_gumbel_mechanism", "privcov_zcdp_mechanism", "subsample_aggregate_mechanism", "wang_xu_mechanism",
]
