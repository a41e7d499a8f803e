"""A user's plain script (no ``if __name__ == "__main__":`` guard): fit every public
estimator and baseline on a small Zarr store and print a JSON summary.

    python fit_everything.py SCHEDULER DATA

SCHEDULER: ``default`` (scheduler=None), a dask scheduler name, ``local-cluster``,
``client:ADDRESS`` (a distributed.Client that is not the default) or a cluster address.
The summary gives, per estimator, the shape of its output, its privacy budget and the seeded
release (values), or the stage at which a private test returned bottom.
"""

import json
import math
import sys

import numpy as np

import dpdist
from dpdist import baselines

kind, data = sys.argv[1], sys.argv[2]
if kind == "default":
    scheduler = None
elif kind.startswith("client:"):
    from distributed import Client

    scheduler = Client(kind[len("client:"):], set_as_default=False)
else:
    scheduler = kind
SIGMA = math.sqrt(5.0)  # the spike's largest variance (sub-Gaussian scale)
ESTIMATORS = {
    "SparseCovariance": lambda: dpdist.SparseCovariance(2, 1.0, 1e-5, clip=3.0, random_state=1, tile_size=4),
    "SparseCovariancePCA": lambda: dpdist.SparseCovariancePCA(2, 1.0, 1e-5, clip=3.0, random_state=1, tile_size=4),
    "SpectralNorm": lambda: dpdist.SpectralNorm(2, 200.0, 1e-6, gap=0.5, sigma=SIGMA, n_batches=60, tau=0.38,
                                                random_state=2),
    "SparsePCA": lambda: dpdist.SparsePCA(2, 2000.0, 1e-6, gap=0.5, sigma=SIGMA, n_batches=60, tau=0.38,
                                          random_state=0),
    "ExpMechSparsePCA": lambda: dpdist.ExpMechSparsePCA(2, 1.0, 1e-6, clip=3.0, random_state=3),
    "SecondMoment": lambda: dpdist.SecondMoment(1.0, m=10, random_state=4),
    "GaussianCovariance": lambda: baselines.GaussianCovariance(1.0, 1e-5, clip=3.0, random_state=5, tile_size=4),
    "ThresholdedCovariance": lambda: baselines.ThresholdedCovariance(sigma=SIGMA, tile_size=4),
    "AnalyzeGauss": lambda: baselines.AnalyzeGauss(1.0, 1e-5, row_norm=8.0, random_state=6),
    "GaussianPCA": lambda: baselines.GaussianPCA(1.0, 1e-5, clip=3.0, random_state=7),
    "ThresholdedPCA": lambda: baselines.ThresholdedPCA(sigma=SIGMA),
    "SubsampleAggregateSecondMoment": lambda: baselines.SubsampleAggregateSecondMoment(
        1.0, 1e-5, m=200, unsafe_no_privacy=True, random_state=8),
}
OUTPUT = ("covariance_", "components_", "second_moment_", "norm_")


def summary(est):
    out = {"shapes": {}, "values": []}
    for name in OUTPUT:
        if hasattr(est, name):
            value = getattr(est, name)
            value = value.toarray() if hasattr(value, "toarray") else np.asarray(value, dtype=float)
            out["shapes"][name] = list(value.shape)
            out["values"] += value.ravel().tolist()
    privacy = getattr(est, "privacy_", None)
    out["budget"] = None if privacy is None else {
        key: getattr(privacy, key) for key in ("epsilon", "delta", "rho") if hasattr(privacy, key)}
    return out


def main():
    result = {}
    for name, make in ESTIMATORS.items():
        est = make()
        est.scheduler = scheduler  # every estimator takes scheduler (and timeout) as a parameter
        try:
            result[name] = summary(est.fit(data))
        except dpdist.NoPrivateResult as exc:
            result[name] = {"bottom": exc.stage}
    print(json.dumps(result))


main()
