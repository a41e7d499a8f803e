"""RecDPSME and the one-shot Gaussian mechanism as functions: validate, initialise the radius and
lambda_min privately, run the levels of the recursion, release.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpdist._validation import check_bool, check_positive, check_probability, check_real
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
    check_alpha,
    check_m,
    check_xi,
    level_schedule,
    one_shot_sigma,
    sensitivity_coefficient,
    split_second_moment_rho,
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
    "data-independent, not exactly uniform: dpdist.privacy.partition)",
    "floating point: rows are scaled to the level radius before any product and every sigma is "
    "calibrated for kappa(n) times the sensitivity (the computed level matrix; float_factor)",
    "float-safe noise: every released matrix and histogram lies on a public power-of-two lattice with "
    "an exactly sampled rounded Gaussian (dpdist.privacy.mechanisms.second_moment); the unwinding of the "
    "levels is post-processing",
)


# ---------------------------------------------------------------------------------------
# the mechanism
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Config:
    rho: float
    m: int
    alpha: float
    radius: float | None
    lambda_min: float | None
    init_fraction: float
    sensitivity: str
    xi: float
    radius_range: tuple
    lambda_floor: float
    psd: bool
    scheduler: Any
    on_nonfinite: str


def _validate(
    rho, m, alpha, radius, lambda_min, init_fraction, sensitivity, xi, radius_range, lambda_floor, psd, scheduler,
    on_nonfinite="zero",
) -> _Config:
    rho = check_rho(rho)
    m = check_m(m)
    alpha = check_alpha(alpha)
    radius = None if radius is None else _check_positive(radius, "radius")
    lambda_min = None if lambda_min is None else _check_positive(lambda_min, "lambda_min")
    split_second_moment_rho(rho, init_fraction, private_radius=True, private_lambda=True)  # validates init_fraction
    sensitivity = _check_sensitivity(sensitivity)
    xi = check_xi(xi)
    if not isinstance(radius_range, (tuple, list)) or len(radius_range) != 2:
        raise ValidationError(f"radius_range must be a pair (lo, hi) of public bounds, got {radius_range!r}")
    lo = check_positive(radius_range[0], "radius_range[0]")
    hi = check_real(radius_range[1], "radius_range[1]", low=lo)
    lambda_floor = check_probability(lambda_floor, "lambda_floor")
    psd = check_bool(psd, "psd")
    scheduler = check_scheduler(scheduler)
    engine.scales_in_memory_bytes()  # the dask configs a fit reads between levels
    engine.rows_in_memory_bytes()
    return _Config(rho, m, alpha, radius, lambda_min, float(init_fraction), sensitivity, xi, (lo, hi),
                   lambda_floor, bool(psd), scheduler, check_nonfinite(on_nonfinite))


def _check_shape(cfg: _Config, n: int, d: int) -> None:
    """The checks that need the data's shape (metadata only)."""
    if cfg.radius is not None and cfg.lambda_min is not None and cfg.lambda_min > cfg.radius**2 / d * (1 + 1e-12):
        raise ValidationError(
            f"lambda_min must be <= radius**2 / n_features = {cfg.radius**2 / d!r} (no second moment of rows "
            f"of norm <= radius has a larger least eigenvalue), got {cfg.lambda_min!r}"
        )
    if cfg.lambda_min is None and cfg.m < d:
        raise ValidationError(
            f"the private lambda_min step needs m >= n_features (groups of m rows are singular "
            f"otherwise), got m={cfg.m}, n_features={d}; pass a public lambda_min"
        )
    if cfg.lambda_min is None and n // cfg.m < 1:
        raise ValidationError(f"the private lambda_min step needs n >= m, got n={n}, m={cfg.m}")


def _compute_one(stat, scheduler):
    return compute(stat, scheduler=scheduler, progress=False)[0]


