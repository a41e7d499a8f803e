"""Subsample-and-aggregate (MS25 Appendix A, Algorithm 3): the agreement test and the masking.

The mechanism of :func:`dpdist.algorithms.baselines.subsample_aggregate.subsample_aggregate_second_moment`
(SECOND_MOMENT.md section 5). Its calibration (the truncated-Laplace support, the rejection
threshold, the masking scale eta_b and MS25's sample-size condition) is
:mod:`dpdist.privacy.second_moment_calibration`'s.

Guarantee
---------
(2 epsilon, 4 e^epsilon delta)-DP under replace-one neighbours (MS25 Lemma A.4), **provided**
MS25's sample-size condition holds (checked by the algorithm; otherwise the release is labelled
NOT PRIVATE). Two steps compose:

1. **Agreement test** (lines 3-6), :class:`AgreementTest`: the rows are split into k groups by a
   data-independent keyed partition; ``Q = (1/k^2) |{(t, t') : dist(Sigma_t, Sigma_t') <= 2
   alpha / (1 - alpha)}|``. A replaced row changes one group t: only pairs in row t and
   column t of the agreement matrix change, at most ``2 (k - 1)`` of them, so ``|Q - Q'| <=
   2/k``. ``Q~ = Q + TLap(2/k, epsilon, delta)`` is (epsilon, delta)-DP (Geng-Ding-Guo-Kumar
   2020; GAP 13); the test ``Q~ >= threshold`` and the weights are post-processing of it and of
   the groups (the weights enter the masked output below, whose analysis covers them).
2. **Masked output** (lines 7-11): ``Sigma~ = Sigma_hat^{1/2} (I + eta_b N)(I + eta_b N)^T
   Sigma_hat^{1/2}`` with N a d x d standard Gaussian matrix (any factor A with A A^T = Sigma_hat
   in place of the root gives the same law; the code uses the Cholesky factor, enclosed exactly):
   (epsilon, 3 e^epsilon delta)-DP by
   Ashtiani-Liaw's Lemma 3.6 as MS25 applies it (the lemma's internal conditions were not
   retrieved, GAP 12: only MS25's explicit n-condition is enforced).

Float-safe release of the test (issue 10, item 2)
-------------------------------------------------
``Q`` is computed exactly as an integer count divided once by ``k^2`` (relative error at most
``2**-53``, so the computed Q of neighbours differ by at most ``Delta = 2/k + 2**-52``). The
released ``Q~`` is ``(rint(Q / gamma) + K) gamma`` with ``K`` the exact *bounded* rounded
Laplace law of :mod:`dpdist.privacy.lattice` (``"bounded-laplace"``: ``round(L)``, L Laplace of
scale ``s`` conditioned on ``|L| < A_Z + 1/2``) from
:func:`~dpdist.privacy.mechanisms.base.lattice_law`: ``gamma = 2**(floor(log2 b) - 28)`` for
``b = Delta / epsilon``, ``Delta_Z = floor(Delta / gamma) + 1``, ``s = Delta_Z / epsilon``
(rounded up) and ``A_Z = ceil(s ln(1 + (e^epsilon - 1) / (2 delta)))``. It is post-processing of
the continuous truncated Laplace mechanism with scale ``s`` and support ``A_Z + 1/2`` at
sensitivity ``Delta_Z``: epsilon' = ``Delta_Z / s <= epsilon`` and delta' = ``(e^epsilon' - 1) /
(2 (e^{(A_Z + 1/2)/s} - 1)) <= (e^epsilon - 1) / (2 (e^epsilon - 1) / (2 delta)) = delta``.
Outputs beyond ``m' +- A_Z`` are impossible under the neighbour *by design*: that is what the
truncated mechanism's delta pays for (it is the calibration's delta, not a float failure).
Residual: the bounded sampler's exhaustion (:meth:`~dpdist.privacy.lattice.LatticeNoise.exhaustion_delta`,
``q**32`` with ``q = P(|L| > A_Z)``, at most ``(2 delta)**32``), stated.

Float-safe masked output (issue 10, item 2)
-------------------------------------------
:meth:`SubsampleAggregateMechanism.masked_output` releases
``grid_round(A (I + eta_b N)(I + eta_b N)^T A^T)`` entry by entry with N a matrix of *real*
standard Gaussians (Box-Muller over exact keyed uniforms) and every rounding to the public
30-bit relative grid decided exactly (:mod:`dpdist.privacy.masking`, which gives the proof). The
algorithm passes ``Sigma_hat`` itself, exactly (:class:`~dpdist.privacy.masking.ExactGram`), and
A is its exact Cholesky factor, enclosed: the release is exactly a post-processing of the
continuous mechanism the lemma analyses, applied to Sigma_hat (the law depends on the factor only
through A A^T). No output is impossible under a neighbour: with Sigma_hat' positive definite,
the continuous output has a positive density on the whole positive-definite cone, so every grid
cell that meets the cone has positive probability under D'. (Drawing N from a countable set
instead, as the code did before, makes the reachable sets of neighbours disjoint: the support
test of ``tests/privacy/test_masking.py`` shows it.)

The statistic, as computed (the floats the proof holds for)
-----------------------------------------------------------
Privacy of subsample-and-aggregate needs nothing of the per-group statistic's accuracy: one row
changes one group's computed matrix ``Sigma_t = fl((S_t + S_t^T)/2)``, whatever it is, and the
argument is about those matrices as exact reals. What the argument does use is exact:

- the agreement: a pair counts only when ``dist(Sigma_t, Sigma_t') <= 2 alpha / (1 - alpha)`` is
  *certified* for the exact matrices (congruence, a rigorous float error bound and Gershgorin:
  :func:`~dpdist.algorithms.baselines.subsample_aggregate.certified_agreement`), so the pairs
  counted are within the radius in exact arithmetic; the count only loses pairs the floats
  cannot decide. Q is an integer count over k^2 (above);
- the weights ``w_t = min(1, 10 max(0, q_t - 0.6))`` as exact rationals and ``Sigma_hat =
  sum_t w_t Sigma_t / sum_t w_t`` as an exact rational matrix
  (:func:`~dpdist.algorithms.baselines.subsample_aggregate.exact_weighted_average`);
- the masked output on that exact Sigma_hat (above).

Residuals (stated): GAP 12 (the internal conditions of Ashtiani-Liaw's Lemma 3.6 were not
retrieved; only MS25's explicit n-condition is enforced); the sampler's exhaustion after
:data:`~dpdist.privacy.masking.MAX_LEVELS` refinements (below 1e-300 an entry); and time, which
depends on the data (the exact path runs for entries close to a grid boundary, the exact
Cholesky factor's precision grows with Sigma_hat's condition number), a side channel outside
the guarantee. The baseline is a comparator whose privacy condition is rarely met in practice
(SECOND_MOMENT.md section 5: n >~ 5e7 m at d = 4); its results are labelled NOT PRIVATE unless
the condition holds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpdist.exceptions import DpdistError
from dpdist.privacy.accounting import EpsilonDeltaEvent, Event
from dpdist.privacy.lattice import LatticeField, LatticeNoise
from dpdist.privacy.masking import GRID_BITS, masked_gram
from dpdist.privacy.mechanisms.base import Mechanism, lattice_law
from dpdist.privacy.noise import NoiseSeed

__all__ = [
    "AgreementTest",
    "PURPOSE_MASK",
    "PURPOSE_TLAP",
    "SubsampleAggregateMechanism",
    "agreement_sensitivity",
    "subsample_aggregate_mechanism",
]

#: Purpose of the truncated-Laplace noise of the agreement test.
PURPOSE_TLAP = "second-moment-baseline/tlap"
#: Purpose of the masking matrix N.
PURPOSE_MASK = "second-moment-baseline/mask"


def agreement_sensitivity(n_groups: int) -> float:
    """``2/k + 2**-52``: the sensitivity of the computed agreement Q (module docstring)."""
    return 2.0 / int(n_groups) + 2.0**-52


@dataclass(frozen=True)
class AgreementTest:
    """``Q -> Q~``: the float-safe truncated-Laplace release of the agreement (a lattice point)."""

    field: LatticeField

    def __call__(self, agreement: float) -> float:
        return float(self.field(np.asarray([agreement], dtype=np.float64), 0)[0])


@dataclass(frozen=True)
class SubsampleAggregateMechanism(Mechanism):
    """Algorithm 3's private steps (module docstring).

    Attributes
    ----------
    epsilon, delta : float
        The per-step budget (the release states (2 epsilon, 4 e^epsilon delta)).
    n_groups : int
        k.
    sensitivity : float
        Delta of the computed Q.
    support : float
        The calibration's TLap support A (data units).
    tlap : LatticeNoise
        The bounded rounded Laplace law of the test.
    sensitivity_units : float
        Delta_Z.
    eta_b : float
        The masking scale of the output.
    """

    NAME = "Subsample-and-aggregate second moment (MS25 Appendix A, Algorithm 3)"

    epsilon: float
    delta: float
    n_groups: int
    sensitivity: float
    support: float
    tlap: LatticeNoise
    sensitivity_units: float
    eta_b: float

    @property
    def test_epsilon(self) -> float:
        """``Delta_Z / s`` of the lattice test (at most epsilon)."""
        return self.sensitivity_units / self.tlap.scale

    def event(self) -> Event:
        """MS25 Lemma A.4's (2 epsilon, 4 e^epsilon delta): the test's (epsilon, delta)
        composed with the masked output's (epsilon, 3 e^epsilon delta)."""
        return EpsilonDeltaEvent(2.0 * self.epsilon, 4.0 * math.exp(self.epsilon) * self.delta)

    def laws(self) -> dict[str, LatticeNoise]:
        return {"tlap": self.tlap}  # the mask is a real Gaussian matrix, not a lattice law

    def purposes(self) -> dict[str, str]:
        return {"tlap": PURPOSE_TLAP, "mask": PURPOSE_MASK}

    def test(self, seed: NoiseSeed) -> AgreementTest:
        """The agreement test's release (called in the aggregation task, on a worker)."""
        return AgreementTest(LatticeField(seed, PURPOSE_TLAP, self.tlap))

    def describe(self) -> dict:
        out = super().describe()
        out["mask"] = {"law": "real standard Gaussian d x d matrix (Box-Muller over exact keyed uniforms)",
                       "eta_b": self.eta_b, "output": f"each entry rounded exactly to {GRID_BITS} significant bits"}
        return out

    def masked_output(self, seed: NoiseSeed, factor: np.ndarray) -> np.ndarray:
        """``grid_round(A (I + eta_b N)(I + eta_b N)^T A^T)`` with A A^T = ``factor`` when it is an
        :class:`~dpdist.privacy.masking.ExactGram` (the algorithm's case), else A = ``factor``
        (called in the aggregation task; :func:`dpdist.privacy.masking.masked_gram`)."""
        return masked_gram(factor, self.eta_b, seed, PURPOSE_MASK)


def subsample_aggregate_mechanism(epsilon: float, delta: float, n_groups: int, support: float, *,
                                  eta_b: float) -> SubsampleAggregateMechanism:
    """The mechanism of Algorithm 3 with k groups, per-step (epsilon, delta), the calibration's
    TLap support ``support`` (:func:`~dpdist.privacy.second_moment_calibration.tlap_support`
    at sensitivity 2/k) and masking scale ``eta_b``
    (:func:`~dpdist.privacy.second_moment_calibration.baseline_masking_scale`)."""
    k = int(n_groups)
    eps, delta = float(epsilon), float(delta)
    sens = agreement_sensitivity(k)
    ratio = math.log1p(math.expm1(eps) / (2.0 * delta))  # A / b of the calibration: support over scale
    tlap, dz = lattice_law("bounded-laplace", sens, 1.0 / eps, bound_ratio=ratio)
    if not dz / tlap.scale <= eps:  # pragma: no cover - lattice_law rounds the scale up
        raise DpdistError("internal error: the lattice test is below its calibration")
    return SubsampleAggregateMechanism(eps, delta, k, sens, float(support), tlap, dz, float(eta_b))
