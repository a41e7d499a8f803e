"""Private second-moment estimation of subsamplable inputs: RecDPSME (MS25) under zCDP.

Mahpud & Sheffet, "A Private Approximation of the 2nd-Moment Matrix of Any Subsamplable
Input", NeurIPS 2025 (arXiv 2505.14251), Algorithms 1-2, with a zCDP initialisation
(docs/privacy/second_moment.md). :class:`SecondMoment` is the estimator; :func:`second_moment`,
its functional form, builds it and returns the :class:`~dpdist.privacy.release.Release` of its
fit. :func:`one_shot_second_moment` is the one-level Gaussian mechanism it is compared with.
"""

from dpdist.algorithms.second_moment.estimator import SecondMoment, second_moment
from dpdist.algorithms.second_moment.release import MECHANISM, one_shot_second_moment
from dpdist.algorithms.second_moment.selection import (
    group_partition,
    lambda_buckets,
    radius_grid,
    random_groups,
    select_lambda,
    select_radius,
)

__all__ = [
    "MECHANISM",
    "SecondMoment",
    "group_partition",
    "lambda_buckets",
    "one_shot_second_moment",
    "radius_grid",
    "random_groups",
    "second_moment",
    "select_lambda",
    "select_radius",
]