def second_moment(
    X,
    rho: float,
    *,
    m: int,
    alpha: float = 0.5,
    radius: float | None = None,
    lambda_min: float | None = None,
    init_fraction: float = 0.1,
    sensitivity: str = "paper",
    xi: float = 0.1,
    random_state: int | None = None,
    scheduler: Any = None,
    radius_range: tuple[float, float] = (1e-8, 1e8),
    lambda_floor: float = 1e-12,
    psd: bool = False,
    on_nonfinite: str = "zero",
) -> Release:
    """rho-zCDP estimate of the second moment (1/n) sum x x^T by RecDPSME (MS25, Alg. 1-2).

    Parameters
    ----------
    X : array-like, dask array, zarr.Array or str
        n rows (individuals) in R^d. Read once per private initialisation step and once per
        level.
    rho : float
        Total zCDP budget (initialisation + recursion).
    m : int
        Subsamplability size of Definition 1.1 (a public assumption about the data; it sets
        psi = 1/(10m), the stopping value C = 640m, hence the number of levels).
    alpha : float, default 0.5
        Subsamplability accuracy, in (0, 1/2].
    radius : float, optional
        Public bound R on the row norms (data units). Rows above it are clipped. When None, a
        private norm quantile is spent on it.
    lambda_min : float, optional
        Public lower bound on lambda_min(Sigma) (data units). When None, a private Gaussian
        bucket histogram over group eigenvalues is spent on it (needs m >= d).
    init_fraction : float, default 0.1
        Each private initialisation step gets rho * init_fraction / 2; the recursion gets the
        rest (the paper gives no split; public values cost 0 and leave their share to the recursion).
    sensitivity : {"paper", "tight"}
        "paper": Delta_k = 4 R_k^2 / n (MS25). "tight": sqrt(2) R_k^2 / n, the exact L2
        sensitivity of the released upper triangle (a deviation; MS25's value is valid but loose).
    xi : float, default 0.1
        Failure probability of the analysis (tail threshold of the radius step; planning).
        It does not enter any noise scale.
    random_state : None or int
        None: OS entropy (the only mode fit for release). An int seeds the noise for tests;
        the release records it as seeded.
    scheduler : optional
        See :func:`dpdist.engine.runtime.compute`.
    radius_range : (float, float), default (1e-8, 1e8)
        Public bounds of the radius grid (private radius only).
    lambda_floor : float, default 1e-12
        The lambda histogram covers [lambda_floor R_hat^2, R_hat^2] (private lambda only).
    psd : bool, default False
        Post-process the output by clipping its eigenvalues at 0 (not in MS25).
    on_nonfinite : {"zero", "raise"}, default "zero"
        "zero": rows holding NaN or inf become zero rows before any statistic (a per-row
        map; nothing counts them). "raise": explicit validation mode: one extra pass checks
        the data first and raises ValidationError before anything is computed; the error (or
        its absence) reveals one bit, which the release records.

    Returns
    -------
    Release
        ``values["second_moment"]`` (d x d), ``values["projections"]`` (the L-1 public
        maps Pi_k, post-processing of released noise) and ``values["level_matrices"]`` (the
        L noisy level matrices, normalised units: each is that level's rho/L-zCDP release, so
        publishing them costs nothing more); ``privacy`` is a :class:`ZCDP` whose breakdown
        lists every step.

    Raises
    ------
    NoPrivateResult
        The private lambda_min histogram's largest bin is the underflow bin;
        ``exc.release`` records the rho already spent (radius and lambda_min steps).

    Notes
    -----
    **Guarantee.** rho-zCDP under replace-one neighbours (same n, one row replaced; n is
    public), for any input. The argument (level sensitivities ``kappa(n) a R_k^2 / n`` from
    public radii, the per-level share rho_main / L, post-processing of the projections, the
    initialisation histograms with sensitivity sqrt(2), the float factor, the lattice) is
    written once in docs/privacy/second_moment.md. The release records one
    event per step (``events``; public steps as no-ops) and ``privacy`` is their zCDP
    composition (BS16 Lemma 2.3), at most rho. The number of levels L = K* + 1 depends on
    (R_hat / sqrt(lambda_hat), alpha, m) only.

    **Floating point** (a deviation that only adds noise). The kernel scales every
    row to R_k *before* forming its outer product (never "plain Gram minus the shrunk rows'
    excess", which let one fill value cancel the rest of its batch), with overflow- and
    underflow-free norms and a radius margin, so each row's term is bounded by R_k^2 as
    computed; sums have bounded rounding depth, and each sigma_k is calibrated for
    ``kappa(n) Delta_k`` (:func:`~dpdist.privacy.float_rounding.gram_rounding_factor`), the
    sensitivity of the computed level matrix. The histograms' counts are exact per row.

    **Float-safe noise.** Every released level matrix and histogram lies on a public
    power-of-two lattice, with an exactly sampled rounded Gaussian: no output is
    impossible under a neighbour. The utility
    guarantee (Theorem 3.3: (1-gamma) Sigma_eff <= output <= (1+gamma) Sigma w.p. >= 1-2 xi)
    needs (m, alpha, beta)-subsamplability and enough samples, see :meth:`SecondMoment.plan`;
    privacy does not.

    **Decisions** (each with its reason in docs/privacy/second_moment.md). L = K*+1, the
    number of draws made, replaces the paper's real-valued T in sigma. S(y) = y min(1,
    sqrt(3/7) R / ||y||) (the printed shrink is dimensionally wrong). Rows are clipped to R_hat
    at level 0. The ``sensitivity`` option. A zCDP initialisation (norm quantile with threshold
    tau_J = sigma sqrt(K+1-J) sqrt(2 ln(2K/xi)), sized for the K+1-J noisy bins
    summed above edge J; bucket argmax with lambda_hat = l / (1 + alpha); the split
    of ``init_fraction``). Groups are a keyed pseudorandom partition (without
    replacement), computed per row block on the workers (:func:`group_partition`).
    Uncentred second moment. The ``psd`` option. Rows with NaN/inf become zero rows.

    **Computation.** One pass over X per private initialisation step and one per level. Each
    level's Gram is reduced and noised inside the graph (only the noised matrix reaches this
    process); the per-row clip scales t_k (exact per-row state, like the data themselves) stay
    where the data live between levels and are never returned (see
    :mod:`dpdist.engine.second_moment`). The eigendecomposition, the projections and the
    unwinding run here, on released values only.
    """
    cfg = _validate(rho, m, alpha, radius, lambda_min, init_fraction, sensitivity, xi, radius_range,
                    lambda_floor, psd, scheduler, on_nonfinite)
    seed = resolve_random_state(random_state)
    X = as_dask_array(X)
    n, d = (int(s) for s in X.shape)
    _check_shape(cfg, n, d)
    split = split_second_moment_rho(cfg.rho, cfg.init_fraction, private_radius=cfg.radius is None,
                                    private_lambda=cfg.lambda_min is None)
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
