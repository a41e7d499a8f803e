"""One frozen object per mechanism: calibration, float-safe noise, purpose keys and events.

Each module holds one mechanism and writes its privacy argument once (guarantee, sensitivity,
lemma, deviations, float factor, lattice); the algorithms wire the engine to these objects,
releases record their events and descriptions, and the audits of :mod:`dpdist.testing` call
them. :mod:`~dpdist.privacy.mechanisms.base` holds what they share.
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
