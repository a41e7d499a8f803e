"""PrivNorm (Algorithm 3) and PrivPCA (Algorithm 2) of the COLT 2026 paper, and Theorem 3.

:func:`private_norm` releases the operator norm of the thresholded FriendlyCore average
``T_5tau(Sigma_bar)``; :func:`sparse_pca` releases the leading k-sparse principal component by
PrivPCA (Algorithm 2), after PrivNorm on the same data (Theorem 3, splitting the budget) when
no ``lambda_hat`` is given. The estimators :class:`SpectralNorm` and :class:`SparsePCA`
validate, call these functions and copy the release into ``*_`` attributes.

Execution (see :mod:`dpdist.engine.friendly`): pass 1 computes the batch statistics (good-set
ingredients, friend counts, weights) and keeps them where they were computed; the private
tests run there and only their noised outcomes come back; pass 2 computes
``T_5tau(Sigma_bar)`` (again kept there), and the final release (a noised norm, or the top
eigenvector of the noised, top-k^2 projector) is the only value that comes back. PrivNorm and
PrivPCA use the same batches, tau, friend counts and Sigma_bar (deterministic functions of the
data), so :func:`sparse_pca` reads the data twice in total, not four times; their noises are
independent (distinct noise purposes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpdist._validation import check_positive, check_probability
from dpdist.algorithms._base import Estimator, Projection, check_nonfinite, nonfinite_note, refuse_nonfinite, reports_empirical
from dpdist.algorithms._centering import (
    DEFAULT_MEAN_FRACTION,
    Centering,
    centre_data,
    check_centering,
    mean_mechanism,
    mean_notes,
    mean_offset_bounds,
    stage_guarantee,
)
from dpdist.algorithms.friendly_steps import FriendlySetup, friendly_setup, friendly_tests, release_norm, release_pca
from dpdist.algorithms._friendly_forecast import (
    REJECTION_LEVEL,
    BatchForecast,
    batch_forecast,
    count_pass_probability,
    lambda_hat_points,
    weight_pass_probability,
)
from dpdist.data.validation import as_dask_array, chunk_reading_notes
from dpdist.engine.friendly.graph import (
    DEFAULT_GROUP_BYTES,
    DEFAULT_TILE_BYTES,
    batch_labels,
    combine_pass1_groups,
    persist_pass1,
    persist_pass2,
)
from dpdist.engine.friendly.kernels import FriendlyStats
from dpdist.engine.session import open_session
from dpdist.engine.sparse_spectrum import sparse_spectrum
from dpdist.engine.gram import zero_nonfinite_rows
from dpdist.engine.runtime import DEFAULT_TIMEOUT, check_scheduler, check_timeout
from dpdist.exceptions import NoPrivateResult, ValidationError
from dpdist.privacy.budget import ApproxDP, check_delta, check_epsilon
from dpdist.privacy.accounting import release_guarantee
from dpdist.privacy.mechanisms.base import residual_note
from dpdist.privacy.mechanisms.friendly import FriendlyTestMechanism, PrivNormMechanism, PrivPCAMechanism
from dpdist.privacy.noise import check_random_state, resolve_random_state
from dpdist.privacy.pca_calibration import (
    DEFAULT_BETA,
    FriendlyTestCalibration,
    check_gap,
    check_k,
    check_n_batches,
    default_n_batches,
    friendly_test_calibration,
    privnorm_calibration,
    privnorm_error_bound,
    privpca_calibration,
    privpca_error_bound,
    search_min_samples,
    split_budget,
)
from dpdist.privacy.plan import Plan
from dpdist.privacy.release import Release, warn_if_unsafe

__all__ = ["SparsePCA", "SparsePCAPlan", "SpectralNorm", "SpectralNormPlan", "private_norm", "sparse_pca"]

MECH_NORM = "PrivNorm (COLT 2026, Algorithm 3)"
MECH_PCA = "PrivPCA (COLT 2026, Algorithm 2)"
MECH_BOTH = "PrivNorm + PrivPCA (COLT 2026, Theorem 3)"

_MEAN_ZERO_NOTE = ("rows are assumed mean-zero: the second moment (1/b) sum x x^T of each batch is used, not a "
                   "centred covariance")

_COMMON_NOTES = (
    "float-safe noise (dpdist.privacy.mechanisms.friendly): the tests, PrivNorm's release and PrivPCA's "
    "projector draw exact rounded laws on public power-of-two lattices; the tests release only their outcome bits; the tests' "
    "bounded samplers exhaust with probability below 2**-1000 + (delta/4)**32 a draw (stated, not added to delta)",
    "Lemma 10 deviation: sigma_priv uses gap (1 - gap/2) lambda_hat in the denominator (Definition 4 "
    "at gap/2 only guarantees that eigengap); the printed (13) omits 1/(1 - gap/2)",
    "Fact 3 deviation: for a per-step epsilon/3 beyond the range Fact 3 is stated for, the "
    "bounded-Laplace bound is enlarged (never reduced)",
    "Fact 2 deviation: the Gaussian releases use the analytic Gaussian mechanism (Balle-Wang 2018) at "
    "(epsilon/3, delta/3), the exact condition for a Gaussian mechanism, instead of Fact 2's sufficient one",
    _MEAN_ZERO_NOTE,
    "deviation 4 (floating point): entries clipped to entry_clip (from sigma), Sigma_bar thresholded at "
    "5 tau + eta, and the release sensitivities include the proven float error (float_bounds)",
    "components larger than 2048 vertices use ARPACK (eigsh), whose convergence to the extreme "
    "eigenvalue is not proven: the float bound assumes LAPACK-level accuracy there too",
)


def _centring_note(centering: Centering) -> str:
    """What the batch statistics are taken around (the first of the release's notes on centring)."""
    if centering.mode == "assume-centered":
        return _MEAN_ZERO_NOTE
    where = "a public mean" if centering.mode == "public-mean" else "the privately released mean"
    return (f"rows centred at {where} before any batch statistic: the second moment (1/b) sum (x - mean)"
            "(x - mean)^T of each batch is used; the entry clip and tau apply to x - mean")


def _check_common(k, epsilon, delta, gap, sigma, n_batches, tau, beta, scheduler, random_state=None,
                  timeout=None, on_nonfinite="zero"):
    check_k(k)
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    check_gap(gap)
    check_positive(sigma, "sigma")
    if n_batches is not None:
        check_n_batches(n_batches)
    check_positive(tau, "tau", allow_none=True)
    check_probability(beta, "beta")
    check_scheduler(scheduler)
    check_timeout(timeout)
    check_random_state(random_state)  # validation only; resolved once in _run
    check_nonfinite(on_nonfinite)
    return epsilon, delta


# --------------------------------------------------------------------------------------
# the pipeline
# --------------------------------------------------------------------------------------


def _run(
    X,
    *,
    k,
    epsilon,
    delta,
    gap,
    sigma,
    stages: list,
    lambda_hat,
    n_batches,
    tau,
    beta,
    shuffle_batches,
    random_state,
    scheduler,
    mechanism,
    timeout=DEFAULT_TIMEOUT,
    budget_split=None,
    tile_bytes=DEFAULT_TILE_BYTES,
    group_bytes=DEFAULT_GROUP_BYTES,
    on_nonfinite="zero",
    centring=(True, None, DEFAULT_MEAN_FRACTION, None),
) -> Release:
    """Run the stages ("norm", then "pca") on shared batch statistics. ``stages`` is a list of
    ``(name, epsilon, delta)`` whose budgets add up to the share of (epsilon, delta) left after
    the private mean; ``centring`` is ``(assume_centered, mean, mean_fraction, mean_clip)``."""
    X = as_dask_array(X)
    n, d = X.shape
    setup = friendly_setup(n, d, k, gap, sigma, n_batches, tau, beta, [(e, dl) for _, e, dl in stages])
    centering = check_centering(*centring, n_features=d)
    mean_share, _ = centering.split(epsilon, delta)
    # the mean's default radius: the rows' L2 norm inside the entry clip's box
    mean_mech = (mean_mechanism(centering, mean_share, n, d, setup.float_bounds.entry_clip)
                 if centering.private else None)
    seed = resolve_random_state(random_state)
    labels = None  # consecutive row ranges: labels are computed per chunk on the workers
    if shuffle_batches:
        # a public random permutation (independent of the data), drawn from the seed; this
        # materialises n labels on the client
        perm = np.argsort(seed.uniforms("privpca/shuffle", 0, 0, n), kind="stable")
        labels = batch_labels(n, setup.sizes, perm)
    tests_mech = {name: FriendlyTestMechanism.from_calibration(friendly_test_calibration(e, dl, setup.n_batches), name)
                  for name, e, dl in stages}
    noise_scales: dict[str, Any] = {}
    for name, tm in tests_mech.items():
        for role in ("count", "weight"):
            law = tm.laws()[role]
            noise_scales[f"{name}/{role}_test_scale"] = law.scale * law.lattice.gamma
            noise_scales[f"{name}/{role}_test_bound"] = law.bound * law.lattice.gamma
    events: list = []  # (label, Event) of every mechanism run, in order
    mechanisms: list = []
    parameters = {
        "n_samples": n,
        "n_features": d,
        "k": setup.k,
        "gap": setup.gap,
        "sigma": setup.sigma,
        "n_batches": setup.n_batches,
        "batch_size_min": min(setup.sizes),
        "batch_size_max": max(setup.sizes),
        "batches": "public random permutation" if shuffle_batches else "consecutive row ranges",
        "tau": setup.tau,
        "tau_rule": setup.tau_rule,
        "threshold_sigma_bar": setup.float_bounds.threshold,
        "entry_clip": setup.float_bounds.entry_clip,
        "float_bounds": setup.float_bounds.to_dict(),
        "beta": setup.beta,
        "on_nonfinite": on_nonfinite,
        "stages": {name: {"epsilon": e, "delta": dl} for name, e, dl in stages},
        "centering": centering.record(mean_mech),
    }
    if budget_split is not None:
        parameters["budget_split"] = budget_split
        if mean_mech is not None:
            parameters["budget_split"]["mean"] = [mean_share.epsilon, mean_share.delta]
    values: dict[str, Any] = {"tests": {}}
    spent = None
    notes = [n if n is not _MEAN_ZERO_NOTE else _centring_note(centering) for n in _COMMON_NOTES]
    notes += [nonfinite_note(on_nonfinite), *chunk_reading_notes(X)]
    clip = setup.float_bounds.entry_clip
    if mean_mech is not None:
        events.append(("mean", mean_mech.event()))
        mechanisms.append(mean_mech.describe())
        noise_scales["mean_gaussian"] = mean_mech.noise_scales()["gaussian"]
        notes += mean_notes(mean_mech)

    def guarantee(budget):
        """The stages run so far, each within its share (the mean's, then the others' ``spent``)."""
        main = [e for label, e in events if label != "mean"]
        if mean_mech is None:
            return release_guarantee(main, budget=budget) if main else budget
        if spent is None:  # pragma: no cover - a stage is under way whenever a result is returned
            return release_guarantee([mean_mech.event()], budget=mean_share)
        return stage_guarantee(budget, main, spent, mean_mech, mean_share)

    def reject(stage: str, why: str):
        rel = Release(
            mechanism=mechanism,
            privacy=guarantee(spent if mean_mech is None else spent + mean_share),
            parameters={**parameters, "rejected_stage": stage},
            noise_scales=noise_scales,
            values=values,
            seeding=seed.describe(),
            notes=tuple(notes + [f"rejected at {stage}: {why}; the budget of the stages run counts as spent"]),
            status="rejected",
            events=tuple(events),
            mechanisms=tuple(mechanisms),
        )
        warn_if_unsafe(rel, stacklevel=4)
        raise NoPrivateResult(f"{mechanism} returned bottom at stage {stage!r}: {why}", stage=stage, release=rel)

    lam_hat = lambda_hat
    with open_session(scheduler, timeout=timeout) as session:
        if on_nonfinite == "raise":
            refuse_nonfinite(X, session.runtime)
        if centering.mode != "assume-centered":
            # first stage: the mean (released here when private), then every batch statistic
            # reads x - mean; non-finite rows are zeroed before, as transform() does
            Xg = zero_nonfinite_rows(X) if on_nonfinite == "zero" else X
            X, mu = centre_data(Xg, None, centering, mean_mech, seed, scheduler=session.runtime, timeout=timeout)
            values["mean"] = mu
        groups, kept = persist_pass1(
            session, X, labels=labels, sizes=setup.sizes, tau=setup.tau, k=setup.k, tile_bytes=tile_bytes,
            group_bytes=group_bytes, clip=clip,
        )
        stats = session.apply(
            combine_pass1_groups, *groups, n_features=d, k=setup.k, sizes=np.asarray(setup.sizes, dtype=np.int64)
        )
        del groups  # the tiles' statistics are released once combined
        sigma_bar = None
        for name, e, dl in stages:
            if name == "pca" and not (lam_hat is not None and lam_hat > 0):
                # PrivNorm released lambda_hat <= 0: PrivPCA cannot run and spends nothing
                reject("privpca/lambda_hat", f"the released lambda_hat = {lam_hat} is not > 0, PrivPCA was not run")
            stage_budget = ApproxDP(e, dl)
            spent = stage_budget if spent is None else spent + stage_budget
            events.append((f"{name}/tests", tests_mech[name].event()))
            mechanisms.append(tests_mech[name].describe())
            outcome = session.fetch(
                session.apply(
                    friendly_tests,
                    stats,
                    setup.gap,
                    None if name == "norm" else float(lam_hat),
                    tests_mech[name],
                    seed,
                )
            )
            values["tests"][name] = outcome
            if not outcome["count_passed"]:
                reject(f"{'privnorm' if name == 'norm' else 'privpca'}/good-set test (Line 4)",
                       "too few batches are good (noisy |C| below 0.8 m + bound)")
            if not outcome["weight_passed"]:
                reject(f"{'privnorm' if name == 'norm' else 'privpca'}/friend-weight test (Line 13)",
                       "too few batches have enough friends (noisy Z below 0.8 m + bound)")
            if sigma_bar is None:
                sigma_bar = persist_pass2(session, X, stats, kept, labels=labels, sizes=setup.sizes,
                                          threshold=setup.float_bounds.threshold, tile_bytes=tile_bytes, clip=clip)
                kept = None  # the batch tiles kept by pass 1 are released once Sigma_bar is formed
            if name == "norm":
                cal = privnorm_calibration(e, dl, setup.k, setup.tau, setup.float_bounds)
                mech = PrivNormMechanism.from_calibration(cal)
                noise_scales["norm/sigma"] = mech.noise_scales()["release"]
                noise_scales["norm/sensitivity"] = cal.sensitivity
                noise_scales["norm/rule"] = cal.rule
                events.append(("norm/release", mech.event()))
                mechanisms.append(mech.describe())
                notes.append(residual_note(1, mech.noise))
                lam_hat = session.fetch(session.apply(release_norm, sigma_bar, d, mech, seed))
                values["norm"] = lam_hat
            else:
                cal = privpca_calibration(e, dl, setup.k, setup.tau, setup.gap, float(lam_hat), setup.float_bounds)
                mech = PrivPCAMechanism.from_calibration(cal, d)
                noise_scales["pca/sigma_priv"] = mech.noise_scales()["projector"]
                noise_scales["pca/sensitivity"] = cal.sensitivity
                noise_scales["pca/rule"] = cal.rule
                events.append(("pca/release", mech.event()))
                mechanisms.append(mech.describe())
                notes.append(residual_note(d * d, mech.noise) + "; PrivPCA's projector: its order-statistics "
                             "sampler's refinement residual is stated in dpdist.privacy.topk_sampler")
                out = session.fetch(
                    session.apply(release_pca, sigma_bar, d, setup.k, mech, seed)
                )
                comp = np.zeros((1, d))
                comp[0, out["support"]] = out["values"]
                values["components"] = comp
                values["projector_top_k2"] = (out["p_rows"], out["p_cols"], out["p_values"])
                values["lambda_hat"] = float(lam_hat)
    return warn_if_unsafe(Release(
        mechanism=mechanism,
        privacy=guarantee(spent if mean_mech is None else ApproxDP(epsilon, delta)),
        parameters=parameters,
        noise_scales=noise_scales,
        values=values,
        seeding=seed.describe(),
        notes=tuple(notes),
        status="released",
        events=tuple(events),
        mechanisms=tuple(mechanisms),
    ), stacklevel=4)


def private_norm(
    X,
    k: int,
    epsilon: float,
    delta: float,
    *,
    gap: float,
    sigma: float,
    n_batches: int | None = None,
    tau: float | None = None,
    beta: float = DEFAULT_BETA,
    shuffle_batches: bool = False,
    random_state=None,
    scheduler=None,
    on_nonfinite: str = "zero",
    timeout: float | None = DEFAULT_TIMEOUT,
    assume_centered: bool = False,
    mean: Any = None,
    mean_fraction: float = DEFAULT_MEAN_FRACTION,
    mean_clip: float | None = None,
) -> Release:
    """PrivNorm (Algorithm 3): a private estimate of ``lambda_1`` of a k-RCS covariance.

    Parameters
    ----------
    X : array-like, dask array, zarr.Array or str
        n x d data, one row per individual (centred first unless ``assume_centered``).
    k : int
        Row-column sparsity of the covariance (Model 1).
    epsilon, delta : float
        Privacy budget; epsilon > 0, 0 < delta < 1.
    gap : float
        Eigengap gamma in (0, 1): ``lambda_2 <= (1 - gap) lambda_1``.
    sigma : float
        Sub-Gaussian parameter of the rows (public); sets tau through eq. (11).
    n_batches : int, optional
        m >= 20; default :func:`~dpdist.privacy.pca_calibration.default_n_batches`.
    tau : float, optional
        Threshold; default eq. (11) with :data:`~dpdist.privacy.pca_calibration.TAU_CONSTANT`.
    beta : float
        Failure probability used by eq. (11) and the default m (utility only).
    shuffle_batches : bool
        False: batches are consecutive row ranges. True: batch membership follows a public
        random permutation drawn from ``random_state`` (for data sorted by time or source).
    random_state : None or int
        None: OS entropy (the only mode fit for release). An int seeds the noise for tests
        (the release is then marked not private).
    scheduler : optional
        See :func:`dpdist.engine.runtime.compute`.
    on_nonfinite : {"zero", "raise"}, default "zero"
        "zero": rows holding NaN or inf become zero rows before any batch statistic
        (uncounted). "raise": explicit validation mode: one pass checks the data first and
        raises ValidationError before anything is computed (reveals one bit, recorded).
    timeout : float or None, default one day
        Seconds for the fit (both passes); see :mod:`dpdist.engine.runtime`.
    assume_centered, mean, mean_fraction, mean_clip
        Centring, as :func:`~dpdist.algorithms.sparse_covariance.private_sparse_covariance`:
        ``assume_centered=True`` takes the rows as mean-zero (the algorithm as published);
        otherwise every batch statistic reads ``x - mean``, with ``mean`` public or released
        first with ``mean_fraction`` of (epsilon, delta) (rows scaled to L2 norm ``mean_clip``,
        default the entry clip times ``sqrt(d)``).

    Returns
    -------
    Release
        ``values["norm"]`` is the released ``lambda_hat``; ``values["tests"]`` the outcomes of
        the private tests, as bits; ``values["mean"]`` the mean the rows were centred at.

    Raises
    ------
    NoPrivateResult
        When a private test rejects (Algorithm 3 returns bottom); ``.release`` records it.

    Notes
    -----
    **Guarantee.** (epsilon, delta)-DP under replace-one neighbours (n public), for any input
    and any tau > 0 (Lemma 20). Three steps at (epsilon/3, delta/3) each, basic composition:
    the good-set count |C| (sensitivity 1) and the FriendlyCore weight sum Z (sensitivity 7,
    eq. (12)) are tested with bounded Laplace noise (Lemma 8, Fact 3); given both pass on
    neighbouring inputs, ``||T_5tau(Sigma_bar)||_op`` is ``20 k tau``-sensitive (Lemma 9 with
    m >= 20) and released with Gaussian noise ``20 k tau (6/eps) sqrt(log(6/delta))`` (Fact
    2). Sensitivities use public parameters only (k, tau, m). Floating point (deviation 4 of
    :mod:`dpdist.privacy.pca_calibration`): input entries are clipped to a public level c from
    sigma, ``Sigma_bar`` is thresholded at ``5 tau + eta`` (eta a public bound on its
    rounding) and the sensitivity adds the proven float error, so the guarantee holds for the
    computed statistic whatever the data's magnitude. Noise is float-safe (exact rounded laws
    on public lattices, :mod:`dpdist.privacy.mechanisms.friendly`). Caveats: for epsilon/3 above the range of Facts 2-3 the noise is enlarged (see
    :mod:`dpdist.privacy.pca_calibration`); a rejection spends the budget.

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
    (:meth:`SpectralNorm.plan`).

    References
    ----------
    COLT 2026 paper (``shared/papers/000_b225b81e7478a8a0.txt``), Appendix C, Proposition 1.
    """
    epsilon, delta = _check_common(k, epsilon, delta, gap, sigma, n_batches, tau, beta, scheduler, random_state,
                                   timeout, on_nonfinite)
    centring = (assume_centered, mean, mean_fraction, mean_clip)
    _, share = check_centering(*centring).split(epsilon, delta)
    return _run(
        X, k=k, epsilon=epsilon, delta=delta, gap=gap, sigma=sigma, stages=[("norm", share.epsilon, share.delta)],
        lambda_hat=None, n_batches=n_batches, tau=tau, beta=beta, shuffle_batches=shuffle_batches,
        random_state=random_state, scheduler=scheduler, timeout=timeout, mechanism=MECH_NORM, on_nonfinite=on_nonfinite,
        centring=centring,
    )


def _check_lambda_hat(lambda_hat) -> float:
    return check_positive(lambda_hat, "lambda_hat")


def sparse_pca(
    X,
    k: int,
    epsilon: float,
    delta: float,
    *,
    gap: float,
    sigma: float,
    norm_fraction: float = 0.5,
    lambda_hat: float | None = None,
    n_batches: int | None = None,
    tau: float | None = None,
    beta: float = DEFAULT_BETA,
    shuffle_batches: bool = False,
    random_state=None,
    scheduler=None,
    on_nonfinite: str = "zero",
    timeout: float | None = DEFAULT_TIMEOUT,
    assume_centered: bool = False,
    mean: Any = None,
    mean_fraction: float = DEFAULT_MEAN_FRACTION,
    mean_clip: float | None = None,
) -> Release:
    """Theorem 3: PrivNorm for ``lambda_hat``, then PrivPCA, on the same data.

    With ``lambda_hat`` given, PrivNorm is skipped and the whole budget goes to PrivPCA (the
    whole budget left after a private mean: centring as in :func:`private_norm`).

    Notes
    -----
    **Guarantee.** (epsilon, delta)-DP under replace-one neighbours by basic composition of
    PrivNorm at ``(f epsilon, f delta)`` and PrivPCA at ``((1-f) epsilon, (1-f) delta)``,
    ``f = norm_fraction`` (PrivNorm as in :func:`private_norm`, PrivPCA as below). Both
    stages share the batches, tau, the friend relation and Sigma_bar (deterministic functions
    of the data, computed once); their noises are independent. If PrivNorm rejects, PrivPCA
    does not run and only PrivNorm's share is spent (recorded in the release). With a private
    mean, PrivNorm and PrivPCA split the share ``1 - mean_fraction`` of (epsilon, delta) left
    after it, and the three compose by basic composition.

    **The PrivPCA stage** (Algorithm 2, ``lambda_hat`` given or released by PrivNorm) is
    (epsilon, delta)-DP at its share, for any input and any tau > 0 (Corollary 1): tests on
    |C| and Z as in :func:`private_norm` (Lemma 8), then, given both neighbouring runs pass, the projector ``u u^T`` of the top eigenvector of
    ``T_5tau(Sigma_bar)`` is ``Delta``-sensitive in Frobenius norm (Lemma 10) with
    ``Delta = 80 sqrt(2) k tau / (gap (1 - gap/2) lambda_hat)`` (the factor ``1/(1 -
    gap/2)`` corrects the printed (13): goodness at gap/2 guarantees only that eigengap), and
    ``u u^T + G`` with ``G_ij ~ N(0, sigma_priv^2)``, ``sigma_priv`` the analytic Gaussian
    mechanism's at (epsilon/3, delta/3) for ``Delta`` (exact; below Fact 2's ``Delta (6/eps)
    sqrt(log(6/delta))``), is (epsilon/3, delta/3)-DP; on the lattice the sensitivity
    adds the rounding of the d^2 entries (:class:`~dpdist.privacy.mechanisms.friendly.
    PrivPCAMechanism`). ``top_{k^2}`` (sampled exactly, float-safe, by
    :func:`~dpdist.privacy.topk_sampler.lattice_top_k2`), symmetrisation and the top eigenvector are
    post-processing. Caveats as in :func:`private_norm`; ``lambda_hat`` must not depend on
    the data except through a DP release whose cost is accounted separately.
    """
    epsilon, delta = _check_common(k, epsilon, delta, gap, sigma, n_batches, tau, beta, scheduler, random_state,
                                   timeout, on_nonfinite)
    centring = (assume_centered, mean, mean_fraction, mean_clip)
    _, share = check_centering(*centring).split(epsilon, delta)
    if lambda_hat is not None:
        lam = _check_lambda_hat(lambda_hat)
        return _run(
            X, k=k, epsilon=epsilon, delta=delta, gap=gap, sigma=sigma, stages=[("pca", share.epsilon, share.delta)],
            lambda_hat=lam, n_batches=n_batches, tau=tau, beta=beta, shuffle_batches=shuffle_batches,
            random_state=random_state, scheduler=scheduler, timeout=timeout, mechanism=MECH_PCA, on_nonfinite=on_nonfinite,
            budget_split={"norm_fraction": 0.0, "lambda_hat": "user-supplied", "pca": [share.epsilon, share.delta]},
            centring=centring,
        )
    (en, dn), (ep, dp) = split_budget(share.epsilon, share.delta, norm_fraction)
    return _run(
        X, k=k, epsilon=epsilon, delta=delta, gap=gap, sigma=sigma,
        stages=[("norm", en, dn), ("pca", ep, dp)], lambda_hat=None, n_batches=n_batches, tau=tau,
        beta=beta, shuffle_batches=shuffle_batches, random_state=random_state, scheduler=scheduler,
        timeout=timeout, mechanism=MECH_BOTH, on_nonfinite=on_nonfinite,
        budget_split={"norm_fraction": float(norm_fraction), "norm": [en, dn], "pca": [ep, dp],
                      "composition": "basic (DR14 Thm 3.16)"},
        centring=centring,
    )


# --------------------------------------------------------------------------------------
# estimators
# --------------------------------------------------------------------------------------


def _plan_tests(setup: FriendlySetup, cal: FriendlyTestCalibration, q=None, forecast: BatchForecast | None = None) -> dict:
    """The two private tests at this size: their noise, thresholds, the margin a run whose
    batches are all good would have on the Z test, and, given the forecast (``q`` the
    probability that one batch is good, ``forecast`` the batch statistics of the reference
    instance), the probability that each passes and that both do."""
    m = setup.n_batches
    margin_all_good = m - cal.weight_threshold  # Z = m when every batch befriends every other
    out = {
        "count_test": {"scale": cal.count_scale, "bound": cal.count_bound, "threshold": cal.count_threshold},
        "weight_test": {"scale": cal.weight_scale, "bound": cal.weight_bound, "threshold": cal.weight_threshold},
        "weight_test_margin_if_all_good": margin_all_good,
        "weight_test_margin_in_noise_scales": margin_all_good / cal.weight_scale,
        "tests_can_pass": bool(margin_all_good > 0),
    }
    if forecast is not None:
        z_mean, z_sd = forecast.z_moments(m)

        def p_count(qq):
            qq = np.clip(qq, 0.0, 1.0)
            return float(np.mean(count_pass_probability(qq, m, cal.count_threshold, cal.count_scale, cal.count_bound)))

        p_weight = weight_pass_probability(z_mean, z_sd, cal.weight_threshold, cal.weight_scale, cal.weight_bound)
        q = np.asarray(q, dtype=np.float64)
        se = forecast.standard_error(q)
        lo, hi = p_count(q - 2 * se), p_count(q + 2 * se)
        out.update({
            "good_batch_probability": float(np.mean(q)),
            "expected_good_batches": float(m * np.mean(q)),
            "expected_weight_sum": z_mean,
            "count_test_pass_probability": p_count(q),
            "count_test_pass_probability_range": [lo, hi],
            "weight_test_pass_probability": p_weight,
            "pass_probability": p_count(q) * p_weight,
            "pass_probability_range": [lo * p_weight, hi * p_weight],
        })
    return out


def _tests_unmet(tests: dict, name: str) -> tuple:
    if not tests["tests_can_pass"]:
        return (f"{name}'s friend-weight test cannot pass even when every batch is good (margin "
                f"{tests['weight_test_margin_if_all_good']:.3g} <= 0): the fit raises NoPrivateResult",)
    p = tests.get("pass_probability")
    if p is not None and p < REJECTION_LEVEL:
        return (f"{name}'s private tests are predicted to pass with probability {p:.3g} (good-set count test "
                f"{tests['count_test_pass_probability']:.3g}: {tests['expected_good_batches']:.4g} good batches "
                f"expected of {tests['count_test']['threshold'] - tests['count_test']['bound']:.4g} needed; "
                f"friend-weight test {tests['weight_test_pass_probability']:.3g}) on the model's reference "
                "instance: the fit would most likely raise NoPrivateResult and spend its budget",)
    return ()


def _plan_centring(est, setup: FriendlySetup, mean_share, lambda_1: float) -> tuple[dict, tuple, bool]:
    """The plan's centring fields, its unmet condition (if any), and whether the mean is private.

    ``mean_offset_bound`` bounds ``||w||_2``, ``w = mu - mu_hat``
    (:func:`~dpdist.algorithms._centering.mean_offset_bounds`, at beta). The plans apply the
    algorithms' bounds to the centred rows' second moment ``Sigma + w w^T``; they name it an
    unmet condition when that matrix may leave the model: ``||w||^2 > gap lambda_1 / 10``
    (Weyl then no longer keeps its relative eigengap above 0.8 gap) or a squared entry of ``w``
    above tau (``w w^T``'s entries off Sigma's pattern could then survive the threshold).
    """
    centering = check_centering(est.assume_centered, est.mean, est.mean_fraction, est.mean_clip,
                                n_features=setup.n_features)
    mech = (mean_mechanism(centering, mean_share, setup.n_samples, setup.n_features, setup.float_bounds.entry_clip)
            if centering.private else None)
    w_inf, w_2 = mean_offset_bounds(centering, mech, setup.sigma, setup.n_samples, setup.n_features, setup.beta)
    why = []
    if w_2 * w_2 > setup.gap * lambda_1 / 10:
        why.append(f"the bound {w_2 * w_2:.3g} on ||mu - mu_hat||^2 exceeds gap lambda_1 / 10 = "
                   f"{setup.gap * lambda_1 / 10:.3g}")
    if w_inf * w_inf > setup.tau:
        why.append(f"the bound {w_inf * w_inf:.3g} on its largest squared entry exceeds tau = {setup.tau:.3g}")
    unmet: tuple = ()
    if why:
        unmet = (f"centring at the private mean: {' and '.join(why)}, so the centred rows may leave the model the "
                 "bound assumes (more rows, or a public mean, bring mu_hat closer)",)
    fields = {"centering": centering.mode, "mean_offset_bound": w_2,
              "mean_noise_scale": None if mech is None else mech.noise_scales()["gaussian"]}
    return fields, unmet, mech is not None


@dataclass(frozen=True, kw_only=True)
class SpectralNormPlan(Plan):
    """:meth:`SpectralNorm.plan`: a :class:`~dpdist.privacy.plan.Plan` whose ``noise_scale``
    is the Gaussian sigma on the norm as the release uses and reports it (after the lattice's
    rounding charge; ``sensitivity`` and the error bound use the calibrated sigma, a relative
    difference near 1e-9) and whose ``error_bound`` is Lemma 21's
    ``|lambda_hat - lambda_1| <= 10 k tau + sigma sqrt(2 log(4/beta))`` (when the tests pass).

    **Scale** (vacuity): ``lambda_1``, the norm estimated (``lambda_1`` of :meth:`plan`,
    default ``sigma**2``, the largest value Model 1 allows). Private tests that cannot pass
    even on ideal data are an unmet condition, and so are tests predicted to pass with
    probability below 1/2.

    **Will it release?** ``tests`` holds, besides the tests' noise and thresholds, the
    forecast on the model's reference instance (:mod:`dpdist.algorithms._friendly_forecast`):
    the probability that a batch is good, the good batches and weight sum expected, and the
    probability that the count test, the weight test and both pass (with ``*_range``, the
    forecast's Monte Carlo resolution); ``release_probability`` (and its range) is that of
    returning a result rather than ``NoPrivateResult``. From public parameters only.

    **Centring.** ``centering`` is how the fit centres; with a private mean the calibration is
    at the share ``1 - mean_fraction`` (``privacy`` is the whole budget), ``mean_noise_scale``
    is the mean's noise, and the error bound adds ``mean_offset_bound**2`` (the most the
    rank-one term ``w w^T`` left by centring at ``mu_hat`` raises the top eigenvalue), holding
    then with probability >= 1 - 2 beta.
    """

    n_batches: int
    batch_size: int
    tau: float
    lambda_1_assumed: float
    sensitivity: float
    tests: dict
    threshold_error: float
    noise_error: float
    relative_error_bound: float
    meets_theorem_3_requirement: bool
    release_probability: float | None = None
    release_probability_range: list | None = None
    centering: str = "assume-centered"
    mean_noise_scale: float | None = None
    mean_offset_bound: float = 0.0


@dataclass(frozen=True, kw_only=True)
class SparsePCAPlan(Plan):
    """:meth:`SparsePCA.plan`: a :class:`~dpdist.privacy.plan.Plan` whose ``noise_scale`` is
    the projector's Gaussian noise as the release uses and reports it (after the lattice's
    rounding charge; ``sigma_priv`` is the calibrated value; with a private ``lambda_hat`` both
    are for the assumed one) and whose ``error_bound`` is the ``sin^2``
    bound of the proof of Theorem 3 (``min(1, 4 E^2)``, when the tests pass).

    **Scale** (vacuity): 1, since ``sin^2 <= 1`` always (a bound of 1 says nothing about the
    direction). Unmet conditions: private tests that cannot pass even on ideal data, and
    PrivNorm's predicted error above ``gap lambda_1 / 10`` (Theorem 3 needs ``lambda_hat``
    within it), and private tests predicted to pass with probability below 1/2.

    **Will it release?** ``norm_tests`` and ``pca_tests`` hold each stage's forecast as in
    :class:`SpectralNormPlan` (PrivPCA's over the law of PrivNorm's ``lambda_hat``, with the
    probability that it is positive, since PrivPCA runs only then); ``release_probability``
    (and its range) is the probability that both stages pass.

    **Centring.** With a private mean every stage is calibrated at the share ``1 -
    mean_fraction`` (``privacy`` is the whole budget); ``sin2_error_bound`` is Theorem 3's bound
    for the centred rows' second moment ``Sigma + w w^T``, ``centring_sin_bound`` bounds the
    angle between its top eigenvector and Sigma's (``min(1, ||w||^2 / (gap lambda_1))``,
    :class:`SparsePCA`'s Notes), and ``error_bound`` is ``min(1, (sqrt(sin2_error_bound) +
    centring_sin_bound)^2)``, holding then with probability >= 1 - 2 beta.
    """

    n_batches: int
    batch_size: int
    tau: float
    lambda_1_assumed: float
    lambda_hat_assumed: float
    sigma_priv: float
    projector_sensitivity: float
    pca_tests: dict
    projector_bias: float
    projector_noise: float
    projector_error_bound: float
    sin2_error_bound: float
    noise_max_entry: float
    support_recoverable: bool
    norm_noise_scale: float | None = None
    norm_error_bound: float | None = None
    norm_within_gap_over_10: bool | None = None
    norm_tests: dict | None = None
    budget_split: dict | None = None
    release_probability: float | None = None
    release_probability_range: list | None = None
    centering: str = "assume-centered"
    mean_noise_scale: float | None = None
    mean_offset_bound: float = 0.0
    centring_sin_bound: float = 0.0


def _min_samples(est, error_at, target: float, *, start: int) -> int:
    """:func:`search_min_samples` for a plan that may centre at a private mean: a size at which
    the mean cannot be computed exactly (its integer sums would overflow) has no bound, and a
    target that no size reaches says why."""
    private = check_centering(**est._centring()).private

    def err(n):
        try:
            return error_at(n)
        except ValidationError as exc:
            if private and "private mean cannot be computed exactly" in str(exc):
                return math.inf
            raise

    try:
        return search_min_samples(err, target, start=start)
    except ValidationError as exc:
        if not private or "not reachable" not in str(exc):
            raise
        raise ValidationError(
            f"{exc} with a private mean: its exact integer sums (below 2**52) coarsen its lattice as n grows, so "
            "its rounding error stops falling, and at a very large n it cannot be computed at all; a public "
            "mean=MEAN or assume_centered=True lifts this") from None


def _location(rel: Release) -> dict:
    """``location_``: the mean the fit centred at (zeros when the data were taken as centred)."""
    mu = rel.values.get("mean")
    d = rel.parameters["n_features"]
    return {"location_": np.zeros(d) if mu is None else np.asarray(mu, dtype=np.float64)}


class SpectralNorm(Estimator):
    """Private operator norm of a k-RCS covariance: PrivNorm (Algorithm 3).

    Parameters
    ----------
    k, epsilon, delta, gap, sigma, n_batches, tau, random_state, scheduler, timeout
        As in :func:`private_norm`.
    ledger, dataset
        A privacy-budget ledger charged by ``fit``, and the dataset's identifier (see
        :class:`~dpdist.SparseCovariance`). Without ``ledger``, ``fit`` is recorded in no ledger.
    beta : float, default 0.05
        Failure probability of the utility statements (eq. (11), default m, plan()).
    shuffle_batches : bool, default False
        Batches from a public random permutation instead of consecutive row ranges.
    on_nonfinite : {"zero", "raise"}, default "zero"
        See :func:`private_norm`.
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

    Notes
    -----
    See :func:`private_norm` for the guarantee: (epsilon, delta)-DP under replace-one
    neighbours for any input (Lemma 20). Parameters are validated in :meth:`fit`; a failed fit
    (including a ``NoPrivateResult``) changes nothing (:mod:`dpdist.algorithms._base`).

    The norm is a functional of the covariance, so it is centred like the covariance
    estimators: the private mean first (its own share, its own event), then PrivNorm on ``x -
    mu_hat`` with the rest; its sensitivity analysis is unchanged since ``mu_hat`` is public by
    then (:func:`private_norm`). The rank-one term ``w w^T`` (``w = mu - mu_hat``) that
    centring at ``mu_hat`` leaves in the second moment raises the top eigenvalue by between 0
    and ``||w||^2``; :meth:`plan` adds that to the error.
    """

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
        timeout: float | None = DEFAULT_TIMEOUT,
        ledger: Any = None,
        dataset: str | None = None,
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
        self.timeout = timeout
        self.ledger = ledger
        self.dataset = dataset
        self.require_useful = require_useful
        self.assume_centered = assume_centered
        self.mean = mean
        self.mean_fraction = mean_fraction
        self.mean_clip = mean_clip

    def _fit_release(self, X) -> Release:
        return private_norm(
            X, self.k, self.epsilon, self.delta, gap=self.gap, sigma=self.sigma, n_batches=self.n_batches,
            tau=self.tau, beta=self.beta, shuffle_batches=self.shuffle_batches,
            random_state=self.random_state, scheduler=self.scheduler, timeout=self.timeout,
            on_nonfinite=self.on_nonfinite, **self._centring(),
        )

    def _centring(self) -> dict:
        return {"assume_centered": self.assume_centered, "mean": self.mean, "mean_fraction": self.mean_fraction,
                "mean_clip": self.mean_clip}

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
        return self._plan(n_samples, n_features, lambda_1)

    def _plan(self, n_samples, n_features, lambda_1=None, *, forecast: bool = True) -> SpectralNormPlan:
        epsilon, delta = _check_common(self.k, self.epsilon, self.delta, self.gap, self.sigma,
                                       self.n_batches, self.tau, self.beta, self.scheduler)
        mean_share, share = check_centering(**self._centring()).split(epsilon, delta)
        setup = friendly_setup(n_samples, n_features, self.k, self.gap, self.sigma, self.n_batches, self.tau,
                       self.beta, [(share.epsilon, share.delta)])
        cal = privnorm_calibration(share.epsilon, share.delta, setup.k, setup.tau, setup.float_bounds)
        err = privnorm_error_bound(cal, setup.k, setup.tau, setup.beta)
        lam = check_positive(lambda_1, "lambda_1", allow_none=True) or setup.sigma**2
        centring, centring_unmet, private_mean = _plan_centring(self, setup, mean_share, lam)
        bound = err["error_bound"] + centring["mean_offset_bound"] ** 2
        fc = (batch_forecast(setup.n_features, setup.k, setup.gap, lam, min(setup.sizes), setup.tau)
              if forecast else None)
        tests = _plan_tests(setup, friendly_test_calibration(share.epsilon, share.delta, setup.n_batches),
                            fc and fc.q_norm(), fc)
        prob = "1 - 2 beta (Lemma 21, plus centring at the private mean)" if private_mean else "1 - beta (Lemma 21)"
        return SpectralNormPlan(
            n_samples=setup.n_samples,
            n_features=setup.n_features,
            privacy=ApproxDP(epsilon, delta),
            noise_scale=PrivNormMechanism.from_calibration(cal).noise_scales()["release"],  # as released
            error_bound=bound,
            error_metric=f"|lambda_hat - lambda_1|, w.p. >= {prob} when the tests pass",
            error_scale=lam,
            error_scale_rule="lambda_1" if lambda_1 is not None else "lambda_1 = sigma**2, the largest Model 1 allows",
            unmet_conditions=_tests_unmet(tests, "PrivNorm") + centring_unmet,
            n_batches=setup.n_batches,
            batch_size=min(setup.sizes),
            tau=setup.tau,
            lambda_1_assumed=lam,
            sensitivity=cal.sensitivity,
            tests=tests,
            threshold_error=err["threshold_error"],
            noise_error=err["noise_error"],
            relative_error_bound=bound / lam,
            meets_theorem_3_requirement=bound <= setup.gap * lam / 10,
            release_probability=tests.get("pass_probability"),
            release_probability_range=tests.get("pass_probability_range"),
            **centring,
        )

    def min_samples(self, target_relative_error: float, n_features: int, *, lambda_1: float | None = None) -> int:
        """Least n whose :meth:`plan` relative error bound is <= the target (m held at its
        value for that n: ``n_batches`` if set, else the default)."""
        epsilon, delta = _check_common(self.k, self.epsilon, self.delta, self.gap, self.sigma,
                                       self.n_batches, self.tau, self.beta, self.scheduler)
        _, share = check_centering(**self._centring()).split(epsilon, delta)
        return _min_samples(
            self,
            lambda n: self._plan(n, n_features, lambda_1, forecast=False).relative_error_bound,
            target_relative_error,
            start=max(40, 2 * (self.n_batches or default_n_batches(share.epsilon, share.delta, beta=self.beta))),
        )


class SparsePCA(Projection, Estimator):
    """Private leading k-sparse principal component: PrivNorm then PrivPCA (Theorem 3).

    Parameters
    ----------
    k, epsilon, delta, gap, sigma, n_batches, tau, random_state, scheduler, timeout
        As in :func:`sparse_pca`.
    ledger, dataset
        A privacy-budget ledger charged by ``fit``, and the dataset's identifier (see
        :class:`~dpdist.SparseCovariance`). A rejection commits what the stages run spent.
        Without ``ledger``, ``fit`` is recorded in no ledger.
    norm_fraction : float, default 0.5
        Share of (epsilon, delta) spent by PrivNorm; ignored when ``lambda_hat`` is given.
    lambda_hat : float, optional
        A public estimate of ``lambda_1``: PrivNorm is skipped and PrivPCA gets the whole budget.
    beta : float, default 0.05
    shuffle_batches : bool, default False
    on_nonfinite : {"zero", "raise"}, default "zero"
        See :func:`private_norm`.
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
    See :func:`sparse_pca`: (epsilon, delta)-DP under replace-one neighbours for any input
    (Corollary 1, Lemma 20, basic composition). Parameters are validated in :meth:`fit`; a
    failed fit (including a ``NoPrivateResult``) changes nothing (:mod:`dpdist.algorithms._base`).

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
        timeout: float | None = DEFAULT_TIMEOUT,
        ledger: Any = None,
        dataset: str | None = None,
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
        self.timeout = timeout
        self.ledger = ledger
        self.dataset = dataset
        self.require_useful = require_useful
        self.assume_centered = assume_centered
        self.mean = mean
        self.mean_fraction = mean_fraction
        self.mean_clip = mean_clip

    _centring = SpectralNorm._centring

    def _fit_release(self, X) -> Release:
        return sparse_pca(
            X, self.k, self.epsilon, self.delta, gap=self.gap, sigma=self.sigma,
            norm_fraction=self.norm_fraction, lambda_hat=self.lambda_hat, n_batches=self.n_batches,
            tau=self.tau, beta=self.beta, shuffle_batches=self.shuffle_batches,
            random_state=self.random_state, scheduler=self.scheduler, timeout=self.timeout,
            on_nonfinite=self.on_nonfinite, **self._centring(),
        )

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

    def _budgets(self):
        """(PrivNorm's budget or None, PrivPCA's): the share left after a private mean, split."""
        epsilon, delta = _check_common(self.k, self.epsilon, self.delta, self.gap, self.sigma,
                                       self.n_batches, self.tau, self.beta, self.scheduler)
        _, share = check_centering(**self._centring()).split(epsilon, delta)
        if self.lambda_hat is not None:
            _check_lambda_hat(self.lambda_hat)
            return None, (share.epsilon, share.delta)
        return split_budget(share.epsilon, share.delta, self.norm_fraction)

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
        return self._plan(n_samples, n_features, lambda_1)

    def _plan(self, n_samples, n_features, lambda_1=None, *, forecast: bool = True) -> SparsePCAPlan:
        norm_budget, (ep, dp) = self._budgets()
        budgets = [(ep, dp)] if norm_budget is None else [norm_budget, (ep, dp)]
        setup = friendly_setup(n_samples, n_features, self.k, self.gap, self.sigma, self.n_batches, self.tau,
                       self.beta, budgets)
        lam = check_positive(lambda_1, "lambda_1", allow_none=True) or (
            float(self.lambda_hat) if self.lambda_hat is not None else setup.sigma**2)
        lam_hat = float(self.lambda_hat) if self.lambda_hat is not None else (1 - setup.gap / 10) * lam
        pcal = privpca_calibration(ep, dp, setup.k, setup.tau, setup.gap, lam_hat, setup.float_bounds)
        err = privpca_error_bound(pcal.sigma, setup.k, setup.tau, setup.gap, lam, setup.n_features, setup.beta)
        fc = (batch_forecast(setup.n_features, setup.k, setup.gap, lam, min(setup.sizes), setup.tau)
              if forecast else None)
        pca_cal = friendly_test_calibration(ep, dp, setup.n_batches)
        if norm_budget is not None:
            ncal = privnorm_calibration(norm_budget[0], norm_budget[1], setup.k, setup.tau, setup.float_bounds)
        if fc is None:
            pca_tests = _plan_tests(setup, pca_cal)
        else:
            if norm_budget is None:  # lambda_hat is public: PrivPCA always runs
                lam_points, p_run = np.array([float(self.lambda_hat)]), 1.0
            else:  # lambda_hat = ||T_5tau(Sigma)||_op + PrivNorm's noise; PrivPCA runs when it is > 0
                points = lambda_hat_points(fc.norm_of_thresholded, ncal.sigma)
                lam_points, p_run = points[points > 0], float(np.mean(points > 0))
            pca_tests = _plan_tests(setup, pca_cal, fc.q_pca(lam_points) if lam_points.size else np.zeros(1), fc)
            if norm_budget is not None:
                pca_tests["lambda_hat_positive_probability"] = p_run
                for key in ("count_test_pass_probability", "pass_probability"):
                    pca_tests[key] *= p_run
                for key in ("count_test_pass_probability_range", "pass_probability_range"):
                    pca_tests[key] = [v * p_run for v in pca_tests[key]]
        unmet = _tests_unmet(pca_tests, "PrivPCA")
        release_probability = pca_tests.get("pass_probability")
        release_range = pca_tests.get("pass_probability_range")
        norm: dict = {}
        if norm_budget is not None:
            nerr = privnorm_error_bound(ncal, setup.k, setup.tau, setup.beta)
            norm = {
                "norm_noise_scale": PrivNormMechanism.from_calibration(ncal).noise_scales()["release"],
                "norm_error_bound": nerr["error_bound"],
                "norm_within_gap_over_10": nerr["error_bound"] <= setup.gap * lam / 10,
                "norm_tests": _plan_tests(setup, friendly_test_calibration(*norm_budget, setup.n_batches),
                                          fc and fc.q_norm(), fc),
                "budget_split": {"norm": list(norm_budget), "pca": [ep, dp]},
            }
            if fc is not None:
                release_probability *= norm["norm_tests"]["pass_probability"]
                release_range = [a * b for a, b in zip(release_range, norm["norm_tests"]["pass_probability_range"])]
            unmet = _tests_unmet(norm["norm_tests"], "PrivNorm") + unmet
            if not norm["norm_within_gap_over_10"]:
                unmet += (f"PrivNorm's predicted error {nerr['error_bound']:.3g} exceeds gap lambda_1 / 10 = "
                          f"{setup.gap * lam / 10:.3g} (Theorem 3 needs lambda_hat within it)",)
        said = any("predicted to pass" in u for u in unmet)
        if fc is not None and release_probability < REJECTION_LEVEL and not said:
            unmet += (f"PrivNorm's and PrivPCA's private tests are predicted to pass together with probability "
                      f"{release_probability:.3g} on the model's reference instance: the fit would most likely "
                      "raise NoPrivateResult and spend its budget",)
        mean_share, _ = check_centering(**self._centring()).split(check_epsilon(self.epsilon), check_delta(self.delta))
        centring, centring_unmet, private_mean = _plan_centring(self, setup, mean_share, lam)
        # the angle the centring's rank-one term turns the top eigenvector by (Davis-Kahan, Notes)
        centring["centring_sin_bound"] = min(1.0, centring["mean_offset_bound"] ** 2 / (setup.gap * lam))
        bound = min(1.0, (math.sqrt(err["sin2_error_bound"]) + centring["centring_sin_bound"]) ** 2)
        prob = ("1 - 2 beta when the tests pass (proof of Theorem 3, plus centring at the private mean)"
                if private_mean else "1 - beta when the tests pass (proof of Theorem 3)")
        return SparsePCAPlan(
            n_samples=setup.n_samples,
            n_features=setup.n_features,
            privacy=ApproxDP(check_epsilon(self.epsilon), check_delta(self.delta)),
            noise_scale=PrivPCAMechanism.from_calibration(pcal, setup.n_features).noise_scales()["projector"],
            error_bound=bound,
            error_metric=f"sin^2(v_hat, v_1), w.p. >= {prob}",
            error_scale=1.0,
            error_scale_rule="1: sin^2 <= 1 always",
            unmet_conditions=unmet + centring_unmet,
            n_batches=setup.n_batches,
            batch_size=min(setup.sizes),
            tau=setup.tau,
            lambda_1_assumed=lam,
            lambda_hat_assumed=lam_hat,
            sigma_priv=pcal.sigma,
            projector_sensitivity=pcal.sensitivity,
            pca_tests=pca_tests,
            release_probability=release_probability,
            release_probability_range=release_range,
            **err,
            **norm,
            **centring,
        )

    def min_samples(self, target_sin2: float, n_features: int, *, lambda_1: float | None = None) -> int:
        """Least n whose :meth:`plan` predicts ``sin^2 <= target_sin2`` (and, when PrivNorm
        runs, a lambda_hat within gap/10 as Theorem 3 requires); m is held at ``n_batches`` or
        its default."""

        def err(n):
            p = self._plan(n, n_features, lambda_1, forecast=False)
            ok = p.norm_within_gap_over_10 is not False
            return p.error_bound if ok else math.inf

        norm_budget, (ep, dp) = self._budgets()
        pairs = [(ep, dp)] if norm_budget is None else [norm_budget, (ep, dp)]
        m = self.n_batches or max(default_n_batches(e, d, beta=self.beta) for e, d in pairs)
        return _min_samples(self, err, target_sin2, start=max(40, 2 * m))
