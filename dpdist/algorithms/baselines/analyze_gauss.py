"""Analyze Gauss (Dwork, Talwar, Thakurta and Zhang 2014): dense DP PCA by symmetric Gaussian
noise on the second moment of norm-clipped rows, then the top eigenvector."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import dask.array as da
import numpy as np

from dpdist._validation import check_int, check_positive
from dpdist.algorithms._base import Estimator, nonfinite_note
from dpdist.algorithms._projection import Projection
from dpdist.algorithms._centering import (
    CENTERING_CONSTRAINTS,
    DEFAULT_MEAN_FRACTION,
    centering_of,
    centre_data,
    centring_error,
    mean_mechanism,
    mean_notes,
    stage_guarantee,
)
from dpdist.algorithms._constraints import Custom, Delta, Epsilon, Params, Real
from dpdist.algorithms.baselines._common import triples_to_csr
from dpdist.algorithms.expmech_pca.release import leading_eigenvector
from dpdist.data.validation import chunk_reading_notes
from dpdist.engine.gram import DEFAULT_TILE, clipped_second_moment, nonfinite_guard
from dpdist.engine.runtime import compute
from dpdist.engine.second_moment_kernels import chunk_clip_rows
from dpdist.engine.threshold import threshold_triples
from dpdist.exceptions import ValidationError
from dpdist.privacy.budget import ApproxDP
from dpdist.privacy.mechanisms.gaussian import analyze_gauss_calibration
from dpdist.privacy.mechanisms.base import residual_note
from dpdist.privacy.mechanisms.gaussian import analyze_gauss_mechanism
from dpdist.privacy.noise.streams import resolve_random_state
from dpdist.algorithms._utility import davis_kahan_sin2, sampling_operator_error, symmetric_gaussian_operator_bound
from dpdist.algorithms.plan import Plan
from dpdist.privacy.release import Release, warn_if_unsafe

__all__ = ["AnalyzeGauss", "AnalyzeGaussPlan", "block_row_norm_clip", "check_row_norm", "row_norm_clip"]

MECHANISM = "Analyze Gauss (Dwork-Talwar-Thakurta-Zhang 2014): Gaussian noise on the second moment of norm-clipped rows"
#: The private mean and the Gaussian release are both Gaussian mechanisms: they compose
#: exactly in Gaussian DP (:mod:`dpdist.algorithms._centering`).
COMPOSITION = "gdp"


def block_row_norm_clip(x: np.ndarray, row_norm: float) -> np.ndarray:
    """Scale each row (whole rows: all columns) to L2 norm at most ``row_norm`` *as computed*
    (:func:`dpdist.engine.second_moment_kernels.chunk_clip_rows`: robust norms, no overflow at
    1e154, no underflow for subnormal rows; zero rows stay 0; non-finite rows become 0)."""
    return chunk_clip_rows(x, float(row_norm))


def row_norm_clip(X: da.Array, row_norm: float) -> da.Array:
    """Lazy ``x_i * min(1, L / ||x_i||)`` on blocks of whole rows (columns in one chunk)."""
    if X.numblocks[1] > 1:
        X = X.rechunk({1: -1})
    return X.map_blocks(block_row_norm_clip, float(row_norm), dtype=np.float64)


def check_row_norm(row_norm, name: str = "row_norm") -> float:
    """The public L2 bound the rows are scaled to (``row_norm``): required and positive."""
    if row_norm is None:
        raise ValidationError("give row_norm, the public L2 bound the rows are scaled to")
    return check_positive(row_norm, "row_norm")


@dataclass(frozen=True, kw_only=True)
class AnalyzeGaussPlan(Plan):
    """:meth:`AnalyzeGauss.plan`: a :class:`~dpdist.algorithms.plan.Plan` whose ``noise_scale``
    is the Gaussian standard deviation per released entry.

    ``error_bound``: the operator-norm error ``||M - Sigma||_op`` (the noise's
    ``noise_operator_bound``, plus Lemma 2's sampling error with ``sigma``); with ``sigma``
    and ``eigengap``, the Davis-Kahan ``sin^2`` bound (scale 1). **Scale** (vacuity) of the
    operator error: ``radius**2``, the largest ``||Sigma||_op`` rows of norm at most
    ``radius`` allow. With a private mean the noise is calibrated at the share ``1 -
    mean_fraction`` of the budget's ``mu^2`` (Gaussian DP) and ``center_operator_bound`` (``d`` times
    :func:`~dpdist.algorithms._centering.centring_error`: ``||b b^T - a a^T||_op <= d
    max(||b||_inf, ||a||_inf)^2``, at beta) is added to the error, which then holds with
    probability >= 1 - 2 beta.
    """

    radius: float
    calibration: dict
    noise_operator_bound: float
    sampling_operator_bound: float | None = None
    operator_error_bound: float | None = None
    sin2_bound: float | None = None
    centering: str = "assume-centered"
    mean_noise_scale: float | None = None
    center_operator_bound: float = 0.0


class AnalyzeGauss(Projection, Estimator):
    """(epsilon, delta)-DP leading principal component by Analyze Gauss (DTTZ 2014). Dense baseline.

    Parameters
    ----------
    epsilon, delta : float
    row_norm : float
        Public L2 bound L: each row is scaled to norm at most L before the second moment.
        Required (the command line's ``--radius``). The release records it as
        ``parameters["radius"]``.
    random_state : None or int
    beta : float
        Failure probability used by :meth:`plan`.
    scheduler, tile_size, on_nonfinite
        As for the other estimators (:mod:`dpdist.engine.runtime` for scheduler).
    assume_centered, mean, mean_fraction, mean_clip
        Centring, as :class:`~dpdist.SparseCovariance`: by default the rows are centred at a
        mean released with ``mean_fraction`` of the budget (rows scaled to L2 norm
        ``mean_clip``, default ``row_norm``) before their norms are clipped to ``row_norm``, which
        must then cover ``||x - mean||``.

    Attributes
    ----------
    components_ : ndarray of shape (1, d)
        Unit top eigenvector of the released noisy covariance.
    covariance_ : ndarray (d, d)
        The released ``(1/n) sum (x - mean)(x - mean)^T + E`` (E symmetric Gaussian; the
        second moment with ``assume_centered=True``).
    location_ : ndarray (d,)
        The mean the rows were centred at (zeros with ``assume_centered=True``); ``transform(X)``
        and ``fit_transform`` project ``X - location_`` on ``components_``, as the other PCA
        estimators do (:class:`~dpdist.algorithms._projection.Projection`).
    noise_scale_ : float
    privacy_, release_

    Notes
    -----
    **Guarantee.** (epsilon, delta)-DP under replace-one neighbours, for any input.
    **Sensitivity.** Rows of norm <= L: replacing one row moves ``(1/n) sum x x^T`` by at
    most ``2 L^2 / n`` in Frobenius norm, hence the released upper triangle (diagonal
    included) by at most that in L2 (DTTZ14 state 1 for add/remove neighbours, unnormalised,
    L = 1). **Mechanism.** i.i.d. ``N(0, s^2)`` on the upper triangle, mirrored, with
    ``s`` from :func:`~dpdist.privacy.mechanisms.gaussian.analyze_gauss_calibration` (the
    analytic Gaussian mechanism of Balle-Wang 2018, for every epsilon); the
    eigenvector is post-processing. The noise is dense d x d, ``||E||_op ~ 3 s sqrt(d)``, so
    its error grows with d: the dense baseline. Noise is added tile by tile on the workers.
    Floating point: rows are scaled to norm at most L as computed before the product, and the
    noise is calibrated for ``kappa(n)`` times the sensitivity
    (:func:`~dpdist.privacy.float_rounding.gram_rounding_factor`). Non-finite rows become zero
    rows (``on_nonfinite="zero"``, the default; "raise" reveals one bit). Float-safe noise:
    the released entries are lattice points with an exactly sampled rounded Gaussian
    (:mod:`dpdist.privacy.mechanisms.gaussian`, where the argument is written). Parameters are validated in :meth:`fit`; a failed fit
    changes nothing (:mod:`dpdist.algorithms._base`). **Centring.** The private mean
    (:mod:`dpdist.privacy.mechanisms.mean`) is released first; ``x -> x - mu_hat`` is then a
    fixed per-row map before the norm clip, so the sensitivity ``2 L^2 / n`` is unchanged; the
    stages compose exactly in Gaussian DP (:mod:`dpdist.algorithms._centering`).
    """

    #: The parameters' rules, in the order a fit checks them (after the runtime ones of
    #: :data:`~dpdist.algorithms._base.BASE_PARAMETER_CONSTRAINTS`).
    _parameter_constraints = {
        "epsilon": Epsilon(),
        "delta": Delta(),
        "beta": Real(low=0.0, high=1.0),
        "row_norm": Custom(check_row_norm),
        **CENTERING_CONSTRAINTS,
    }

    def __init__(self, epsilon: float, delta: float, *, row_norm: float, random_state: Any = None,
                 beta: float = 0.1, scheduler: Any = None, tile_size: int = DEFAULT_TILE,
                 on_nonfinite: str = "zero", assume_centered: bool = False, mean: Any = None,
                 mean_fraction: float = DEFAULT_MEAN_FRACTION, mean_clip: float | None = None) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.row_norm = row_norm
        self.random_state = random_state
        self.beta = beta
        self.scheduler = scheduler
        self.tile_size = tile_size
        self.on_nonfinite = on_nonfinite
        self.assume_centered = assume_centered
        self.mean = mean
        self.mean_fraction = mean_fraction
        self.mean_clip = mean_clip

    def _validate_together(self, p: Params, n_samples: Any, n_features: Any) -> Params:
        """The rules between the parameters and the shape, then what follows from them: the
        centring and the mean's mechanism, the budget's shares and the Gaussian calibration."""
        n = check_int(n_samples, "n_samples", low=1)
        d = check_int(n_features, "n_features", low=1)
        centering = centering_of(p, n_features=d)
        mean_share, share = centering.split(p.epsilon, p.delta, COMPOSITION)
        mean_mech = mean_mechanism(centering, mean_share, n, d, None, radius=p.row_norm) if centering.private else None
        return p.replace(n_samples=n, n_features=d, centering=centering, mean_mech=mean_mech, mean_share=mean_share,
                         share=share, cal=analyze_gauss_calibration(share.epsilon, share.delta, n, p.row_norm))

    def plan(self, n_samples: int, n_features: int, *, sigma: float | None = None,
             eigengap: float | None = None) -> AnalyzeGaussPlan:
        """Noise scale and predicted error for a data size; reads no data.

        ``noise_operator_bound`` bounds ``||E||_op`` w.p. >= 1 - beta/2. With ``sigma``
        (sub-Gaussian scale) the error adds Lemma 2's sampling error (s = d), and with
        ``eigengap`` (absolute) too, ``sin2_bound`` is Davis-Kahan applied to both, assuming no
        row is clipped (:class:`AnalyzeGaussPlan`).
        """
        p = self._validated_at(n_samples, n_features)
        return self._plan_validated(p, check_positive(sigma, "sigma", allow_none=True), eigengap)

    def _plan_validated(self, p: Params, sigma: float | None = None, eigengap: float | None = None) -> AnalyzeGaussPlan:
        n, d, beta, cal, centering, mean_mech = p.n_samples, p.n_features, p.beta, p.cal, p.centering, p.mean_mech
        noise_op = symmetric_gaussian_operator_bound(cal["gaussian_sigma"], d, beta / 2)
        radius = cal["row_norm"]
        fields: dict = {"error_bound": noise_op, "error_metric": "||E||_op (the noise alone), w.p. >= 1 - beta/2"}
        if sigma is not None:
            samp = sampling_operator_error(sigma, n, d, d, beta / 2)
            fields = {"sampling_operator_bound": samp, "operator_error_bound": noise_op + samp,
                      "error_bound": noise_op + samp, "error_metric": "||M - Sigma||_op, w.p. >= 1 - beta (Lemma 2)"}
        center_op = d * centring_error(centering, mean_mech, sigma if sigma is not None else radius, n, d, beta)
        if mean_mech is not None:
            fields["error_bound"] += center_op
            fields["error_metric"] += " plus centring at the private mean, w.p. >= 1 - 2 beta"
            if sigma is not None:
                fields["operator_error_bound"] += center_op
        scale, rule = radius**2, "radius**2 (||Sigma||_op <= radius^2 for rows of norm <= radius)"
        if sigma is not None and eigengap is not None:
            fields["sin2_bound"] = fields["error_bound"] = davis_kahan_sin2(fields["operator_error_bound"], eigengap)
            fields["error_metric"] = "sin^2(v_hat, v_1), w.p. >= 1 - beta (Davis-Kahan)"
            scale, rule = 1.0, "1: sin^2 <= 1 always"
        return AnalyzeGaussPlan(
            n_samples=n,
            n_features=d,
            privacy=ApproxDP(p.epsilon, p.delta),
            noise_scale=cal["gaussian_sigma"],
            error_scale=scale,
            error_scale_rule=rule,
            radius=radius,
            calibration=cal,
            noise_operator_bound=noise_op,
            centering=centering.mode,
            mean_noise_scale=None if mean_mech is None else mean_mech.noise_scales()["gaussian"],
            center_operator_bound=center_op,
            **fields,
        )

    def _release_validated(self, X: Any, p: Params, plan: Any) -> Release:
        """Release the noisy second moment and its top eigenvector (one PrivacyWarning when seeded)."""
        n, d, cal, centering, mean_mech, mean_share, share = (p.n_samples, p.n_features, p.cal, p.centering,
                                                              p.mean_mech, p.mean_share, p.share)
        scheduler, on_nonfinite = p.scheduler, p.on_nonfinite
        seed = resolve_random_state(p.random_state)
        mech = analyze_gauss_mechanism(cal, d)
        budget = ApproxDP(p.epsilon, p.delta)
        privacy = stage_guarantee(budget, [mech.event()], share, mean_mech, mean_share, COMPOSITION)
        Xg, finite = nonfinite_guard(X, on_nonfinite)
        Xc, mu = centre_data(Xg, finite, centering, mean_mech, seed, scheduler=scheduler)
        Y = row_norm_clip(Xc, cal["row_norm"])
        S = clipped_second_moment(Y, math.inf, tile=p.tile_size)
        results = compute(*threshold_triples(S, 0.0, guard=finite, release=mech.release(seed)),
                          scheduler=scheduler)
        M = triples_to_csr(list(results), d).toarray()
        v, lam = leading_eigenvector(M)
        notes = [residual_note(d * (d + 1) // 2, mech.noise), f"Gaussian scale rule: {cal['rule']}",
                 "components are post-processing (top eigenvector of the released noisy matrix)",
                 nonfinite_note(on_nonfinite), *chunk_reading_notes(X)]
        events, mechanisms = [("gaussian", mech.event())], [mech.describe()]
        noise_scales = {"gaussian": cal["gaussian_sigma"]}
        values = {"components": v[None, :], "covariance": M, "eigenvalue": lam}
        if mu is not None:
            values["mean"] = mu
        if mean_mech is not None:
            events.insert(0, ("mean", mean_mech.event()))  # in the order they ran
            mechanisms.append(mean_mech.describe())
            noise_scales["mean_gaussian"] = mean_mech.noise_scales()["gaussian"]
            notes.extend(mean_notes(mean_mech))
        return warn_if_unsafe(Release(
            mechanism=MECHANISM,
            privacy=privacy,
            parameters={"n_samples": n, "n_features": d, "radius": cal["row_norm"],
                        "sensitivity": cal["sensitivity"], "float_factor": cal["float_factor"], "rule": cal["rule"],
                        "on_nonfinite": on_nonfinite,
                        "centering": centering.record(mean_mech, centering.composition(budget.epsilon, budget.delta,
                                                                                       COMPOSITION))},
            noise_scales=noise_scales,
            values=values,
            seeding=seed.describe(),
            notes=tuple(notes),
            events=tuple(events),
            mechanisms=tuple(mechanisms),
        ), stacklevel=6)  # the caller of fit

    def _fitted_attributes(self, rel: Release) -> dict:
        return {
            "components_": rel.values["components"],
            "covariance_": rel.values["covariance"],
            "location_": (np.zeros(rel.parameters["n_features"]) if "mean" not in rel.values
                          else np.asarray(rel.values["mean"], dtype=np.float64)),
            "noise_scale_": rel.noise_scales["gaussian"],
            "privacy_": rel.privacy,
            "release_": rel,
        }
