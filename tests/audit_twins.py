"""Deliberately wrong variants of dpdist's mechanisms: the negative controls of the audits.

Nothing here is used by the package. Each variant is something a sound audit must catch, so
that a test (or ``dpdist audit --include-twins``, which imports this module) can show the
audits have the power to see a broken guarantee:

* :func:`scaled_twin`: a mechanism object whose every noise scale is multiplied by a factor
  while its event (the claim, hence the budget) stays the calibration's. At factor 0.5 it is
  the "mis-calibrated twin" of each audit case of :mod:`dpdist.testing.mechanisms`.
* :func:`cancelling_second_moment_kernel`: a SecondMoment kernel that adds the plain Gram of a
  batch and then subtracts the shrunk rows' excess ``(1 - t_i^2) z_i z_i^T``. A row of large
  finite norm (a fill value near 1e37) swamps the sum and the subtraction cancels every other
  row of its batch; rows of norm near 1e154 make it NaN. The package's kernel scales the rows
  before the product instead.
* :func:`unbounded_privnorm`: PrivNorm/PrivPCA without the entry clip (so the rounding of
  ``Sigma_bar`` grows with the data's magnitude), with the threshold ``5 tau`` without the
  float slack, the exact-arithmetic sensitivity, and ``Sigma_bar`` summed row by row in a
  second pass over the data.
* :class:`InverseCdfSampler`: floating-point inverse-CDF noise ``value + transform(u)``, whose
  outputs under one value can be impossible under a neighbouring one (Mironov, CCS 2012); the
  support test of :mod:`dpdist.testing.support` must find them.

Importing this module registers one variant per audit case with
:func:`dpdist.testing.cases.register_twins` (:data:`TWINS`).
"""

from __future__ import annotations

import contextlib
import functools
import math
from dataclasses import dataclass, fields, replace
from typing import Callable, Iterator
from unittest import mock

import numpy as np

from dpdist.privacy.noise.lattice import LatticeNoise
from dpdist.privacy.noise.streams import (
    NoiseSeed,
    bounded_laplace_from_uniform,
    gaussian_from_uniform,
    laplace_from_uniform,
)
from dpdist.testing.cases import AuditCase, register_twins, variant

__all__ = [
    "SLACK",
    "TWIN_FACTOR",
    "TWINS",
    "InverseCdfSampler",
    "cancelling_chunk_level_step",
    "cancelling_second_moment_kernel",
    "scaled_twin",
    "twin_case",
    "unbounded_privnorm",
]

#: The factor of the mis-calibrated twins.
TWIN_FACTOR = 0.5


# ---------------------------------------------------------------------------------------
# mechanism objects with scaled noise and the calibration's claim
# ---------------------------------------------------------------------------------------


def _fixed_event(event):
    """The event a twin keeps (its calibration's)."""
    return event


def scaled_twin(mech, factor: float):
    """A copy of the mechanism object ``mech`` whose every noise law has its scale multiplied by
    ``factor`` (bounded laws: their bound too; PrivCov's Gumbel selection: its Gumbel scale,
    by dividing its weight), the event unchanged. Picklable."""
    from dpdist.privacy.mechanisms.privcov.mechanism import PrivCovGumbelMechanism

    f = float(factor)
    if isinstance(mech, PrivCovGumbelMechanism):
        law = mech.release_noise
        copy = replace(mech, weight=mech.weight / f,
                       release_noise=LatticeNoise(law.law, law.lattice, law.scale * f, law.bound))
    else:
        changes = {}
        for fld in fields(mech):
            value = getattr(mech, fld.name)
            if isinstance(value, LatticeNoise):
                bound = value.bound if value.law != "bounded-laplace" else float(max(0, math.ceil(value.bound * f)))
                changes[fld.name] = LatticeNoise(value.law, value.lattice, value.scale * f, bound)
        if not changes:
            raise TypeError(f"{type(mech).__name__} holds no lattice law to scale")
        copy = replace(mech, **changes)
    # the claim stays the calibration's even where event() reads the (scaled) laws: an
    # instance attribute shadows the method (a partial of a module function: picklable)
    object.__setattr__(copy, "event", functools.partial(_fixed_event, mech.event()))
    return copy


