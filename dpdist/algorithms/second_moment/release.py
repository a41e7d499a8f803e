"""RecDPSME's release and the one-shot Gaussian mechanism.

:func:`run_second_moment` makes the release of a fit of
:class:`~dpdist.algorithms.second_moment.estimator.SecondMoment` from its validated parameters
(initialise the radius and lambda_min privately when they are not public, run the levels of
the recursion) and checks nothing again. :func:`one_shot_second_moment` is a function of its
own (it has no estimator): it validates its parameters and releases.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

import numpy as np

from dpdist.algorithms._base import check_nonfinite, nonfinite_note, refuse_nonfinite
from dpdist.data.validation import as_dask_array, chunk_reading_notes
from dpdist.engine import second_moment as engine
from dpdist.engine.second_moment_kernels import combine_bucket_counts, combine_group_min_eigenvalues
from dpdist.engine.runtime import check_scheduler, compute, open_runtime
from dpdist.exceptions import NoPrivateResult, ValidationError
from dpdist.privacy.accounting import release_guarantee
from dpdist.privacy.events import NoOpEvent
from dpdist.privacy.float_rounding import float_sensitivity
from dpdist.privacy.mechanisms.base import residual_note
from dpdist.privacy.mechanisms.second_moment import (
    histogram_mechanism,
    level_mechanisms,
    moment_release,
    one_shot_mechanism,
)
from dpdist.privacy.noise.streams import NoiseSeed, resolve_random_state
from dpdist.privacy.release import Release, warn_if_unsafe
from dpdist.privacy.mechanisms.second_moment import (
    GROWTH,
    LevelSchedule,
    _check_positive,
    _check_sensitivity,
    level_schedule,
    one_shot_sigma,
    sensitivity_coefficient,
)
from dpdist.privacy.zcdp import ZCDP, check_rho
from dpdist.algorithms.second_moment.selection import (
    group_partition,
    lambda_buckets,
    radius_grid,
    select_lambda,
    select_radius,
)


MECHANISM = "RecDPSME (Mahpud-Sheffet NeurIPS 2025, Algorithms 1-2) with zCDP initialisation"


#: Wall-clock timings go here (DEBUG), never into a release: they depend on the data.
logger = logging.getLogger("dpdist")

_NOTES = (
    "privacy: rho-zCDP under replace-one neighbours (n public); convert with "
    "privacy.to_approx_dp(delta) (Bun-Steinke) or method='cks20' (tight)",
    "the budget is split over L = K*+1 noise draws (the paper's real-valued T would "
    "overspend); the total is exactly rho",
    "every row is clipped to the radius before level 0",
    "shrink S(y) = y min(1, sqrt(3/7) R / ||y||)",
    "uncentred second moment (1/n) sum x x^T; no private mean step",
    "rows holding NaN or inf are replaced by zero rows (a per-row map; not counted)",
    "lambda_min groups (private lambda_min only) are a keyed pseudorandom partition without "
    "replacement (row i -> pi(i) // m, pi an 8-round Feistel permutation keyed by the seed; "
    "data-independent, not exactly uniform: dpdist.privacy.noise.partition)",
    "floating point: rows are scaled to the level radius before any product and every sigma is "
    "calibrated for kappa(n) times the sensitivity (the computed level matrix; float_factor)",
    "float-safe noise: every released matrix and histogram lies on a public power-of-two lattice with "
    "an exactly sampled rounded Gaussian (dpdist.privacy.mechanisms.second_moment); the unwinding of the "
    "levels is post-processing",
)


# ---------------------------------------------------------------------------------------
# the mechanism
# ---------------------------------------------------------------------------------------


def check_shape(p, n: int, d: int) -> None:
    """The rules between the validated parameters ``p`` and the data's shape (metadata only)."""
    if p.radius is not None and p.lambda_min is not None and p.lambda_min > p.radius**2 / d * (1 + 1e-12):
        raise ValidationError(
            f"lambda_min must be <= radius**2 / n_features = {p.radius**2 / d!r} (no second moment of rows "
            f"of norm <= radius has a larger least eigenvalue), got {p.lambda_min!r}"
        )
    if p.lambda_min is None and p.m < d:
        raise ValidationError(
            f"the private lambda_min step needs m >= n_features (groups of m rows are singular "
            f"otherwise), got m={p.m}, n_features={d}; pass a public lambda_min"
        )
    if p.lambda_min is None and n // p.m < 1:
        raise ValidationError(f"the private lambda_min step needs n >= m, got n={n}, m={p.m}")


