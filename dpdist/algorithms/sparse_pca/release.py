"""PrivNorm and PrivPCA's release: the two passes over the batches, from validated values.

:func:`run_friendly` runs the stages of a fit of :class:`~dpdist.algorithms.sparse_pca.
estimator.SpectralNorm` (PrivNorm) or :class:`~dpdist.algorithms.sparse_pca.estimator.SparsePCA`
(PrivNorm then PrivPCA, or PrivPCA alone for a given ``lambda_hat``) on shared batch statistics.
It takes the estimator's validated parameters (the batches, tau and the float bounds fixed by
:func:`~dpdist.algorithms.friendly_steps.friendly_setup`, the centring, the stages' budgets) and
checks nothing again.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpdist.algorithms._base import nonfinite_note, refuse_nonfinite
from dpdist.algorithms._centering import Centering, centre_data, mean_notes, stage_guarantee
from dpdist.algorithms.friendly_steps import friendly_tests, release_norm, release_pca
from dpdist.data.validation import chunk_reading_notes
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
from dpdist.exceptions import NoPrivateResult
from dpdist.privacy.budget import ApproxDP
from dpdist.privacy.accounting import release_guarantee
from dpdist.privacy.mechanisms.base import residual_note
from dpdist.privacy.mechanisms.privpca.mechanism import FriendlyTestMechanism, PrivNormMechanism, PrivPCAMechanism
from dpdist.privacy.noise.streams import resolve_random_state
from dpdist.privacy.mechanisms.privpca.calibration import friendly_test_calibration, privnorm_calibration, privpca_calibration
from dpdist.privacy.release import Release, warn_if_unsafe


MECH_NORM = "PrivNorm (COLT 2026, Algorithm 3)"
MECH_PCA = "PrivPCA (COLT 2026, Algorithm 2)"
MECH_BOTH = "PrivNorm + PrivPCA (COLT 2026, Theorem 3)"

_MEAN_ZERO_NOTE = ("rows are assumed mean-zero: the second moment (1/b) sum x x^T of each batch is used, not a "
                   "centred covariance")

_COMMON_NOTES = (
    "float-safe noise (dpdist.privacy.mechanisms.privpca.mechanism): the tests, PrivNorm's release and PrivPCA's "
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


# --------------------------------------------------------------------------------------
# the pipeline
# --------------------------------------------------------------------------------------


def run_friendly(X, p, *, tile_bytes=DEFAULT_TILE_BYTES, group_bytes=DEFAULT_GROUP_BYTES) -> Release:
    """Run the stages ``p.stages`` ("norm", then "pca") on shared batch statistics and release.

    ``X`` is the opened input; ``p`` the estimator's validated parameters, with what
    ``_validate_together`` derived from them and the shape: ``setup`` (batches, tau, float
    bounds), ``centering``, ``mean_share`` and ``mean_mechanism`` (the private mean's share and
    mechanism, or None), ``stages`` (``(name, epsilon, delta)`` of each stage, adding up to the
    share of (epsilon, delta) left after the private mean), ``lambda_hat`` (given, or None),
    ``budget_split`` (recorded, or None) and ``mechanism`` (the release's name).
    """
    n, d = X.shape
    setup, centering, mean_share, mean_mech = p.setup, p.centering, p.mean_share, p.mean_mechanism
    epsilon, delta, stages, mechanism, on_nonfinite = p.epsilon, p.delta, p.stages, p.mechanism, p.on_nonfinite
    shuffle_batches = p.shuffle_batches
    seed = resolve_random_state(p.random_state)
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
    if p.budget_split is not None:
        parameters["budget_split"] = dict(p.budget_split)
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

    lam_hat = p.lambda_hat
    with open_session(p.scheduler) as session:
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
                             "sampler's refinement residual is stated in dpdist.privacy.noise.topk_sampler")
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
