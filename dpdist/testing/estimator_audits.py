"""End-to-end black-box audits of the public estimators.

Each case calls an estimator's public ``fit()`` (the synchronous scheduler; ``random_state=None``:
OS entropy, a fresh key per fit, exactly the path a release takes) once per trial, on a tiny
pair of neighbouring datasets, and audits one released number against the *release's own*
claim: ``(epsilon, delta)`` for the approximate-DP estimators, ``rho`` for the zCDP ones
(SecondMoment and the one-shot Gaussian mechanism), as recorded in ``Release.privacy``. No noise
path is re-created here: a bug anywhere between the data and the release shows.

Pairs (the replaced row; :data:`PAIRS`): ``benign`` (an ordinary row, the strongest benign
change of the audited number), ``fill-9.97e36`` (a typical fill value in one entry), ``1e154``
(a row whose squared norm overflows), ``nan`` (a row of NaN: a zero row under the default
``on_nonfinite="zero"``). PrivNorm also has ``rows-1e10`` (every row ``1e10 e_1``, the neighbour
zeroes one of them: the input on which an unclipped PrivNorm was found to leak).

The claims are the whole estimator's (its composed total), far above what one released number
can reach: the real estimators' lower bounds stay far below them. What the audits exist to catch
are bugs that break the guarantee outright. Each case factory takes a ``source``: a context
manager factory inside which the fits run (default: none). The test side registers two
variants carrying bugs once found in the package (a second-moment kernel that cancels rows
next to a fill value; PrivNorm without its entry clip), which a sound audit must flag.

Short form (CI): ``default_trials`` per dataset (20). Long form (``DPDIST_LONG=1``, or
``dpdist audit --mechanism end-to-end --include-slow --long``): :data:`LONG_TRIALS` per
dataset (``parameters["long_trials"]``). Measured on the shared 2-core machine: the whole long table (39 cases, 24,600 fits)
took 8.3 minutes at 300 trials for every case, about 47 fits per second (a tiny fit takes
15-80 ms; :func:`trials_per_second`).
"""

from __future__ import annotations

import contextlib
import math
import warnings
from typing import Any, Callable

import numpy as np

from dpdist.testing.cases import AuditCase

__all__ = [
    "E2E_CASES",
    "LONG_TRIALS",
    "PAIRS",
    "estimator_case",
    "spike_rows",
    "trials_per_second",
]

#: The pairs every estimator is audited on (see the module docstring).
PAIRS = ("benign", "fill-9.97e36", "1e154", "nan")
#: Trials per dataset in the long form (the short form uses each case's ``default_trials``).
LONG_TRIALS = 300
#: The statistic recorded when a fit returns bottom (NoPrivateResult): an output like any other.
BOTTOM = -1e6
REPLACED = 0  # the replaced row
SYNC = "synchronous"


def spike_rows(n: int, d: int = 6, seed: int = 3, lam: float = 5.0, noise: float = 1e-3) -> np.ndarray:
    """Rows ``z sqrt(lam) v + noise g`` (v 2-sparse on coordinates 1 and 4, z = +-1): every
    batch of FriendlyCore passes its tests."""
    rng = np.random.default_rng(seed)
    v = np.zeros(d)
    v[[1, 4]] = 1 / math.sqrt(2)
    z = rng.choice([-1.0, 1.0], size=n)
    return z[:, None] * math.sqrt(lam) * v + noise * rng.standard_normal((n, d))


