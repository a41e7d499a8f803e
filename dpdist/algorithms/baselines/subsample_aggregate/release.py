"""Subsample-and-aggregate as a function: validate the sizes, partition the rows into groups, run
the private agreement test and the masked release inside the graph.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dpdist._validation import check_bool
from dpdist.algorithms._base import check_nonfinite, nonfinite_note, refuse_nonfinite
from dpdist.algorithms.second_moment.selection import group_partition
from dpdist.data.validation import as_dask_array, chunk_reading_notes
from dpdist.engine import second_moment as engine
from dpdist.engine.runtime import check_scheduler, compute, open_runtime
from dpdist.exceptions import NoPrivateResult, ValidationError
from dpdist.privacy.events import NonPrivateEvent
from dpdist.privacy.budget import check_delta, check_epsilon
from dpdist.privacy.noise.masking import GRID_BITS
from dpdist.privacy.mechanisms.subsample_aggregate import (
    SubsampleAggregateMechanism,
    subsample_aggregate_mechanism,
)
from dpdist.privacy.noise.streams import NoiseSeed, resolve_random_state
from dpdist.privacy.release import Release, warn_if_unsafe
from dpdist.privacy.mechanisms.second_moment import check_alpha, check_m, check_xi
from dpdist.privacy.mechanisms.subsample_aggregate import (
    BASELINE_CN,
    baseline_guarantee,
    baseline_masking_scale,
    baseline_privacy_min_samples,
    baseline_threshold,
    tlap_support,
)
from dpdist.algorithms.baselines.subsample_aggregate.plan import baseline_utility_min_samples
from dpdist.algorithms.baselines.subsample_aggregate.agreement import (
    _symmetric,
    agreement_weights,
    certified_agreement,
    exact_weighted_average,
)


MECHANISM = "Subsample-and-aggregate second moment (MS25 Appendix A, Algorithm 3)"
NOT_PRIVATE_LABEL = "NOT PRIVATE"
PURPOSE_PARTITION = "second-moment-baseline/partition"


@dataclass(frozen=True)
class _Aggregate:
    """Lines 3-11 of Algorithm 3 on the k group Gram sums, inside the graph (on a worker).

    Returns ``{"q_tilde": Q + TLap, "second_moment": masked estimate or None (bottom)}``;
    the exact q_t, Q and group moments never leave the task.
    """

    seed: NoiseSeed
    mechanism: SubsampleAggregateMechanism
    alpha: float
    group_size: int
    threshold: float

    def __call__(self, grams: np.ndarray) -> dict:
        mats = _symmetric(np.asarray(grams, dtype=np.float64) / self.group_size)
        counts = certified_agreement(mats, self.alpha).sum(axis=1)
        k = len(counts)
        # Q exactly as an integer count divided once by k^2 (the mechanism's sensitivity covers it)
        q_tilde = self.mechanism.test(self.seed)(float(int(counts.sum())) / float(k * k))
        if q_tilde < self.threshold:
            return {"q_tilde": q_tilde, "second_moment": None}
        # weights and Sigma_hat exactly (rationals): the masked output is the mechanism on Sigma_hat itself
        sigma_hat = exact_weighted_average(mats, agreement_weights(counts, k))
        return {"q_tilde": q_tilde, "second_moment": self.mechanism.masked_output(self.seed, sigma_hat)}


# ---------------------------------------------------------------------------------------
# the mechanism
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Sizes:
    """What the data's shape decides, from public values only (checked before any data is read)."""

    n_groups: int
    eta_b: float
    privacy_min_samples: float
    private: bool


def _check_sizes(n: int, d: int, m: int, epsilon: float, delta: float, alpha: float, xi: float,
                 unsafe_no_privacy: bool) -> _Sizes:
    if m < d:
        raise ValidationError(f"m must be >= n_features (groups of m < d rows are singular), got m={m}, d={d}")
    k = n // m
    if k < 1:
        raise ValidationError(f"need n >= m for at least one group, got n={n}, m={m}")
    eta_b = baseline_masking_scale(alpha, d, xi)
    n_private = baseline_privacy_min_samples(m, d, epsilon, delta, eta_b)
    private = n >= n_private
    if not private and not unsafe_no_privacy:
        raise ValidationError(
            f"n={n} is below MS25's sample-size condition for the baseline's privacy "
            f"(n >= {n_private:.4g} at m={m}, d={d}, epsilon={epsilon}, delta={delta}); "
            f"pass unsafe_no_privacy=True for a NOT PRIVATE experimental run"
        )
    return _Sizes(k, eta_b, n_private, private)