def _compute_one(stat, scheduler):
    return compute(stat, scheduler=scheduler, progress=False)[0]


def run_second_moment(X, cfg) -> Release:
    """RecDPSME's release (MS25, Algorithms 1-2) from the opened input ``X`` and the validated
    parameters ``cfg`` of :class:`~dpdist.algorithms.second_moment.estimator.SecondMoment`, with
    the budget ``split`` its ``_validate_together`` derived (checks nothing again)."""
    seed = resolve_random_state(cfg.random_state)
    n, d = (int(s) for s in X.shape)
    split = cfg.split
    noise_scales: dict[str, Any] = {}
    params: dict[str, Any] = {
        "n_samples": n, "n_features": d, "rho": cfg.rho, "m": cfg.m, "alpha": cfg.alpha, "xi": cfg.xi,
        "sensitivity": cfg.sensitivity, "init_fraction": cfg.init_fraction, "budget_split": split,
        "psd": cfg.psd, "on_nonfinite": cfg.on_nonfinite,
    }
    notes = list(_NOTES) + [nonfinite_note(cfg.on_nonfinite), *chunk_reading_notes(X)]
    events: list = []  # (label, Event), in the order the steps ran
    mechanisms: list = []  # their public descriptions
    n_bins = 0  # released histogram entries (for the exhaustion residual)
    with open_runtime(cfg.scheduler) as sched:
        if cfg.on_nonfinite == "raise":
            refuse_nonfinite(X, sched)

        # --- radius: Gaussian histogram of row norms, then a tail rule ----------
        if cfg.radius is None:
            edges = radius_grid(cfg.radius_range)
            mech_r = histogram_mechanism("radius", split["radius"])
            sigma_r = mech_r.sigma
            t0 = time.perf_counter()
            noisy = _compute_one(engine.noised(engine.norm_counts(X, edges), mech_r.release(seed)), sched)
            _log_time("radius", None, time.perf_counter() - t0)
            r_hat, capped = select_radius(noisy, edges, sigma_r, cfg.xi)
            if capped:
                notes.append("radius: no grid edge passed the tail rule; the top of radius_range was used")
            noise_scales["radius_histogram_sigma"] = sigma_r
            n_bins += len(noisy)
            events.append(("init radius", mech_r.event()))
            mechanisms.append(mech_r.describe())
            params["radius_grid"] = [float(edges[0]), float(edges[-1]), len(edges)]
            params["radius_source"] = "private (Gaussian norm histogram)"
        else:
            r_hat = cfg.radius
            params["radius_source"] = "public"
            events.append(("init radius (public)", NoOpEvent()))

        # --- lambda_min: Algorithm 4 with a Gaussian bucket histogram ------------
        if cfg.lambda_min is None:
            partition = group_partition(seed, n, cfg.m)
            k = partition.n_groups
            edges_l = lambda_buckets(r_hat, cfg.alpha, cfg.lambda_floor)
            mech_l = histogram_mechanism("lambda_min", split["lambda_min"])
            sigma_l = mech_l.sigma
            grams = engine.group_grams(X, partition, k, steps=((1.0, r_hat),))
            counts = engine.on_worker(
                combine_bucket_counts, engine.on_worker(combine_group_min_eigenvalues, grams, cfg.m), edges_l
            )
            t0 = time.perf_counter()
            noisy_l = _compute_one(engine.noised(counts, mech_l.release(seed)), sched)
            _log_time("lambda", None, time.perf_counter() - t0)
            noise_scales["lambda_histogram_sigma"] = sigma_l
            n_bins += len(noisy_l)
            events.append(("init lambda_min", mech_l.event()))
            mechanisms.append(mech_l.describe())
            try:
                low, lam_hat = select_lambda(noisy_l, edges_l, cfg.alpha)
            except NoPrivateResult as exc:
                rel = Release(
                    mechanism=MECHANISM,
                    privacy=_privacy(events, split["radius"] + split["lambda_min"]),
                    parameters={**params, "radius": r_hat, "rejected_stage": "init-lambda"},
                    noise_scales=noise_scales,
                    values={},
                    seeding=seed.describe(),
                    notes=tuple(notes + [f"rejected at init-lambda: {exc}; the rho of the steps run counts as spent"]),
                    status="rejected",
                    events=tuple(events),
                    mechanisms=tuple(mechanisms),
                )
                warn_if_unsafe(rel)
                raise NoPrivateResult(str(exc), stage="init-lambda", release=rel) from None
            if lam_hat > r_hat**2 / d:
                lam_hat = r_hat**2 / d
                notes.append("lambda_min: the selected bucket exceeded radius**2/d; capped there")
            params["lambda_groups"] = k
            params["lambda_bucket_lower_edge"] = low
            params["lambda_source"] = "private (Gaussian bucket histogram of group eigenvalues)"
        else:
            lam_hat = cfg.lambda_min
            params["lambda_source"] = "public"
            events.append(("init lambda_min (public)", NoOpEvent()))

        # --- recursion (Algorithms 1-2) ---------------------------------------------------
        schedule = level_schedule(n, d, split["main"], m=cfg.m, alpha=cfg.alpha,
                                  radius=r_hat / math.sqrt(lam_hat), sensitivity=cfg.sensitivity)
        levels = level_mechanisms(schedule)
        sigma_tilde, projections, dims, level_matrices = _recursion(X, schedule, levels, lam_hat, seed, sched)
    events.extend((f"level {k}", mech.event()) for k, mech in enumerate(levels))
    mechanisms.extend(mech.describe() for mech in levels)
    d_tri = d * (d + 1) // 2
    notes.append(residual_note(d_tri * len(levels) + n_bins, levels[-1].noise))

    out = (1.0 - cfg.alpha) * lam_hat * sigma_tilde
    out = (out + out.T) / 2.0
    if cfg.psd:
        w, v = np.linalg.eigh(out)
        out = (v * np.maximum(w, 0.0)) @ v.T
    params.update(
        radius=r_hat, lambda_min=lam_hat, n_levels=schedule.n_levels, normalised_radius=schedule.radius,
        kappas=list(schedule.kappas), level_radii=list(schedule.radii), thresholds=list(schedule.thresholds),
        subspace_dims=dims, float_factor=schedule.float_factor,
    )
    noise_scales["level_sigmas"] = list(schedule.sigmas)
    noise_scales["level_sigmas_units"] = "normalised (rows / sqrt((1-alpha) lambda_min)), per level"
    privacy = _privacy(events, cfg.rho)
    return warn_if_unsafe(Release(
        mechanism=MECHANISM,
        privacy=privacy,
        parameters=params,
        noise_scales=noise_scales,
        values={"second_moment": out, "projections": projections, "level_matrices": level_matrices},
        seeding=seed.describe(),
        notes=tuple(notes),
        events=tuple(events),
        mechanisms=tuple(mechanisms),
    ))


