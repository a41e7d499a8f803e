"""Simulation mode: draw the statistics the estimators consume instead of rows.

For Gaussian rows the second moment of a block of coordinates is Wishart-distributed, so a
run at n = 1e15 or d = 1e5 costs what the mechanism costs, not what reading n x d numbers
costs. One module per simulated family (:mod:`~dpdist.simulate.thresholded`,
:mod:`~dpdist.simulate.privcov`, :mod:`~dpdist.simulate.privpca`) applies each estimator's own
calibration (its ``plan()`` or :mod:`dpdist.privacy`, never re-typed) and noise laws
(:func:`~dpdist.privacy.noise.streams.laplace_from_uniform`,
:func:`~dpdist.privacy.noise.streams.gaussian_from_uniform`; for PrivPCA the estimator's own release
functions) to the statistic drawn by :mod:`~dpdist.simulate.draws`; :mod:`~dpdist.simulate.errors`
measures the result and :mod:`~dpdist.simulate.result` holds it.

Regimes
-------
*Exact in law* (Gaussian rows, clipping inactive; the probability that clipping is active is
computed and returned as ``p_clip``): the diagonal blocks of the second moment, the
diagonal, every noise value the mechanism adds on them, the top order statistics of the
noise on the off-block entries; for PrivPCA the per-batch support blocks, the private tests
and both releases.

*Approximate*: the off-block entries of the second moment (independent Gaussians with the
exact conditional variance, not their exact joint law), and for PrivPCA the events that an
off-support entry matters (their probability is reported). Each result lists its
approximations in ``info["approximations"]``.

Every result, its metadata and every plot made from it carry the label
:data:`SIMULATED`. The simulation is validated against the real pipeline at each method's
n*, or at the largest n the real pipeline reaches, with the difference stated as a shift of n*
(:mod:`dpdist.experiments.validation`).

Instances are :class:`~dpdist.data.block_models.BlockModel` (block-diagonal covariance plus an
i.i.d. bulk, in canonical coordinates): Construction 1 and the Model-2 sparse spike.
"""

from dpdist.data.block_models import BlockModel, from_construction1, from_model2, model2_block_model
from dpdist.simulate.privcov import simulate_privcov
from dpdist.simulate.privpca import simulate_privnorm, simulate_privpca
from dpdist.simulate.result import SIMULATED, SimResult, clip_probability
from dpdist.simulate.thresholded import simulate_thresholded, simulate_wang_xu

__all__ = [
    "SIMULATED",
    "BlockModel",
    "SimResult",
    "clip_probability",
    "from_construction1",
    "from_model2",
    "model2_block_model",
    "simulate_privcov",
    "simulate_privnorm",
    "simulate_privpca",
    "simulate_thresholded",
    "simulate_wang_xu",
]
