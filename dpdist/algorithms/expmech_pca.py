"""ExpMechPCA (COLT 2026, Algorithm 4, Appendix F): exhaustive exponential-mechanism sparse PCA.

:func:`expmech_pca` does the math and returns a :class:`~dpdist.privacy.release.Release`;
:class:`ExpMechSparsePCA` is the scikit-learn-style wrapper.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dpdist._validation import check_int, check_positive, check_probability
from dpdist.algorithms._base import Estimator, Projection, check_nonfinite, nonfinite_note, reports_empirical
from dpdist.data.validation import as_dask_array, chunk_reading_notes
from dpdist.engine.gram import clipped_second_moment, nonfinite_guard
from dpdist.engine.gumbel_max import exact_gumbel_max_subset
from dpdist.engine.runtime import DEFAULT_TIMEOUT, check_scheduler, check_timeout, compute
from dpdist.engine.subsets import DEFAULT_CHUNK_SIZE, block_release
from dpdist.exceptions import ValidationError
from dpdist.algorithms._centering import (
    DEFAULT_MEAN_FRACTION,
    centre_data,
    centring_error,
    check_centering,
    mean_mechanism,
    mean_notes,
    stage_guarantee,
)
from dpdist.privacy.accounting import gaussian_epsilon
from dpdist.privacy.budget import ApproxDP, check_delta, check_epsilon
from dpdist.privacy.expmech_calibration import (
    ExpMechCalibration,
    expmech_calibration,
    expmech_clip,
    expmech_error_bound,
    expmech_min_samples,
)
from dpdist.privacy.mechanisms.base import residual_note
from dpdist.privacy.mechanisms.expmech import BLOCK_PURPOSE, SELECT_PURPOSE, ExpMechMechanism
from dpdist.privacy.noise import resolve_random_state
from dpdist.privacy.plan import Plan
from dpdist.privacy.release import Release, warn_if_unsafe

__all__ = ["BLOCK_PURPOSE", "DEFAULT_MAX_SUBSETS", "ExpMechPlan", "ExpMechSparsePCA", "SELECT_PURPOSE", "expmech_pca",
           "leading_eigenvector"]

#: Default refusal limit on C(d, k): about a minute per core at k = 3 (15 M subsets/s/core
#: measured on the project's 2-core machine; benchmarks/bench_expmech.py).
DEFAULT_MAX_SUBSETS = 10**9
#: Default failure probability beta of Theorem 7 (clip level and plan()).
DEFAULT_BETA = 0.1

MECHANISM = "ExpMechPCA (COLT 2026, Algorithm 4)"


def leading_eigenvector(A, n_features: int | None = None) -> tuple[np.ndarray, float]:
    """Unit top eigenvector (largest algebraic eigenvalue) of a symmetric matrix, and its eigenvalue.

    Dense ``numpy.linalg.eigh`` up to 2,000 columns or for dense input, ``scipy.sparse.linalg.eigsh``
    for larger sparse input. Sign convention: the entry of largest magnitude is positive.
    """
    import scipy.sparse as sp

    if sp.issparse(A) and A.shape[0] > 2000:
        from scipy.sparse.linalg import eigsh

        A = sp.csr_array(A, dtype=np.float64)
        A = (A + A.T) * 0.5
        vals, vecs = eigsh(A, k=1, which="LA", v0=np.ones(A.shape[0]))
        lam, v = float(vals[0]), vecs[:, 0]
    else:
        A = A.toarray() if sp.issparse(A) else np.asarray(A, dtype=np.float64)
        A = 0.5 * (A + A.T)
        vals, vecs = np.linalg.eigh(A)
        lam, v = float(vals[-1]), vecs[:, -1]
    v = v / np.linalg.norm(v)
    i = int(np.argmax(np.abs(v)))
    if v[i] < 0:
        v = -v
    return v, lam


def _resolve_clip(sigma, clip, n: int, d: int, beta: float) -> tuple[float, str]:
    if clip is not None:
        return check_positive(clip, "clip"), "clip (user)"
    if sigma is None:
        raise ValidationError(
            "ExpMechSparsePCA needs a public bound: give sigma (sub-Gaussian scale; tau = 2 sigma "
            "sqrt(log(4 n d / beta)), Theorem 7) or clip (the entry truncation level tau)"
        )
    return expmech_clip(sigma, n, d, beta), "2 sigma sqrt(log(4 n d / beta)) (Theorem 7)"


def _check_params(k, epsilon, delta, sigma, clip, max_subsets, beta) -> None:
    check_int(k, "k")
    check_epsilon(epsilon)
    check_delta(delta)
    check_positive(sigma, "sigma", allow_none=True)
    check_positive(clip, "clip", allow_none=True)
    check_int(max_subsets, "max_subsets")
    check_probability(beta, "beta")


def _check_range(cal: ExpMechCalibration, max_subsets: int) -> None:
    if cal.n_subsets >= 1 << 62:
        raise ValidationError(
            f"C({cal.n_features}, {cal.k}) = {cal.n_subsets:.3e} supports exceed the 2**62 noise "
            "positions of one stream; ExpMechPCA cannot run at this size"
        )
    if cal.n_subsets > max_subsets:
        raise ValidationError(
            f"ExpMechPCA enumerates all C(d, k) = C({cal.n_features}, {cal.k}) = {cal.n_subsets:,} "
            f"supports, more than max_subsets = {max_subsets:,}; raise max_subsets if you mean it "
            "(there is no inexact fallback), or use SparsePCA (PrivPCA)"
        )


def _composition(cal: ExpMechCalibration) -> str:
    """How a private mean composes with the selection and the block (:func:`~dpdist.privacy.
    expmech_calibration.expmech_split`): ``"mixed"`` (the selection by basic composition, the
    mean and the block one Gaussian mechanism in GDP) or ``"zcdp"``; ``"basic"`` when the
    calibration did not include the mean (a budget too small for it, :func:`_calibrate`)."""
    if cal.mean_noise_multiplier is None:  # no mean, or the (epsilon, delta) split of a tiny budget
        return "basic"
    return "zcdp" if cal.composition == "zcdp" else "mixed"


def _calibrate(centering, epsilon, delta, n: int, d: int, k: int, tau: float, beta) -> tuple:
    """``(calibration, mean mechanism or None, the mean's share or None, the selection and
    block's share)``: one calibration of the whole budget, the private mean's Gaussian included
    (``mean_fraction``); the mean's share is its stand-alone (epsilon, delta)."""
    budget = ApproxDP(epsilon, delta)
    f = centering.mean_fraction if centering.private else 0.0
    cal = expmech_calibration(epsilon, delta, n, d, int(k), tau, beta=float(beta), mean_fraction=f)
    if not centering.private:
        return cal, None, None, budget
    # the mean's stand-alone guarantee at the full delta gives back its multiplier (analytic Gaussian)
    alone = gaussian_epsilon(1.0 / cal.mean_noise_multiplier, cal.delta)
    if not alone > 0.0:  # a mean (0, delta)-DP alone (epsilon of the order of delta): split (epsilon, delta)
        mean_share, share = centering.split(epsilon, delta, "basic")
        cal = expmech_calibration(share.epsilon, share.delta, n, d, int(k), tau, beta=float(beta))
        return cal, mean_mechanism(centering, mean_share, n, d, tau), mean_share, share
    mean_share = ApproxDP(alone, cal.delta)
    return cal, mean_mechanism(centering, mean_share, n, d, tau), mean_share, budget


def expmech_pca(
    X: Any,
    k: int,
    epsilon: float,
    delta: float,
    *,
    sigma: float | None = None,
    clip: float | None = None,
    max_subsets: int = DEFAULT_MAX_SUBSETS,
    beta: float = DEFAULT_BETA,
    random_state: Any = None,
    scheduler: Any = None,
    on_nonfinite: str = "zero",
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    timeout: float | None = DEFAULT_TIMEOUT,
    assume_centered: bool = False,
    mean: Any = None,
    mean_fraction: float = DEFAULT_MEAN_FRACTION,
    mean_clip: float | None = None,
) -> Release:
    """Private k-sparse leading eigenvector by the exhaustive exponential mechanism.

    Parameters
    ----------
    X : array-like, dask array, zarr.Array or str
        ``(n, d)`` data, rows are individuals. The scores and the block are those of the
        covariance around a private or public mean, or with ``assume_centered=True`` of the
        second moment.
    k : int
        Support size of the released vector.
    epsilon, delta : float
        Total budget; ``epsilon/2`` selects the support, ``(epsilon/2, delta)`` releases the
        block (Lemma 29).
    sigma : float, optional
        Public sub-Gaussian scale; sets ``tau = 2 sigma sqrt(log(4 n d / beta))`` when
        ``clip`` is not given.
    clip : float, optional
        Public entry truncation level tau (overrides ``sigma`` for the clip).
    max_subsets : int
        Refuse (``ValidationError``) when ``C(d, k)`` exceeds it, before reading data.
    beta : float
        Failure probability used for tau (and by ``plan``).
    random_state : None or int
        ``None``: OS entropy (the only mode for real releases); int: seeded, for tests.
    scheduler : optional
        See :func:`dpdist.engine.runtime.compute`.
    on_nonfinite : {"zero", "raise"}, default "zero"
        "zero": rows holding NaN or inf become zero rows before any statistic (uncounted).
        "raise": explicit validation mode, refuse before releasing (reveals one bit, recorded
        in the release's notes).
    chunk_size : int
        Subsets per task of the enumeration (does not change the output).
    timeout : float or None, default one day
        Seconds for the fit; see :mod:`dpdist.engine.runtime`.
    assume_centered, mean, mean_fraction, mean_clip
        Centring, as :func:`~dpdist.algorithms.sparse_covariance.private_sparse_covariance`:
        by default a mean released with ``mean_fraction`` of the Gaussian part of the budget
        (rows scaled to L2 norm ``mean_clip``, default ``tau sqrt(d)``): with the selection
        by basic composition, the mean and the block form one Gaussian mechanism (GDP) and
        the mean takes ``mean_fraction`` of its ``mu^2``; in zCDP it takes ``mean_fraction``
        of rho (:func:`~dpdist.privacy.expmech_calibration.expmech_split`).

    Returns
    -------
    Release
        ``values``: ``components`` (1, d) unit vector supported on ``support``, ``support``
        (k,), ``noisy_block`` (the released ``Sigma_hat_S + G_S``, not symmetrised), and
        ``block_eigenvalue`` (top eigenvalue of the symmetrised noisy block).

    Notes
    -----
    Guarantee: ``(epsilon, delta)``-DP under replace-one neighbours (rows), for every input,
    by Lemma 29 of the COLT 2026 paper. Entries are truncated to ``[-tau, tau]`` with a
    public tau; the score ``lambda_1(Sigma_hat_S)`` of each support S has global sensitivity
    ``2 k tau^2 / n`` and the ``k x k`` block the same Frobenius sensitivity. The support is
    drawn by the exponential mechanism at ``epsilon_sel`` (Lemma 28; the paper's
    ``epsilon/2``), sampled exactly by Gumbel-max: ``argmax_S epsilon_sel n q(S) / (4 k tau^2)
    + Gumbel_S`` over all ``C(d, k)`` supports; the block is released with i.i.d. ``N(0,
    sigma^2)`` noise, sigma the exact requirement of its share (below the printed line 11's);
    ``epsilon_sel`` and the composition of the two (basic, or zCDP with the selection's
    bounded range) minimise the error bound
    (:func:`~dpdist.privacy.expmech_calibration.expmech_split`); symmetrising and the
    eigenvector are post-processing.

    Cost: ``C(d, k)`` score evaluations, and every enumeration task holds the dense
    ``d x d`` clipped second moment (``8 d^2`` bytes; ``plan()`` reports it).

    Float-safe: the selection is the exact exponential mechanism on lattice scores
    (exact Gumbel-max, certified comparisons; every support has positive probability under
    every dataset) and the block is released on a lattice with an exactly sampled rounded
    Gaussian; the argument and its residuals are written once in
    :mod:`dpdist.privacy.mechanisms.expmech`. Only the winning support and the noisy block
    leave the workers; the noisy maximum and the
    scores do not. ``on_nonfinite="raise"`` refuses data with NaN/inf: the check runs in the
    same pass and the release task outputs nothing when it fails (the refusal itself reveals
    one bit). Floating point: the Gumbel weight and the block noise use the sensitivities of
    the computed scores and block
    (:func:`~dpdist.privacy.expmech_calibration.expmech_calibration`).

    Centring: the private mean (:mod:`dpdist.privacy.mechanisms.mean`) is released first;
    ``x -> x - mu_hat`` is then a fixed per-row map before the truncation to tau, so the
    sensitivities above are unchanged (the mean is public by then); tau must cover the
    entries of ``x - mu_hat``. The mean joins the Gaussian part of the budget: with the
    selection by basic composition, the mean and the block are one Gaussian mechanism in GDP;
    in zCDP the mean takes ``mean_fraction`` of rho (:func:`_calibrate`). The accountant
    re-derives (epsilon, delta) from the three events together.
    """
    _check_params(k, epsilon, delta, sigma, clip, max_subsets, beta)
    check_nonfinite(on_nonfinite)
    check_int(chunk_size, "chunk_size")
    check_scheduler(scheduler)
    timeout = check_timeout(timeout)
    check_centering(assume_centered, mean, mean_fraction, mean_clip)
    Xd = as_dask_array(X, min_rows=1, min_cols=1)
    n, d = (int(s) for s in Xd.shape)
    k = int(k)
    if k > d:
        raise ValidationError(f"k must satisfy 1 <= k <= d = {d}, got k={k}")
    tau, clip_source = _resolve_clip(sigma, clip, n, d, beta)
    centering = check_centering(assume_centered, mean, mean_fraction, mean_clip, n_features=d)
    cal, mean_mech, mean_share, share = _calibrate(centering, epsilon, delta, n, d, k, tau, beta)
    _check_range(cal, int(max_subsets))
    seed = resolve_random_state(random_state)

    mech = ExpMechMechanism.from_calibration(cal)
    privacy = stage_guarantee(ApproxDP(epsilon, delta), [mech.event()], share, mean_mech, mean_share,
                              _composition(cal))

    Xg, all_finite = nonfinite_guard(Xd, on_nonfinite)
    Xc, mu = centre_data(Xg, all_finite, centering, mean_mech, seed, scheduler=scheduler, timeout=timeout)
    M = clipped_second_moment(Xc, tau)
    release_fn = mech.release(seed)
    rank = exact_gumbel_max_subset(M, k, mech.selection(seed), chunk_size=chunk_size)
    # as a Delayed on the unoptimised graph the finiteness check shares the data's keys with
    # the second moment (each chunk is read once); the release task checks it on the worker
    guard = None if all_finite is None else all_finite.to_delayed(optimize_graph=False).ravel()[0]
    subset_d, block_d = block_release(M, rank, k, release_fn, guard=guard)
    subset, noisy_block = compute(subset_d, block_d, scheduler=scheduler, timeout=timeout)
    if all_finite is not None and noisy_block is None:
        raise ValidationError(
            "X contains NaN or infinite values; nothing was released (pass on_nonfinite='zero' "
            "to replace such rows by zero rows)"
        )
    subset = np.asarray(subset, dtype=np.int64)
    if subset.shape != (k,) or noisy_block is None:
        raise ValidationError("no support was selected: the scores were not finite; nothing was released")
    noisy_block = np.asarray(noisy_block, dtype=np.float64)
    u, lam = leading_eigenvector(noisy_block)
    components = np.zeros((1, d))
    components[0, subset] = u
    parameters = {
        "n_samples": n,
        "n_features": d,
        "k": k,
        "clip": tau,
        "clip_source": clip_source,
        "sigma": None if sigma is None else float(sigma),
        "beta": float(beta),
        "max_subsets": int(max_subsets),
        "on_nonfinite": on_nonfinite,
        "budget_split": {
            "composition": cal.composition,
            "selection": {"epsilon": cal.selection_epsilon, "delta": 0.0},
            "block": {"epsilon": cal.release_epsilon, "delta": cal.release_delta},
        },
        "calibration": cal.to_dict(),
        "centering": centering.record(mean_mech, _composition(cal) if mean_mech is not None else None),
    }
    notes = (
        "support drawn by the exact exponential mechanism over all C(d, k) supports (Lemma 28 at the selection's "
        "epsilon): weighted scores on the lattice 2**-30, exact Gumbel-max with certified comparisons (the lattice "
        "and the product's rounding paid inside that epsilon); Gumbel noise of subset rank r is a function of "
        "(seed, r) only",
        residual_note(k * k, mech.block_noise),
        f"block noise scale: {cal.gaussian_rule}",
        "components are post-processing of the noisy block (symmetrised, top eigenvector)",
        nonfinite_note(on_nonfinite),
        *chunk_reading_notes(Xd),
    )
    events, mechanisms = [("ExpMechPCA selection and block", mech.event())], [mech.describe()]
    noise_scales = {"selection_gumbel_scale": mech.gumbel_scale, "block_gaussian_sigma": cal.gaussian_sigma}
    values = {"components": components, "support": subset, "noisy_block": noisy_block, "block_eigenvalue": lam}
    if mu is not None:
        values["mean"] = mu
    if mean_mech is not None:
        events.insert(0, ("mean", mean_mech.event()))  # in the order they ran
        mechanisms.append(mean_mech.describe())
        noise_scales["mean_gaussian"] = mean_mech.noise_scales()["gaussian"]
        notes = (*notes, *mean_notes(mean_mech))
    return warn_if_unsafe(Release(
        mechanism=MECHANISM,
        privacy=privacy,
        parameters=parameters,
        noise_scales=noise_scales,
        values=values,
        seeding=seed.describe(),
        notes=notes,
        events=tuple(events),
        mechanisms=tuple(mechanisms),
    ))


@dataclass(frozen=True, kw_only=True)
class ExpMechPlan(Plan):
    """:meth:`ExpMechSparsePCA.plan`: a :class:`~dpdist.privacy.plan.Plan` whose
    ``noise_scale`` is the block's Gaussian sigma (sigma_priv) and whose ``error_bound`` is
    Theorem 7's: with ``eigengap``, the ``sin^2`` bound (scale 1, as ``sin^2 <= 1``); without,
    the Rayleigh deficit ``lambda_1 - v_hat^T Sigma v_hat`` (scale ``sigma**2``, which bounds
    lambda_1 for sigma-sub-Gaussian rows). With ``clip`` only, both use ``sigma = clip``
    (entries clipped to [-clip, clip] are clip-sub-Gaussian). An infeasible enumeration
    (``C(d, k) > max_subsets``) is an unmet condition. With a private mean the calibration
    gives the block ``1 - mean_fraction`` of the Gaussian part (``privacy`` is the whole budget) and ``error`` adds
    ``eta_center`` (k times :func:`~dpdist.algorithms._centering.centring_error`, at beta) to
    the deficit like the sampling term; the bound then holds with probability >= 1 - 2 beta.
    """

    mechanism: str
    k: int
    n_subsets: int
    max_subsets: int
    feasible: bool
    dense_second_moment_bytes: int
    clip: float
    noise_scales: dict
    calibration: ExpMechCalibration
    error: dict
    centering: str = "assume-centered"
    mean_noise_scale: float | None = None


class ExpMechSparsePCA(Projection, Estimator):
    """Private leading k-sparse principal component by the exponential mechanism (Algorithm 4).

    Parameters
    ----------
    k : int
        Support size.
    epsilon, delta : float
        Privacy budget (replace-one neighbours).
    sigma : float, optional
        Public sub-Gaussian scale (sets the clip level, and is needed by :meth:`plan`).
    clip : float, optional
        Public entry truncation level tau.
    max_subsets : int
        Refusal limit on ``C(d, k)`` (default :data:`DEFAULT_MAX_SUBSETS`).
    beta : float
        Failure probability for the clip level and :meth:`plan`.
    random_state : None or int
        ``None`` for OS entropy; an int seeds the noise (tests and reproduction only).
    scheduler : optional
        Where the graph runs (:func:`dpdist.engine.runtime.compute`).
    on_nonfinite : {"zero", "raise"}, default "zero"
        See :func:`expmech_pca`.
    chunk_size : int
        Subsets per task.
    timeout : float or None, default 86400 (one day)
        Seconds for the fit; None for no limit (:mod:`dpdist.engine.runtime`).
    ledger, dataset
        A privacy-budget ledger charged by ``fit``, and the dataset's identifier (see
        :class:`~dpdist.SparseCovariance`). Without ``ledger``, ``fit`` is recorded in no ledger.

    Attributes
    ----------
    components_ : ndarray of shape (1, n_features)
        Unit vector supported on ``support_``.
    support_ : ndarray of shape (k,)
    noise_scale_ : float
        Gaussian scale of the block release (sigma_priv).
    selection_scale_ : float
        Gumbel scale of the selection, in score units (``8 k tau^2 / (epsilon n)``).
    clip_ : float
    privacy_ : ApproxDP
    release_ : Release

    Notes
    -----
    Guarantee: ``(epsilon, delta)``-DP under replace-one neighbours, Lemma 29 of the COLT
    2026 paper; see :func:`expmech_pca` for sensitivities, the budget split and caveats.
    The cost is ``C(d, k)`` score evaluations (exact enumeration; refused above
    ``max_subsets``). Parameters are validated in :meth:`fit`; a failed fit changes nothing
    (:mod:`dpdist.algorithms._base`).

    Examples
    --------
    >>> from dpdist.data.model2 import make_model2
    >>> m = make_model2(20_000, 20, 2, gap=0.5, lambda1=2.0, random_state=0)
    >>> est = ExpMechSparsePCA(2, 1.0, 1e-6, sigma=m.sigma, random_state=0, scheduler="synchronous")
    >>> est.fit(m.X).components_.shape
    (1, 20)
    """

    def __init__(
        self,
        k: int,
        epsilon: float,
        delta: float,
        *,
        sigma: float | None = None,
        clip: float | None = None,
        max_subsets: int = DEFAULT_MAX_SUBSETS,
        beta: float = DEFAULT_BETA,
        random_state: Any = None,
        scheduler: Any = None,
        on_nonfinite: str = "zero",
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        timeout: float | None = DEFAULT_TIMEOUT,
        ledger: Any = None,
        dataset: str | None = None,
        assume_centered: bool = False,
        mean: Any = None,
        mean_fraction: float = DEFAULT_MEAN_FRACTION,
        mean_clip: float | None = None,
    ) -> None:
        self.k = k
        self.epsilon = epsilon
        self.delta = delta
        self.sigma = sigma
        self.clip = clip
        self.max_subsets = max_subsets
        self.beta = beta
        self.random_state = random_state
        self.scheduler = scheduler
        self.on_nonfinite = on_nonfinite
        self.chunk_size = chunk_size
        self.timeout = timeout
        self.ledger = ledger
        self.dataset = dataset
        self.assume_centered = assume_centered
        self.mean = mean
        self.mean_fraction = mean_fraction
        self.mean_clip = mean_clip

    #: ExpMechPCA accepts one row and one column.
    _min_shape = (1, 1)

    def _fit_release(self, X: Any) -> Release:
        return expmech_pca(
            X,
            self.k,
            self.epsilon,
            self.delta,
            sigma=self.sigma,
            clip=self.clip,
            max_subsets=self.max_subsets,
            beta=self.beta,
            random_state=self.random_state,
            scheduler=self.scheduler,
            on_nonfinite=self.on_nonfinite,
            chunk_size=self.chunk_size,
            timeout=self.timeout,
            assume_centered=self.assume_centered,
            mean=self.mean,
            mean_fraction=self.mean_fraction,
            mean_clip=self.mean_clip,
        )

    def _fitted_attributes(self, rel: Release) -> dict:
        mu = rel.values.get("mean")
        return {
            "release_": rel,
            "components_": rel.values["components"],
            "location_": np.zeros(rel.parameters["n_features"]) if mu is None else np.asarray(mu, dtype=np.float64),
            "support_": rel.values["support"],
            "noise_scale_": rel.noise_scales["block_gaussian_sigma"],
            "selection_scale_": rel.noise_scales["selection_gumbel_scale"],
            "clip_": rel.parameters["clip"],
            "privacy_": rel.privacy,
        }

    def _calibration(self, n_samples: int, n_features: int) -> ExpMechCalibration:
        _check_params(self.k, self.epsilon, self.delta, self.sigma, self.clip, self.max_subsets, self.beta)
        n = check_int(n_samples, "n_samples", low=1)
        d = check_int(n_features, "n_features", low=1)
        tau, _ = _resolve_clip(self.sigma, self.clip, n, d, self.beta)
        return self._centering(n, d, tau)[2]

    def _centering(self, n: int, d: int, tau: float) -> tuple:
        """(centering, mean mechanism or None, the calibration of the selection and block)."""
        centering = check_centering(self.assume_centered, self.mean, self.mean_fraction, self.mean_clip,
                                    n_features=d)
        cal, mech, _, _ = _calibrate(centering, self.epsilon, self.delta, n, d, self.k, tau, self.beta)
        return centering, mech, cal

    def _check_fit(self, n_samples: int, n_features: int) -> None:
        super()._check_fit(n_samples, n_features)
        _check_range(self._calibration(n_samples, n_features), self.max_subsets)

    @reports_empirical("expmech")
    def plan(self, n_samples: int, n_features: int, *, eigengap: float | None = None) -> "ExpMechPlan":
        """Noise scales and the predicted error at this size, without reading data.

        Parameters
        ----------
        n_samples, n_features : int
        eigengap : float, optional
            Absolute eigengap ``lambda_1 - lambda_2`` of the population covariance (a model
            assumption); with it the plan's error is the ``sin^2`` bound of Theorem 7's proof.

        Returns
        -------
        ExpMechPlan
            ``n_subsets``, ``feasible`` (``n_subsets <= max_subsets``), ``clip``,
            ``noise_scales``, the calibration, and ``error``: the pieces of
            :func:`~dpdist.privacy.expmech_calibration.expmech_error_bound`, holding with
            probability >= 1 - beta (with ``clip`` only, computed at ``sigma = clip``).
        """
        cal = self._calibration(n_samples, n_features)
        sigma = float(self.sigma) if self.sigma is not None else cal.clip
        error = expmech_error_bound(cal, sigma, float(self.beta), eigengap)
        centering, mean_mech, _ = self._centering(cal.n_samples, cal.n_features, cal.clip)
        # centring at the released mean moves every k x k block by at most k lambda_center in
        # operator norm: the sampling term's role in the deficit (twice)
        error["eta_center"] = cal.k * centring_error(centering, mean_mech, sigma, cal.n_samples, cal.n_features,
                                                     float(self.beta))
        error["rayleigh_deficit_bound"] += 2.0 * error["eta_center"]
        if eigengap is not None:
            error["sin2_bound"] = min(1.0, error["rayleigh_deficit_bound"] / error["eigengap"])
        prob = "1 - 2 beta (Theorem 7, plus centring at the private mean)" if mean_mech else "1 - beta (Theorem 7)"
        feasible = cal.n_subsets <= self.max_subsets and cal.n_subsets < 1 << 62
        if eigengap is not None:
            bound, metric, scale, rule = (error["sin2_bound"], f"sin^2(v_hat, v_1), w.p. >= {prob}",
                                          1.0, "1: sin^2 <= 1 always")
        else:
            bound, metric, scale = (error["rayleigh_deficit_bound"],
                                    f"lambda_1 - v_hat^T Sigma v_hat, w.p. >= {prob}", sigma * sigma)
            rule = "sigma**2 (lambda_1 <= sigma^2)" if self.sigma is not None else \
                "clip**2: no sigma given, clipped entries are clip-sub-Gaussian"
        return ExpMechPlan(
            n_samples=cal.n_samples,
            n_features=cal.n_features,
            privacy=ApproxDP(self.epsilon, self.delta),
            noise_scale=cal.gaussian_sigma,
            error_bound=bound,
            error_metric=metric,
            error_scale=scale,
            error_scale_rule=rule,
            unmet_conditions=() if feasible else (
                f"C(d, k) = {cal.n_subsets:.3g} supports exceed max_subsets = {self.max_subsets}: the fit is refused",),
            mechanism=MECHANISM,
            k=cal.k,
            n_subsets=int(cal.n_subsets),
            max_subsets=int(self.max_subsets),
            feasible=feasible,
            dense_second_moment_bytes=8 * cal.n_features**2,  # held densely by the enumeration's tasks
            clip=cal.clip,
            noise_scales={"selection_gumbel_scale": cal.gumbel_scale, "block_gaussian_sigma": cal.gaussian_sigma},
            calibration=cal,
            error=error,
            centering=centering.mode,
            mean_noise_scale=None if mean_mech is None else mean_mech.noise_scales()["gaussian"],
        )

    def min_samples(self, target_sin2: float, n_features: int, *, eigengap: float) -> int:
        """Least n for which :meth:`plan` predicts ``sin^2 <= target_sin2`` (needs ``sigma``)."""
        _check_params(self.k, self.epsilon, self.delta, self.sigma, self.clip, self.max_subsets, self.beta)
        if self.sigma is None:
            raise ValidationError("min_samples needs sigma (the sub-Gaussian scale of the model)")
        d = check_int(n_features, "n_features")
        if check_centering(self.assume_centered, self.mean, self.mean_fraction, self.mean_clip, n_features=d).private:
            # the plan's bound, with the private mean's share and error
            from dpdist.privacy.privcov_calibration import search_min_samples

            target = check_positive(target_sin2, "target_sin2")
            return search_min_samples(lambda n: self.plan(n, d, eigengap=eigengap).error_bound, target, start=4,
                                      limit=1 << 62)
        return expmech_min_samples(
            target_sin2,
            self.epsilon,
            self.delta,
            check_int(n_features, "n_features"),
            self.k,
            sigma=float(self.sigma),
            eigengap=eigengap,
            beta=float(self.beta),
            clip=None if self.clip is None else float(self.clip),
        )