def _privacy(events, rho: float) -> ZCDP:
    """The zCDP composition of the labelled events (BS16 Lemma 2.3), stated as ``rho`` (the
    budget the fit was asked to spend): :func:`release_guarantee` checks that the events' total
    is at most ``rho`` (each lattice scale is rounded up, so it is a few ulp below), and the
    breakdown lists each event's accounted share."""
    evs, labels = [e for _, e in events], [label for label, _ in events]
    release_guarantee(evs, labels=labels, budget=ZCDP(rho))  # an internal error if above rho
    return ZCDP(rho, breakdown=release_guarantee(evs, labels=labels).breakdown)


def _log_time(stage: str, level: int | None, seconds: float) -> None:
    """Timings go to the ``dpdist`` logger at DEBUG (``record.dpdist_timing`` holds them for
    tools such as the benchmarks), never into a release: they depend on the data."""
    logger.debug("second-moment %s%s: %.6f s", stage, "" if level is None else f" {level}", seconds,
                 extra={"dpdist_timing": {"stage": stage, "level": level, "seconds": seconds}})


def _recursion(X, schedule: LevelSchedule, levels, lam_hat: float, seed: NoiseSeed, scheduler) -> tuple:
    """Run the L levels; return (unwound Sigma_tilde at level-0 scale, Pi's, dim V's, the L
    noisy level matrices).

    Level k's rows are y = t_k M_k x with M_k = a_k ... a_0 (public) and t_k the per-row clip
    scale (see :func:`dpdist.engine.second_moment_kernels.chunk_row_scales`); t_k is persisted where
    the data live between levels, so each level is one pass of one d x d map per row.
    """
    d, L = schedule.n_features, schedule.n_levels
    s0 = 1.0 / math.sqrt((1.0 - schedule.alpha) * lam_hat)
    M = s0 * np.eye(d)
    t = None
    projections, dims, noisy_levels = [], [], []
    eye = np.eye(d)
    blocks = engine.row_blocks(X)  # the data-loading graph, optimised once for all levels
    keep_rows = L > 1 and engine.rows_in_memory(X)  # small data: read once, kept between the levels
    for k in range(L):
        if k > 0:
            M = (math.sqrt(GROWTH) * projections[-1]) @ M
        noise = moment_release(levels[k], seed, schedule.n_samples)
        t0 = time.perf_counter()
        last = k == L - 1  # its scales are not needed: none is kept
        t_next, gram = engine.level_step(blocks, t, M, schedule.radii[k], keep_rows=keep_rows and not last,
                                         rows_in_prev=keep_rows and k > 0, keep_scales=not last,
                                         spill_to=None if last else engine.spill_stem(scheduler, X.shape[0]))
        t, noisy = engine.persist_and_release(t_next, engine.noised(gram, noise), scheduler)
        _log_time("level", k, time.perf_counter() - t0)
        noisy_levels.append(noisy)
        if k == L - 1:
            break
        w, v = np.linalg.eigh(noisy)
        V = v[:, w >= schedule.thresholds[k]]
        dims.append(int(V.shape[1]))
        projections.append(eye - (1.0 - schedule.eta) * (V @ V.T))
    del t
    sigma = noisy
    for pi in reversed(projections):
        pinv = eye + (eye - pi) / schedule.eta  # Pi^{-1} = I + (1/eta - 1) V V^T, V V^T = (I - Pi)/(1 - eta)
        sigma = (1.0 / GROWTH) * pinv @ sigma @ pinv
    proj = np.stack(projections) if projections else np.zeros((0, d, d))
    return sigma, proj, dims, np.stack(noisy_levels)


