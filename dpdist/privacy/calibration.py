"""Calibration functions: noise scales from public parameters only.

Each function implements one formula of a paper and cites it. Nothing here sees data.
Constants in sensitivities and noise scales are the papers'; the only deviation from a
printed formula is marked *deviation* with its reason and always makes noise larger.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from scipy import optimize

from dpdist._validation import check_int, check_positive, check_probability
from dpdist.exceptions import ValidationError
from dpdist.privacy.accounting import gaussian_profile_delta
from dpdist.privacy.budget import check_delta, check_epsilon
from dpdist.privacy.zcdp import cks20_rho

__all__ = [
    "GRAM_BATCH_ROWS",
    "GRAM_TREE_FAN_IN",
    "UNIT_ROUNDOFF",
    "PrivCovCalibration",
    "PrivCovGumbelCalibration",
    "PrivCovZCDPCalibration",
    "advanced_composition_epsilon",
    "analytic_gaussian_sigma",
    "classic_gaussian_sigma",
    "gaussian_mu",
    "gaussian_sigma",
    "float_sensitivity",
    "gram_rounding_factor",
    "rounding_gamma",
    "summation_depth",
    "privcov_calibration",
    "privcov_error_bound",
    "privcov_gumbel_calibration",
    "privcov_gumbel_error_bound",
    "privcov_min_samples",
    "privcov_pure_coefficient",
    "privcov_release_sensitivity",
    "privcov_selection_sensitivity",
    "gaussian_row_norm_bound",
    "privcov_zcdp_calibration",
    "privcov_zcdp_error_bound",
    "search_min_samples",
    "subgaussian_clip",
    "wang_xu_calibration",
    "SAMPLING_CONSTANT",
]

#: Constant C of Fact 1 (Wainwright 2019, Lemma 6.26) used by the *utility* bounds of
#: ``plan()``. The paper leaves it unspecified; 4 is our documented choice (Bernstein's
#: inequality for products of two N(0, sigma^2) coordinates gives a constant below 4 with the
#: paper's log(6d/beta) union term for d >= 2). It never enters a noise scale.
SAMPLING_CONSTANT = 4.0

# ---------------------------------------------------------------------------------------
# floating-point error of the engine's Gram sums (added to the sensitivities below)
# ---------------------------------------------------------------------------------------

#: Unit roundoff of IEEE double precision (round to nearest): u = 2**-53.
UNIT_ROUNDOFF = 2.0**-53
#: Most rows the engine multiplies in one BLAS product, or accumulates in one running sum,
#: before combining partial sums pairwise (``dpdist.engine.gram.GRAM_BATCH_ROWS`` and the
#: kernels of ``dpdist.engine.second_moment``; tests/engine check they do not exceed it).
GRAM_BATCH_ROWS = 4096
#: Largest fan-in of the engine's trees over row chunks (sequential sums inside a node).
GRAM_TREE_FAN_IN = 8


def rounding_gamma(k: int) -> float:
    """Higham's ``gamma_k = k u / (1 - k u)`` (Accuracy and Stability of Numerical
    Algorithms, 2nd ed., Lemma 3.1): a product of k factors ``(1 + d_i)^(+-1)``,
    ``|d_i| <= u``, lies within ``gamma_k`` of 1."""
    k = int(k)
    if not k * UNIT_ROUNDOFF < 0.5:
        raise ValidationError(f"rounding bound undefined for a chain of {k} operations")
    return k * UNIT_ROUNDOFF / (1.0 - k * UNIT_ROUNDOFF)


def summation_depth(n_samples: int, *, batch_rows: int = GRAM_BATCH_ROWS, fan_in: int = GRAM_TREE_FAN_IN) -> int:
    """Bound on the number of floating-point additions on the path from one row's term to a
    released entry of the engine's Gram sums of ``n_samples`` rows.

    The engine sums a row's term in a run of at most ``batch_rows`` rows (a BLAS product and
    a running sum: at most ``batch_rows`` additions), combines the runs of one row chunk
    pairwise (at most ``ceil(log2 n)`` additions), and the chunks in trees of fan-in at most
    ``fan_in`` (at most ``fan_in - 1`` additions per level, at most ``ceil(log2 n)`` levels);
    4 more operations cover the product forming the term, the symmetrisation and the scaling
    by 1/n. Hence ``D(n) = batch_rows + fan_in * ceil(log2 n) + 4``: a function of the public
    n only, whatever the chunking.
    """
    n = max(2, int(n_samples))
    return int(batch_rows) + int(fan_in) * math.ceil(math.log2(n)) + 4


def gram_rounding_factor(n_samples: int, *, batch_rows: int = GRAM_BATCH_ROWS, fan_in: int = GRAM_TREE_FAN_IN) -> float:
    """Factor ``kappa(n) = 1 + 2 n gamma_D`` (D = :func:`summation_depth`) by which every
    Gram-type sensitivity is multiplied, so that it bounds the statistic *as computed*.

    Claim. Let each row i contribute a term ``t_i = y_i y_i^T`` (y_i the row as computed by
    the engine: clipped, scaled, zeroed; a deterministic function of the row and its
    position), and let every term satisfy ``||t_i|| <= B`` in the norm N of the release
    (``|t_i|_{ab} <= B`` entrywise for PrivCov; Frobenius, hence L2 of the upper triangle,
    for the Gaussian releases: ``|| |y_i| |y_i|^T ||_F = ||y_i||^2``). If the exact-arithmetic
    statistic ``S = (1/n) sum_i t_i`` has sensitivity ``Delta >= B / n`` in N, the computed
    ``fl(S)`` has sensitivity at most ``kappa(n) Delta``.

    Proof. Every summation order (BLAS blocking, pairwise or tree combination) computes each
    entry as a sum whose terms pass through at most D rounded operations, so (Higham, Lemma
    3.4 and eq. (3.5), any order; the product and the scaling are two more factors
    ``1 + d``) ``|fl(S) - S| <= gamma_D (1/n) sum_i |t_i|`` entrywise, and
    ``|| (1/n) sum_i |t_i| ||_N <= B`` (the entrywise absolute values of PSD rank-one terms
    keep the bound ``B``). For neighbours D, D' (unchanged rows give bitwise identical
    ``y_i``: the same value, position and public map),
    ``||fl(S) - fl(S')|| <= ||S - S'|| + 2 gamma_D B <= Delta + 2 gamma_D n Delta``.
    With D from :func:`summation_depth` this is a function of the public n only (about
    ``1 + 1e-9 n / 1000``: 1e-6 at n = 1e6, 1e-3 at n = 1e9). Assumptions: IEEE double
    arithmetic with round to nearest, and no overflow (the public bounds keep every partial
    sum below n B). Underflow: an operation in the subnormal range errs by at most 2**-1075
    absolutely instead of u relatively; :func:`float_sensitivity` refuses sensitivities below
    2**-900, where these absolute errors (at most D n d**2 2**-1075 < 2**-960 in total) stay
    far below the slack ``2 n gamma_D Delta >= 2**-940``.
    """
    n = int(n_samples)
    return 1.0 + 2.0 * n * rounding_gamma(summation_depth(n, batch_rows=batch_rows, fan_in=fan_in))


#: Smallest exact-arithmetic sensitivity accepted (see :func:`gram_rounding_factor`).
MIN_SENSITIVITY = 2.0**-900


def float_sensitivity(sensitivity: float, n_samples: int) -> tuple[float, float]:
    """``(kappa(n) * sensitivity, kappa(n))``: a Gram-type sensitivity made valid for the
    computed statistic (:func:`gram_rounding_factor`). Refuses sensitivities outside
    ``[2**-900, 2**1000]`` (public bounds too small or too large for float64)."""
    sensitivity = float(sensitivity)
    if not (MIN_SENSITIVITY <= sensitivity <= 2.0**1000):
        raise ValidationError(
            f"the sensitivity {sensitivity!r} (from the public clip/radius and n) is outside the range "
            "where float64 rounding can be bounded: choose a clip or radius of moderate magnitude"
        )
    kappa = gram_rounding_factor(n_samples)
    return sensitivity * kappa, kappa


def advanced_composition_epsilon(epsilon_step: float, n_steps: int, delta_slack: float) -> float:
    """Total epsilon of ``n_steps`` adaptive (epsilon_step, .)-DP steps (DR14, Theorem 3.20).

    ``eps' = sqrt(2 k ln(1/delta')) eps + k eps (e^eps - 1)``, with total delta
    ``k * delta_step + delta'``. Exact formula, valid for every eps > 0.
    """
    k = int(n_steps)
    if epsilon_step > 700.0:  # e^eps overflows float64: the bound is larger than any float
        return math.inf
    return math.sqrt(2 * k * math.log(1 / delta_slack)) * epsilon_step + k * epsilon_step * math.expm1(
        epsilon_step
    )


def subgaussian_clip(sigma: float, n_samples: int, n_features: int, beta: float) -> float:
    """Truncation level R = sigma * sqrt(2 log(6 n d / beta)) (proof of Theorem 1).

    With this R no entry of n samples from a sigma-sub-Gaussian distribution is clipped,
    except with probability beta/3. Utility only: privacy holds for any R.
    """
    sigma = check_positive(sigma, "sigma")
    beta = check_probability(beta, "beta")
    n = check_int(n_samples, "n_samples", low=1)
    d = check_int(n_features, "n_features", low=1)
    return sigma * math.sqrt(2.0 * math.log(6.0 * n * d / beta))


def gaussian_row_norm_bound(sigma: float, n_samples: int, n_features: int, beta: float) -> float:
    """Row-norm level ``C = sigma sqrt(d + 2 sqrt(d t) + 2 t)`` with ``t = log(n / beta)``.

    For a Gaussian row ``x ~ N(0, Sigma)`` with ``||Sigma||_op <= sigma^2``, ``||x||^2 = sum_i
    lambda_i g_i^2`` (lambda the eigenvalues of Sigma, g i.i.d. standard normal), and Laurent and
    Massart 2000 (Lemma 1) give ``P(||x||^2 >= sum lambda_i + 2 sqrt(t sum lambda_i^2) + 2 t max
    lambda_i) <= e^-t``; with ``sum lambda_i <= d sigma^2``, ``sum lambda_i^2 <= d sigma^4`` and
    ``max lambda_i <= sigma^2`` that is ``P(||x|| > C) <= e^-t = beta / n``: no row of n is
    scaled down, but with probability beta. Utility only: privacy holds for any C.
    """
    sigma = check_positive(sigma, "sigma")
    beta = check_probability(beta, "beta")
    n = check_int(n_samples, "n_samples", low=1)
    d = check_int(n_features, "n_features", low=1)
    t = math.log(n / beta)
    return sigma * math.sqrt(d + 2.0 * math.sqrt(d * t) + 2.0 * t)


def check_row_clip(row_clip, *, allow_none: bool = True):
    """A row-norm level: None (not given), a positive finite float, or ``math.inf`` (no row clip)."""
    if row_clip is None and allow_none:
        return None
    try:
        value = float(row_clip)
    except (TypeError, ValueError):
        raise ValidationError(f"row_clip must be a positive number or inf, got {row_clip!r}") from None
    if isinstance(row_clip, bool) or math.isnan(value) or not value > 0:
        raise ValidationError(f"row_clip must be a positive number or inf, got {row_clip!r}")
    return value


def privcov_release_sensitivity(n_samples: int, n_features: int, k_released: int, clip: float,
                                row_clip: float = math.inf) -> tuple[float, float, float]:
    """L2 sensitivity of PrivCov's released values, float error included:
    ``(release, entry_route, row_route)`` with ``release = min(entry_route, row_route)``.

    The released addresses P hold at most ``k'`` addresses a row (``k' = k_released``, the
    diagonal included), so ``|P| <= d k'``.

    * Entry route: every computed entry moves by at most ``Delta_fl = kappa(n) 2 R^2 / n``, so
      the vector at P by at most ``sqrt(d k') Delta_fl``.
    * Row route (rows entry-clipped to R, then scaled to L2 norm at most ``C = row_clip``): for
      such a row y, ``||(y y^T)_P||_F^2 = sum_i y_i^2 sum_{j in P_i} y_j^2 <= ||y||^2 min(k'
      R^2, ||y||^2) <= C^2 min(k' R^2, C^2)``, so one replaced row moves the exact moment at P
      by at most ``Delta_2 = 2 C min(R sqrt(k'), C) / n``. The same bound ``B = C min(R
      sqrt(k'), C)`` holds for ``|y| |y|^T`` (same entries in magnitude), so the computed
      moment moves by at most ``kappa(n) Delta_2`` in this norm
      (:func:`gram_rounding_factor`'s claim with N the Frobenius norm at P). ``inf`` when C
      is inf.
    """
    n, d, kr = int(n_samples), int(n_features), int(k_released)
    entry_fl, kappa = float_sensitivity(2 * clip**2 / n, n)
    entry_route = math.sqrt(d * kr) * entry_fl
    if not math.isfinite(row_clip):
        return entry_route, entry_route, math.inf
    row_route = float_sensitivity(2.0 * row_clip * min(clip * math.sqrt(kr), row_clip) / n, n)[0]
    return min(entry_route, row_route), entry_route, row_route


def privcov_selection_sensitivity(n_samples: int, n_features: int, clip: float,
                                  row_clip: float = math.inf) -> tuple[float, float, float]:
    """Root-mean-square over the d rows of the most one row's computed scores move, float error
    included: ``(selection, entry_route, row_route)`` with ``selection = min(entry_route,
    row_route)``. For neighbours, with ``delta_i = max_j |S_ij - S'_ij|`` (S the computed
    clipped moment), ``sqrt(sum_i delta_i^2) <= sqrt(d) selection``.

    * Entry route: every computed entry moves by at most ``Delta_fl = kappa(n) 2 R^2 / n``, so
      ``delta_i <= Delta_fl`` for every row.
    * Row route (rows entry-clipped to R, then scaled to L2 norm at most ``C = row_clip``): in
      the norm ``N(M) = sqrt(sum_i max_j M_ij^2)`` (absolute, hence monotone) one row's term has
      ``N(|y| |y|^T) = ||y||_2 ||y||_inf <= C min(R, C)``, so one replaced row moves the exact
      moment by at most ``2 C min(R, C) / n`` in N, and the computed one by ``kappa(n)`` times
      that (:func:`gram_rounding_factor`'s claim with this N); divided by ``sqrt(d)``, and
      raised by a factor ``1 + 2**-50`` so that the float quotient times ``sqrt(d)`` is not
      below the bound (the square root and the division round twice). ``inf`` when C is inf.
    """
    n, d = int(n_samples), int(n_features)
    entry_route = float_sensitivity(2 * clip**2 / n, n)[0]
    if not math.isfinite(row_clip):
        return entry_route, entry_route, math.inf
    row_route = float_sensitivity(2.0 * row_clip * min(clip, row_clip) / n, n)[0] / math.sqrt(d) * (1.0 + 2.0**-50)
    return min(entry_route, row_route), entry_route, row_route


@dataclass(frozen=True)
class PrivCovCalibration:
    """All constants of one run of Algorithm 1 (PrivCov), computed from public values.

    Attributes mirror the lines of Algorithm 1. ``k_released = min(k + 1, d)`` is the
    per-row release size. ``sensitivity`` is Delta = 2 R^2 / n in exact arithmetic and
    ``float_factor`` the factor kappa(n) that makes it bound the computed second moment
    (:func:`gram_rounding_factor`). ``laplace_scale = max(laplace_scale_paper,
    laplace_scale_pure)``; ``laplace_rule`` names the active term (see
    :func:`privcov_calibration`).
    """

    epsilon: float
    delta: float
    n_samples: int
    n_features: int
    k: int
    clip: float
    k_released: int
    delta_row: float
    epsilon_row: float
    sensitivity: float
    float_factor: float
    laplace_scale_paper: float
    laplace_scale_pure: float
    laplace_rule: str
    laplace_scale: float
    composed_epsilon: float
    composed_delta: float
    composition: str

    def to_dict(self) -> dict:
        return asdict(self)


def privcov_pure_coefficient(k: int, n_features: int) -> int:
    """``c(k, d)`` of the pure-DP coupling bound: one row of Algorithm 1 is ``c Delta / b``-DP.

    ``c = 2k + k'`` with ``k' = min(k + 1, d)`` released values, except that the selection
    costs nothing when ``k = d`` (every column is selected): ``c = k'`` then. For k < d this
    is ``3k + 1``: k shifted selection scores on each side of the coupling, k + 1 released values.
    """
    k, d = int(k), int(n_features)
    k_released = min(k + 1, d)
    return (2 * k if k < d else 0) + k_released


def _check_privcov_inputs(epsilon, delta, n_samples, n_features, k, clip) -> tuple:
    """The public inputs of either PrivCov calibration, validated: (epsilon, delta, n, d, k, clip)."""
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    n = check_int(n_samples, "n_samples", low=2)
    d = check_int(n_features, "n_features", low=2)
    k = check_int(k, "k", low=1)
    if k > d:
        raise ValidationError(f"k must satisfy 1 <= k <= d = {d}, got k={k}")
    return epsilon, delta, n, d, k, check_positive(clip, "clip")


def _sampling_lambda(sigma: float, n: int, d: int, beta: float) -> float:
    """Theorem 1's ``lambda_samp = C sigma^2 (sqrt(log(6d/beta)/n) + log(6d/beta)/n)``: every
    entry of the sample second moment within it of Sigma, but with probability beta/3."""
    t = math.log(6 * d / beta)
    return SAMPLING_CONSTANT * sigma**2 * (math.sqrt(t / n) + t / n)


def privcov_calibration(
    epsilon: float, delta: float, n_samples: int, n_features: int, k: int, clip: float
) -> PrivCovCalibration:
    """Calibrate Algorithm 1 (PrivCov) of the COLT 2026 paper, Section 3.1.

    Lines 3-4 of Algorithm 1, with the two deviations below::

        delta_row = delta / (2 d)
        eps_row   = (eps / 4) * (2 d log(2 / delta))^(-1/2)
        Delta     = 2 R^2 / n                       (entry sensitivity of the clipped moment)
        Delta_fl  = kappa(n) Delta                  (float error, gram_rounding_factor)
        b_paper   = (2 Delta_fl / eps_row) * sqrt(k' log(d / delta_row)),  k' = k + 1
        b_pure    = c(k, d) Delta_fl / eps_row,    c = 3k + 1 (k < d), k' (k = d)
        b         = max(b_paper, b_pure)

    *Deviation 1* (the diagonal): line 11 releases the diagonal entry of every row
    even when i is not in S_i, so the per-row release is S_i plus {i}: k' = k + 1 values.
    The paper's term is evaluated with k' (b grows by sqrt((k+1)/k)).

    *Deviation 2* (the selection's proof): the paper's b cites Theorem 2.2 of Qiao-Su-Zhang 2021, which
    needs 8 Delta (with eps <= 0.2, delta <= 0.05), covers the selected index set only and
    signed top-k only, while line 6 selects by magnitude and lines 8 and 11 also release
    values. We rely instead on the pure-DP coupling below, and take ``b = max(b_paper,
    b_pure)``: never less noise than the paper. ``b_pure`` is the active term when
    ``c(k, d) > 2 sqrt(k' log(d / delta_row))`` (``laplace_rule`` says which); for
    delta = 1e-6 that is k above about 10.

    **Claim (one row is ``c Delta / b``-DP, pure).** Fix row i and neighbours D, D' (one row
    of X replaced). Every entry of row i of the clipped second moment moves by
    ``a_j = Sigma'_ij - Sigma_ij``, ``|a_j| <= Delta`` (rows clipped entrywise to [-R, R]:
    each product moves by at most 2 R^2, divided by n). The row's output is ``(S, v)``:
    ``y_j = Sigma_ij + w_j``, S = the k indices of largest ``|y_j|`` (line 6), and
    ``v_j = Sigma_ij + z_j`` for j in ``S u {i}`` (lines 8 and 11), with w, z i.i.d.
    Laplace(b). Fix an output set S and let ``E_S = {w : S(w) = S}`` under D. Define
    ``phi(w, z) = (w', z')`` by

    * ``w'_j = w_j + 2 Delta sign(y_j)`` for j in S, ``w'_j = w_j`` otherwise;
    * ``z'_j = z_j - a_j`` for j in ``S u {i}``, ``z'_j = z_j`` otherwise.

    Under D' with noise ``(w', z')``: for j in S, ``y'_j = y_j + a_j + 2 Delta sign(y_j)``
    has the sign of y_j and ``|y'_j| >= |y_j| + Delta``; for l not in S, ``|y'_l| = |y_l +
    a_l| <= |y_l| + Delta``. As ``|y_l| <= |y_j|`` (ties have probability 0), every
    unselected score stays below every selected one: S is selected again, and ``v' = v``.
    phi is a translation on each of the finitely many regions of constant ``sign(y_j)``
    (j in S), and it is injective on ``E_S x R^d``: ``sign(y'_j) = sign(y_j)`` is read off
    ``w'``, which recovers w. The Laplace density ratio is at most
    ``exp(sum |shift| / b) <= exp((2 Delta |S| + Delta |S u {i}|) / b)``, and ``|S| = k``,
    ``|S u {i}| <= k'``. So for every event A of outputs with set S,
    ``P_D[A] <= e^{(2k + k') Delta / b} P_D'[A]``, and summing over S gives pure
    ``(2k + k') Delta / b``-DP. When ``k = d``, S is all of [d] whatever the noise: no shift of
    w is needed and the row is ``k' Delta / b``-DP. Hence ``b >= c(k, d) Delta / eps_row``
    makes every row (eps_row, 0)-DP (a fortiori (eps_row, delta_row)-DP). The same holds for
    the computed second moment with ``Delta_fl`` (its entries move by at most ``Delta_fl``,
    :func:`gram_rounding_factor`), and for continuous noise; the noise actually drawn is
    the lattice version of :class:`dpdist.privacy.mechanisms.PrivCovMechanism`, whose
    sensitivity in lattice units covers the rounding (floating-point sampling would be outside
    the proof: Mironov 2012). We know no tighter valid
    bound for the magnitude selection with released values: the 2 Delta shift is needed
    because the unselected scores may each rise by Delta while a selected one falls by Delta.

    Composition: the d rows compose by advanced composition (DR14 Theorem 3.20, delta' =
    delta / 2) to (eps*, d delta_row + delta/2 = delta) (the d delta_row term is kept, though
    the coupling gives delta_row = 0). The paper bounds eps* <= eps using e^x - 1 <= 2x,
    valid for x <= 1. For eps > 1 that shortcut may not hold, so this function evaluates the
    exact composition bound (and basic composition, d * eps_row, whichever is smaller) and
    refuses a calibration whose composed total exceeds the requested epsilon.
    """
    epsilon, delta, n, d, k, clip = _check_privcov_inputs(epsilon, delta, n_samples, n_features, k, clip)
    k_released = min(k + 1, d)
    delta_row = delta / (2 * d)
    eps_row = (epsilon / 4) / math.sqrt(2 * d * math.log(2 / delta))
    sensitivity = 2 * clip**2 / n
    sens_fl, kappa = float_sensitivity(sensitivity, n)
    b_paper = (2 * sens_fl / eps_row) * math.sqrt(k_released * math.log(d / delta_row))
    b_pure = privcov_pure_coefficient(k, d) * sens_fl / eps_row
    if b_pure > b_paper:
        b, rule = b_pure, f"pure-DP coupling: c Delta / eps_row, c = {privcov_pure_coefficient(k, d)}"
    else:
        b, rule = b_paper, "paper (Algorithm 1 line 4, with k+1)"
    advanced = advanced_composition_epsilon(eps_row, d, delta / 2)
    basic = d * eps_row
    if advanced <= basic:
        composed, composed_delta, how = advanced, d * delta_row + delta / 2, "advanced (DR14 Thm 3.20)"
    else:
        composed, composed_delta, how = basic, d * delta_row, "basic (DR14 Thm 3.16)"
    if composed > epsilon * (1 + 1e-12):
        raise ValidationError(
            f"epsilon={epsilon} is too large for the per-row split of Algorithm 1 at d={d}: "
            f"the composed total would be {composed:.4g} > epsilon; use a smaller epsilon"
        )
    return PrivCovCalibration(
        epsilon=epsilon,
        delta=delta,
        n_samples=n,
        n_features=d,
        k=k,
        clip=clip,
        k_released=k_released,
        delta_row=delta_row,
        epsilon_row=eps_row,
        sensitivity=sensitivity,
        float_factor=kappa,
        laplace_scale_paper=b_paper,
        laplace_scale_pure=b_pure,
        laplace_rule=rule,
        laplace_scale=b,
        composed_epsilon=composed,
        composed_delta=composed_delta,
        composition=how,
    )


def privcov_error_bound(cal: PrivCovCalibration, sigma: float, beta: float) -> dict:
    """Theorem 1's operator-norm error bound for a calibration, with its pieces.

    From the proof of Theorem 1, equation (4): with probability >= 1 - beta (when no entry is
    clipped), ``||M - Sigma||_op <= 6 k lambda`` with ``lambda = lambda_samp + lambda_priv``,
    ``lambda_samp = C sigma^2 (sqrt(log(6d/beta)/n) + log(6d/beta)/n)`` (C =
    :data:`SAMPLING_CONSTANT`) and ``lambda_priv = b log(12 d^2 / beta)``.
    """
    n, d, k = cal.n_samples, cal.n_features, cal.k
    lam_samp = _sampling_lambda(sigma, n, d, beta)
    lam_priv = cal.laplace_scale * math.log(12 * d**2 / beta)
    lam = lam_samp + lam_priv
    return {
        "lambda_samp": lam_samp,
        "lambda_priv": lam_priv,
        "lambda": lam,
        "error_bound": 6 * k * lam,
        "relative_error_bound": 6 * k * lam / sigma**2,
    }


@dataclass(frozen=True)
class PrivCovZCDPCalibration:
    """All constants of one run of PrivCov with the zCDP analysis (``selection="laplace"``),
    computed from public values (:func:`privcov_zcdp_calibration`).

    ``sensitivity`` and ``float_factor`` are as in :class:`PrivCovCalibration` (Delta =
    2 R^2 / n and kappa(n)). ``laplace_scale`` is the selection's Laplace scale b,
    ``gaussian_sigma`` the release's Gaussian sigma; ``rho = rho_selection + rho_release``
    is the zCDP budget whose tight conversion is the requested (epsilon, delta).
    """

    epsilon: float
    delta: float
    n_samples: int
    n_features: int
    k: int
    clip: float
    beta: float
    k_released: int
    rho: float
    selection_share: float
    rho_selection: float
    rho_release: float
    sensitivity: float
    float_factor: float
    selection_coefficient: int
    selection_row_epsilon: float
    laplace_scale: float
    release_coordinates: int
    release_sensitivity: float
    gaussian_sigma: float
    row_clip: float
    release_sensitivity_entry: float
    release_sensitivity_row: float

    def to_dict(self) -> dict:
        return asdict(self)


def _privcov_zcdp_logs(n_features: int, beta: float) -> tuple[float, float]:
    """``(log(6 d^2 / beta), log(12 d / beta))``: the union-bound logarithms of
    :func:`privcov_zcdp_error_bound` (selection noise, release noise)."""
    d = int(n_features)
    return math.log(6.0 * d * d / beta), math.log(12.0 * d / beta)


def _privcov_release(rho: float, c1: float, k: int, k_released: int, log_rel: float, release_sens: float,
                     entry_route: float):
    """The split of rho between a zCDP PrivCov's selection and its Gaussian release, and the
    release's sigma: ``f / (1 - f) = (C_1 / C_2)^(2/3)`` with the selection's constant ``c1``
    (0 when the selection is free: f = 0) and the release's ``C_2 = sqrt(k' (k + 2) L_2)`` on the
    entry route, proportional to the release's L2 sensitivity ``release_sens`` (one Gaussian
    mechanism). Returns ``(f, rho_sel, rho_rel, sigma)``."""
    c2 = math.sqrt(k_released * (k + 2) * log_rel) * (release_sens / entry_route)
    if c1:
        ratio = (c1 / c2) ** (2.0 / 3.0)
        share = ratio / (1.0 + ratio)
    else:
        share = 0.0
    rho_rel = (1.0 - share) * rho
    return share, share * rho, rho_rel, release_sens / math.sqrt(2.0 * rho_rel)


def privcov_zcdp_calibration(
    epsilon: float, delta: float, n_samples: int, n_features: int, k: int, clip: float, beta: float = 0.1,
    *, row_clip: float = math.inf,
) -> PrivCovZCDPCalibration:
    """Calibrate PrivCov's selection and release by zCDP (``selection="laplace"``).

    The guarantee, proved in docs/privacy/privcov.md and
    :mod:`dpdist.privacy.mechanisms.privcov`: each row's selection (noisy top-k by
    magnitude, Laplace(b) noise) is pure ``2 k Delta_fl / b``-DP, hence ``(2 k Delta_fl /
    b)^2 / 2``-zCDP (Bun-Steinke 2016, Prop. 1.4); all released values together (d k'
    coordinates, ``k' = min(k + 1, d)``) are one Gaussian mechanism of L2 sensitivity
    ``sqrt(d k') Delta_fl``, hence ``d k' Delta_fl^2 / (2 sigma^2)``-zCDP (Prop. 1.6); zCDP
    composes by adding (Lemma 2.3), and rho-zCDP is (epsilon, delta)-DP by the tight
    conversion of Canonne, Kamath and Steinke 2020 (Prop. 12). So::

        rho        = the largest rho that converts to (epsilon, delta)   (cks20_rho)
        rho_sel    = f rho,  rho_rel = (1 - f) rho
        eps_sel    = sqrt(2 rho_sel / d)                  (pure epsilon of one row's selection)
        b          = 2 k Delta_fl / eps_sel
        sigma      = sqrt(d k') Delta_fl / sqrt(2 rho_rel)

    When ``k = d`` every column is selected whatever the noise: the selection costs nothing,
    ``f = 0`` (b is then irrelevant; it is set to sigma).

    The split f minimises the error bound of :func:`privcov_zcdp_error_bound`,
    ``6 k b L_1 + sigma sqrt((k + 2) L_2)`` (its only terms that depend on f), which is
    ``C_1 / sqrt(f) + C_2 / sqrt(1 - f)`` times ``Delta_fl sqrt(d / (2 rho))`` with ``C_1 = 12
    k^2 L_1`` and ``C_2 = sqrt(k' (k + 2) L_2)``; its minimum is at ``f / (1 - f) = (C_1 /
    C_2)^(2/3)``. beta (public) enters only through the logarithms ``L_1, L_2``.

    With ``row_clip`` C finite (rows scaled to L2 norm at most C after the entry clip), the
    release's L2 sensitivity is :func:`privcov_release_sensitivity`'s ``min(sqrt(d k')
    Delta_fl, kappa(n) 2 C min(R sqrt(k'), C) / n)`` (docs/privacy/privcov.md, Lemma 3a), sigma
    is that over ``sqrt(2 rho_rel)``, and ``C_2`` is multiplied by its ratio to ``sqrt(d k')
    Delta_fl`` (``C_2 = sqrt((k + 2) L_2) Delta_rel / (sqrt(d) Delta_fl)``): the split moves
    towards the selection. ``release_sensitivity_entry`` and ``release_sensitivity_row`` record
    both routes. The selection's entry sensitivity ``Delta_fl`` is unchanged (scaling only
    shrinks entries).
    """
    epsilon, delta, n, d, k, clip = _check_privcov_inputs(epsilon, delta, n_samples, n_features, k, clip)
    beta = check_probability(beta, "beta")
    row_clip = check_row_clip(row_clip, allow_none=False)
    k_released = min(k + 1, d)
    sensitivity = 2 * clip**2 / n
    sens_fl, kappa = float_sensitivity(sensitivity, n)
    release_sens, entry_route, row_route = privcov_release_sensitivity(n, d, k_released, clip, row_clip)
    rho = cks20_rho(epsilon, delta)
    coefficient = 2 * k if k < d else 0
    log_sel, log_rel = _privcov_zcdp_logs(d, beta)
    coordinates = d * k_released
    share, rho_sel, rho_rel, sigma = _privcov_release(
        rho, 12.0 * k * k * log_sel if coefficient else 0.0, k, k_released, log_rel, release_sens, entry_route)
    if coefficient:
        eps_sel = math.sqrt(2.0 * rho_sel / d)
        b = coefficient * sens_fl / eps_sel
    else:
        eps_sel, b = 0.0, sigma
    return PrivCovZCDPCalibration(
        epsilon=epsilon,
        delta=delta,
        n_samples=n,
        n_features=d,
        k=k,
        clip=clip,
        beta=beta,
        k_released=k_released,
        rho=rho,
        selection_share=share,
        rho_selection=rho_sel,
        rho_release=rho_rel,
        sensitivity=sensitivity,
        float_factor=kappa,
        selection_coefficient=coefficient,
        selection_row_epsilon=eps_sel,
        laplace_scale=b,
        release_coordinates=coordinates,
        release_sensitivity=release_sens,
        gaussian_sigma=sigma,
        row_clip=row_clip,
        release_sensitivity_entry=entry_route,
        release_sensitivity_row=row_route,
    )


def privcov_zcdp_error_bound(cal: PrivCovZCDPCalibration, sigma: float, beta: float) -> dict:
    """Operator-norm error bound of PrivCov with the zCDP calibration, with its pieces.

    With probability >= 1 - beta, when no entry is clipped::

        ||M - Sigma||_op <= 6 k (lambda_samp + lambda_priv) + lambda_release
        lambda_samp    = C sigma^2 (sqrt(log(6d/beta)/n) + log(6d/beta)/n)      (as Theorem 1)
        lambda_priv    = b log(6 d^2 / beta)                  (every selection noise, k < d)
        lambda_release = sigma_rel sqrt((k + 2) log(12 d / beta))

    Proof (Theorem 1's, with the release noise kept apart; docs/privacy/privcov.md): the
    events "no clipping" and "every entry of Sigma_hat within lambda_samp" fail with
    probability beta/3 each (Theorem 1), "every one of the d^2 selection noises within
    lambda_priv" with at most ``d^2 e^{-lambda_priv / b} = beta/6``. On them, an entry with
    ``|Sigma_ij| > 2 (lambda_samp + lambda_priv)`` beats every zero entry of its row, so it is
    selected (Theorem 1's (7)). Write ``M - Sigma = Z + E``: Z holds the release noise of M
    (``(z_ij + z_ji) / 2`` on each mutually selected pair, ``z_ii`` on the diagonal), E the
    rest. E has at most 3k non-zero entries a row (M is (k+1)-RCS, Sigma k-RCS), each at most
    ``2 (lambda_samp + lambda_priv)`` (unselected entries by (7), released ones within
    lambda_samp), so ``||E||_op <= 6 k (lambda_samp + lambda_priv)``. Given the selection
    (independent of the release noise), Z is a symmetric Gaussian series whose variance
    ``||sum A^2||`` is at most ``sigma_rel^2 (1 + k / 2)`` (a diagonal entry of variance
    sigma_rel^2 and at most k pairs of variance sigma_rel^2 / 2 a row), so ``||Z||_op <=
    lambda_release`` but with probability ``2 d e^{-lambda_release^2 / (2 sigma_rel^2 (1 +
    k/2))} = beta/6`` (Tropp 2012, Theorem 4.1.1). The lattice's rounding (at most
    ``2**-28`` of the noise scales) is left out, as in Theorem 1's bound.
    """
    n, d, k = cal.n_samples, cal.n_features, cal.k
    log_sel, log_rel = _privcov_zcdp_logs(d, beta)
    lam_samp = _sampling_lambda(sigma, n, d, beta)
    lam_priv = cal.laplace_scale * log_sel if cal.selection_coefficient else 0.0
    lam_rel = cal.gaussian_sigma * math.sqrt((k + 2) * log_rel)
    err = 6 * k * (lam_samp + lam_priv) + lam_rel
    return {
        "lambda_samp": lam_samp,
        "lambda_priv": lam_priv,
        "lambda_release": lam_rel,
        "lambda": lam_samp + lam_priv,
        "error_bound": err,
        "relative_error_bound": err / sigma**2,
    }


@dataclass(frozen=True)
class PrivCovGumbelCalibration:
    """All constants of one run of PrivCov with Gumbel top-k selection (``selection="gumbel"``),
    computed from public values (:func:`privcov_gumbel_calibration`).

    ``sensitivity`` and ``float_factor`` are as in :class:`PrivCovCalibration`. ``gumbel_scale``
    is the selection's Gumbel scale beta in data units (the keys are ``|S_ij| / beta + G_ij``),
    ``selection_steps`` the number of exponential-mechanism steps of one row (k, or 0 when
    ``k = d``: the selection is then a constant), ``selection_step_epsilon`` the bounded-range
    parameter ``2 Delta_fl / beta`` of one step, ``gaussian_sigma`` the release's Gaussian sigma;
    ``rho = rho_selection + rho_release`` is the zCDP budget whose tight conversion is the
    requested (epsilon, delta).
    """

    epsilon: float
    delta: float
    n_samples: int
    n_features: int
    k: int
    clip: float
    beta: float
    k_released: int
    rho: float
    selection_share: float
    rho_selection: float
    rho_release: float
    sensitivity: float
    float_factor: float
    selection_steps: int
    selection_step_epsilon: float
    gumbel_scale: float
    release_coordinates: int
    release_sensitivity: float
    gaussian_sigma: float
    row_clip: float
    release_sensitivity_entry: float
    release_sensitivity_row: float
    selection_sensitivity: float
    selection_sensitivity_row: float

    def to_dict(self) -> dict:
        return asdict(self)


def _privcov_gumbel_logs(n_features: int, beta: float) -> tuple[float, float]:
    """``(T, log(12 d / beta))`` of :func:`privcov_gumbel_error_bound`: ``T = t_up + t_low`` with
    ``t_up = log(12 d^2 / beta)`` (``d^2 P(G > t_up) <= d^2 e^-t_up = beta/12``) and ``t_low =
    log(log(12 d^2 / beta))`` (``d^2 P(G < -t_low) = d^2 exp(-e^t_low) = beta/12``), G standard
    Gumbel; the second is the release noise's union-bound logarithm."""
    d = int(n_features)
    t_up = math.log(12.0 * d * d / beta)
    return t_up + math.log(t_up), math.log(12.0 * d / beta)


def privcov_gumbel_calibration(
    epsilon: float, delta: float, n_samples: int, n_features: int, k: int, clip: float, beta: float = 0.1,
    *, row_clip: float = math.inf,
) -> PrivCovGumbelCalibration:
    """Calibrate PrivCov with Gumbel top-k selection and a Gaussian release (``selection="gumbel"``).

    The guarantee, proved in docs/privacy/privcov.md and
    :mod:`dpdist.privacy.mechanisms.privcov`: row i's selection, the k largest keys
    ``|S_ij| / beta + G_ij`` (G i.i.d. standard Gumbel), has the law of k peeling steps of the
    exponential mechanism with utility ``|S_ij|`` (Durfee and Rogers 2019); a step whose
    utilities move by at most ``Delta_fl`` between neighbours is ``(2 Delta_fl / beta)``-bounded
    range, hence ``(2 Delta_fl / beta)^2 / 8``-zCDP (Cesar and Rogers 2021); the ``d k`` steps
    and the Gaussian release of the ``d k'`` selected values and diagonal entries (L2
    sensitivity ``sqrt(d k') Delta_fl``) compose in zCDP, converted by CKS20 (Prop. 12)::

        rho        = the largest rho that converts to (epsilon, delta)   (cks20_rho)
        rho_sel    = f rho,  rho_rel = (1 - f) rho
        eps_step   = sqrt(8 rho_sel / (d k))       (bounded range of one step)
        beta_g     = 2 Delta_fl / eps_step = Delta_fl sqrt(d k / (2 rho_sel))
        sigma      = sqrt(d k') Delta_fl / sqrt(2 rho_rel)

    At the same rho_sel the Laplace selection of :func:`privcov_zcdp_calibration` needs ``b =
    2 k Delta_fl sqrt(d / (2 rho_sel))``: ``b / beta_g = 2 sqrt(k)``.

    When ``k = d`` every column is selected whatever the noise: the selection costs nothing,
    ``f = 0`` (beta_g is then irrelevant; it is set to sigma).

    The split f minimises :func:`privcov_gumbel_error_bound`'s terms that depend on it,
    ``3 k T beta_g + sigma sqrt((k + 2) L_2)`` = ``Delta_fl sqrt(d / (2 rho)) (C_1 / sqrt(f) +
    C_2 / sqrt(1 - f))`` with ``C_1 = 3 k^1.5 T`` and ``C_2 = sqrt(k' (k + 2) L_2)``; convex in
    f, least at ``f / (1 - f) = (C_1 / C_2)^(2/3)``. beta (public) enters only through T, L_2.

    With ``row_clip`` C finite (rows scaled to L2 norm at most C after the entry clip), the
    release and ``C_2`` are those of :func:`privcov_zcdp_calibration` with a row clip (Lemma 3a).
    The selection's steps are calibrated to the rows' root-mean-square score
    sensitivity ``Delta_sel`` of :func:`privcov_selection_sensitivity` (``min(Delta_fl, kappa(n)
    2 C min(R, C) / (n sqrt(d)))``, Lemma 4a) in place of ``Delta_fl``: ``beta_g = 2 Delta_sel /
    eps_step``, and ``C_1`` is multiplied by ``Delta_sel / Delta_fl``.
    """
    epsilon, delta, n, d, k, clip = _check_privcov_inputs(epsilon, delta, n_samples, n_features, k, clip)
    beta = check_probability(beta, "beta")
    row_clip = check_row_clip(row_clip, allow_none=False)
    k_released = min(k + 1, d)
    sensitivity = 2 * clip**2 / n
    sens_fl, kappa = float_sensitivity(sensitivity, n)
    release_sens, entry_route, row_route = privcov_release_sensitivity(n, d, k_released, clip, row_clip)
    sel_sens, _, sel_row_route = privcov_selection_sensitivity(n, d, clip, row_clip)
    rho = cks20_rho(epsilon, delta)
    steps = k if k < d else 0
    t_sel, log_rel = _privcov_gumbel_logs(d, beta)
    coordinates = d * k_released
    # C_1 = 3 k^1.5 T on the entry route, proportional to the selection's root-mean-square row sensitivity
    c1 = 3.0 * k * math.sqrt(k) * t_sel * (sel_sens / sens_fl) if steps else 0.0
    share, rho_sel, rho_rel, sigma = _privcov_release(rho, c1, k, k_released, log_rel, release_sens, entry_route)
    if steps:
        eps_step = math.sqrt(8.0 * rho_sel / (d * steps))
        scale = 2.0 * sel_sens / eps_step
    else:
        eps_step, scale = 0.0, sigma
    return PrivCovGumbelCalibration(
        epsilon=epsilon,
        delta=delta,
        n_samples=n,
        n_features=d,
        k=k,
        clip=clip,
        beta=beta,
        k_released=k_released,
        rho=rho,
        selection_share=share,
        rho_selection=rho_sel,
        rho_release=rho_rel,
        sensitivity=sensitivity,
        float_factor=kappa,
        selection_steps=steps,
        selection_step_epsilon=eps_step,
        gumbel_scale=scale,
        release_coordinates=coordinates,
        release_sensitivity=release_sens,
        gaussian_sigma=sigma,
        row_clip=row_clip,
        release_sensitivity_entry=entry_route,
        release_sensitivity_row=row_route,
        selection_sensitivity=sel_sens,
        selection_sensitivity_row=sel_row_route,
    )


def privcov_gumbel_error_bound(cal: PrivCovGumbelCalibration, sigma: float, beta: float) -> dict:
    """Operator-norm error bound of PrivCov with Gumbel selection, with its pieces.

    With probability >= 1 - beta, when no entry is clipped::

        ||M - Sigma||_op <= 6 k (lambda_samp + lambda_priv) + lambda_release
        lambda_samp    = C sigma^2 (sqrt(log(6d/beta)/n) + log(6d/beta)/n)      (as Theorem 1)
        lambda_priv    = beta_g (t_up + t_low) / 2                               (0 when k = d)
        t_up = log(12 d^2 / beta),  t_low = log(t_up)
        lambda_release = sigma_rel sqrt((k + 2) log(12 d / beta))

    Proof (docs/privacy/privcov.md): as :func:`privcov_zcdp_error_bound`'s, with the
    selection event "every Gumbel ``G_ij`` lies in ``[-t_low, t_up]``", which fails with
    probability at most ``d^2 e^-t_up + d^2 exp(-e^t_low) = beta/6`` (``P(G > t) <= e^-t``,
    ``P(G < -t) = exp(-e^t)``). On it, an entry with ``|Sigma_ij| > 2 lambda_samp + beta_g
    (t_up + t_low)`` has key (in data units) ``|S_ij| + beta_g G_ij > lambda_samp + beta_g
    t_up``, above the key of every zero entry of its row; at most k - 1 other entries of the
    row are non-zero, so it is selected, and every unselected entry is at most ``2
    (lambda_samp + lambda_priv)``. The rest is unchanged (E with at most 3k non-zero entries a
    row, the matrix Gaussian series for the release noise).
    """
    n, d, k = cal.n_samples, cal.n_features, cal.k
    t_sel, log_rel = _privcov_gumbel_logs(d, beta)
    lam_samp = _sampling_lambda(sigma, n, d, beta)
    lam_priv = cal.gumbel_scale * t_sel / 2.0 if cal.selection_steps else 0.0
    lam_rel = cal.gaussian_sigma * math.sqrt((k + 2) * log_rel)
    err = 6 * k * (lam_samp + lam_priv) + lam_rel
    return {
        "lambda_samp": lam_samp,
        "lambda_priv": lam_priv,
        "lambda_release": lam_rel,
        "lambda": lam_samp + lam_priv,
        "error_bound": err,
        "relative_error_bound": err / sigma**2,
    }


def privcov_min_samples(
    target_error: float,
    epsilon: float,
    delta: float,
    n_features: int,
    k: int,
    *,
    sigma: float,
    beta: float,
    clip: float | None = None,
) -> int:
    """Least n for which :func:`privcov_error_bound` is <= ``target_error`` (an absolute
    operator-norm error; divide by sigma^2 for Problem 1's alpha). The clip level follows
    :func:`subgaussian_clip` at each n unless ``clip`` is fixed."""
    target_error = check_positive(target_error, "target_error")

    def bound(n: int) -> float:
        r = clip if clip is not None else subgaussian_clip(sigma, n, n_features, beta)
        cal = privcov_calibration(epsilon, delta, n, n_features, k, r)
        return privcov_error_bound(cal, sigma, beta)["error_bound"]

    return search_min_samples(bound, target_error, start=4, limit=1 << 62)


def search_min_samples(error_at, target: float, *, start: int = 40, limit: int = 10**40) -> int:
    """Least n with ``error_at(n) <= target`` for a non-increasing ``error_at`` (doubling,
    then bisection to 0.1% relative precision). Raises ValidationError when unreachable."""
    target = check_positive(target, "target error")
    lo, hi = start // 2, start
    while error_at(hi) > target:
        lo, hi = hi, hi * 2
        if hi > limit:
            raise ValidationError(f"target error {target} is not reachable at any sample size")
    while hi - lo > max(1, lo // 1000):
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if error_at(mid) <= target else (mid, hi)
    return int(hi)


def classic_gaussian_sigma(sensitivity: float, epsilon: float, delta: float) -> float:
    """Classic Gaussian mechanism (DR14 Theorem A.1): sigma = Delta sqrt(2 ln(1.25/delta)) / eps.

    Valid for eps < 1 only.
    """
    if not epsilon < 1:
        raise ValidationError("the classic Gaussian mechanism needs epsilon < 1")
    return sensitivity * math.sqrt(2 * math.log(1.25 / delta)) / epsilon


def analytic_gaussian_sigma(sensitivity: float, epsilon: float, delta: float) -> float:
    """Smallest sigma of the analytic Gaussian mechanism (Balle & Wang 2018, Theorem 8).

    ``delta(sigma) = Phi(D/(2 s) - eps s / D) - e^eps Phi(-D/(2 s) - eps s / D)`` is
    decreasing in s; we return the s where it equals ``delta`` (found by bracketing root
    search, then nudged up by one part in 1e9 so the inequality holds after rounding; for a
    small mu and epsilon, delta is evaluated without cancellation,
    :func:`~dpdist.privacy.accounting.gaussian_profile_delta`). Exact (necessary and
    sufficient) for every eps > 0.
    """

    def excess(s: float) -> float:
        a = sensitivity / (2 * s)
        b = epsilon * s / sensitivity
        return gaussian_profile_delta(sensitivity / s, epsilon, a - b, -a - b) - delta

    lo, hi = 1e-12 * sensitivity, sensitivity
    while excess(hi) > 0:
        hi *= 2
    s = optimize.brentq(excess, lo, hi, xtol=1e-15 * sensitivity, rtol=1e-14)
    return s * (1 + 1e-9)


def gaussian_mu(epsilon: float, delta: float) -> float:
    """The largest mu such that mu-GDP implies (epsilon, delta)-DP: ``1 / sigma`` of the analytic
    Gaussian mechanism at sensitivity 1 (mu-GDP is exactly the profile of the Gaussian mechanism
    with noise multiplier 1/mu; Dong, Roth and Su 2019, Corollary 2.13). Gaussian stages that
    compose in GDP share ``mu^2``."""
    return 1.0 / analytic_gaussian_sigma(1.0, check_epsilon(epsilon), check_delta(delta))


def gaussian_sigma(sensitivity: float, epsilon: float, delta: float) -> tuple[float, str]:
    """Gaussian noise scale for an L2 ``sensitivity`` at (eps, delta), for every eps > 0: the
    analytic Gaussian mechanism (:func:`analytic_gaussian_sigma`). Its condition on sigma is
    necessary and sufficient for one Gaussian mechanism to be (eps, delta)-DP, so no other
    calibration of a single Gaussian release (the classic formula, a zCDP conversion) is
    smaller; at delta = 1e-6 it is 24% below the classic formula at eps = 0.5 and 31% below
    at eps = 0.1.
    Returns (sigma, rule)."""
    return analytic_gaussian_sigma(sensitivity, epsilon, delta), "analytic (Balle-Wang 2018)"


def wang_xu_calibration(
    epsilon: float, delta: float, n_samples: int, n_features: int, clip: float
) -> dict:
    """Wang-Xu 2021 style release of the whole entry-clipped second moment.

    Rows y with entries in [-R, R] have ``||y y^T||_F <= R^2 d``; replacing one row moves
    (1/n) sum y y^T by at most ``2 R^2 d / n`` in Frobenius norm, which bounds the L2
    sensitivity of the released upper triangle (diagonal included). Symmetric Gaussian noise
    of scale :func:`gaussian_sigma` on that triangle is (eps, delta)-DP.

    The noise is calibrated for ``kappa(n)`` times that sensitivity, which bounds the
    computed matrix (:func:`gram_rounding_factor`: terms ``|y_i| |y_i|^T`` of Frobenius norm
    ``||y_i||^2 <= R^2 d = B``).
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    clip = check_positive(clip, "clip")
    n = check_int(n_samples, "n_samples", low=1)
    d = check_int(n_features, "n_features", low=1)
    sens = 2 * clip**2 * d / n
    sens_fl, kappa = float_sensitivity(sens, n)
    sigma, rule = gaussian_sigma(sens_fl, epsilon, delta)
    return {"sensitivity": sens, "float_factor": kappa, "gaussian_sigma": sigma, "rule": rule}
