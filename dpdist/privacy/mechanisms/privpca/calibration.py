"""Calibration of PrivNorm (Algorithm 3) and PrivPCA (Algorithm 2) of the COLT 2026 paper.

Every function here turns *public* parameters (epsilon, delta, k, gap, sigma, tau, the number
of batches, lambda_hat) into a noise scale or a test threshold, and cites the formula it
implements. Nothing here sees data, and nothing here imports dask or zarr. The predicted
errors (Lemma 21, Lemma 12) are utility and live in :mod:`dpdist.algorithms.sparse_pca.plan`.

Where this module deviates from a printed formula it says *deviation* and gives the reason;
deviations 1, 2 and 4 only make noise larger (or a test stricter), deviation 3 replaces a
sufficient condition by the exact one. The deviations are:

1. **Lemma 10's gap** (:func:`privpca_sensitivity`). The proof applies Lemma 1 with
   ``gap = gamma * lambda_hat / 2``, but Definition 4 with parameter gamma/2 only guarantees
   ``lambda_1 - lambda_2 >= (gamma/2) lambda_1 >= (gamma/2)(1 - gamma/2) lambda_hat``. The
   sensitivity is therefore ``80 sqrt(2) k tau / (gamma (1 - gamma/2) lambda_hat)``: larger
   than the printed (13) by the factor ``1 / (1 - gamma/2)`` (at most 4/3 for gamma < 1/2).
2. **Fact 3 for large epsilon** (:func:`bounded_laplace_test`). The bounded Laplace
   mechanism with bound ``(Delta/eps) log(4/delta)`` is (eps, delta)-DP only while
   ``e^eps + delta <= 4``; Fact 3 is stated for eps <= 1. In general the coupling gives
   ``delta_eff = e^eps q / (1 - q)`` with ``q = exp(-bound/scale)``, so the bound used is
   ``scale * max(log(4/delta), log((e^eps + delta)/delta))``, which equals the paper's for
   every per-test eps <= log(4 - delta) (about 1.386) and is larger beyond.
3. **The Gaussian releases** (:func:`gaussian_release_sigma`). The printed Gaussian
   mechanism ``sigma = 2 Delta sqrt(log(2/delta)) / eps`` (Fact 2, stated for eps <= 1) is
   replaced by the analytic Gaussian mechanism (Balle & Wang 2018) at the same per-release
   (eps, delta): exact for a Gaussian mechanism of sensitivity Delta, valid for every eps, and
   smaller (this deviation lowers the noise; it is the only one that does, and it needs
   nothing of the proof but that the release is a Gaussian mechanism of sensitivity Delta).

4. **Floating point** (:func:`friendly_float_bounds`). The released statistics are
   computed in floats whose rounding grows with the data's magnitude. The engine clips
   every input entry to a public level ``c`` (:func:`friendly_entry_clip`, from the declared
   sigma), thresholds ``Sigma_bar`` at ``5 tau + eta`` instead of ``5 tau`` (eta a public bound
   on the rounding of ``Sigma_bar``), and the sensitivities below add the remaining proven
   error. With Model 1 data no entry is clipped except with probability beta/3, and eta is
   about ``1e-16 n c^2``, far below tau.

Budget split (Lemma 8, Corollary 1, Lemma 20): each of the three private steps of one run
(the test on |C|, the test on Z, and the Gaussian release) gets (epsilon/3, delta/3); basic
composition gives (epsilon, delta).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from dpdist._validation import check_int, check_positive, check_probability
from dpdist.exceptions import ValidationError
from dpdist.privacy.budget import check_delta, check_epsilon
from dpdist.privacy.float_rounding import GRAM_BATCH_ROWS, UNIT_ROUNDOFF, rounding_gamma
from dpdist.privacy.mechanisms.gaussian import analytic_gaussian_sigma
from dpdist.privacy.mechanisms.privcov.calibration import subgaussian_clip

__all__ = [
    "DEFAULT_BETA",
    "GOOD_FRACTION",
    "MIN_BATCHES",
    "PASS_FRACTION",
    "TAU_CONSTANT",
    "COUNT_SENSITIVITY",
    "WEIGHT_SENSITIVITY",
    "EIGEN_BLOCK_LIMIT",
    "EIGEN_ERROR",
    "FriendlyFloatBounds",
    "FriendlyTestCalibration",
    "GaussianReleaseCalibration",
    "batch_sizes",
    "bounded_laplace_test",
    "check_gap",
    "check_k",
    "check_n_batches",
    "default_n_batches",
    "friendly_entry_clip",
    "friendly_float_bounds",
    "friendly_tau",
    "friendly_test_calibration",
    "gaussian_release_sigma",
    "privnorm_calibration",
    "privnorm_sensitivity",
    "privpca_calibration",
    "privpca_sensitivity",
    "split_norm_and_pca_budget",
]

#: Constant C of eq. (11), ``tau = C sigma^2 sqrt(log(d / beta) / b)``. The paper asks for "a
#: sufficiently large constant". Our choice: for Gaussian rows, ``Var(x_a x_b) <= 2 sigma^4``,
#: so a Bernstein/Gaussian-tail union bound over the d^2 entries of one batch moment gives a
#: max-entry deviation of about ``2 sigma^2 sqrt((2 log d + log(2/beta)) / b)``; C = 4 covers
#: that with a margin of at least sqrt(2) for every d >= 2 and beta <= 0.05, so that good
#: batches pass the friend test (pairwise distance <= 2 tau) on Model 1 data. Utility only:
#: privacy holds for any tau. Users override it with ``tau=``.
TAU_CONSTANT = 4.0

#: Default failure probability beta of the utility statements (eq. (11), plan()).
DEFAULT_BETA = 0.05

#: Lemma 9 needs ``m + 1 - 4 (0.2 m + 1) >= 1``, i.e. m >= 20, for two neighbouring runs that
#: both pass the tests to share a good batch. Below 20 batches the privacy proof fails, so
#: fewer batches are refused.
MIN_BATCHES = 20

#: Lines 4 and 13: a run continues only when the noisy, shifted statistic is >= 0.8 m.
PASS_FRACTION = 0.8

#: Fraction of good batches assumed by :func:`default_n_batches` (Lemma 11 gives >= 0.9 m
#: with high probability, typically close to m; we plan for 0.95 m).
GOOD_FRACTION = 0.95

#: Sensitivity of |C| (Lemma 8): one row changes one batch.
COUNT_SENSITIVITY = 1.0

#: Sensitivity of Z = sum p_i (Lemma 8, eq. (12)): 1 + (m - 1) 6/m <= 7.
WEIGHT_SENSITIVITY = 7.0


def check_k(k, n_features: int | None = None) -> int:
    """Validate the sparsity ``k`` (an int >= 1, and <= d when d is known)."""
    k = check_int(k, "k", low=1)
    if n_features is not None and k > n_features:
        raise ValidationError(f"k must satisfy k <= n_features = {n_features}, got k={k}")
    return k


def check_gap(gap) -> float:
    """Validate the eigengap parameter gamma (``gap``): a real number, 0 < gap < 1.

    Privacy needs ``1 - gap/2 > 0`` (Lemma 10, deviation 1); Model 1 itself asks gap < 1/2.
    """
    return check_probability(gap, "gap")


def _check_positive(value, name: str) -> float:
    return check_positive(value, name)


def check_n_batches(n_batches, n_samples: int | None = None) -> int:
    """Validate the number of batches m: an int >= :data:`MIN_BATCHES` (Lemma 9's privacy
    argument needs it), and at most n/2 when n is known (each batch needs two rows)."""
    m = check_int(n_batches, "n_batches", low=None)
    if m < MIN_BATCHES:
        raise ValidationError(
            f"n_batches must be >= {MIN_BATCHES} (Lemma 9's privacy argument needs it), got {m}"
        )
    if n_samples is not None and m > n_samples // 2:
        raise ValidationError(
            f"n_batches must be <= n_samples // 2 = {n_samples // 2} (batches of >= 2 rows), got {m}"
        )
    return m


def batch_sizes(n_samples: int, n_batches: int) -> list[int]:
    """Sizes of the m consecutive batches: ``n // m`` or ``n // m + 1`` rows, larger first
    (the split of ``numpy.array_split``). Every row belongs to exactly one batch."""
    q, r = divmod(int(n_samples), int(n_batches))
    return [q + 1] * r + [q] * (int(n_batches) - r)


def friendly_tau(
    sigma: float,
    n_features: int,
    batch_size: int,
    *,
    beta: float = DEFAULT_BETA,
    constant: float = TAU_CONSTANT,
) -> float:
    """Threshold tau of eq. (11): ``tau = C sigma^2 sqrt(log(d / beta) / b)``.

    ``C`` is :data:`TAU_CONSTANT` unless given, ``b`` is the (smallest) batch size. Utility
    only: the privacy proof of Algorithms 2 and 3 holds for any tau > 0.
    """
    sigma = _check_positive(sigma, "sigma")
    constant = _check_positive(constant, "tau constant")
    d, b = int(n_features), int(batch_size)
    if d < 1 or b < 1:
        raise ValidationError(f"friendly_tau needs d >= 1 and b >= 1, got d={d}, b={b}")
    return constant * sigma**2 * math.sqrt(math.log(d / beta) / b)


def bounded_laplace_test(sensitivity: float, epsilon: float, delta: float) -> tuple[float, float]:
    """Scale and bound of the bounded Laplace mechanism (Fact 3) for one test.

    Returns ``(scale, bound)`` with ``scale = sensitivity / epsilon`` and ``bound = scale *
    max(log(4 / delta), log((e^epsilon + delta) / delta))``. The first term is Fact 3's; the
    second (deviation 2 of the module docstring) makes the coupling argument hold for every
    epsilon: BoundedLap = Lap conditioned on ``|X| <= bound``, and for any event E,
    ``P[s + BL in E] <= e^eps P[s' + BL in E] + e^eps q / (1 - q)`` with ``q = e^{-bound /
    scale}``; the bound makes ``e^eps q / (1 - q) <= delta``.
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    scale = float(sensitivity) / epsilon
    # log((e^eps + delta) / delta), written to avoid overflowing e^eps
    large = epsilon - math.log(delta) + math.log1p(delta * math.exp(-epsilon))
    log_term = max(math.log(4.0 / delta), large)
    return scale, scale * log_term