def one_shot_second_moment(
    X, rho: float, *, radius: float, sensitivity: str = "paper", random_state: int | None = None, scheduler: Any = None,
    on_nonfinite: str = "zero",
) -> Release:
    """The one-shot Gaussian mechanism: (1/n) sum clip(x) clip(x)^T + GUE(sigma^2), a
    one-level comparator for the recursion.

    Notes
    -----
    **Guarantee.** rho-zCDP under replace-one neighbours: rows clipped to the public
    ``radius`` R, L2 sensitivity of the upper triangle <= sqrt(2) R^2/n <= 4 R^2/n, sigma =
    Delta / sqrt(2 rho) (BS16 Prop. 1.6), with the float factor kappa(n) (rows scaled before
    the product). ``on_nonfinite`` as in :func:`second_moment`. Float-safe noise: the
    release is :func:`~dpdist.privacy.mechanisms.second_moment.one_shot_mechanism`'s (the
    argument is written in that module).
    """
    rho = check_rho(rho)
    radius = _check_positive(radius, "radius")
    sensitivity = _check_sensitivity(sensitivity)
    scheduler = check_scheduler(scheduler)
    on_nonfinite = check_nonfinite(on_nonfinite)
    seed = resolve_random_state(random_state)
    X = as_dask_array(X)
    n, d = (int(s) for s in X.shape)
    sigma = one_shot_sigma(n, rho, radius, sensitivity)
    sens, _ = float_sensitivity(sensitivity_coefficient(sensitivity) * radius**2 / n, n)  # one_shot_sigma's Delta
    mech = one_shot_mechanism(d, sens, sigma)
    with open_runtime(scheduler) as rt:
        if on_nonfinite == "raise":
            refuse_nonfinite(X, rt)
        noisy = compute(
            engine.noised(engine.level_gram(X, ((1.0, radius),)), moment_release(mech, seed, n)),
            scheduler=rt, progress=False,
        )[0]
    events = [("one-shot", mech.event())]
    return warn_if_unsafe(Release(
        mechanism="Gaussian mechanism on the clipped second moment (one shot)",
        privacy=_privacy(events, rho),
        parameters={"n_samples": n, "n_features": d, "rho": rho, "radius": radius, "sensitivity": sensitivity,
                    "on_nonfinite": on_nonfinite},
        noise_scales={"sigma": sigma},
        values={"second_moment": noisy},
        seeding=seed.describe(),
        notes=(residual_note(d * (d + 1) // 2, mech.noise), nonfinite_note(on_nonfinite), *chunk_reading_notes(X)),
        events=tuple(events),
        mechanisms=(mech.describe(),),
    ))
