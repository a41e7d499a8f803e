"""Subsample-and-aggregate's release: from the validated parameters, partition the rows into
groups, run the private agreement test and the masked release inside the graph.

:func:`group_sizes` and :func:`refuse_unless_private` hold the rules between the parameters and
the data's shape (the estimator's ``_validate_together`` and fit call them once);
:func:`run_subsample_aggregate` makes the release and checks nothing again.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpdist.algorithms._base import nonfinite_note, refuse_nonfinite
from dpdist.algorithms.second_moment.selection import group_partition
from dpdist.data.validation import chunk_reading_notes
from dpdist.engine import second_moment as engine
from dpdist.engine.runtime import compute, open_runtime
from dpdist.exceptions import NoPrivateResult, ValidationError
from dpdist.privacy.events import NonPrivateEvent
from dpdist.privacy.noise.masking import GRID_BITS
from dpdist.privacy.mechanisms.subsample_aggregate import SubsampleAggregateMechanism, subsample_aggregate_mechanism
from dpdist.privacy.noise.streams import NoiseSeed, resolve_random_state
from dpdist.privacy.release import Release, warn_if_unsafe
from dpdist.privacy.mechanisms.subsample_aggregate import (
    BASELINE_CN,
    baseline_masking_scale,
    baseline_privacy_min_samples,
    baseline_threshold,
    tlap_support,
)
from dpdist.algorithms.baselines.subsample_aggregate.plan import utility_min_samples
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


def group_sizes(n: int, d: int, m: int, epsilon: float, delta: float, alpha: float, xi: float) -> _Sizes:
    """The groups, the masking scale and MS25's privacy condition at this size, from checked
    values (``m >= d`` and at least one group are required)."""
    if m < d:
        raise ValidationError(f"m must be >= n_features (groups of m < d rows are singular), got m={m}, d={d}")
    k = n // m
    if k < 1:
        raise ValidationError(f"need n >= m for at least one group, got n={n}, m={m}")
    eta_b = baseline_masking_scale(alpha, d, xi)
    n_private = baseline_privacy_min_samples(m, d, epsilon, delta, eta_b)
    return _Sizes(k, eta_b, n_private, n >= n_private)


def refuse_unless_private(p) -> None:
    """A fit refuses, before any data is read, a size below MS25's privacy condition unless
    ``unsafe_no_privacy`` (``p``: the validated parameters, with their ``sizes``)."""
    if not p.sizes.private and not p.unsafe_no_privacy:
        raise ValidationError(
            f"n={p.n_samples} is below MS25's sample-size condition for the baseline's privacy "
            f"(n >= {p.sizes.privacy_min_samples:.4g} at m={p.m}, d={p.n_features}, epsilon={p.epsilon}, "
            f"delta={p.delta}); pass unsafe_no_privacy=True for a NOT PRIVATE experimental run"
        )


def run_subsample_aggregate(X, p) -> Release:
    """Algorithm 3 of MS25 from the opened input ``X`` and the validated parameters ``p`` of
    :class:`~dpdist.algorithms.baselines.subsample_aggregate.estimator.SubsampleAggregateSecondMoment`
    (with the ``guarantee`` and the ``sizes`` its ``_validate_together`` derived); refuses a
    size below MS25's privacy condition unless ``unsafe_no_privacy`` (:func:`refuse_unless_private`)
    and checks nothing else again."""
    refuse_unless_private(p)
    epsilon, delta, m, alpha, xi, on_nonfinite = p.epsilon, p.delta, p.m, p.alpha, p.xi, p.on_nonfinite
    unsafe_no_privacy, guarantee, sizes = p.unsafe_no_privacy, p.guarantee, p.sizes
    seed = resolve_random_state(p.random_state)
    n, d = (int(s) for s in X.shape)
    k, eta_b, n_private, private = sizes.n_groups, sizes.eta_b, sizes.privacy_min_samples, sizes.private
    threshold = baseline_threshold(k, epsilon, delta)
    support = tlap_support(2.0 / k, epsilon, delta)
    partition = group_partition(seed, n, m, purpose=PURPOSE_PARTITION)  # labels per row block, on the workers
    mech = subsample_aggregate_mechanism(epsilon, delta, k, support, eta_b=eta_b)
    agg = _Aggregate(seed, mech, alpha, m, threshold)
    with open_runtime(p.scheduler) as rt:
        if on_nonfinite == "raise":
            refuse_nonfinite(X, rt)
        out = compute(engine.noised(engine.group_grams(X, partition, k), agg), scheduler=rt, progress=False)[0]
    params = {
        "n_samples": n, "n_features": d, "epsilon": epsilon, "delta": delta, "m": m, "alpha": alpha, "xi": xi,
        "n_groups": k, "eta_b": eta_b, "C_N": BASELINE_CN, "threshold": threshold, "q_tilde": out["q_tilde"],
        "privacy_min_samples": n_private, "utility_min_samples": utility_min_samples(m, epsilon, delta),
        "privacy_precondition_holds": private, "unsafe_no_privacy": bool(unsafe_no_privacy),
        "on_nonfinite": on_nonfinite,
    }
    notes = [
        "privacy: (2 epsilon, 4 e^epsilon delta)-DP (Lemma A.4) when privacy_precondition_holds",
        "keyed pseudorandom partition into groups (sampling without replacement; "
        "data-independent, not exactly uniform: dpdist.privacy.noise.partition)",
        "C_N = 2, masking scale uses ln(4/xi); Ashtiani-Liaw Lemma 3.6 conditions not checked",
        "TLap = Laplace conditioned on |z| <= A (Geng et al. 2020)",
        "float-safe agreement test: q_tilde is a lattice point with an exact bounded rounded Laplace "
        f"(lattice 2**{mech.tlap.lattice.exponent})",
        "float-safe masked output: agreements certified for the exact group matrices, weights and "
        "Sigma_hat exact rationals, N a real Gaussian matrix and every entry rounded exactly to "
        f"{GRID_BITS} significant bits (dpdist.privacy.noise.masking; residuals in dpdist.privacy.mechanisms.subsample_aggregate)",
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