# ---------------------------------------------------------------------------------------
# bugs once found in the package, reproduced
# ---------------------------------------------------------------------------------------

_BLAS_SINGLE_THREAD = 262144


def cancelling_chunk_level_step(
    x: np.ndarray, prev: np.ndarray | None = None, *, M: np.ndarray, radius: float
) -> tuple[np.ndarray, np.ndarray]:
    """UNSAFE second-moment kernel: plain Gram plus a subtracted correction (overflow warnings
    silenced)."""
    x = np.asarray(x, dtype=np.float64)
    n, d = x.shape
    MT = np.ascontiguousarray(np.asarray(M, dtype=np.float64).T)
    prev = None if prev is None else np.asarray(prev, dtype=np.float64).ravel()
    t = np.empty(n, dtype=np.float64)
    g = np.zeros((d, d), dtype=np.float64)
    batch = max(256, _BLAS_SINGLE_THREAD // (d * d) - 1)
    for lo in range(0, n, batch):
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            z = x[lo : lo + batch] @ MT
            norms = np.sqrt(np.einsum("ij,ij->i", z, z))
            tb = np.minimum(1.0, np.where(norms > 0, float(radius) / norms, 1.0))
        if prev is not None:
            np.minimum(tb, prev[lo : lo + batch], out=tb)
        bad = ~np.isfinite(norms)
        if bad.any():
            tb[bad] = 0.0
            z[bad] = 0.0
        shrunk = np.flatnonzero(tb < 1.0)
        if len(shrunk) <= len(tb) // 8:
            with np.errstate(over="ignore", invalid="ignore"):
                g += z.T @ z
                if len(shrunk):
                    zs = z[shrunk]
                    g -= (zs.T * (1.0 - tb[shrunk] ** 2)) @ zs
        else:
            z *= tb[:, None]
            g += z.T @ z
        t[lo : lo + batch] = tb
    return t, (g + g.T) / 2.0


@contextlib.contextmanager
def cancelling_second_moment_kernel() -> Iterator[None]:
    """Run SecondMoment with :func:`cancelling_chunk_level_step` inside the block (the
    engine's module attribute is patched; local schedulers only: a worker process imports the
    unpatched module)."""
    import dpdist.engine.second_moment as engine

    with mock.patch.object(engine, "chunk_level_step", cancelling_chunk_level_step):
        yield


@contextlib.contextmanager
def unbounded_privnorm() -> Iterator[None]:
    """Run PrivNorm/PrivPCA inside the block with no entry clip (infinite), Sigma_bar
    thresholded at exactly 5 tau, the exact-arithmetic sensitivities (no float terms) and
    Sigma_bar re-read from the rows in pass 2. Patches names of
    :mod:`dpdist.algorithms.sparse_pca.release` and :mod:`dpdist.algorithms.friendly_steps`
    (where the batch setup takes its float bounds); local schedulers only."""
    import dpdist.algorithms.friendly_steps as steps
    import dpdist.algorithms.sparse_pca.release as module
    from dpdist.privacy.mechanisms.privpca.calibration import FriendlyFloatBounds

    def no_bounds(n_samples, n_batches, n_features, entry_clip, tau, k):
        return FriendlyFloatBounds(entry_clip=math.inf, eta=0.0, threshold=5.0 * tau, eigen_error=0.0,
                                   vector_error=0.0)

    real_norm, real_pca = module.privnorm_calibration, module.privpca_calibration

    def norm_cal(epsilon, delta, k, tau, float_bounds=None):
        return real_norm(epsilon, delta, k, tau)

    def pca_cal(epsilon, delta, k, tau, gap, lambda_hat, float_bounds=None):
        return real_pca(epsilon, delta, k, tau, gap, lambda_hat)

    real_pass1 = module.persist_pass1

    def pass1_keeping_nothing(*args, **kwargs):
        groups, _ = real_pass1(*args, **kwargs)
        return groups, None  # pass 2 reads the rows again

    with mock.patch.object(steps, "friendly_float_bounds", no_bounds), \
            mock.patch.object(steps, "friendly_entry_clip", lambda *a, **k: math.inf), \
            mock.patch.object(module, "privnorm_calibration", norm_cal), \
            mock.patch.object(module, "privpca_calibration", pca_cal), \
            mock.patch.object(module, "persist_pass1", pass1_keeping_nothing):
        yield


# ---------------------------------------------------------------------------------------
# floating-point inverse-CDF noise, for the support test
# ---------------------------------------------------------------------------------------

_PURPOSE = "testing/support"


@dataclass(frozen=True)
class InverseCdfSampler:
    """Floating-point inverse-CDF noise, ``value + transform(u)`` (must fail the support test).

    ``kind`` is ``"laplace"``, ``"gaussian"`` or ``"bounded-laplace"``; ``u`` ranges over the
    uniforms :meth:`~dpdist.privacy.noise.streams.NoiseSeed.uniforms` produces,
    ``(g + 1/2) 2**-53`` for ``g`` in ``[0, 2**53)``.
    """

    kind: str
    scale: float
    bound: float = math.inf

    def _noise(self, u: np.ndarray) -> np.ndarray:
        if self.kind == "laplace":
            return laplace_from_uniform(u, self.scale)
        if self.kind == "gaussian":
            return gaussian_from_uniform(u, self.scale)
        if self.kind == "bounded-laplace":
            return bounded_laplace_from_uniform(u, self.scale, self.bound)
        raise ValueError(f"unknown kind {self.kind!r}")

    def draw(self, value: float, n: int, random_state: int) -> np.ndarray:
        u = NoiseSeed(random_state, seeded=True).uniforms(_PURPOSE, 0, 0, n)
        return value + self._noise(u)

    def attainable(self, outputs, value: float) -> np.ndarray:
        """Exact: ``fl(value + noise(u(g)))`` is nondecreasing in the grid index g, so a binary
        search finds the smallest g reaching each output; the output is attainable iff some g
        near it hits it exactly (g - 2 .. g + 2 are checked to absorb any non-monotone
        rounding of the float transform)."""
        o = np.asarray(outputs, dtype=np.float64).ravel()
        lo = np.zeros(o.shape, dtype=np.int64)
        hi = np.full(o.shape, 1 << 53, dtype=np.int64)
        while True:
            active = lo < hi
            if not active.any():
                break
            mid = (lo + hi) // 2
            val = value + self._noise((mid.astype(np.float64) + 0.5) * 2.0**-53)
            right = active & (val < o)
            lo = np.where(right, mid + 1, lo)
            hi = np.where(active & ~right, mid, hi)
        ok = np.zeros(o.shape, dtype=bool)
        for off in (-2, -1, 0, 1, 2):
            g = np.clip(lo + off, 0, (1 << 53) - 1)
            ok |= (value + self._noise((g.astype(np.float64) + 0.5) * 2.0**-53)) == o
        return ok.reshape(np.shape(outputs))


# ---------------------------------------------------------------------------------------
# the registry of the audits' negative controls
# ---------------------------------------------------------------------------------------

#: Cases whose claim has slack on their pair: the true privacy loss of the factor-2 twin there
#: still lies below the claim, so either verdict is correct. Name -> why.
SLACK = {
    "privcov/row": "per-row claim has slack about 2 sqrt(k' log(d/delta_row)) / (d - 1) >= 2 over the best "
                   "row change",
    "wang-xu/data": "claimed sensitivity 2R^2 d/n is twice the L2 move of this pair: the factor-2 twin is still "
                    "private here",
    "second-moment/level-paper": "MS25's 4R^2/n has slack 2 sqrt(2) over the exact sqrt(2) R^2/n",
}


def _halved(case: AuditCase):
    """The twin source of a case whose source is a noise scale (the raw Laplace and Gaussian)."""
    return TWIN_FACTOR * case.source


def _bounded_laplace_at_half_sensitivity(case: AuditCase):
    """The bounded Laplace calibrated for half the sensitivity (scale and bound both halved)."""
    from dpdist.privacy.mechanisms.privpca.calibration import bounded_laplace_test

    return bounded_laplace_test(TWIN_FACTOR * case.parameters["sensitivity"], case.claimed_epsilon,
                                case.claimed_delta)


def _doubled_weight(case: AuditCase):
    """The exponential mechanism's weight doubled (its Gumbel scale halved)."""
    return case.source / TWIN_FACTOR


def _privcov_builder(case: AuditCase):
    from dpdist.privacy.mechanisms.privcov.mechanism import PrivCovMechanism

    def build(calibration):
        return scaled_twin(PrivCovMechanism.from_calibration(calibration), TWIN_FACTOR)

    return build


def _analyze_gauss_builder(case: AuditCase):
    from dpdist.privacy.mechanisms.gaussian import analyze_gauss_mechanism

    def build(*args, **kwargs):
        return scaled_twin(analyze_gauss_mechanism(*args, **kwargs), TWIN_FACTOR)

    return build


#: How a case's twin source derives from its own source (default: :func:`scaled_twin`).
_SOURCES: dict[str, Callable[[AuditCase], object]] = {
    "primitives/laplace": _halved,
    "primitives/gaussian": _halved,
    "primitives/gaussian-small-epsilon": _halved,
    "primitives/bounded-laplace": _bounded_laplace_at_half_sensitivity,
    "expmech/selection": _doubled_weight,
    "privcov/estimator": _privcov_builder,
    "analyze-gauss/estimator": _analyze_gauss_builder,
}

#: The end-to-end bug twins: case name -> (label, context manager carrying the bug).
_BUGS = {
    "end-to-end/second-moment/fill-9.97e36": ("cancelling kernel", cancelling_second_moment_kernel),
    "end-to-end/spectral-norm/rows-1e10": ("unbounded PrivNorm", unbounded_privnorm),
}


def twin_case(name: str) -> AuditCase:
    """The registered twin of the audit case ``name``: its factor-2 mis-calibrated variant, or
    for an end-to-end case the variant carrying a reproduced bug."""
    from dpdist.testing.estimator_audits import LONG_TRIALS
    from dpdist.testing.mechanisms import CASES

    factory = CASES[name]
    if name in _BUGS:
        label, bug = _BUGS[name]
        real = factory()
        # the cancelling kernel is flagged already at 60 trials; the unbounded PrivNorm needs
        # perfectly separated outputs in about 170 trials per dataset to beat its claim
        # epsilon = 3 at delta = 0.1, and about 5% of its runs return bottom (the
        # friend-weight test), which costs margin: 600 trials give a bound near 4.2
        return variant(factory, bug, f"twin: {label}", "flagged", default_trials=60,
                       notes=f"twin carrying the bug: {label} (tests.audit_twins)",
                       parameters={**real.parameters, "long_trials": 2 * LONG_TRIALS})
    real = factory()
    source = _SOURCES.get(name, lambda case: scaled_twin(case.source, TWIN_FACTOR))(real)
    if name in SLACK:
        return variant(factory, source, f"twin x{TWIN_FACTOR:g}", "slack", notes=SLACK[name])
    return variant(factory, source, f"twin x{TWIN_FACTOR:g}", "flagged")


def _all_twins() -> dict[str, Callable[[], AuditCase]]:
    from dpdist.testing.estimator_audits import E2E_CASES
    from dpdist.testing.mechanisms import CASES

    names = [n for n in CASES if n not in E2E_CASES] + list(_BUGS)
    return {n: functools.partial(twin_case, n) for n in names}


#: Every registered twin: case name -> factory.
TWINS = _all_twins()
register_twins(TWINS)
