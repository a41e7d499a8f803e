"""Empirical privacy auditing: statistically valid lower bounds on a mechanism's privacy loss.

A differentially private mechanism that is wrong by a factor of two in a noise scale looks
exactly like a correct one: its outputs are noisy either way. An audit runs the mechanism many
times on two neighbouring datasets ``D`` and ``D'``, applies a distinguishing test, and turns
the test's two error rates into a *lower bound* on the privacy parameter that holds with a
stated confidence. If the lower bound exceeds what the mechanism claims, the claim is false
(with probability at least the confidence). A passing audit proves nothing; a failing one is a
proof of a bug (Jagielski, Ullman and Oprea 2020; Nasr et al. 2021; the stochastic tester of
Google's differential-privacy library; ``dp_auditorium``).

Three notions are audited:

``"approx-dp"`` (rigorous, any mechanism)
    (epsilon, delta)-DP means ``P[M(D) in S] <= e^epsilon P[M(D') in S] + delta`` for every
    set S and both orders of (D, D'). With one-sided Clopper-Pearson bounds
    ``p0_lower <= P[M(D) in S]`` and ``P[M(D') in S] <= p1_upper`` (each at level
    ``(1 - confidence) / 2``, so both hold jointly with probability >= confidence),
    ``epsilon >= ln((p0_lower - delta) / p1_upper)``.
``"gdp"`` (Gaussian differential privacy; valid for mechanisms whose trade-off function is
    Gaussian, such as the Gaussian mechanism)
    mu-GDP (Dong, Roth and Su 2019) means every test has ``1 - p0 >= Phi(Phi^-1(1 - p1) - mu)``,
    so ``mu >= Phi^-1(p0_lower) - Phi^-1(p1_upper)``. A Gaussian release of L2 sensitivity
    Delta with noise N(0, sigma^2 I) is exactly ``Delta / sigma``-GDP, and it is
    (epsilon, delta)-DP iff ``Delta / sigma <= mu_max(epsilon, delta)`` (Balle and Wang 2018,
    Theorem 8): :func:`gdp_mu_for_approx_dp` computes ``mu_max``.
``"zcdp"`` (rigorous, any mechanism)
    rho-zCDP means ``D_alpha(M(D) || M(D')) <= alpha rho`` for every alpha > 1 (both orders).
    Post-processing by the test's indicator cannot increase a Renyi divergence, and the
    divergence between two Bernoulli laws grows as they move apart, so
    ``rho >= sup_alpha D_alpha(Bern(p0_lower) || Bern(p1_upper)) / alpha`` (and the same with
    the two swapped). zCDP claims are also converted to (epsilon(delta), delta) with the
    package's CKS20 conversion (:func:`dpdist.privacy.zcdp.cks20_epsilon`) and audited there.

Overfitting the test. The threshold (and the orientation of the test) is chosen on the first
half of the trials and the bound is computed on the second half only, so the reported bound is
a single pre-registered test (``selection="split"``). Alternatively a list of thresholds fixed
a priori is evaluated on all trials with a Bonferroni correction over every (threshold,
orientation) pair (``selection="fixed"``).

This module depends on numpy and scipy only (no pytest); the bounds themselves are in
:mod:`dpdist.testing.bounds`, and the cases that audit dpdist's own mechanisms in
:mod:`dpdist.testing.mechanisms`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Callable, Sequence

import numpy as np

from dpdist.testing.bounds import (
    N_CANDIDATE_THRESHOLDS,
    _check_confidence,
    _cp_lower,
    _cp_upper,
    clopper_pearson,
    epsilon_lower_bound,
    gdp_mu_for_approx_dp,
    mu_lower_bound,
    renyi_bernoulli,
    rho_lower_bound,
)

__all__ = [
    "NOTIONS",
    "AuditResult",
    "audit",
    "audit_samples",
    "clopper_pearson",
    "epsilon_lower_bound",
    "gdp_mu_for_approx_dp",
    "mu_lower_bound",
    "renyi_bernoulli",
    "rho_lower_bound",
]

#: The privacy notions an audit can check (see the module docstring).
NOTIONS = ("approx-dp", "gdp", "zcdp")

# ---------------------------------------------------------------------------------------
# the result
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AuditResult:
    """Everything behind one audit: the test, its counts, the bounds and the verdict.

    Attributes
    ----------
    mechanism : str
        Name of the audited mechanism (or component).
    claim : str
        What the claimed guarantee is the guarantee of (one sentence).
    notion : {"approx-dp", "gdp", "zcdp"}
        The notion whose bound decides ``passed``.
    claimed_epsilon, claimed_delta : float or None
        The (epsilon, delta) claim (for a zCDP claim: CKS20's epsilon(delta) of claimed_rho).
    claimed_mu, claimed_rho : float or None
        The GDP / zCDP claim, when there is one.
    epsilon_lower_bound : float
        ``ln((p0_lower - claimed_delta) / p1_upper)`` (0 when not positive).
    mu_lower_bound, rho_lower_bound : float
        The GDP and zCDP lower bounds of the same test (always computed; ``mu_lower_bound``
        is only a bound for Gaussian trade-off functions).
    passed : bool
        True when no lower bound exceeds its claim: ``epsilon_lower_bound <=
        claimed_epsilon`` (when claimed), and ``mu_lower_bound <= claimed_mu`` for
        ``notion="gdp"``, ``rho_lower_bound <= claimed_rho`` for ``notion="zcdp"``.
    n_trials : int
        Trials run on each of the two datasets.
    n_evaluation : int
        Trials per dataset the bound was computed from (the second half under
        ``selection="split"``, all trials under ``"fixed"``).
    confidence : float
        Joint confidence of the two Clopper-Pearson bounds (after Bonferroni).
    selection : {"split", "fixed"}
    n_tests : int
        Bonferroni factor: the number of (threshold, orientation) tests the reported one
        was the best of on the evaluation trials (1 under ``"split"``).
    threshold : float
        The test rejects when the statistic is ``>`` threshold (``side="above"``) or ``<=``
        it (``side="below"``).
    side : {"above", "below"}
    swapped : bool
        False: ``p0`` is the rate on D (the first dataset), ``p1`` on D'; True: the roles of
        the two datasets are exchanged (DP constrains both orders).
    count0, count1 : int
        Rejections among the ``n_evaluation`` evaluation trials, numerator and denominator
        dataset.
    rate0, rate1 : float
        ``count / n_evaluation``.
    interval0, interval1 : tuple of float
        Clopper-Pearson intervals at the per-test confidence; the bound uses
        ``interval0[0]`` and ``interval1[1]``.
    seed : int or None
        The seed the trials were run with (None for samples given directly).
    notes : str
    """

    mechanism: str
    claim: str
    notion: str
    claimed_epsilon: float | None
    claimed_delta: float | None
    claimed_mu: float | None
    claimed_rho: float | None
    epsilon_lower_bound: float
    mu_lower_bound: float
    rho_lower_bound: float
    passed: bool
    n_trials: int
    n_evaluation: int
    confidence: float
    selection: str
    n_tests: int
    threshold: float
    side: str
    swapped: bool
    count0: int
    count1: int
    rate0: float
    rate1: float
    interval0: tuple
    interval1: tuple
    seed: int | None = None
    notes: str = ""

    @property
    def claimed(self) -> float | None:
        """The claim in the units of :attr:`notion` (epsilon, mu or rho)."""
        return {"approx-dp": self.claimed_epsilon, "gdp": self.claimed_mu, "zcdp": self.claimed_rho}[self.notion]

    @property
    def lower_bound(self) -> float:
        """The lower bound in the units of :attr:`notion`."""
        return {"approx-dp": self.epsilon_lower_bound, "gdp": self.mu_lower_bound, "zcdp": self.rho_lower_bound}[
            self.notion
        ]

    @property
    def ratio(self) -> float:
        """``lower_bound / claimed``: above 1 means the claim is refuted."""
        c = self.claimed
        return math.inf if not c else self.lower_bound / c

    def to_dict(self) -> dict:
        """Plain-JSON dictionary of all fields plus ``claimed``, ``lower_bound`` and ``ratio``."""
        out = asdict(self)
        out["interval0"] = list(self.interval0)
        out["interval1"] = list(self.interval1)
        out["claimed"] = self.claimed
        out["lower_bound"] = self.lower_bound
        out["ratio"] = self.ratio
        return out


# ---------------------------------------------------------------------------------------
# choosing and evaluating tests
# ---------------------------------------------------------------------------------------

# A test is (threshold, side, swapped). Counts come from sorted samples by binary search.


def _rejections(sorted_x: np.ndarray, thresholds: np.ndarray, side: str) -> np.ndarray:
    above = sorted_x.size - np.searchsorted(sorted_x, thresholds, side="right")  # # x > t
    return above if side == "above" else sorted_x.size - above


def _metric(notion: str, p0_lo: np.ndarray, p1_hi: np.ndarray, delta: float) -> np.ndarray:
    if notion == "approx-dp":
        return np.atleast_1d(epsilon_lower_bound(p0_lo, p1_hi, delta))
    if notion == "gdp":
        return np.atleast_1d(mu_lower_bound(p0_lo, p1_hi))
    return np.array([rho_lower_bound(a, b) for a, b in zip(np.atleast_1d(p0_lo), np.atleast_1d(p1_hi))])


def _candidate_thresholds(x: np.ndarray) -> np.ndarray:
    """Midpoints between distinct values when there are few (discrete statistics), else
    quantiles of the pooled sample."""
    u = np.unique(x)
    if u.size <= N_CANDIDATE_THRESHOLDS + 1:
        return (u[:-1] + u[1:]) / 2.0 if u.size > 1 else u
    q = np.linspace(0.0, 1.0, N_CANDIDATE_THRESHOLDS + 2)[1:-1]
    return np.unique(np.quantile(x, q))


def _best_test(x0, x1, thresholds, notion, delta, confidence, n_tests):
    """The (metric, threshold, side, swapped) maximising the bound over all candidates."""
    tail = (1.0 - confidence) / (2.0 * n_tests)
    s0, s1 = np.sort(x0), np.sort(x1)
    best = (-1.0, float(thresholds[0]), "above", False)
    for side in ("above", "below"):
        k0, k1 = _rejections(s0, thresholds, side), _rejections(s1, thresholds, side)
        for swapped in (False, True):
            ka, na, kb, nb = (k1, s1.size, k0, s0.size) if swapped else (k0, s0.size, k1, s1.size)
            m = _metric(notion, _cp_lower(ka, na, tail), _cp_upper(kb, nb, tail), delta)
            i = int(np.argmax(m))
            if m[i] > best[0]:
                best = (float(m[i]), float(thresholds[i]), side, swapped)
    return best


def audit_samples(
    samples0: np.ndarray,
    samples1: np.ndarray,
    *,
    claimed_epsilon: float | None = None,
    claimed_delta: float = 0.0,
    claimed_mu: float | None = None,
    claimed_rho: float | None = None,
    notion: str | None = None,
    confidence: float = 0.95,
    selection: str = "split",
    thresholds: Sequence[float] | None = None,
    mechanism: str = "mechanism",
    claim: str = "",
    seed: int | None = None,
    notes: str = "",
) -> AuditResult:
    """Lower-bound the privacy loss from test statistics observed on two neighbouring datasets.

    Parameters
    ----------
    samples0, samples1 : array of shape (n_trials,)
        A scalar statistic of independent runs of the mechanism on D and on D' (booleans for
        a rejection set). Same length.
    claimed_epsilon, claimed_delta : float, optional
        The (epsilon, delta) claim. ``claimed_delta`` also enters the epsilon bound.
    claimed_mu : float, optional
        A GDP claim (``notion="gdp"``).
    claimed_rho : float, optional
        A zCDP claim (``notion="zcdp"``).
    notion : {"approx-dp", "gdp", "zcdp"}, optional
        Which bound decides ``passed`` and chooses the test; default: "zcdp" when
        ``claimed_rho`` is given, else "gdp" when ``claimed_mu`` is given, else "approx-dp".
    confidence : float, default 0.95
        Joint confidence of the reported bound.
    selection : {"split", "fixed"}, default "split"
        "split": choose the threshold and orientation on the first half of the trials (by
        the bound of ``notion``), compute the bound on the second half. "fixed": evaluate
        every threshold of ``thresholds`` (required) in both sides and both orders on all
        trials, with a Bonferroni correction over the ``4 * len(thresholds)`` tests.
    thresholds : sequence of float, optional
        Candidate thresholds (default for "split": midpoints of the distinct values, or
        199 quantiles of the pooled selection half).
    mechanism, claim, seed, notes
        Recorded in the result.

    Returns
    -------
    AuditResult

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> x0, x1 = rng.laplace(1.0, 1.0, 20000), rng.laplace(0.0, 1.0, 20000)
    >>> r = audit_samples(x0, x1, claimed_epsilon=1.0)
    >>> r.passed, 0.5 < r.epsilon_lower_bound <= 1.0
    (True, True)
    """
    confidence = _check_confidence(confidence)
    x0 = np.asarray(samples0, dtype=np.float64).ravel()
    x1 = np.asarray(samples1, dtype=np.float64).ravel()
    if x0.size != x1.size or x0.size < 2:
        raise ValueError(f"need two samples of the same length >= 2, got {x0.size} and {x1.size}")
    if not (np.all(np.isfinite(x0)) and np.all(np.isfinite(x1))):
        raise ValueError("statistics must be finite")
    if notion is None:
        notion = "zcdp" if claimed_rho is not None else "gdp" if claimed_mu is not None else "approx-dp"
    if notion not in NOTIONS:
        raise ValueError(f"notion must be one of {NOTIONS}, got {notion!r}")
    claims = {"approx-dp": claimed_epsilon, "gdp": claimed_mu, "zcdp": claimed_rho}
    if claims[notion] is None:
        raise ValueError(f"notion {notion!r} needs its claim (claimed_epsilon / claimed_mu / claimed_rho)")
    delta = float(claimed_delta or 0.0)
    if not 0.0 <= delta < 1.0:
        raise ValueError(f"claimed_delta must lie in [0, 1), got {claimed_delta!r}")
    n = x0.size
    if selection == "split":
        half = n // 2
        sel0, sel1, ev0, ev1 = x0[:half], x1[:half], x0[half:], x1[half:]
        cand = (
            np.asarray(thresholds, dtype=np.float64)
            if thresholds is not None
            else _candidate_thresholds(np.concatenate([sel0, sel1]))
        )
        _, t, side, swapped = _best_test(sel0, sel1, cand, notion, delta, confidence, 1)
        n_tests = 1
    elif selection == "fixed":
        if thresholds is None or len(thresholds) == 0:
            raise ValueError('selection="fixed" needs thresholds fixed a priori')
        cand = np.asarray(thresholds, dtype=np.float64)
        ev0, ev1 = x0, x1
        n_tests = 4 * cand.size
        _, t, side, swapped = _best_test(ev0, ev1, cand, notion, delta, confidence, n_tests)
    else:
        raise ValueError(f'selection must be "split" or "fixed", got {selection!r}')
    per_test = 1.0 - (1.0 - confidence) / n_tests
    a, b = (ev1, ev0) if swapped else (ev0, ev1)
    ka = int(np.sum(a > t) if side == "above" else np.sum(a <= t))
    kb = int(np.sum(b > t) if side == "above" else np.sum(b <= t))
    ne = a.size
    ci0 = clopper_pearson(ka, ne, per_test)
    ci1 = clopper_pearson(kb, ne, per_test)
    eps_lb = epsilon_lower_bound(ci0[0], ci1[1], delta)
    mu_lb = mu_lower_bound(ci0[0], ci1[1])
    rho_lb = rho_lower_bound(ci0[0], ci1[1])
    ok = True
    if claimed_epsilon is not None:
        ok &= eps_lb <= claimed_epsilon
    if notion == "gdp":
        ok &= mu_lb <= claimed_mu
    if notion == "zcdp":
        ok &= rho_lb <= claimed_rho
    return AuditResult(
        mechanism=mechanism,
        claim=claim,
        notion=notion,
        claimed_epsilon=None if claimed_epsilon is None else float(claimed_epsilon),
        claimed_delta=delta,
        claimed_mu=None if claimed_mu is None else float(claimed_mu),
        claimed_rho=None if claimed_rho is None else float(claimed_rho),
        epsilon_lower_bound=float(eps_lb),
        mu_lower_bound=float(mu_lb),
        rho_lower_bound=float(rho_lb),
        passed=bool(ok),
        n_trials=int(n),
        n_evaluation=int(ne),
        confidence=confidence,
        selection=selection,
        n_tests=int(n_tests),
        threshold=float(t),
        side=side,
        swapped=bool(swapped),
        count0=ka,
        count1=kb,
        rate0=ka / ne,
        rate1=kb / ne,
        interval0=tuple(ci0),
        interval1=tuple(ci1),
        seed=seed,
        notes=notes,
    )


def audit(
    mechanism: Callable[[Any, int, int], Any],
    neighbours: tuple[Any, Any],
    statistic: Callable[[Any], np.ndarray] | None = None,
    *,
    n_trials: int,
    confidence: float = 0.95,
    claimed_epsilon: float | None = None,
    claimed_delta: float = 0.0,
    claimed_mu: float | None = None,
    claimed_rho: float | None = None,
    notion: str | None = None,
    selection: str = "split",
    thresholds: Sequence[float] | None = None,
    seed: int = 0,
    name: str = "mechanism",
    claim: str = "",
    notes: str = "",
) -> AuditResult:
    """Run a mechanism ``n_trials`` times on each of two neighbouring datasets and audit it.

    Parameters
    ----------
    mechanism : callable ``(dataset, n_trials, seed) -> outputs``
        Runs the mechanism ``n_trials`` times on ``dataset`` with independent noise derived
        from ``seed`` (the two datasets receive different seeds), returning the outputs in
        any batched form that ``statistic`` understands.
    neighbours : (D, D')
        Two neighbouring datasets (for dpdist: same n, one row replaced).
    statistic : callable ``outputs -> array (n_trials,)``, optional
        The test statistic (a float per run; larger values should point to D) or a rejection
        set (a boolean per run: is the output in S?). Default: the outputs themselves.
    n_trials : int
        Runs per dataset (>= 4). Under ``selection="split"`` half of them choose the test.
    confidence, claimed_epsilon, claimed_delta, claimed_mu, claimed_rho, notion, selection, thresholds
        See :func:`audit_samples`.
    seed : int
        Seeds of the two runs: ``2 * seed`` for D and ``2 * seed + 1`` for D'.
    name, claim, notes
        Recorded in the result.

    Returns
    -------
    AuditResult

    Notes
    -----
    The bound is valid when the runs are independent and identically distributed on each
    dataset (independent noise per run) and the statistic is a function of the output alone.
    Choose the most powerful statistic for the mechanism: for a Laplace or Gaussian release,
    the likelihood ratio (the released value of the affected coordinate, or the sum of the
    affected coordinates); for a selection, the indicator that the targeted item is chosen.

    Examples
    --------
    >>> import numpy as np
    >>> def laplace(x, n, seed):
    ...     return x + np.random.default_rng(seed).laplace(0.0, 1.0, n)
    >>> r = audit(laplace, (1.0, 0.0), n_trials=20000, claimed_epsilon=1.0)
    >>> r.passed
    True
    """
    n_trials = int(n_trials)
    if n_trials < 4:
        raise ValueError(f"n_trials must be >= 4, got {n_trials}")
    d0, d1 = neighbours
    out0 = mechanism(d0, n_trials, 2 * int(seed))
    out1 = mechanism(d1, n_trials, 2 * int(seed) + 1)
    s0 = np.asarray(out0 if statistic is None else statistic(out0))
    s1 = np.asarray(out1 if statistic is None else statistic(out1))
    if s0.shape != (n_trials,) or s1.shape != (n_trials,):
        raise ValueError(f"the statistic must return shape ({n_trials},), got {s0.shape} and {s1.shape}")
    return audit_samples(
        s0.astype(np.float64),
        s1.astype(np.float64),
        claimed_epsilon=claimed_epsilon,
        claimed_delta=claimed_delta,
        claimed_mu=claimed_mu,
        claimed_rho=claimed_rho,
        notion=notion,
        confidence=confidence,
        selection=selection,
        thresholds=thresholds,
        mechanism=name,
        claim=claim,
        seed=int(seed),
        notes=notes,
    )
