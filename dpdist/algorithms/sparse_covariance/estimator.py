"""The estimator :class:`SparseCovariance` (its parameters' table, the rules between them, the
plan) and its functional form :func:`private_sparse_covariance`; the release itself is
:func:`~dpdist.algorithms.sparse_covariance.release.release_privcov`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from dpdist._validation import check_int, check_positive
from dpdist.algorithms._base import Estimator, reports_empirical
from dpdist.algorithms._centering import (
    CENTERING_CONSTRAINTS,
    DEFAULT_MEAN_FRACTION,
    centering_of,
    mean_mechanism,
)
from dpdist.algorithms._constraints import Custom, Delta, Epsilon, Integer, Params, Real, functional_form
from dpdist.algorithms._utility import search_min_samples
from dpdist.engine.gram import DEFAULT_TILE
from dpdist.exceptions import ValidationError
from dpdist.privacy.budget import ApproxDP
from dpdist.privacy.release import Release
from dpdist.algorithms.sparse_covariance.bounds import privcov_min_samples
from dpdist.algorithms.sparse_covariance.plan import _privcov_plan
from dpdist.algorithms.sparse_covariance.release import (
    _calibrate,
    _check_row_clip,
    _check_selection,
    _error_bound,
    _resolve_clips,
    _stage_composition,
    release_privcov,
)


class SparseCovariance(Estimator):
    """Private sparse covariance (PrivCov, Algorithm 1 of the COLT 2026 paper; by default with
    Gumbel top-k selection and the zCDP analysis of docs/privacy/privcov.md,
    ``selection="gumbel"``).

    Parameters
    ----------
    k : int
        Row sparsity of the estimate (the model's k-RCS level).
    epsilon, delta : float
        Privacy budget: epsilon > 0 (values above 1 are accepted when the per-row split
        still composes to at most epsilon, which is checked), delta in (0, 1).
    sigma : float, optional
        Public sub-Gaussian scale of the rows; sets the clip level R by the paper's rule.
    clip : float, optional
        Truncation level R; overrides the rule. One of ``sigma`` / ``clip`` is required.
    beta : float, default 0.1
        Failure probability of the utility statement (enters R and the error bound).
    random_state : None or int
        None (default) draws noise entropy from the OS; an int makes the noise reproducible
        and marks the release as seeded (tests only).
    scheduler : None, str or distributed.Client
        See :mod:`dpdist.engine.runtime`.
    on_nonfinite : {"zero", "raise"}, default "zero"
        "zero": every row holding a NaN or inf is replaced by a zero row before any
        statistic (a per-row map inside the neighbour relation; nothing counts or reports
        the rows). "raise": explicit validation mode: such data raise ValidationError after
        the pass, before anything is released; the error (or its absence) reveals one bit
        about the data, which the release records in its notes.
    tile_size : int, default 2048
        Tile width of the second moment (memory per task ~ 8 * tile_size**2 bytes).
    assume_centered : bool, default False
        As scikit-learn's ``EmpiricalCovariance``: False (default) centres the data and
        estimates the covariance; True takes the data as mean-zero and estimates the second
        moment ``(1/n) sum x x^T`` with the whole budget.
    mean : array-like (d,), optional
        A public mean to centre at (recorded as public in the release; costs nothing).
        Without it the mean is released privately with ``mean_fraction`` of the budget.
    mean_fraction : float in (0, 1), default 0.1
        Share of the budget spent on the private mean: of rho for the zCDP selections
        (``"gumbel"``, ``"laplace"``: the two stages compose in zCDP), of (epsilon, delta) for
        ``selection="paper"``.
    mean_clip : float, optional
        L2 radius the rows are scaled to for the private mean; it must cover the norms of the
        raw rows (default ``clip * sqrt(d)``). ``clip`` / ``sigma`` must cover the entries of
        the centred rows ``x - mean``.
    selection : {"gumbel", "laplace", "paper"}, default "gumbel"
        "gumbel": Gumbel top-k selection (the peeling exponential mechanism) and a Gaussian
        release calibrated by zCDP; "laplace": Laplace selection and the same release (the
        proofs are docs/privacy/privcov.md); "paper": Algorithm 1 as the paper writes it
        (per-row Laplace for selection and values, advanced composition). At d = 1,000,
        k = 20, epsilon 1, delta 1e-6 "gumbel"'s selection noise is 63x and its release noise
        20x smaller than "paper"'s. The noise of each is described in
        :func:`private_sparse_covariance`'s notes.
    row_clip : float, optional
        L2 bound C the entry-clipped rows are scaled to (``"gumbel"`` and ``"laplace"`` only):
        the release's L2 sensitivity becomes ``min(sqrt(d k') 2 R^2 / n, 2 C min(R sqrt(k'),
        C) / n)`` (float factor included), a factor about ``C / (R sqrt(d))``. Default (None):
        with ``sigma``, ``C = sigma sqrt(d + 2 sqrt(d t) + 2 t)``, ``t = log(6 n / beta)`` (no
        Gaussian row scaled but with probability beta/6; R's rule then takes beta/6 too); with
        only ``clip``, no row clip. ``inf``: no row clip.

    Attributes
    ----------
    covariance_ : scipy.sparse.csr_array, (d, d)
        The released symmetric (k+1)-RCS estimate M.
    location_ : ndarray (d,)
        The mean the data were centred at (released or public); zeros with
        ``assume_centered=True``.
    support_ : scipy.sparse.csr_array of bool
        Non-zero pattern of ``covariance_`` (diagonal included).
    selected_ : ndarray (d, k)
        The released sets S_i.
    clip_ : float
        The truncation level R used.
    noise_scale_ : float
        The selection's noise scale used: the Gumbel scale (``"gumbel"``, data units) or the
        Laplace scale b (with ``selection="paper"`` also the release's).
    release_noise_scale_ : float
        The noise scale of the released values: the Gaussian sigma (``"gumbel"``,
        ``"laplace"``) or b (``"paper"``).
    privacy_ : ApproxDP
        The (epsilon, delta) spent.
    release_ : Release
        The full record (mechanism, parameters, calibration, seeding, notes).

    Notes
    -----
    Guarantee, sensitivity and lemmas: see :func:`private_sparse_covariance`.
    Algorithm 1 needs many samples: use :meth:`plan` and :meth:`min_samples` before spending
    budget; a fit whose plan is vacuous warns :class:`~dpdist.exceptions.UtilityWarning`.
    Parameters are validated in :meth:`fit`; a failed fit changes nothing
    (:mod:`dpdist.algorithms._base`).

    Examples
    --------
    >>> import numpy as np, dpdist
    >>> X = np.random.default_rng(0).standard_normal((2000, 6))
    >>> est = dpdist.SparseCovariance(k=2, epsilon=1.0, delta=1e-6, sigma=1.0,
    ...                               random_state=0, scheduler="synchronous").fit(X)
    >>> est.covariance_.shape
    (6, 6)
    """

    #: The parameters' rules, in the order a fit checks them (after the runtime ones of
    #: :data:`~dpdist.algorithms._base.BASE_PARAMETER_CONSTRAINTS`).
    _parameter_constraints = {
        "k": Integer(),
        "epsilon": Epsilon(),
        "delta": Delta(),
        "beta": Real(low=0.0, high=1.0),
        "sigma": Real(low=0.0, allow_none=True),
        "clip": Real(low=0.0, allow_none=True),
        "selection": Custom(_check_selection),
        "row_clip": Custom(_check_row_clip),
        **CENTERING_CONSTRAINTS,
    }

    def __init__(
        self,
        k: int,
        epsilon: float,
        delta: float,
        *,
        sigma: float | None = None,
        clip: float | None = None,
        beta: float = 0.1,
        random_state: int | None = None,
        scheduler: Any = None,
        on_nonfinite: str = "zero",
        tile_size: int = DEFAULT_TILE,
        assume_centered: bool = False,
        mean: Any = None,
        mean_fraction: float = DEFAULT_MEAN_FRACTION,
        mean_clip: float | None = None,
        selection: str = "gumbel",
        row_clip: float | None = None,
    ):
        self.k = k
        self.epsilon = epsilon
        self.delta = delta
        self.sigma = sigma
        self.clip = clip
        self.beta = beta
        self.random_state = random_state
        self.scheduler = scheduler
        self.on_nonfinite = on_nonfinite
        self.tile_size = tile_size
        self.assume_centered = assume_centered
        self.mean = mean
        self.mean_fraction = mean_fraction
        self.mean_clip = mean_clip
        self.selection = selection
        self.row_clip = row_clip

    def _fitted_attributes(self, rel: Release) -> dict:
        M = rel.values["covariance"]
        mu = rel.values.get("mean")
        return {
            "covariance_": M,
            "location_": np.zeros(M.shape[0]) if mu is None else np.asarray(mu, dtype=np.float64),
            "support_": sp.csr_array(M != 0) if M.nnz else sp.csr_array(M.shape, dtype=bool),
            "selected_": rel.values["selected"],
            "clip_": rel.parameters["clip"],
            "noise_scale_": rel.noise_scales.get("gumbel_select", rel.noise_scales.get("laplace_select")),
            "release_noise_scale_": rel.noise_scales.get("gaussian_release", rel.noise_scales.get("laplace_select")),
            "privacy_": rel.privacy,
            "release_": rel,
        }

    def _validate_together(self, p: Params, n_samples: Any, n_features: Any) -> Params:
        """The rules between the parameters and the shape, then what follows from them: the
        clips, the centring, the budget's shares, the calibration and the mean's mechanism."""
        _check_clip_given(p)
        n = check_int(n_samples, "n_samples", low=2)
        d = check_int(n_features, "n_features", low=2)
        if p.k > d:
            raise ValidationError(f"k must satisfy k <= d = {d} (the number of features), got k={p.k}")
        centering = centering_of(p, n_features=d)
        R, rule, C, c_rule = _resolve_clips(p.clip, p.sigma, p.row_clip, p.selection, n, d, p.beta)
        mean_share, cov_share = centering.split(p.epsilon, p.delta, _stage_composition(p.selection))
        return p.replace(
            n_samples=n, n_features=d, centering=centering, clip_level=R, clip_rule=rule, row_clip_level=C,
            row_clip_rule=c_rule, mean_share=mean_share, cov_share=cov_share,
            cal=_calibrate(p.selection, cov_share.epsilon, cov_share.delta, n, d, p.k, R, p.beta, C),
            mean_mech=mean_mechanism(centering, mean_share, n, d, R) if centering.private else None,
        )

    def _plan_of(self, p: Params) -> "SparseCovariancePlan":
        return _privcov_plan(p.cal, p.clip_rule, p.sigma, p.beta, budget=ApproxDP(p.epsilon, p.delta),
                             centering=p.centering, mean_mech=p.mean_mech, row_clip_rule=p.row_clip_rule)

    @reports_empirical("privcov")
    def _paper_plan(self, p: Params) -> "SparseCovariancePlan":
        return self._plan_of(p)

    @reports_empirical("privcov_laplace")
    def _laplace_plan(self, p: Params) -> "SparseCovariancePlan":
        return self._plan_of(p)

    @reports_empirical("privcov_gumbel")
    def _gumbel_plan(self, p: Params) -> "SparseCovariancePlan":
        return self._plan_of(p)

    def _plan_validated(self, p: Params) -> "SparseCovariancePlan":
        return {"paper": self._paper_plan, "laplace": self._laplace_plan, "gumbel": self._gumbel_plan}[p.selection](p)

    def _release_validated(self, X: Any, p: Params, plan: Any) -> Release:
        return release_privcov(X, p)

    def plan(self, n_samples: int, n_features: int) -> "SparseCovariancePlan":
        """Clip level, noise scales and error bound for a data size; reads no data.

        Returns a :class:`SparseCovariancePlan`: ``clip``, ``noise_scale`` (the selection's
        Gumbel scale, or Laplace b), ``release_sigma`` (``selection="gumbel"`` and
        ``"laplace"``: the release's Gaussian sigma), ``selection_share`` (their share of rho
        spent on the selection), ``laplace_rule`` (how the selection's scale was set), the
        full ``calibration``, the ``error_bound``
        (operator norm, with probability >= 1 - beta over data and noise, when no entry is
        clipped: Theorem 1's, or its version with the Gaussian release) and its pieces,
        whether it is vacuous, and for comparison the Gaussian scale of the Wang-Xu baseline
        (``wang_xu_gaussian_sigma``) at the same budget and clip. The measured n* of
        ``dpdist experiment sample-complexity`` (``empirical``) are those of the plan's
        selection: method ``privcov`` for ``"paper"``, ``privcov_laplace`` for ``"laplace"``,
        ``privcov_gumbel`` for ``"gumbel"``.
        """
        return self._plan_validated(self._validated_at(n_samples, n_features))

    def min_samples(self, target_error: float, n_features: int) -> int:
        """Least n at which :meth:`plan`'s error bound is <= ``target_error`` (needs sigma;
        with a private mean, the bound includes its share of the budget and its error)."""
        p = self._validate_params(fit=False)
        _check_clip_given(p)
        if p.sigma is None:
            raise ValidationError("min_samples needs sigma (the error bound depends on it)")
        d = check_int(n_features, "n_features", low=2)
        centering = centering_of(p, n_features=d)
        k = check_int(p.k, "k", high=d)
        if centering.private:  # the plan's bound, with the private mean's share and error
            target = check_positive(target_error, "target_error")
            return search_min_samples(lambda n: self._plan_validated(self._validate_together(p, n, d)).error_bound,
                                      target, start=4, limit=1 << 62)
        if p.selection == "paper":
            return privcov_min_samples(target_error, p.epsilon, p.delta, d, k, sigma=p.sigma, beta=p.beta,
                                       clip=p.clip)
        target_error = check_positive(target_error, "target_error")

        def bound(n: int) -> float:
            r, _, c, _ = _resolve_clips(p.clip, p.sigma, p.row_clip, p.selection, n, d, p.beta)
            return _error_bound(_calibrate(p.selection, p.epsilon, p.delta, n, d, k, r, p.beta, c), p.sigma,
                                p.beta)["error_bound"]

        return search_min_samples(bound, target_error, start=4, limit=1 << 62)


def _check_clip_given(p: Params) -> None:
    """The rules between PrivCov's parameters that do not need the shape."""
    if p.sigma is None and p.clip is None:
        raise ValidationError("give either sigma (the sub-Gaussian scale) or clip (the truncation level R)")
    if p.selection == "paper" and p.row_clip is not None:
        raise ValidationError("row_clip applies to selection='gumbel' and 'laplace' only; selection='paper' is "
                              "Algorithm 1 as printed (entry clip only)")


_RETURNS_AND_NOTES = """\
Release
    ``values["covariance"]`` (scipy.sparse CSR, d x d, symmetric), ``values["selected"]``
    (d x k, the sets S_i), ``values["selected_values"]``, ``values["diagonal"]`` and, when
    centred, ``values["mean"]``; ``parameters["centering"]`` records how.

Notes
-----
**Guarantee.** (epsilon, delta)-DP for replace-one neighbours (same n, one row
replaced), for any input. The release records its event (``release.events``: d k
bounded-range selection steps and one Gaussian release for ``"gumbel"``, d pure per-row
selections and one Gaussian for ``"laplace"``, d pure per-row steps for ``"paper"``); its
``privacy`` is the charged (epsilon, delta), which the accountant certifies the event to
fit in (:func:`~dpdist.privacy.accounting.release_guarantee`; the event may account to
less: ``release.accountant()``). The arguments (sensitivity ``2 R^2 / n`` of the clipped
second moment, the float factor, the lattices, the selection's analysis) are written once
in :mod:`dpdist.privacy.mechanisms.privcov` and docs/privacy/privcov.md; the constants are
:func:`~dpdist.privacy.mechanisms.privcov.zcdp_calibration.privcov_gumbel_calibration`'s,
``privcov_zcdp_calibration``'s and ``privcov_calibration``'s (with the k+1 deviation).

**Float-safe noise.** Selected values and the diagonal are released on a public
power-of-two lattice with an exactly sampled discrete law; the selection compares exact
Gumbel keys of lattice scores (``"gumbel"``: certified float intervals, exact comparisons
where they overlap) or integer scores with lattice Laplace noise. ``on_nonfinite="raise"``:
the refusal reveals that the data contain a non-finite value (one bit), before anything is
released. The output is post-processing of the per-row releases (the symmetric AND rule of
lines 13-17), computed on the client.

**Selection noise.** ``"gumbel"``: :class:`~dpdist.privacy.noise.gumbel.GumbelTopK` draws every
key of a row (one 64-bit word an entry, d^2 in all) and keeps each tile's exact top k; the
engine merges the tiles' lists by the sampler's exact comparisons, so S_i is the same for
every tiling. ``"laplace"`` and ``"paper"``:
:class:`~dpdist.privacy.noise.lazy_selection.LazySelectionNoise`: each row's d noises are
defined by a tree of keyed draws and only the draws that can change the top k are made
(O(d k) a row instead of d); the selected sets and scores are exactly those of the fully
drawn i.i.d. noise (proof in that module). Only the upper-triangle tiles of Sigma_hat are
computed, each once, and each serves both its row blocks: memory is O(tile + d k), never
a d x d array.

**Centring.** With ``assume_centered=False`` and no public ``mean``, the mean is released
first by :class:`~dpdist.privacy.mechanisms.mean.ClippedMeanMechanism` with the share
``mean_fraction`` of the budget and PrivCov runs with the rest on the rows ``x -
mu_hat``. PrivCov's sensitivity ``2 R^2 / n`` is unchanged: ``mu_hat`` is public once
released, ``x -> x - mu_hat`` is a fixed per-row map applied before the clip, so neighbours
stay neighbours and every row's clipped term is bounded as before. The clip R (or sigma)
must now cover the entries of ``x - mu_hat``, ``mean_clip`` the norms of the raw rows.
The two stages compose in zCDP (the mean ``mean_fraction`` of rho, PrivCov the rest, one
CKS20 conversion), or by basic composition for ``selection="paper"``
(:mod:`dpdist.algorithms._centering`).

**What leaves the workers.** Only, per row block, S_i and the noised values of S_i and
of the diagonal, and the noised mean. Raw and clipped rows, tiles of Sigma_hat and
candidate lists stay in the task graph.
"""

private_sparse_covariance = functional_form(
    SparseCovariance, name="private_sparse_covariance", positional=("k", "epsilon", "delta"),
    summary="Release an (epsilon, delta)-DP sparse estimate of the covariance of ``X``.",
    returns=_RETURNS_AND_NOTES,
)