@dataclass(frozen=True)
class FriendlyTestCalibration:
    """The two private tests of Algorithms 2 and 3 (Lines 3-4 and 12-13), Lemma 8.

    Each test is (epsilon/3, delta/3)-DP. A run continues iff ``stat + noise - bound >=
    pass_fraction * m`` where ``|noise| <= bound``, so a passing run certifies ``stat >= 0.8
    m`` deterministically (what Lemma 9 uses).
    """

    epsilon: float
    delta: float
    n_batches: int
    count_sensitivity: float
    count_scale: float
    count_bound: float
    weight_sensitivity: float
    weight_scale: float
    weight_bound: float
    pass_fraction: float

    @property
    def count_threshold(self) -> float:
        """The noisy |C| + L must reach ``0.8 m + count_bound``."""
        return self.pass_fraction * self.n_batches + self.count_bound

    @property
    def weight_threshold(self) -> float:
        """The noisy Z + xi must reach ``0.8 m + weight_bound``."""
        return self.pass_fraction * self.n_batches + self.weight_bound

    def to_dict(self) -> dict:
        return asdict(self)


def friendly_test_calibration(epsilon: float, delta: float, n_batches: int) -> FriendlyTestCalibration:
    """Calibrate the |C| and Z tests of one run at budget (epsilon, delta) (Lemma 8).

    Paper values (for epsilon <= about 4): ``L ~ BoundedLap(3/eps, (3/eps) log(12/delta))``
    and ``xi ~ BoundedLap(21/eps, (21/eps) log(12/delta))``: sensitivities 1 and 7 (eq. (12))
    at (epsilon/3, delta/3) each, through :func:`bounded_laplace_test`.
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    m = check_n_batches(n_batches)
    cs, cb = bounded_laplace_test(COUNT_SENSITIVITY, epsilon / 3, delta / 3)
    ws, wb = bounded_laplace_test(WEIGHT_SENSITIVITY, epsilon / 3, delta / 3)
    return FriendlyTestCalibration(
        epsilon=epsilon,
        delta=delta,
        n_batches=m,
        count_sensitivity=COUNT_SENSITIVITY,
        count_scale=cs,
        count_bound=cb,
        weight_sensitivity=WEIGHT_SENSITIVITY,
        weight_scale=ws,
        weight_bound=wb,
        pass_fraction=PASS_FRACTION,
    )


def default_n_batches(epsilon: float, delta: float, *, beta: float = DEFAULT_BETA) -> int:
    """Default number of batches m (the paper's ``m ~ (1/eps) log(1/(delta beta))``).

    The smallest m >= :data:`MIN_BATCHES` for which a run with ``Z >= GOOD_FRACTION * m``
    passes the Z test (the binding one: sensitivity 7) unless the bounded Laplace noise falls
    below ``-scale * log(2/beta)`` (probability below beta/4)::

        (GOOD_FRACTION - 0.8) m >= bound_Z + scale_Z log(2 / beta)

    With the paper's constants this is about ``(21/eps)(log(12/delta) + log(2/beta)) / 0.15``
    batches: about 3,000/eps at delta = 1e-6.
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    ws, wb = bounded_laplace_test(WEIGHT_SENSITIVITY, epsilon / 3, delta / 3)
    need = (wb + ws * math.log(2.0 / beta)) / (GOOD_FRACTION - PASS_FRACTION)
    return max(MIN_BATCHES, int(math.ceil(need)))


@dataclass(frozen=True)
class GaussianReleaseCalibration:
    """The Gaussian release of one run (Line 17-18 of Algorithm 3, Line 19-20 of Algorithm 2)."""

    epsilon: float
    delta: float
    sensitivity: float
    sigma: float
    rule: str

    def to_dict(self) -> dict:
        return asdict(self)


def gaussian_release_sigma(sensitivity: float, epsilon: float, delta: float) -> tuple[float, str]:
    """Noise of the Gaussian release at (epsilon/3, delta/3) of a run's budget.

    Fact 2 prints ``sigma = 2 Delta sqrt(log(2 / (delta/3))) / (epsilon/3) = Delta (6/eps)
    sqrt(log(6/delta))`` (for a per-release epsilon <= 1). The proof needs only that the
    release, given that both tests passed, is an (epsilon/3, delta/3)-DP Gaussian mechanism of
    L2 sensitivity Delta (Lemma 10 / Lemma 20 give Delta on such runs); the analytic Gaussian
    mechanism (Balle & Wang 2018, Theorem 8) is necessary and sufficient for that, for every
    epsilon, so it is the sigma used (deviation 3): 0.53 of Fact 2's at (1, 1e-6). Returns
    ``(sigma, rule)``.
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    sigma = analytic_gaussian_sigma(float(sensitivity), epsilon / 3, delta / 3)
    return sigma, "analytic Gaussian (Balle-Wang 2018) at (eps/3, delta/3)"


#: Accuracy assumed of the symmetric eigensolvers (LAPACK ``syevd`` via ``numpy.linalg.eigh``)
#: on an s x s block A: computed eigenvalues are those of ``A + F`` and computed eigenvectors
#: lie within ``EIGEN_ERROR s u`` of exact unit eigenvectors of ``A + F``, with
#: ``||F||_2 <= EIGEN_ERROR s u ||A||_2`` (backward stability; LAPACK Users' Guide section
#: 4.7 states ``p(s) u ||A||`` with p "a modestly growing function", here taken as 8 s).
#: The engine diagonalises each connected component of the thresholded matrix on its own,
#: densely up to :data:`EIGEN_BLOCK_LIMIT` vertices, so s <= min(d, EIGEN_BLOCK_LIMIT). Larger
#: components use ARPACK, whose converged Ritz values meet the same residual bound but whose
#: convergence to the extreme eigenvalue is not proven: a documented caveat.
EIGEN_ERROR = 8.0
#: Largest component diagonalised densely (``dpdist.engine.sparse_spectrum.DENSE_COMPONENT_LIMIT``).
EIGEN_BLOCK_LIMIT = 2048


def friendly_entry_clip(sigma: float, n_samples: int, n_features: int, beta: float = DEFAULT_BETA) -> float:
    """Public entry clip ``c = sigma sqrt(2 log(6 n d / beta))`` applied to every input entry
    of PrivNorm/PrivPCA before any batch statistic (deviation 4). For sigma-sub-Gaussian
    entries none is clipped except with probability beta/3 (the clip of Theorem 1's proof);
    privacy holds for any c (a per-row map keeps neighbours neighbours)."""
    return subgaussian_clip(_check_positive(sigma, "sigma"), int(n_samples), int(n_features), float(beta))


@dataclass(frozen=True)
class FriendlyFloatBounds:
    """Public bounds on the floating-point error of PrivNorm/PrivPCA (deviation 4).

    Attributes
    ----------
    entry_clip : float
        c: every input entry is clipped to [-c, c].
    eta : float
        Bound on ``||C - Sigma_bar*||_max`` beyond the exact argument, where C is the computed
        ``Sigma_bar`` and ``Sigma_bar*`` a convex combination of the *computed* batch moments of
        the batches with ``p_i > 0`` (see :func:`friendly_float_bounds`).
    threshold : float
        ``5 tau + eta``: the level at which the computed ``Sigma_bar`` is thresholded.
    eigen_error : float
        ``EIGEN_ERROR s u ||A||`` (s = min(d, EIGEN_BLOCK_LIMIT)) with ``||A||_2 <= k (c^2 (1 + 1e-6) + 10 tau + 2 eta)`` for
        ``A = T_rho(C)`` in the case that matters (both neighbouring runs passed the tests:
        ``||A - T_tau(M)|| <= 10 k tau + 2 k eta`` and ``T_tau(M)`` is k-RCS with entries at
        most ``c^2 (1 + 1e-6)``, so ``||T_tau(M)||_2 <= k c^2 (1 + 1e-6)``).
    vector_error : float
        ``EIGEN_ERROR s u``: forward error of a computed unit eigenvector of ``A + F``.
    """

    entry_clip: float
    eta: float
    threshold: float
    eigen_error: float
    vector_error: float

    def to_dict(self) -> dict:
        return asdict(self)


def friendly_float_bounds(
    n_samples: int, n_batches: int, n_features: int, entry_clip: float, tau: float, k: int
) -> FriendlyFloatBounds:
    """Public float-error bounds of PrivNorm/PrivPCA for clipped entries (deviation 4).

    With every entry in [-c, c], each product ``x_a x_b`` is at most ``c^2``; the batch
    moments S_i (pass 1) and ``C = sum_rows w_row x x^T`` (pass 2, ``w = p/(Z b)``) are sums
    whose terms go through at most ``D = GRAM_BATCH_ROWS + 8 ceil(log2 n) + 16`` rounded
    operations (the products and the weights; syrk/gemm runs of at most GRAM_BATCH_ROWS rows
    combined pairwise; pieces of a batch across chunks added pairwise; trees of fan-in <= 4),
    so (Higham, Lemma 3.4, any summation order) ``|S_i - Sigma_i| <= gamma_D c^2`` entrywise and ``|C - sum_i lambda_i Sigma_i| <= gamma_D c^2 (1 + gamma_m)``, with
    ``Sigma_i`` the exact batch moments and ``lambda_i = p_i (1 + theta_i) / fl(Z)``,
    ``|sum lambda_i - 1| <= gamma_{m+3}``. Hence C lies within
    ``eta_0 = (2 gamma_D + gamma_{m+8}) c^2 (1 + 1e-6)`` (max norm) of the convex combination
    ``sum_i (lambda_i / sum lambda) S_i`` over the batches with ``p_i > 0``. The friend test
    ``fl(|S_i - S_j|) <= 2 tau`` implies ``|S_i - S_j| <= 2 tau (1 + u)``, so Lemma 9's ball
    ``B(M, 4 tau)`` becomes ``B(M, 4 tau (1 + u))``, M a computed good batch moment, and
    ``||C - T_tau(M)||_max <= 5 tau + eta`` with ``eta = eta_0 + 8 u tau``. Lemma 3 with
    ``rho = 5 tau + eta`` then gives ``||T_rho(C) - T_tau(M)||_op <= 2 k rho = 10 k tau + 2 k eta``
    for both neighbouring runs (T_tau(M) is k-RCS as computed: thresholding compares floats
    exactly).

    When pass 1 keeps its batch tiles (``dpdist.engine.privpca.kernels.tile_weighted_moment``), C is
    instead ``sum_i fl(q_i S_i)``, ``q_i = fl(p_i / fl(Z))``, summed pairwise over the batches
    with ``p_i > 0`` (``L = ceil(log2 m)`` additions a term): entrywise ``C = sum_i lambda_i S_i``
    with ``lambda_i = (p_i / fl(Z))(1 + theta_{L+2})`` and ``fl(Z) = (sum p_i)(1 + theta_{m-1})``,
    so ``Lambda = sum lambda_i`` is within ``gamma_{m+L+1}`` of 1 and C lies within
    ``|1 - 1/Lambda| |C| <= gamma_{m+L+1} c^2 (1 + gamma_D)`` of the convex combination
    ``sum_i (lambda_i / Lambda) S_i`` of the computed S_i themselves. As gamma is increasing
    and convex, ``gamma_{m+L+1} <= gamma_{m+8} + 4 (L - 7)^+ u`` while ``(m + L + 1) u <= 1/2``,
    and ``4 (L - 7)^+ u <= 228 u < gamma_D``, so this is at most ``eta_0``: the same eta holds.
    """
    n, m, d = int(n_samples), int(n_batches), int(n_features)
    c = _check_positive(entry_clip, "entry clip")
    tau = _check_positive(tau, "tau")
    if not c * c * max(n, 2) < 2.0**1000:
        raise ValidationError(f"the entry clip {c!r} (from sigma) is too large for float64 sums of {n} rows")
    depth = GRAM_BATCH_ROWS + 8 * math.ceil(math.log2(max(n, 2))) + 16
    eta0 = (2.0 * rounding_gamma(depth) + rounding_gamma(m + 8)) * c * c * (1.0 + 1e-6)
    eta = eta0 + 8.0 * UNIT_ROUNDOFF * tau
    norm_a = check_k(k) * (c * c * (1.0 + 1e-6) + 10.0 * tau + 2.0 * eta)
    block = min(d, EIGEN_BLOCK_LIMIT)
    return FriendlyFloatBounds(
        entry_clip=c,
        eta=eta,
        threshold=5.0 * tau + eta,
        eigen_error=EIGEN_ERROR * block * UNIT_ROUNDOFF * norm_a,
        vector_error=EIGEN_ERROR * block * UNIT_ROUNDOFF,
    )


def privnorm_sensitivity(k: int, tau: float) -> float:
    """Sensitivity ``20 k tau`` of ``||T_5tau(Sigma_bar)||_op`` given both runs pass the tests
    (Lemma 20, from Lemma 9: both are within 10 k tau of T_tau(M))."""
    return 20.0 * int(k) * float(tau)


def privnorm_calibration(
    epsilon: float, delta: float, k: int, tau: float, float_bounds: FriendlyFloatBounds | None = None
) -> GaussianReleaseCalibration:
    """Noise of PrivNorm's release, Algorithm 3 Line 17: ``20 k tau (6/eps) sqrt(log(6/delta))``.

    With ``float_bounds`` (what the estimators pass; None gives the exact-arithmetic value
    of the paper) the sensitivity is that of the computed statistic (deviation 4): both
    computed thresholded matrices lie within ``10 k tau + 2 k eta`` of ``T_tau(M)`` in
    operator norm (:func:`friendly_float_bounds`), and each computed operator norm errs by at
    most ``eigen_error``, so ``Delta = 20 k tau + 4 k eta + 2 eigen_error``.
    """
    tau = _check_positive(tau, "tau")
    k = check_k(k)
    sens = privnorm_sensitivity(k, tau)
    if float_bounds is not None:
        sens += 4.0 * k * float_bounds.eta + 2.0 * float_bounds.eigen_error
    sigma, rule = gaussian_release_sigma(sens, epsilon, delta)
    return GaussianReleaseCalibration(float(epsilon), float(delta), sens, sigma, rule)


def privpca_sensitivity(k: int, tau: float, gap: float, lambda_hat: float) -> float:
    """Frobenius sensitivity of the projector ``P_hat = u u^T`` (Lemma 10, with deviation 1).

    ``Delta = 80 sqrt(2) k tau / (gap (1 - gap/2) lambda_hat)``. The printed (13) omits the
    factor ``1/(1 - gap/2)``: Lemma 10 applies Lemma 1 with gap ``gamma lambda_hat / 2``, but
    goodness at gamma/2 (Definition 4) only gives ``lambda_1 - lambda_2 >= (gamma/2) lambda_1
    >= (gamma/2)(1 - gamma/2) lambda_hat``.
    """
    gap = check_gap(gap)
    lambda_hat = _check_positive(lambda_hat, "lambda_hat")
    return 80.0 * math.sqrt(2.0) * int(k) * float(tau) / (gap * (1.0 - gap / 2.0) * lambda_hat)


def privpca_calibration(
    epsilon: float,
    delta: float,
    k: int,
    tau: float,
    gap: float,
    lambda_hat: float,
    float_bounds: FriendlyFloatBounds | None = None,
) -> GaussianReleaseCalibration:
    """sigma_priv of Algorithm 2 Line 19: ``(80 sqrt(2) k tau / (gap lambda_hat)) (6/eps)
    sqrt(log(6/delta))``, times ``1/(1 - gap/2)`` (deviation 1).

    With ``float_bounds`` (deviation 4): Lemma 10's sensitivity is linear in the operator-norm
    distance ``10 k tau`` of Lemma 9, which becomes ``10 k tau + 2 k eta + eigen_error`` (the
    computed eigenvector is within ``vector_error`` of an exact top eigenvector of ``A + F``,
    ``||F|| <= eigen_error``), and each computed projector lies within ``2.01 vector_error``
    of that exact one in Frobenius norm: ``Delta = 8 sqrt(2) (10 k tau + 2 k eta +
    eigen_error) / (gap (1 - gap/2) lambda_hat) + 4.02 vector_error``.
    """
    tau = _check_positive(tau, "tau")
    k = check_k(k)
    sens = privpca_sensitivity(k, tau, gap, lambda_hat)
    if float_bounds is not None:
        dist = 10.0 * k * tau + 2.0 * k * float_bounds.eta + float_bounds.eigen_error
        sens = sens * dist / (10.0 * k * tau) + 4.02 * float_bounds.vector_error
    sigma, rule = gaussian_release_sigma(sens, epsilon, delta)
    return GaussianReleaseCalibration(float(epsilon), float(delta), sens, sigma, rule)


def split_norm_and_pca_budget(
    epsilon: float, delta: float, norm_fraction: float
) -> tuple[tuple[float, float], tuple[float, float]]:
    """Split (epsilon, delta) between PrivNorm and PrivPCA (Theorem 3, basic composition).

    Returns ``((eps_norm, delta_norm), (eps_pca, delta_pca))`` with ``eps_norm = f eps``,
    ``delta_norm = f delta`` and the rest to PrivPCA; the two add up to (epsilon, delta).
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    f = check_probability(norm_fraction, "norm_fraction")
    return (epsilon * f, delta * f), (epsilon * (1.0 - f), delta * (1.0 - f))

