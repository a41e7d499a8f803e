"""Private second-moment estimation of subsamplable inputs: RecDPSME (MS25) under zCDP.

Mahpud & Sheffet, "A Private Approximation of the 2nd-Moment Matrix of Any Subsamplable
Input", NeurIPS 2025 (arXiv 2505.14251), Algorithms 1-2, with a zCDP initialisation
(docs/privacy/second_moment.md). :func:`second_moment` does the work and returns a
:class:`~dpdist.privacy.release.Release`; :class:`SecondMoment` validates, calls it, and copies
the release to ``*_`` attributes.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpdist._validation import check_bool, check_positive, check_probability, check_real
from dpdist.algorithms._base import Estimator, check_nonfinite, nonfinite_note, refuse_nonfinite
from dpdist.data.validation import as_dask_array, chunk_reading_notes
from dpdist.engine import second_moment as engine
from dpdist.engine.second_moment_kernels import combine_bucket_counts, combine_group_min_eigenvalues
from dpdist.engine.runtime import DEFAULT_TIMEOUT, check_scheduler, check_timeout, compute, open_runtime
from dpdist.exceptions import NoPrivateResult, ValidationError
from dpdist.privacy.accounting import NoOpEvent, release_guarantee
from dpdist.privacy.calibration import float_sensitivity
from dpdist.privacy.mechanisms.base import residual_note
from dpdist.privacy.mechanisms.second_moment import (
    histogram_mechanism,
    level_mechanisms,
    moment_release,
    one_shot_mechanism,
)
from dpdist.privacy.noise import NoiseSeed, resolve_random_state
from dpdist.privacy.partition import GroupPartition
from dpdist.privacy.release import Release, warn_if_unsafe
from dpdist.privacy.second_moment_calibration import (
    GROWTH,
    LevelSchedule,
    SecondMomentPlan,
    _check_positive,
    _check_sensitivity,
    check_alpha,
    check_m,
    check_xi,
    level_schedule,
    min_samples,
    one_shot_sigma,
    plan_second_moment,
    sensitivity_coefficient,
    split_budget,
)
from dpdist.privacy.zcdp import ZCDP, check_rho

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

MECHANISM = "RecDPSME (Mahpud-Sheffet NeurIPS 2025, Algorithms 1-2) with zCDP initialisation"
PURPOSE_PARTITION = "second-moment/partition"
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
# zCDP initialisation: grids, partitions and selection rules (post-processing)
# ---------------------------------------------------------------------------------------


def radius_grid(radius_range: tuple[float, float]) -> np.ndarray:
    """Public geometric edges b_j = lo 2^j, j = 0..K, with K = ceil(log2(hi/lo))."""
    lo, hi = radius_range
    K = max(1, math.ceil(math.log2(hi / lo)))
    return lo * 2.0 ** np.arange(K + 1)


def select_radius(noisy_counts: np.ndarray, edges: np.ndarray, sigma: float, xi: float) -> tuple[float, bool]:
    """R_hat = b_J for the least J whose noisy count above b_J is <= tau_J.

    ``noisy_counts`` has K + 2 bins: [0, b_0), [b_0, b_1), ..., [b_K, inf); the count above
    b_J is the sum of the K + 1 - J bins J+1 .. K+1, each noised independently with standard
    deviation ``sigma``, so its noise has standard deviation sigma sqrt(K + 1 - J). The
    threshold is sized for that sum: tau_J = sigma sqrt(K + 1 - J) sqrt(2 ln(2K/xi)). At the
    first edge b_J0 with no row at or above it the noisy sum is a centred Gaussian of that
    standard deviation (rounded to a lattice 2^-28 times finer), which exceeds tau_J0 with
    probability at most about xi / (4K) (Pr[Z > z] <= exp(-z^2/2) / 2), so R_hat <= b_J0 <=
    2 max ||x_i|| (when the largest norm is inside the
    grid) except with that probability. (A threshold sized for one bin, sigma sqrt(2
    ln(2K/xi)), let R_hat overshoot the largest norm by a factor of 2 or more in about a
    quarter of the runs at 200,000 rows and rho = 0.5, some by 1e7.)

    Post-processing of the noisy histogram. Returns (R_hat, capped): ``capped`` is True when
    no J qualified and R_hat = b_K (the top edge).
    """
    edges = np.asarray(edges, dtype=np.float64)
    K = len(edges) - 1
    z = math.sqrt(2.0 * math.log(2.0 * max(K, 1) / xi))
    above = np.cumsum(np.asarray(noisy_counts, dtype=np.float64)[::-1])[::-1]  # above[i] = sum bins i..
    for J in range(K + 1):
        if above[J + 1] <= sigma * math.sqrt(K + 1 - J) * z:
            return float(edges[J]), False
    return float(edges[K]), True


def lambda_buckets(radius: float, alpha: float, floor_ratio: float) -> np.ndarray:
    """Ascending edges of the buckets [(1-a)^{j+1}, (1-a)^j) that cover [floor_ratio R^2, R^2].

    Value v lies in bucket j = ceil(ln v / ln(1-a)) - 1. With edges e_0 < ... < e_B the bins
    are the underflow (-inf, e_0) (it holds 0), the B buckets, and an overflow [e_B, inf).
    """
    q = 1.0 - alpha
    top = radius**2
    j_top = math.ceil(math.log(top) / math.log(q)) - 1
    j_bot = math.ceil(math.log(floor_ratio * top) / math.log(q)) - 1
    return q ** np.arange(j_bot + 1, j_top - 1, -1, dtype=np.float64)


def select_lambda(noisy_counts: np.ndarray, edges: np.ndarray, alpha: float) -> tuple[float, float]:
    """Argmax bucket's lower edge l, and lambda_hat = l / (1 + alpha).

    The released bucket may exceed lambda_min by up to its width, hence the division.

    Raises :class:`NoPrivateResult` when the argmax is the underflow bin.
    """
    noisy_counts = np.asarray(noisy_counts, dtype=np.float64)
    i = int(np.argmax(noisy_counts))
    if i == 0:
        raise NoPrivateResult(
            "private lambda_min estimate failed: the noisy histogram's largest bin is the "
            "underflow (groups of m rows look singular); pass lambda_min, a larger m, or more rho",
            stage="init-lambda",
        )
    low = float(edges[i - 1])
    return low, low / (1.0 + alpha)


def group_partition(
    seed: NoiseSeed, n_samples: int, group_size: int, purpose: str = PURPOSE_PARTITION
) -> GroupPartition:
    """A data-independent split into k = floor(n/m) disjoint groups of m rows (Algorithms 3-4).

    Row i goes to group pi(i) // m, with pi a permutation of [0, n) keyed by the seed (a
    Feistel network, see :mod:`dpdist.privacy.partition`); rows with pi(i) >= k m are unused
    (-1). The returned object computes the labels of any row range, so each row block gets
    its own on the worker that reads it: nothing of size n is built on the client. This
    samples without replacement, unlike Definition 1.1, and the permutation is
    pseudorandom, not exactly uniform (its distribution is stated in that module).
    """
    return GroupPartition(seed, int(n_samples), int(group_size), purpose)


def random_groups(
    seed: NoiseSeed, n_samples: int, group_size: int, purpose: str = PURPOSE_PARTITION
) -> tuple[np.ndarray, int]:
    """The labels of :func:`group_partition` for all n rows at once (8 n bytes: for tests and
    small inputs; the estimators evaluate the partition per row block), and k."""
    partition = group_partition(seed, n_samples, group_size, purpose)
    return partition(0, int(n_samples)), partition.n_groups


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
    timeout: float | None
    on_nonfinite: str


def _validate(
    rho, m, alpha, radius, lambda_min, init_fraction, sensitivity, xi, radius_range, lambda_floor, psd, scheduler,
    timeout,
    on_nonfinite="zero",
) -> _Config:
    rho = check_rho(rho)
    m = check_m(m)
    alpha = check_alpha(alpha)
    radius = None if radius is None else _check_positive(radius, "radius")
    lambda_min = None if lambda_min is None else _check_positive(lambda_min, "lambda_min")
    split_budget(rho, init_fraction, private_radius=True, private_lambda=True)  # validates init_fraction
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
                   lambda_floor, bool(psd), scheduler, check_timeout(timeout), check_nonfinite(on_nonfinite))


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
    timeout: float | None = DEFAULT_TIMEOUT,
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
    timeout : float or None, default one day
        Seconds for the whole fit (all passes); see :mod:`dpdist.engine.runtime`.

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
    ``kappa(n) Delta_k`` (:func:`~dpdist.privacy.calibration.gram_rounding_factor`), the
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
                    lambda_floor, psd, scheduler, timeout, on_nonfinite)
    seed = resolve_random_state(random_state)
    X = as_dask_array(X)
    n, d = (int(s) for s in X.shape)
    _check_shape(cfg, n, d)
    split = split_budget(cfg.rho, cfg.init_fraction, private_radius=cfg.radius is None,
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
    with open_runtime(cfg.scheduler, timeout=cfg.timeout) as sched:
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
    timeout: float | None = DEFAULT_TIMEOUT,
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
    with open_runtime(scheduler, timeout=timeout) as rt:
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


# ---------------------------------------------------------------------------------------
# the estimator
# ---------------------------------------------------------------------------------------


class SecondMoment(Estimator):
    """Private second-moment matrix of a subsamplable input (RecDPSME, MS25), rho-zCDP.

    It estimates the second moment ``E[x x^T]`` (``(1/n) sum x x^T`` of the rows), not a
    covariance: the data are never centred, whatever their mean, and it takes no
    ``assume_centered``. For a covariance, centre the data first or use a covariance estimator
    (``SparseCovariance``, the ``baselines``), which centre by default.

    Parameters
    ----------
    rho : float
        Total zCDP budget.
    m, alpha, radius, lambda_min, init_fraction, sensitivity, xi, random_state, scheduler
        See :func:`second_moment`.
    radius_range, lambda_floor, psd, on_nonfinite, timeout
        See :func:`second_moment`.
    ledger, dataset
        A privacy-budget ledger charged ``ZCDP(rho)`` by ``fit``, and the dataset's identifier
        (see :class:`~dpdist.SparseCovariance`). A rejection at the private lambda_min step
        commits the rho of the steps run. Without ``ledger``, ``fit`` is recorded in no ledger.

    Attributes
    ----------
    second_moment_ : ndarray (d, d)
        The private estimate of (1/n) sum x x^T.
    n_levels_ : int
        L, the number of noise draws (= data passes of the recursion).
    noise_scales_ : ndarray (L,)
        sigma_k of each level's GUE noise (normalised units, see the release).
    radius_, lambda_min_ : float
        The radius and least-eigenvalue bound used (public, or privately released).
    privacy_ : ZCDP
        The guarantee; ``privacy_.rho`` and ``privacy_.to_approx_dp(delta)``.
    release_ : Release

    Notes
    -----
    **Guarantee.** rho-zCDP under replace-one neighbours (see :func:`second_moment` for the
    sensitivity, lemma and caveats). Parameters are validated in :meth:`fit` before any data
    is read; the attributes are set only after the release succeeded, and a failed fit
    changes nothing (:mod:`dpdist.algorithms._base`). The release records whether it is
    vacuous (``parameters["utility"]``: predicted gamma >= 1, or event E's sample size unmet),
    planned at the radius and lambda_min it used (public, or privately released).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).normal(size=(20000, 3)) * [1.0, 3.0, 10.0]
    >>> est = SecondMoment(1.0, m=20, radius=60.0, lambda_min=0.5, random_state=0,
    ...                    scheduler="synchronous").fit(X)
    >>> est.second_moment_.shape
    (3, 3)
    """

    def __init__(
        self,
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
        timeout: float | None = DEFAULT_TIMEOUT,
        ledger: Any = None,
        dataset: str | None = None,
    ) -> None:
        self.rho = rho
        self.m = m
        self.alpha = alpha
        self.radius = radius
        self.lambda_min = lambda_min
        self.init_fraction = init_fraction
        self.sensitivity = sensitivity
        self.xi = xi
        self.random_state = random_state
        self.scheduler = scheduler
        self.radius_range = radius_range
        self.lambda_floor = lambda_floor
        self.psd = psd
        self.on_nonfinite = on_nonfinite
        self.timeout = timeout
        self.ledger = ledger
        self.dataset = dataset

    def _kwargs(self) -> dict:
        return {k: v for k, v in self.get_params().items() if k not in ("ledger", "dataset")}

    def _fit_release(self, X) -> Release:
        return second_moment(X, **self._kwargs())

    def _fitted_attributes(self, release: Release) -> dict:
        return {
            "release_": release,
            "second_moment_": release.values["second_moment"],
            "n_levels_": int(release.parameters["n_levels"]),
            "noise_scales_": np.asarray(release.noise_scales["level_sigmas"]),
            "radius_": float(release.parameters["radius"]),
            "lambda_min_": float(release.parameters["lambda_min"]),
            "privacy_": release.privacy,
        }

    def _config(self) -> _Config:
        kw = self._kwargs()
        kw.pop("random_state")
        return _validate(**kw)

    def _check_fit(self, n_samples: int, n_features: int) -> None:
        _check_shape(self._config(), n_samples, n_features)
        self._check_runtime()

    def _utility_plan(self, release: Release):
        p = release.parameters
        return self.plan(p["n_samples"], p["n_features"], radius=p["radius"], lambda_min=p["lambda_min"])

    def _planning_values(self, radius, lambda_min) -> tuple[float, float, float]:
        radius = self.radius if radius is None else radius
        lambda_min = self.lambda_min if lambda_min is None else lambda_min
        if radius is None or lambda_min is None:
            raise ValidationError(
                "plan needs radius and lambda_min: set them on the estimator or pass guesses "
                "(radius=..., lambda_min=...) to plan/min_samples"
            )
        split = split_budget(check_rho(self.rho), self.init_fraction, private_radius=self.radius is None,
                             private_lambda=self.lambda_min is None)
        return _check_positive(radius, "radius"), _check_positive(lambda_min, "lambda_min"), split["main"]

    def plan(
        self, n_samples: int, n_features: int, *, radius: float | None = None, lambda_min: float | None = None,
        g_method: str = "heuristic",
    ) -> SecondMomentPlan:
        """L, per-level noise scales and predicted gamma (docs/privacy/second_moment.md) without reading data.

        When the estimator's ``radius``/``lambda_min`` are None (private initialisation),
        pass guesses of them here; the recursion's share of rho is used for the noise, and
        the plan's ``privacy`` is the whole ``ZCDP(rho)`` a fit spends.
        """
        self._config()  # every parameter, with the rule the fit uses
        r, lam, rho_main = self._planning_values(radius, lambda_min)
        plan = plan_second_moment(n_samples, n_features, rho_main, m=check_m(self.m), alpha=self.alpha, radius=r,
                                  lambda_min=lam, sensitivity=self.sensitivity, xi=self.xi, g_method=g_method)
        return dataclasses.replace(plan, privacy=ZCDP(check_rho(self.rho)))

    def min_samples(
        self, gamma: float, n_features: int, *, radius: float | None = None, lambda_min: float | None = None,
        g_method: str = "heuristic",
    ) -> int:
        """Least n whose :meth:`plan` predicts gamma <= ``gamma`` with event E's condition met."""
        r, lam, rho_main = self._planning_values(radius, lambda_min)
        return min_samples(gamma, n_features, rho_main, m=check_m(self.m), alpha=self.alpha, radius=r,
                           lambda_min=lam, sensitivity=self.sensitivity, xi=self.xi, g_method=g_method)
