"""The estimators :class:`SpectralNorm` (PrivNorm) and :class:`SparsePCA` (PrivPCA), and their
functional forms :func:`private_norm` and :func:`sparse_pca`.

Each estimator lists its parameters once (``_parameter_constraints``); ``fit`` validates them
once, fixes the batches, tau, the centring and the stages' budgets from them and the data's
shape (``_validate_together``), plans once, and runs
:func:`~dpdist.algorithms.sparse_pca.release.run_friendly` on those values. The functional
forms build the estimator and return the release of its fit.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpdist._validation import check_int
from dpdist.algorithms._base import Estimator, reports_empirical
from dpdist.algorithms._projection import Projection
from dpdist.algorithms._centering import CENTERING_CONSTRAINTS, DEFAULT_MEAN_FRACTION, centering_of, mean_mechanism
from dpdist.algorithms._constraints import Boolean, Custom, Delta, Epsilon, Real, functional_form
from dpdist.algorithms.friendly_steps import batch_setup
from dpdist.algorithms.sparse_pca.plan import (
    SparsePCAPlan,
    SpectralNormPlan,
    _min_samples,
    sparse_pca_plan,
    spectral_norm_plan,
)
from dpdist.algorithms.sparse_pca.release import MECH_BOTH, MECH_NORM, MECH_PCA, run_friendly
from dpdist.privacy.mechanisms.privpca.calibration import (
    DEFAULT_BETA,
    check_gap,
    check_k,
    check_n_batches,
    default_n_batches,
    split_norm_and_pca_budget,
)
from dpdist.privacy.release import Release

__all__ = ["SparsePCA", "SpectralNorm", "private_norm", "sparse_pca"]


def _k(value, name):
    return check_k(value)


def _gap(value, name):
    return check_gap(value)


def _n_batches(value, name):
    return None if value is None else check_n_batches(value)


#: The parameters PrivNorm and PrivPCA share, in the order they are checked.
_FRIENDLY_CONSTRAINTS = {
    "k": Custom(_k),
    "epsilon": Epsilon(),
    "delta": Delta(),
    "gap": Custom(_gap),
    "sigma": Real(low=0.0),
    "n_batches": Custom(_n_batches),
    "tau": Real(low=0.0, allow_none=True),
    "beta": Real(low=0.0, high=1.0),
}


def _centred(p, n_samples: int, n_features: int, stages_of):
    """``p`` with what the centring and the shape decide: ``centering``, the private mean's
    ``mean_share`` and ``mean_mechanism`` (or None), the ``stages`` (``stages_of`` splits the
    share left after the mean), the ``setup`` (batches, tau, float bounds)."""
    n, d = check_int(n_samples, "n_samples", low=1), check_int(n_features, "n_features", low=1)
    centering = centering_of(p, n_features=d)
    mean_share, share = centering.split(p.epsilon, p.delta)
    stages = stages_of(share)
    setup = batch_setup(n, d, p.k, p.gap, p.sigma, p.n_batches, p.tau, p.beta,
                        [(e, dl) for _, e, dl in stages])
    mech = (mean_mechanism(centering, mean_share, setup.n_samples, setup.n_features, setup.float_bounds.entry_clip)
            if centering.private else None)
    return p.replace(n_samples=setup.n_samples, n_features=setup.n_features, setup=setup, centering=centering,
                     mean_share=mean_share, mean_mechanism=mech, stages=stages)


def _location(rel: Release) -> dict:
    """``location_``: the mean the fit centred at (zeros when the data were taken as centred)."""
    mu = rel.values.get("mean")
    d = rel.parameters["n_features"]
    return {"location_": np.zeros(d) if mu is None else np.asarray(mu, dtype=np.float64)}


class SpectralNorm(Estimator):
    """Private operator norm of a k-RCS covariance: PrivNorm (Algorithm 3).

    Parameters
    ----------
    k : int
        Row-column sparsity of the covariance (Model 1).
    epsilon, delta : float
        Privacy budget; epsilon > 0, 0 < delta < 1.
    gap : float
        Eigengap gamma in (0, 1): ``lambda_2 <= (1 - gap) lambda_1``.
    sigma : float
        Sub-Gaussian parameter of the rows (public); sets tau through eq. (11).
    n_batches : int, optional
        m >= 20; default :func:`~dpdist.privacy.mechanisms.privpca.calibration.default_n_batches`.
    tau : float, optional
        Threshold; default eq. (11) with :data:`~dpdist.privacy.mechanisms.privpca.calibration.TAU_CONSTANT`.
    random_state : None or int
        None: OS entropy (the only mode fit for release). An int seeds the noise for tests
        (the release is then marked not private).
    scheduler : optional
        See :func:`dpdist.engine.runtime.compute`.
    beta : float, default 0.05
        Failure probability used by eq. (11), the default m and :meth:`plan` (utility only).
    shuffle_batches : bool, default False
        False: batches are consecutive row ranges. True: batch membership follows a public
        random permutation drawn from ``random_state`` (for data sorted by time or source).
    on_nonfinite : {"zero", "raise"}, default "zero"
        "zero": rows holding NaN or inf become zero rows before any batch statistic
        (uncounted). "raise": explicit validation mode: one pass checks the data first and
        raises ValidationError before anything is computed (reveals one bit, recorded).
    require_useful : bool, default False
        True: ``fit`` refuses (``ValidationError``) before reading any data or reserving any
        budget when :meth:`plan` at the data's shape says the release would be rejected (its
        private tests predicted to pass with probability below 1/2) or vacuous. The plan
        depends only on public parameters and the shape, never on the data, so the refusal
        leaks nothing.
    assume_centered : bool, default False
        As scikit-learn's ``EmpiricalCovariance``: False (default) centres the data, so the norm
        estimated is that of the covariance; True takes the rows as mean-zero (their second
        moment's norm, the algorithm as published).
    mean : array-like (d,), optional
        A public mean to centre at (recorded as public in the release; costs nothing).
        Without it the mean is released privately with ``mean_fraction`` of the budget.
    mean_fraction : float in (0, 1), default 0.1
        Share of (epsilon, delta) spent on the private mean.
    mean_clip : float, optional
        L2 radius the rows are scaled to for the private mean; it must cover the norms of the
        raw rows (default: the entry clip times ``sqrt(d)``). ``sigma`` describes the centred
        rows ``x - mean``.

    Attributes
    ----------
    norm_ : float
        The released estimate of ``lambda_1``.
    location_ : ndarray of shape (n_features,)
        The mean the data were centred at (released or public); zeros with
        ``assume_centered=True``.
    noise_scale_ : float
        Standard deviation of the Gaussian noise on the norm.
    tau_ : float
    n_batches_ : int
    privacy_ : ApproxDP
    release_ : Release
        ``values["norm"]`` is the released ``lambda_hat``; ``values["tests"]`` the outcomes of
        the private tests, as bits; ``values["mean"]`` the mean the rows were centred at. A fit
        whose private test rejects (Algorithm 3 returns bottom) raises ``NoPrivateResult``,
        whose ``.release`` records it.

    Notes
    -----
    **Guarantee.** (epsilon, delta)-DP under replace-one neighbours (n public), for any input
    and any tau > 0 (Lemma 20). Three steps at (epsilon/3, delta/3) each, basic composition:
    the good-set count |C| (sensitivity 1) and the FriendlyCore weight sum Z (sensitivity 7,
    eq. (12)) are tested with bounded Laplace noise (Lemma 8, Fact 3); given both pass on
    neighbouring inputs, ``||T_5tau(Sigma_bar)||_op`` is ``20 k tau``-sensitive (Lemma 9 with
    m >= 20) and released with Gaussian noise ``20 k tau (6/eps) sqrt(log(6/delta))`` (Fact
    2). Sensitivities use public parameters only (k, tau, m). Floating point (deviation 4 of
    :mod:`dpdist.privacy.mechanisms.privpca.calibration`): input entries are clipped to a public level c from
    sigma, ``Sigma_bar`` is thresholded at ``5 tau + eta`` (eta a public bound on its
    rounding) and the sensitivity adds the proven float error, so the guarantee holds for the
    computed statistic whatever the data's magnitude. Noise is float-safe (exact rounded laws
    on public lattices, :mod:`dpdist.privacy.mechanisms.privpca.mechanism`). Caveats: for epsilon/3
    above the range of Facts 2-3 the noise is enlarged (see
    :mod:`dpdist.privacy.mechanisms.privpca.calibration`); a rejection spends the budget. Parameters are
    validated in :meth:`fit`; a failed fit (including a ``NoPrivateResult``) changes nothing
    (:mod:`dpdist.algorithms._base`).

    **Centring.** Without ``assume_centered``, the mean is released first by
    :class:`~dpdist.privacy.mechanisms.mean.ClippedMeanMechanism` with the share
    ``mean_fraction`` of (epsilon, delta) (or taken from the public ``mean``), and the steps
    above run at the rest on the rows ``x - mu_hat``. Their analysis is unchanged: ``mu_hat``
    is public by then (post-processing of a DP release), ``x -> x - mu_hat`` is a fixed per-row
    map applied before the entry clip, so replace-one neighbours stay replace-one neighbours
    and every sensitivity above holds verbatim; the stages compose by basic composition
    (:mod:`dpdist.algorithms._centering`). What the public bounds must now cover: ``sigma``
    (hence the entry clip and tau) the centred rows ``x - mu_hat``, ``mean_clip`` the norms of
    the raw rows. What is estimated is the top eigenvalue of the covariance ``Sigma``: around
    ``mu_hat`` the rows' second moment is ``Sigma + w w^T`` with ``w = mu - mu_hat``, whose top
    eigenvalue lies in ``[lambda_1, lambda_1 + ||w||^2]`` (Weyl; ``w w^T`` is positive
    semidefinite of norm ``||w||^2``), so centring adds at most ``||w||^2`` to the error
    (:meth:`plan`).

    References
    ----------
    COLT 2026 paper (``shared/papers/000_b225b81e7478a8a0.txt``), Appendix C, Proposition 1.
    """

    _parameter_constraints = {**_FRIENDLY_CONSTRAINTS, "shuffle_batches": Boolean(), **CENTERING_CONSTRAINTS}

    def __init__(
        self,
        k: int,
        epsilon: float,
        delta: float,
        *,
        gap: float,
        sigma: float,
        n_batches: int | None = None,
        tau: float | None = None,
        random_state=None,
        scheduler=None,
        beta: float = DEFAULT_BETA,
        shuffle_batches: bool = False,
        on_nonfinite: str = "zero",
        require_useful: bool = False,
        assume_centered: bool = False,
        mean: Any = None,
        mean_fraction: float = DEFAULT_MEAN_FRACTION,
        mean_clip: float | None = None,
    ):
        self.k = k
        self.epsilon = epsilon
        self.delta = delta
        self.gap = gap
        self.sigma = sigma
        self.n_batches = n_batches
        self.tau = tau
        self.random_state = random_state
        self.scheduler = scheduler
        self.beta = beta
        self.shuffle_batches = shuffle_batches
        self.on_nonfinite = on_nonfinite
        self.require_useful = require_useful
        self.assume_centered = assume_centered
        self.mean = mean
        self.mean_fraction = mean_fraction
        self.mean_clip = mean_clip

    def _validate_together(self, params, n_samples, n_features):
        """The batches, tau, the centring and PrivNorm's budget (the share left after a private mean)."""
        return _centred(params, n_samples, n_features, lambda share: [("norm", share.epsilon, share.delta)]).replace(
            lambda_hat=None, budget_split=None, mechanism=MECH_NORM)

    def _plan_validated(self, params, lambda_1: float | None = None, *, forecast: bool = True) -> SpectralNormPlan:
        return spectral_norm_plan(params, lambda_1, forecast=forecast)

    def _release_validated(self, X, params, plan) -> Release:
        return run_friendly(X, params)

    def _fitted_attributes(self, rel: Release) -> dict:
        return {
            **_location(rel),
            "norm_": float(rel.values["norm"]),
            "noise_scale_": float(rel.noise_scales["norm/sigma"]),
            "tau_": float(rel.parameters["tau"]),
            "n_batches_": int(rel.parameters["n_batches"]),
            "privacy_": rel.privacy,
            "release_": rel,
        }

    def plan(self, n_samples: int, n_features: int, *, lambda_1: float | None = None) -> SpectralNormPlan:
        """Noise scales, tau, m, the error Lemma 21 predicts at this size, and the probability
        that the private tests pass (``tests``, ``release_probability``; on the model's
        reference instance, :mod:`dpdist.algorithms._friendly_forecast`); reads no data.

        ``lambda_1`` (default ``sigma**2``, the largest value Model 1 allows) turns the
        absolute error bound into a relative one, is the scale the vacuity check uses, and is
        the reference instance's top eigenvalue.
        """
        return self._plan_validated(self._validated_at(n_samples, n_features), lambda_1)

    def min_samples(self, target_relative_error: float, n_features: int, *, lambda_1: float | None = None) -> int:
        """Least n whose :meth:`plan` relative error bound is <= the target (m held at its
        value for that n: ``n_batches`` if set, else the default)."""
        p = self._validate_params(fit=False)
        centering = centering_of(p)
        _, share = centering.split(p.epsilon, p.delta)
        return _min_samples(
            centering.private,
            lambda n: self._plan_validated(self._validate_together(p, n, n_features), lambda_1,
                                           forecast=False).relative_error_bound,
            target_relative_error,
            start=max(40, 2 * (p.n_batches or default_n_batches(share.epsilon, share.delta, beta=p.beta))),
        )


