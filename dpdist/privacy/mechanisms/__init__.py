"""One frozen object per mechanism: calibration, float-safe noise, purpose keys and events.

Each module holds one mechanism and writes its privacy argument once (guarantee, sensitivity,
lemma, deviations, float factor, lattice); the algorithms wire the engine to these objects,
releases record their events and descriptions, and the audits of :mod:`dpdist.testing` call
them. :mod:`~dpdist.privacy.mechanisms.base` holds what they share.
"""

from dpdist.privacy.mechanisms.base import Mechanism, lattice_law
from dpdist.privacy.mechanisms.privcov import PrivCovMechanism, privcov_mechanism
from dpdist.privacy.mechanisms.gaussian import SymmetricGaussianMechanism, analyze_gauss_mechanism, wang_xu_mechanism
from dpdist.privacy.mechanisms.second_moment import GaussianHistogramMechanism, histogram_mechanism, level_mechanisms
from dpdist.privacy.mechanisms.subsample import SubsampleAggregateMechanism, subsample_aggregate_mechanism
from dpdist.privacy.mechanisms.expmech import ExpMechMechanism

__all__ = ["Mechanism", "PrivCovMechanism", "lattice_law", "privcov_mechanism"]
__all__ += ["SymmetricGaussianMechanism", "analyze_gauss_mechanism", "wang_xu_mechanism"]
__all__ += ["GaussianHistogramMechanism", "histogram_mechanism", "level_mechanisms"]
__all__ += ["SubsampleAggregateMechanism", "subsample_aggregate_mechanism"]
__all__ += ["ExpMechMechanism"]