def subsample_aggregate_second_moment(
    X,
    epsilon: float,
    delta: float,
    *,
    m: int,
    alpha: float = 0.5,
    xi: float = 0.1,
    unsafe_no_privacy: bool = False,
    random_state: int | None = None,
    scheduler: Any = None,
    on_nonfinite: str = "zero",
) -> Release:
    """Algorithm 3 of MS25: subsample-and-aggregate with a masked output.

    Parameters
    ----------
    X : array-like, dask array, zarr.Array or str
        n rows in R^d.
    epsilon, delta : float
        The per-step parameters of Algorithm 3. The *reported* guarantee is
        (2 epsilon, 4 e^epsilon delta) (Lemma A.4). For equal privacy with a rho-zCDP run use
        :func:`~dpdist.privacy.subsample_calibration.equal_privacy_baseline_budget`.
    m : int
        Group size (the subsamplability size); needs m >= d.
    alpha : float, default 0.5
        Subsamplability accuracy; the agreement radius is 2 alpha / (1 - alpha).
    xi : float, default 0.1
        Failure probability; sets the masking scale eta_b.
    unsafe_no_privacy : bool, default False
        Run even when MS25's n-condition for privacy fails. The result is then labelled
        NOT PRIVATE (``Release.private = False``, ``privacy = None``). Experiments only;
        every fit with it emits one :class:`~dpdist.exceptions.PrivacyWarning`.
    random_state, scheduler, on_nonfinite
        As for :func:`dpdist.algorithms.second_moment.second_moment` (rows holding NaN or inf
        become zero rows by default).

    Returns
    -------
    Release
        ``values["second_moment"]`` and ``parameters["q_tilde"]`` (the noisy agreement).

    Raises
    ------
    ValidationError
        The n-condition fails and ``unsafe_no_privacy`` is False (checked before reading data).
    NoPrivateResult
        The noisy agreement Q_tilde fell below the threshold: Algorithm 3 returned bottom
        (the budget counts as spent; ``exc.release`` has status "rejected").

    Notes
    -----
    **Guarantee.** (2 epsilon, 4 e^epsilon delta)-DP under replace-one neighbours, n public
    (MS25 Lemma A.4: TLap on Q, whose sensitivity is 2/k because one replaced row changes one
    group, composed with Ashtiani-Liaw's Lemma 3.6 for the masked output), **provided**
    n >= 800 m max{sqrt(2d(d + 1/eta_b^2)/eps), 8d sqrt(ln(2/delta))/eps,
    8 ln(2/delta)/eps, 12 sqrt(d ln(2/delta))/(eps eta_b)}, which is checked. Sensitivity
    comes from k = floor(n/m) only; no clipping is needed. Not zCDP, and an (epsilon, delta)
    step cannot be turned into zCDP: a pipeline that mixes it with zCDP steps converts those to
    (epsilon, delta) and states its guarantee there. Caveats: the internal conditions of
    Ashtiani-Liaw Lemma 3.6 were not retrieved; only MS25's explicit n-condition is enforced. The
    condition is enormous (n >~ 5e7 m at d = 4), so experiments use ``unsafe_no_privacy``.
    Float-safe release: Q~ is a lattice value and every entry of the masked output is rounded
    exactly (:mod:`dpdist.privacy.mechanisms.subsample` states what the proof does not cover).

    **Decisions.** Groups: a keyed pseudorandom partition (without replacement, as Algorithm 3
    draws them; :mod:`dpdist.privacy.partition` states its distribution), labelled per row block
    on the workers. Constants: MS25 leaves C_N open; C_N = 2 is valid (a d x d Gaussian matrix
    has norm at most 2 sqrt(d) + t with probability >= 1 - 2 e^(-t^2/2)), and eta_b = alpha /
    (48 C_N (sqrt(d) + sqrt(ln(4/xi)))) uses ln(4/xi) as Lemma A.4 and Theorem A.6 do, not the
    ln(4/beta) of Algorithm 3's line 19. TLap(Delta, eps, delta), which MS25 names without a
    density, is Laplace(Delta/eps) conditioned on |z| <= A = (Delta/eps) ln(1 + (e^eps - 1)/(2
    delta)) (Geng et al. 2020; A is MS25's threshold term). Pairwise distances cost O(k^2 d^3)
    in one task: feasible for k up to a few thousand groups.

    **Floats.** Line 3 counts a pair only when its distance is certified within the radius for
    the computed group matrices (:func:`certified_agreement`; a pair the floats cannot decide
    counts as disagreeing). Lines 7-8 are exact rationals (:func:`agreement_weights`,
    :func:`exact_weighted_average`), and line 11 applies the Cholesky factor of that exact
    Sigma_hat (same law as the symmetric root) to a real Gaussian N, each entry rounded exactly
    to 30 significant bits (:mod:`dpdist.privacy.masking`).
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    m = check_m(m)
    alpha = check_alpha(alpha)
    xi = check_xi(xi)
    unsafe_no_privacy = check_bool(unsafe_no_privacy, "unsafe_no_privacy")
    scheduler = check_scheduler(scheduler)
    check_nonfinite(on_nonfinite)
    guarantee = baseline_guarantee(epsilon, delta)
    seed = resolve_random_state(random_state)
    X = as_dask_array(X)
    n, d = (int(s) for s in X.shape)
    sizes = _check_sizes(n, d, m, epsilon, delta, alpha, xi, unsafe_no_privacy)
    k, eta_b, n_private, private = sizes.n_groups, sizes.eta_b, sizes.privacy_min_samples, sizes.private
    threshold = baseline_threshold(k, epsilon, delta)
    support = tlap_support(2.0 / k, epsilon, delta)
    partition = group_partition(seed, n, m, purpose=PURPOSE_PARTITION)  # labels per row block, on the workers
    mech = subsample_aggregate_mechanism(epsilon, delta, k, support, eta_b=eta_b)
    agg = _Aggregate(seed, mech, alpha, m, threshold)
    with open_runtime(scheduler) as rt:
        if on_nonfinite == "raise":
            refuse_nonfinite(X, rt)
        out = compute(engine.noised(engine.group_grams(X, partition, k), agg), scheduler=rt, progress=False)[0]
    params = {
        "n_samples": n, "n_features": d, "epsilon": epsilon, "delta": delta, "m": m, "alpha": alpha, "xi": xi,
        "n_groups": k, "eta_b": eta_b, "C_N": BASELINE_CN, "threshold": threshold, "q_tilde": out["q_tilde"],
        "privacy_min_samples": n_private, "utility_min_samples": baseline_utility_min_samples(m, epsilon, delta),
        "privacy_precondition_holds": private, "unsafe_no_privacy": bool(unsafe_no_privacy),
        "on_nonfinite": on_nonfinite,
    }
    notes = [
        "privacy: (2 epsilon, 4 e^epsilon delta)-DP (Lemma A.4) when privacy_precondition_holds",
        "keyed pseudorandom partition into groups (sampling without replacement; "
        "data-independent, not exactly uniform: dpdist.privacy.partition)",
        "C_N = 2, masking scale uses ln(4/xi); Ashtiani-Liaw Lemma 3.6 conditions not checked",
        "TLap = Laplace conditioned on |z| <= A (Geng et al. 2020)",
        "float-safe agreement test: q_tilde is a lattice point with an exact bounded rounded Laplace "
        f"(lattice 2**{mech.tlap.lattice.exponent})",
        "float-safe masked output: agreements certified for the exact group matrices, weights and "
        "Sigma_hat exact rationals, N a real Gaussian matrix and every entry rounded exactly to "
        f"{GRID_BITS} significant bits (dpdist.privacy.masking; residuals in dpdist.privacy.mechanisms.subsample)",
        nonfinite_note(on_nonfinite),
        *chunk_reading_notes(X),
    ]
    reasons: tuple = ()
    if not private:
        reasons = (f"{NOT_PRIVATE_LABEL}: n is below MS25's sample-size condition; run with unsafe_no_privacy=True",)
        notes.insert(0, reasons[0])
    unsafe = ("unsafe_no_privacy=True (the n-condition was not enforced)",) if unsafe_no_privacy else ()
    status = "released" if out["second_moment"] is not None else "rejected"
    release = Release(
        mechanism=MECHANISM,
        privacy=guarantee if private else None,
        parameters=params,
        noise_scales={"tlap_scale": 2.0 / (k * epsilon), "tlap_support": support, "masking_eta_b": eta_b},
        events=(("subsample-and-aggregate", mech.event() if private else NonPrivateEvent()),),
        mechanisms=(mech.describe(),),
        values={} if out["second_moment"] is None else {"second_moment": out["second_moment"]},
        seeding=seed.describe(),
        notes=tuple(notes),
        status=status,
        private=private,
        not_private_reasons=reasons,
    )
    warn_if_unsafe(release, extra=unsafe)
    if out["second_moment"] is None:
        raise NoPrivateResult(
            f"subsample-and-aggregate returned bottom: noisy agreement {out['q_tilde']:.4f} < threshold "
            f"{threshold:.4f} (k={k} groups)" + ("" if private else f" [{NOT_PRIVATE_LABEL}]"),
            stage="aggregate",
            release=release,
        )
    return release
