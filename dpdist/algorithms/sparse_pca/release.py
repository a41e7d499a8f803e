"""PrivNorm and PrivPCA as functions: validate, run the two passes over the batches, release.

:func:`private_norm` releases the operator norm (PrivNorm); :func:`sparse_pca` releases the
leading eigenvector (PrivPCA), after PrivNorm on the same batches when no ``lambda_hat`` is given.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpdist._validation import check_positive, check_probability
from dpdist.algorithms._base import check_nonfinite, nonfinite_note, refuse_nonfinite
from dpdist.algorithms._centering import (
    DEFAULT_MEAN_FRACTION,
    Centering,
    centre_data,
    check_centering,
    mean_mechanism,
    mean_notes,
    stage_guarantee,
)
from dpdist.algorithms.friendly_steps import friendly_setup, friendly_tests, release_norm, release_pca
from dpdist.data.validation import as_dask_array, chunk_reading_notes
from dpdist.engine.privpca.graph import (
    DEFAULT_GROUP_BYTES,
    DEFAULT_TILE_BYTES,
    batch_labels,
    combine_pass1_groups,
    persist_pass1,
    persist_pass2,
)
from dpdist.engine.session import open_session
from dpdist.engine.gram import zero_nonfinite_rows
from dpdist.engine.runtime import check_scheduler
from dpdist.exceptions import NoPrivateResult
from dpdist.privacy.budget import ApproxDP, check_delta, check_epsilon
from dpdist.privacy.accounting import release_guarantee
from dpdist.privacy.mechanisms.base import residual_note
from dpdist.privacy.mechanisms.privpca.mechanism import (
    FriendlyTestMechanism,
    PrivNormMechanism,
    PrivPCAMechanism,
)
from dpdist.privacy.noise.streams import check_random_state, resolve_random_state
from dpdist.privacy.mechanisms.privpca.calibration import (
    DEFAULT_BETA,
    check_gap,
    check_k,
    check_n_batches,
    friendly_test_calibration,
    privnorm_calibration,
    privpca_calibration,
    split_norm_and_pca_budget,
)
from dpdist.privacy.release import Release, warn_if_unsafe


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
                  on_nonfinite="zero"):
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
    with open_session(scheduler) as session:
        if on_nonfinite == "raise":
            refuse_nonfinite(X, session.runtime)
        if centering.mode != "assume-centered":
            # first stage: the mean (released here when private), then every batch statistic
            # reads x - mean; non-finite rows are zeroed before, as transform() does
            Xg = zero_nonfinite_rows(X) if on_nonfinite == "zero" else X
            X, mu = centre_data(Xg, None, centering, mean_mech, seed, scheduler=session.runtime)
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
                                   on_nonfinite)
    centring = (assume_centered, mean, mean_fraction, mean_clip)
    _, share = check_centering(*centring).split(epsilon, delta)
    return _run(
        X, k=k, epsilon=epsilon, delta=delta, gap=gap, sigma=sigma, stages=[("norm", share.epsilon, share.delta)],
        lambda_hat=None, n_batches=n_batches, tau=tau, beta=beta, shuffle_batches=shuffle_batches,
        random_state=random_state, scheduler=scheduler, mechanism=MECH_NORM, on_nonfinite=on_nonfinite,
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
                                   on_nonfinite)
    centring = (assume_centered, mean, mean_fraction, mean_clip)
    _, share = check_centering(*centring).split(epsilon, delta)
    if lambda_hat is not None:
        lam = _check_lambda_hat(lambda_hat)
        return _run(
            X, k=k, epsilon=epsilon, delta=delta, gap=gap, sigma=sigma, stages=[("pca", share.epsilon, share.delta)],
            lambda_hat=lam, n_batches=n_batches, tau=tau, beta=beta, shuffle_batches=shuffle_batches,
            random_state=random_state, scheduler=scheduler, mechanism=MECH_PCA, on_nonfinite=on_nonfinite,
            budget_split={"norm_fraction": 0.0, "lambda_hat": "user-supplied", "pca": [share.epsilon, share.delta]},
            centring=centring,
        )
    (en, dn), (ep, dp) = split_norm_and_pca_budget(share.epsilon, share.delta, norm_fraction)
    return _run(
        X, k=k, epsilon=epsilon, delta=delta, gap=gap, sigma=sigma,
        stages=[("norm", en, dn), ("pca", ep, dp)], lambda_hat=None, n_batches=n_batches, tau=tau,
        beta=beta, shuffle_batches=shuffle_batches, random_state=random_state, scheduler=scheduler,
        mechanism=MECH_BOTH, on_nonfinite=on_nonfinite,
        budget_split={"norm_fraction": float(norm_fraction), "norm": [en, dn], "pca": [ep, dp],
                      "composition": "basic (DR14 Thm 3.16)"},
        centring=centring,
    )