def _pair(base: np.ndarray, how: str, benign_row: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    D = np.array(base, dtype=np.float64)
    Dp = D.copy()
    if how == "benign":
        Dp[REPLACED] = benign_row
    elif how == "fill-9.97e36":
        Dp[REPLACED, 0] = 9.97e36
    elif how == "1e154":
        Dp[REPLACED] = 1e154
    elif how == "nan":
        Dp[REPLACED] = np.nan
    elif how == "rows-1e10":
        D = np.zeros_like(D)
        D[:, 0] = 1e10
        Dp = D.copy()
        Dp[REPLACED] = 0.0
    else:
        raise KeyError(how)
    return D, Dp


def _quiet_fit(fn: Callable[[], Any]) -> Any:
    """One fit, its release (or the rejection's release on bottom)."""
    from dpdist.exceptions import NoPrivateResult

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return fn()
        except NoPrivateResult as exc:
            return exc.release


# ---------------------------------------------------------------------------------------
# the estimators: (fit(X) -> Release, statistic(Release) -> float, data, benign row, claim)
# ---------------------------------------------------------------------------------------


def _privcov(row_clip: float | None = None):
    """PrivCov's default (Gumbel selection); with ``row_clip``, rows are also scaled to that L2
    norm and both stages are calibrated to the row-clipped sensitivities."""
    import dpdist

    X = np.zeros((40, 4))
    X[1:21, :2] = 1.0

    def fit(D):
        return dpdist.SparseCovariance(2, 1.0, 1e-5, clip=1.0, row_clip=row_clip, scheduler=SYNC,
                                       tile_size=4).fit(D).release_

    return fit, lambda r: float(r.values["diagonal"][0]), X, np.array([1.0, 0, 0, 0]), ("approx-dp", 1.0, 1e-5)


def _wang_xu(pca: bool = False):
    from dpdist.baselines import GaussianCovariance, GaussianPCA

    X = np.zeros((40, 4))
    X[1:21, :2] = 1.0
    cls = GaussianPCA if pca else GaussianCovariance

    def fit(D):
        return cls(1.0, 1e-5, clip=1.0, threshold=1e-12, scheduler=SYNC, tile_size=4).fit(D).release_

    def stat(r):
        return float(r.values["covariance"][0, 0])

    return fit, stat, X, np.array([1.0, 0, 0, 0]), ("approx-dp", 1.0, 1e-5)


def _analyze_gauss():
    from dpdist.baselines import AnalyzeGauss

    X = np.zeros((40, 4))
    X[1:21, :2] = 0.5

    def fit(D):
        return AnalyzeGauss(1.0, 1e-5, row_norm=1.0, scheduler=SYNC, tile_size=4).fit(D).release_

    return fit, lambda r: float(r.values["covariance"][0, 0]), X, np.array([1.0, 0, 0, 0]), ("approx-dp", 1.0, 1e-5)


def _expmech():
    import dpdist

    X = np.zeros((40, 4))
    X[1:21, :2] = 1.0

    def fit(D):
        return dpdist.ExpMechSparsePCA(2, 1.0, 1e-5, clip=1.0, scheduler=SYNC).fit(D).release_

    return fit, lambda r: float(r.values["block_eigenvalue"]), X, np.array([1.0, 0, 0, 0]), ("approx-dp", 1.0, 1e-5)


def _second_moment():
    import dpdist

    # rows (1, 1), inside the radius R = 2: one level (kappa_0 = 4/0.5/0.5 = 16 <= C = 3200).
    # Rows strictly inside the radius keep t = 1: a kernel that adds the plain Gram and then
    # subtracts the shrunk rows' excess would let a fill value cancel every other row of the batch.
    X = np.ones((200, 2))

    def fit(D):
        return dpdist.SecondMoment(0.25, m=5, radius=2.0, lambda_min=0.5, scheduler=SYNC).fit(D).release_

    return fit, lambda r: float(r.values["second_moment"][0, 0]), X, np.array([2.0, 0.0]), ("zcdp", 0.25, 1e-3)


def _one_shot():
    from dpdist.algorithms.second_moment.release import one_shot_second_moment

    X = np.ones((200, 2))

    def fit(D):
        return one_shot_second_moment(D, 0.25, radius=2.0, scheduler=SYNC)

    return fit, lambda r: float(r.values["second_moment"][0, 0]), X, np.array([2.0, 0.0]), ("zcdp", 0.25, 1e-3)


# PrivNorm and PrivPCA as published (rows taken as mean-zero): the private mean their default
# adds before them is audited on its own (the clipped-mean case of dpdist.testing.mechanisms)
def _privnorm():
    import dpdist

    X = spike_rows(250 * 2)

    def fit(D):
        return dpdist.SpectralNorm(2, 3.0, 0.1, gap=0.5, sigma=1.0, n_batches=250, tau=0.05, scheduler=SYNC,
                                   assume_centered=True).fit(D).release_

    def stat(r):
        return float(r.values["norm"]) if "norm" in r.values else BOTTOM

    return fit, stat, X, np.zeros(6), ("approx-dp", 3.0, 0.1)


def _privpca():
    import dpdist

    X = spike_rows(250 * 2)

    def fit(D):
        return dpdist.SparsePCA(2, 3.0, 0.1, gap=0.5, sigma=1.0, n_batches=250, tau=0.05, lambda_hat=5.0,
                                scheduler=SYNC, assume_centered=True).fit(D).release_

    def stat(r):
        return float(r.values["components"][0, 1]) if "components" in r.values else BOTTOM

    return fit, stat, X, np.zeros(6), ("approx-dp", 3.0, 0.1)


ESTIMATORS: dict[str, Callable] = {
    "sparse-covariance": _privcov,
    "sparse-covariance-row-clip": lambda: _privcov(row_clip=1.2),
    "gaussian-covariance": _wang_xu,
    "gaussian-pca": lambda: _wang_xu(pca=True),
    "analyze-gauss": _analyze_gauss,
    "expmech-sparse-pca": _expmech,
    "second-moment": _second_moment,
    "one-shot-second-moment": _one_shot,
    "spectral-norm": _privnorm,
    "sparse-pca": _privpca,
}

def estimator_case(estimator: str, pair: str, source: Callable | None = None) -> AuditCase:
    """The end-to-end audit of ``estimator`` on ``pair``; ``source``: a context manager factory
    inside which every trial's fits run (default none)."""
    from dpdist.privacy.zcdp import cks20_epsilon

    fit, stat, base, benign, (notion, claim, delta) = ESTIMATORS[estimator]()
    D, Dp = _pair(base, pair, benign)
    data = {0: D, 1: Dp}
    context = contextlib.nullcontext if source is None else source

    def mech(which: int, n: int, seed: int) -> np.ndarray:
        # seed is unused: every fit draws fresh OS entropy (random_state=None)
        out = np.empty(n)
        with context():
            for t in range(n):
                out[t] = stat(_quiet_fit(lambda: fit(data[which])))
        return out

    if notion == "zcdp":
        claims = dict(claimed_epsilon=cks20_epsilon(claim, delta), claimed_delta=delta, claimed_rho=claim)
        what = f"rho = {claim} zCDP"
    else:
        claims = dict(claimed_epsilon=claim, claimed_delta=delta, claimed_rho=None)
        what = f"({claim}, {delta})-DP"
    return AuditCase(
        name=f"end-to-end/{estimator}/{pair}",
        family="end-to-end",
        component=f"{estimator} public fit(), OS entropy, replaced row {pair}: {what} (the release's own claim)",
        notion=notion,
        claimed_mu=None,
        mechanism=mech,
        neighbours=(0, 1),
        default_trials=20,
        slow=True,
        parameters={"estimator": estimator, "pair": pair, "long_trials": LONG_TRIALS},
        source=source,
        **claims,
    )


def _factory(estimator: str, pair: str) -> Callable[..., AuditCase]:
    def make(source: Callable | None = None) -> AuditCase:
        return estimator_case(estimator, pair, source)

    make.__doc__ = f"End-to-end audit of {estimator} on the pair {pair!r}."
    return make


#: Every end-to-end case by name (registered in :data:`dpdist.testing.mechanisms.CASES`).
E2E_CASES: dict[str, Callable[..., AuditCase]] = {
    f"end-to-end/{est}/{pair}": _factory(est, pair) for est in ESTIMATORS for pair in PAIRS
}
E2E_CASES["end-to-end/spectral-norm/rows-1e10"] = _factory("spectral-norm", "rows-1e10")


def trials_per_second(estimator: str, n_fits: int = 5) -> float:
    """Measured fits per second of one estimator's case (to size the long form)."""
    import time

    case = estimator_case(estimator, "benign")
    t0 = time.perf_counter()
    case.mechanism(0, n_fits, 0)
    return n_fits / (time.perf_counter() - t0)
