"""The numerics the float-error bounds rest on, checked on the kernels themselves.

``dpdist.privacy.float_rounding.gram_rounding_factor`` and
``dpdist.privacy.mechanisms.privpca.calibration.friendly_float_bounds`` assume (a) every row's contribution is
bounded *as computed* (rows scaled to the radius before any product, norms that neither
overflow nor underflow), (b) Gram sums in runs of at most GRAM_BATCH_ROWS rows combined
pairwise, trees of fan-in at most 8, and dense eigensolves on blocks of at most 2048. These
tests check each assumption against exact (rational) arithmetic or against the engine's
constants.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from dpdist.engine import gram, sparse_spectrum
from dpdist.engine import second_moment as eng
from dpdist.engine import second_moment_kernels as kern
from dpdist.engine.privpca import graph as friendly_graph
from dpdist.privacy import float_rounding
from dpdist.privacy.mechanisms.privpca import calibration as pca_calibration

HOSTILE_ROWS = {
    "1e154": np.full(4, 1e154),
    "1e300": np.array([1e300, -1e300, 1e300, 1e300]),
    "float32-max": np.full(4, float(np.finfo(np.float32).max)),
    "max-float": np.array([np.finfo(np.float64).max, 0.0, 0.0, 1.0]),
    "fill": np.array([9.97e36, 1.0, -2.0, 0.5]),
    "subnormal": np.full(4, 5e-324),
    "tiny": np.array([1e-200, 3e-200, 0.0, -1e-201]),
    "mixed": np.array([1e200, 1e-200, 1.0, -1e100]),
}


def exact_norm_squared(v) -> Fraction:
    return sum((Fraction(float(x)) ** 2 for x in v), Fraction(0))


def exact_norm(v) -> float | None:
    """The Euclidean norm of v from exact rational arithmetic, correctly scaled (None when
    it exceeds the float range)."""
    sq = exact_norm_squared(v)
    if sq == 0:
        return 0.0
    k = (sq.numerator.bit_length() - sq.denominator.bit_length()) // 2
    norm = math.ldexp(math.sqrt(float(sq / Fraction(2) ** (2 * k))), k)
    return None if math.isinf(norm) else norm


def test_the_privacy_layer_mirrors_the_engine_constants():
    assert gram.GRAM_BATCH_ROWS == float_rounding.GRAM_BATCH_ROWS
    assert sparse_spectrum.DENSE_COMPONENT_LIMIT == pca_calibration.EIGEN_BLOCK_LIMIT
    assert kern.gram_batch_rows(2) <= gram.GRAM_BATCH_ROWS and kern.gram_batch_rows(500) <= gram.GRAM_BATCH_ROWS
    import inspect

    # tree fan-ins of the Gram reductions (at most GRAM_TREE_FAN_IN = 8)
    for fn in (gram.clipped_second_moment, eng.level_gram, eng.tree_sum):
        assert inspect.signature(fn).parameters["split_every"].default <= float_rounding.GRAM_TREE_FAN_IN
    assert inspect.signature(friendly_graph._tree).parameters["fan_in"].default <= float_rounding.GRAM_TREE_FAN_IN
    with pytest.raises(ValueError, match="split_every"):
        gram.clipped_second_moment(None, 1.0, split_every=9)


@pytest.mark.parametrize("name", list(HOSTILE_ROWS))
@pytest.mark.parametrize("radius", [2.0, 1e-150, 1e150])
def test_clipped_rows_have_norm_at_most_the_radius_exactly(name, radius):
    x = np.vstack([HOSTILE_ROWS[name], np.ones(4), np.zeros(4), [np.nan, 1, 1, 1], [1, np.inf, 1, 1]])
    y, t = kern.map_and_clip(x, None, radius)
    assert np.isfinite(y).all() and np.isfinite(t).all()
    for row in y:
        assert exact_norm_squared(row) <= Fraction(radius) ** 2  # exact norm of the float row
    np.testing.assert_array_equal(y[2:], 0.0)  # zero and non-finite rows
    assert t[3] == 0 and t[4] == 0
    v = HOSTILE_ROWS[name]
    if np.any(v):
        # direction kept (rows of representable norm; compare unit vectors)
        u = v / np.abs(v).max()
        u = u / np.linalg.norm(u)
        if exact_norm_squared(y[0]) > 0:
            w = y[0] / np.abs(y[0]).max()
            np.testing.assert_allclose(w / np.linalg.norm(w), u, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", list(HOSTILE_ROWS))
def test_row_norms_are_accurate_without_overflow_or_underflow(name):
    v = HOSTILE_ROWS[name]
    got = kern.row_norms(v[None])[0]
    exact = exact_norm(v)
    if exact is None:  # the norm itself exceeds the float range (max-float rows)
        assert got == np.inf
    else:
        assert got == pytest.approx(exact, rel=(4 + 4 / 2 + 4) * 2**-53)


def test_level_gram_error_is_within_the_bound_the_privacy_layer_adds():
    """|fl(S) - S| <= gamma_D sum |t_i| entrywise (the claim of gram_rounding_factor), with S the
    exact sum of the computed rows' outer products, on a block with hostile rows."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((9000, 3)) * [1.0, 10.0, 1e3]
    x[17] = 9.97e36
    x[4100] = 1e154
    x[8000] = 5e-324
    M = np.array([[0.9, 0.1, 0.0], [0.0, 1.1, 0.2], [0.0, 0.0, 0.7]])
    t, g = kern.chunk_level_step(x, None, M=M, radius=50.0)
    y, _ = kern.map_and_clip(x, np.ascontiguousarray(M.T), 50.0)
    n = len(x)
    D = float_rounding.summation_depth(n)
    gamma = float_rounding.rounding_gamma(D)
    for a in range(3):
        for b in range(a, 3):
            terms = [Fraction(float(p)) * Fraction(float(q)) for p, q in zip(y[:, a], y[:, b])]
            exact = sum(terms, Fraction(0))
            bound = gamma * float(sum((abs(v) for v in terms), Fraction(0)))
            assert abs(float(Fraction(float(g[a, b])) - exact)) <= bound
    assert np.all(np.einsum("ij,ij->i", y, y) <= 50.0**2)


def test_gram_accumulator_runs_are_bounded_and_combined_pairwise():
    sizes = []

    def product(a, b):
        sizes.append(a.shape[0])
        return a.T @ a

    acc = gram.GramAccumulator(product)
    x = np.random.default_rng(1).standard_normal((30_000, 2))
    for lo in range(0, len(x), 3000):  # blocks that do not align with the runs
        acc.add(x[lo : lo + 3000])
    total = acc.total((2, 2))
    assert max(sizes) <= gram.GRAM_BATCH_ROWS
    np.testing.assert_allclose(total, x.T @ x, rtol=1e-12)
    assert len(acc._stack) == 0  # everything combined