def _pca_stages(p):
    """The function from the share left after a private mean to the stages' budgets: PrivPCA
    alone for a given ``lambda_hat``, else PrivNorm and PrivPCA split by ``norm_fraction``."""

    def stages_of(share):
        if p.lambda_hat is not None:
            return [("pca", share.epsilon, share.delta)]
        (en, dn), (ep, dp) = split_norm_and_pca_budget(share.epsilon, share.delta, p.norm_fraction)
        return [("norm", en, dn), ("pca", ep, dp)]

    return stages_of


class SparsePCA(Projection, Estimator):
    """Private leading k-sparse principal component: PrivNorm then PrivPCA (Theorem 3).

    Parameters
    ----------
    k : int
        Row-column sparsity of the covariance (Model 1).
    epsilon, delta : float
        Privacy budget; epsilon > 0, 0 < delta < 1.
    gap : float
        Eigengap gamma in (0, 1): ``lambda_2 <= (1 - gap) lambda_1``.
    sigma : float
        Sub-Gaussian parameter of the rows (public); sets tau through eq. (11).
    n_batches : int, optional
        m >= 20; default :func:`~dpdist.privacy.mechanisms.privpca.calibration.default_n_batches`.
    tau : float, optional
        Threshold; default eq. (11) with :data:`~dpdist.privacy.mechanisms.privpca.calibration.TAU_CONSTANT`.
    norm_fraction : float, default 0.5
        Share of (epsilon, delta) spent by PrivNorm; unused when ``lambda_hat`` is given.
    lambda_hat : float, optional
        A public estimate of ``lambda_1``: PrivNorm is skipped and PrivPCA gets the whole budget
        (the whole budget left after a private mean). It must not depend on the data except
        through a DP release whose cost is accounted separately.
    random_state : None or int
        None: OS entropy (the only mode fit for release). An int seeds the noise for tests
        (the release is then marked not private).
    scheduler : optional
        See :func:`dpdist.engine.runtime.compute`.
    beta : float, default 0.05
        Failure probability used by eq. (11), the default m and :meth:`plan` (utility only).
    shuffle_batches : bool, default False
        False: batches are consecutive row ranges. True: batch membership follows a public
        random permutation drawn from ``random_state`` (for data sorted by time or source).
    on_nonfinite : {"zero", "raise"}, default "zero"
        As in :class:`SpectralNorm`.
    require_useful : bool, default False
        True: ``fit`` refuses (``ValidationError``) before reading any data or reserving any
        budget when :meth:`plan` at the data's shape says the release would be rejected (its
        private tests predicted to pass with probability below 1/2) or vacuous. The plan
        depends only on public parameters and the shape, never on the data, so the refusal
        leaks nothing.
    assume_centered, mean, mean_fraction, mean_clip
        Centring, as in :class:`SpectralNorm` (default: a private mean with 10% of the budget;
        PrivNorm and PrivPCA split the rest by ``norm_fraction``).

    Attributes
    ----------
    components_ : ndarray of shape (1, d)
        Unit vector; exactly zero off its (at most 2 k^2) active coordinates.
    location_ : ndarray of shape (n_features,)
        The mean the data were centred at (released or public; zeros with
        ``assume_centered=True``); :meth:`transform` subtracts it.
    lambda_hat_ : float
    noise_scale_ : float
        sigma_priv of the projector release.
    tau_ : float
    n_batches_ : int
    privacy_ : ApproxDP
    release_ : Release

    Notes
    -----
    **Guarantee.** (epsilon, delta)-DP under replace-one neighbours by basic composition of
    PrivNorm at ``(f epsilon, f delta)`` and PrivPCA at ``((1-f) epsilon, (1-f) delta)``,
    ``f = norm_fraction`` (PrivNorm as in :class:`SpectralNorm`, PrivPCA as below). Both
    stages share the batches, tau, the friend relation and Sigma_bar (deterministic functions
    of the data, computed once; the data are read twice in total); their noises are
    independent. If PrivNorm rejects, PrivPCA does not run and only PrivNorm's share is spent
    (recorded in the release). With a private mean, PrivNorm and PrivPCA split the share ``1 -
    mean_fraction`` of (epsilon, delta) left after it, and the three compose by basic
    composition. Parameters are validated in :meth:`fit`; a failed fit (including a
    ``NoPrivateResult``) changes nothing (:mod:`dpdist.algorithms._base`).

    **The PrivPCA stage** (Algorithm 2, ``lambda_hat`` given or released by PrivNorm) is
    (epsilon, delta)-DP at its share, for any input and any tau > 0 (Corollary 1): tests on
    |C| and Z as in :class:`SpectralNorm` (Lemma 8), then, given both neighbouring runs pass,
    the projector ``u u^T`` of the top eigenvector of ``T_5tau(Sigma_bar)`` is
    ``Delta``-sensitive in Frobenius norm (Lemma 10) with ``Delta = 80 sqrt(2) k tau / (gap (1 -
    gap/2) lambda_hat)`` (the factor ``1/(1 - gap/2)`` corrects the printed (13): goodness at
    gap/2 guarantees only that eigengap), and ``u u^T + G`` with ``G_ij ~ N(0,
    sigma_priv^2)``, ``sigma_priv`` the analytic Gaussian mechanism's at (epsilon/3, delta/3)
    for ``Delta`` (exact; below Fact 2's ``Delta (6/eps) sqrt(log(6/delta))``), is
    (epsilon/3, delta/3)-DP; on the lattice the sensitivity adds the rounding of the d^2
    entries (:class:`~dpdist.privacy.mechanisms.privpca.mechanism.PrivPCAMechanism`). ``top_{k^2}``
    (sampled exactly, float-safe, by :func:`~dpdist.privacy.noise.topk_sampler.lattice_top_k2`),
    symmetrisation and the top eigenvector are post-processing. Caveats as in
    :class:`SpectralNorm`.

    **Centring.** By default the mean is released first (clipped-mean Gaussian mechanism,
    ``mean_fraction`` of the budget, rows scaled to L2 norm ``mean_clip``) and PrivNorm and
    PrivPCA run on ``x - mu_hat``. Privacy: ``mu_hat`` is public once released, and ``x -> x -
    mu_hat`` is a fixed per-row map applied before the entry clip, so the second stage's
    sensitivity analysis (Lemmas 9-10, the float bounds) holds verbatim for the centred rows;
    the stages compose by basic composition. The public bounds must now cover: ``sigma`` (hence
    the entry clip and tau) the centred rows, ``mean_clip`` the norms of the raw rows.

    Utility: with ``w = mu - mu_hat``, the centred rows ``(x - mu) + w`` have second moment
    ``Sigma' = Sigma + w w^T`` (up to the cross terms ``(1/b) sum (x - mu) w^T``, of mean zero
    and of the order of the batch sampling error times ``||w|| / sigma``), a rank-one,
    positive semidefinite perturbation of norm ``||w||^2``. Davis-Kahan: with ``v'`` the top
    eigenvector of ``Sigma'`` and ``P`` the projector on ``Sigma``'s eigenvectors of
    eigenvalue at most ``lambda_2``, ``P`` commutes with ``Sigma``, so ``(lambda_1' - Sigma) P
    v' = P w w^T v'`` and ``sin(v', v_1) = ||P v'|| <= ||w||^2 / (lambda_1' - lambda_2) <=
    ||w||^2 / (lambda_1 - lambda_2)``, as ``lambda_1' >= lambda_1`` (Weyl, ``w w^T >= 0``).
    Angles between lines add, so ``sin(v_hat, v_1) <= sin(v_hat, v') + ||w||^2 / (gap
    lambda_1)``: :meth:`plan` adds this term (``centring_sin_bound``, with ``||w||`` bounded by
    :func:`~dpdist.algorithms._centering.mean_offset_bounds`) to Theorem 3's bound for
    ``Sigma'``, and names an unmet condition when ``Sigma'`` may leave the model.
    """

    _parameter_constraints = {
        **_FRIENDLY_CONSTRAINTS,
        "norm_fraction": Real(low=0.0, high=1.0),
        "lambda_hat": Real(low=0.0, allow_none=True),
        "shuffle_batches": Boolean(),
        **CENTERING_CONSTRAINTS,
    }

    def __init__(
        self,
        k: int,
        epsilon: float,
        delta: float,
        *,
        gap: float,
        sigma: float,
        n_batches: int | None = None,
        tau: float | None = None,
        norm_fraction: float = 0.5,
        lambda_hat: float | None = None,
        random_state=None,
        scheduler=None,
        beta: float = DEFAULT_BETA,
        shuffle_batches: bool = False,
        on_nonfinite: str = "zero",
        require_useful: bool = False,
        assume_centered: bool = False,
        mean: Any = None,
        mean_fraction: float = DEFAULT_MEAN_FRACTION,
        mean_clip: float | None = None,
    ):
        self.k = k
        self.epsilon = epsilon
        self.delta = delta
        self.gap = gap
        self.sigma = sigma
        self.n_batches = n_batches
        self.tau = tau
        self.norm_fraction = norm_fraction
        self.lambda_hat = lambda_hat
        self.random_state = random_state
        self.scheduler = scheduler
        self.beta = beta
        self.shuffle_batches = shuffle_batches
        self.on_nonfinite = on_nonfinite
        self.require_useful = require_useful
        self.assume_centered = assume_centered
        self.mean = mean
        self.mean_fraction = mean_fraction
        self.mean_clip = mean_clip

    def _validate_together(self, params, n_samples, n_features):
        """The batches, tau, the centring and the stages' budgets (PrivPCA alone for a given
        ``lambda_hat``, else PrivNorm and PrivPCA split by ``norm_fraction``)."""
        p = _centred(params, n_samples, n_features, _pca_stages(params))
        pca = [e for name, *e in p.stages if name == "pca"][0]
        if p.lambda_hat is not None:
            split, mechanism = {"norm_fraction": 0.0, "lambda_hat": "user-supplied", "pca": pca}, MECH_PCA
        else:
            norm = [e for name, *e in p.stages if name == "norm"][0]
            split = {"norm_fraction": p.norm_fraction, "norm": norm, "pca": pca,
                     "composition": "basic (DR14 Thm 3.16)"}
            mechanism = MECH_BOTH
        return p.replace(budget_split=split, mechanism=mechanism)

    def _plan_validated(self, params, lambda_1: float | None = None, *, forecast: bool = True) -> SparsePCAPlan:
        return sparse_pca_plan(params, lambda_1, forecast=forecast)

    def _release_validated(self, X, params, plan) -> Release:
        return run_friendly(X, params)

    def _fitted_attributes(self, rel: Release) -> dict:
        return {
            **_location(rel),
            "components_": np.asarray(rel.values["components"]),
            "lambda_hat_": float(rel.values["lambda_hat"]),
            "noise_scale_": float(rel.noise_scales["pca/sigma_priv"]),
            "tau_": float(rel.parameters["tau"]),
            "n_batches_": int(rel.parameters["n_batches"]),
            "privacy_": rel.privacy,
            "release_": rel,
        }

    @reports_empirical("privpca")
    def plan(self, n_samples: int, n_features: int, *, lambda_1: float | None = None) -> SparsePCAPlan:
        """Noise scales, tau, m and the sin^2 error Theorem 3's proof predicts; reads no data.

        ``lambda_1`` is the anticipated top eigenvalue (default: ``lambda_hat`` if given, else
        ``sigma**2``, the largest value Model 1 allows, i.e. the optimistic case). Without a
        given ``lambda_hat``, sigma_priv is planned at ``lambda_hat = (1 - gap/10) lambda_1``,
        the worst value Proposition 1 allows.

        ``pca_tests``, ``norm_tests`` and ``release_probability`` give the probability that the
        private tests pass, on the model's reference instance (top eigenvalue ``lambda_1``;
        :mod:`dpdist.algorithms._friendly_forecast`).
        """
        return self._plan_validated(self._validated_at(n_samples, n_features), lambda_1)

    def min_samples(self, target_sin2: float, n_features: int, *, lambda_1: float | None = None) -> int:
        """Least n whose :meth:`plan` predicts ``sin^2 <= target_sin2`` (and, when PrivNorm
        runs, a lambda_hat within gap/10 as Theorem 3 requires); m is held at ``n_batches`` or
        its default."""
        p = self._validate_params(fit=False)
        centering = centering_of(p)

        def err(n):
            plan = self._plan_validated(self._validate_together(p, n, n_features), lambda_1, forecast=False)
            return plan.error_bound if plan.norm_within_gap_over_10 is not False else math.inf

        _, share = centering.split(p.epsilon, p.delta)
        pairs = [(e, dl) for _, e, dl in _pca_stages(p)(share)]
        m = p.n_batches or max(default_n_batches(e, dl, beta=p.beta) for e, dl in pairs)
        return _min_samples(centering.private, err, target_sin2, start=max(40, 2 * m))


private_norm = functional_form(
    SpectralNorm, name="private_norm", positional=("k", "epsilon", "delta"),
    summary="PrivNorm (Algorithm 3): a private estimate of ``lambda_1`` of a k-RCS covariance.",
    returns="""
    Release
        ``values["norm"]`` is the released ``lambda_hat``; ``values["tests"]`` the outcomes of the
        private tests, as bits; ``values["mean"]`` the mean the rows were centred at. A rejection
        (Algorithm 3 returns bottom) raises ``NoPrivateResult``, whose ``.release`` records it.""",
)

sparse_pca = functional_form(
    SparsePCA, name="sparse_pca", positional=("k", "epsilon", "delta"),
    summary="Theorem 3: PrivNorm for ``lambda_hat``, then PrivPCA, on the same data.",
    returns="""
    Release
        ``values["components"]`` (1, d), ``values["lambda_hat"]``, ``values["tests"]`` (the tests'
        outcomes, as bits) and ``values["mean"]``. A rejection raises ``NoPrivateResult``, whose
        ``.release`` records what the stages run spent.""",
)
