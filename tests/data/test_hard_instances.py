"""The lower-bound instances satisfy what their lemmas state (COLT 2026: Construction 1 and
Lemma 4, Corollary 2 with Proposition 3, Lemmas 15-16; Construction 2 is tested in
test_model2.py against Lemma 23)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from dpdist.data.hard_instances.graphs import biregular_second_eigenvalue, random_biregular_graph, ramanujan_bound
from dpdist.data.hard_instances.theorem2 import construction1
from dpdist.data.hard_instances.theorem4 import corollary2, theorem4_codebook
from dpdist.data.hard_instances.theorem5 import edge_spike
from dpdist.data.model2 import make_construction2
from dpdist.exceptions import ValidationError


# ----------------------------------------------------------------------------------- graphs


@pytest.mark.parametrize("n_left,n_right,deg", [(40, 20, 3), (500, 250, 7), (300, 300, 9)])
def test_random_biregular_graph_is_simple_and_biregular(n_left, n_right, deg):
    B = random_biregular_graph(n_left, n_right, deg, np.random.default_rng(0))
    dense = B.toarray()
    assert set(np.unique(dense)) <= {0.0, 1.0}  # simple: no repeated edge
    assert (dense.sum(axis=1) == deg).all()
    assert (dense.sum(axis=0) == n_left * deg // n_right).all()
    # the top singular value of a (c1, c2)-biregular biadjacency is sqrt(c1 c2) (Lemma 14)
    s = np.linalg.svd(dense, compute_uv=False)
    assert s[0] == pytest.approx(math.sqrt(deg * n_left * deg / n_right))
    assert biregular_second_eigenvalue(B) == pytest.approx(s[1])


def test_second_eigenvalue_by_sparse_svd_matches_dense():
    B = random_biregular_graph(2400, 1200, 4, np.random.default_rng(1))
    dense = np.linalg.svd(B.toarray(), compute_uv=False)[1]
    assert biregular_second_eigenvalue(B) == pytest.approx(dense, rel=1e-8)


# --------------------------------------------------------------------------- Construction 1


def test_construction1_block_and_graph_structure():
    c = construction1(60, 12, random_state=3)  # 12 >= 2 log 5
    S = c.covariance.toarray()
    lab = np.arange(60) // 12
    same = lab[:, None] == lab[None, :]
    assert (S[~same] == 0).all()  # block diagonal on consecutive cliques
    assert (np.count_nonzero(S, axis=1) <= 12).all()  # k-RCS
    for b in range(5):
        np.testing.assert_array_equal(S[12 * b:12 * b + 12, 12 * b:12 * b + 12], c.blocks[b])
        assert np.linalg.eigvalsh(c.blocks[b]).min() > 0
    G = c.graph().toarray()
    np.testing.assert_array_equal(G, (same & ~np.eye(60, dtype=bool)).astype(float))  # union of 5 cliques
    # P_G keeps the diagonal and the edges of G: P_G(Sigma) = Sigma, and (Lemma 4, item 1)
    # P_G(Sigma_hat) is block diagonal with the block second moments
    np.testing.assert_array_equal(c.project(S), S)
    X = c.samples(500, chunk_rows=200).compute(scheduler="sync")
    H = X.T @ X / 500
    P = c.project(H)
    for b in range(5):
        xb = X[:, 12 * b:12 * b + 12]
        np.testing.assert_allclose(P[12 * b:12 * b + 12, 12 * b:12 * b + 12], xb.T @ xb / 500, rtol=1e-12)
    assert (P[~same] == 0).all()
    p = c.parameters()
    ev = np.linalg.eigvalsh(S)
    assert p["k"] == 12 and p["sigma2"] == pytest.approx(ev[-1]) and p["gap"] == pytest.approx(1 - ev[-2] / ev[-1])
    assert p["condition_k_ge_2log_d_over_k"] is True


def test_construction1_blocks_have_the_inverse_wishart_mean():
    # E[Sigma_b] = (k-1) I / (2k - k - 1) = I (Fact 4). Var(Sigma_ii) = 2 psi^2 / ((nu-p-1)^2 (nu-p-3))
    # = 2 / (k - 3) and Var(Sigma_ij) = ((nu-p+1) psi^2) / ((nu-p)(nu-p-1)^2 (nu-p-3)) ~ 1/k^2 for
    # InvWishart((k-1) I, 2k), p = k; 280 blocks of k = 14: 6 standard errors of the mean.
    k, B = 14, 280
    c = construction1(k * B, k, random_state=7)
    diag = np.einsum("bii->bi", c.blocks)
    assert abs(diag.mean() - 1.0) < 6 * math.sqrt(2 / (k - 3) / diag.size)
    off = c.blocks[:, ~np.eye(k, dtype=bool)]
    nu, p = 2 * k, k
    var_off = (nu - p + 1) * (k - 1) ** 2 / ((nu - p) * (nu - p - 1) ** 2 * (nu - p - 3))
    # off-diagonal entries of one block are dependent: bound the se by the block count only
    assert abs(off.mean()) < 6 * math.sqrt(var_off / B)


def test_construction1_operator_norm_tail_of_lemma_4():
    # Lemma 4 item 3: P[||Sigma||_op > t] <= (d/k) (3 e^2 / t)^(k/2). At d = 40, k = 8, t = 30:
    # bound = 5 * (22.17/30)^4 = 1.49 (vacuous); t = 60: 0.093. Over 200 draws the empirical
    # frequency must be below the bound plus 4 binomial standard errors.
    d, k, t, draws = 40, 8, 60.0, 200
    bound = d / k * (3 * math.e**2 / t) ** (k / 2)
    hits = sum(construction1(d, k, random_state=s, require_condition=False).model.sigma2 > t for s in range(draws))
    assert hits / draws <= bound + 4 * math.sqrt(bound * (1 - bound) / draws)


def test_construction1_samples_have_its_covariance():
    c = construction1(24, 6, random_state=2, require_condition=False)
    X = c.samples(100_000, chunk_rows=30_000).compute(scheduler="sync")
    S = c.covariance.toarray()
    se = np.sqrt((np.outer(np.diag(S), np.diag(S)) + S**2) / len(X))
    assert (np.abs(X.T @ X / len(X) - S) <= 6 * se).all()


def test_construction1_refuses_what_the_construction_excludes():
    with pytest.raises(ValidationError, match="dividing"):
        construction1(50, 20)
    with pytest.raises(ValidationError, match=r"2 log\(d/k\)"):
        construction1(4000, 4)  # 4 < 2 log 1000
    assert construction1(4000, 4, require_condition=False).condition_holds is False


# ----------------------------------------------------------------------------- Corollary 2


@pytest.mark.parametrize("d,k,seed", [(18, 6, 0), (90, 8, 1), (600, 12, 2)])
def test_corollary2_properties(d, k, seed):
    inst = corollary2(d, k, random_state=seed)
    h = (k - 2) // 2
    A = inst.adjacency.toarray()
    deg = A.sum(axis=1)
    assert (deg[inst.left] == h).all() and (deg[inst.right] == 2 * h).all()
    assert not A[np.ix_(inst.left, inst.left)].any() and not A[np.ix_(inst.right, inst.right)].any()
    # the graph meets Proposition 3's Ramanujan bound (checked on the graph itself)
    lam_A = np.sort(np.linalg.eigvalsh(A))
    assert lam_A[-1] == pytest.approx(math.sqrt(2) * h)
    assert lam_A[-2] <= ramanujan_bound(h, 2 * h) + 1e-9
    Sigma = np.eye(d) + A / (math.sqrt(2) * h)
    np.testing.assert_allclose(inst.covariance.toarray(), 0.5 * Sigma)
    assert (np.count_nonzero(Sigma, axis=1) <= k).all()  # k-RCS
    ev, vec = np.linalg.eigh(Sigma)
    assert ev[-1] == pytest.approx(2.0) and ev[-2] < 1.97 and ev[-2] <= inst.lambda2_bound + 1e-12
    assert ev[0] > -1e-9  # PSD (singular: bipartite spectrum is symmetric)
    assert ev[-2] == pytest.approx(inst.lambda2)
    v1 = np.zeros(d)
    v1[inst.left] = math.sqrt(3 / (4 * d))
    v1[inst.right] = math.sqrt(2) * math.sqrt(3 / (4 * d))  # eq. (14)
    np.testing.assert_allclose(inst.v1, v1)
    assert abs(vec[:, -1] @ v1) == pytest.approx(1.0, abs=1e-9)
    p = inst.parameters()
    assert p["sigma2"] == pytest.approx(1.0) and p["gap"] >= 0.01  # Theorem 4: sigma^2 = 1, gamma = 1/100


def test_corollary2_edge_factor_samples_have_its_covariance():
    inst = corollary2(36, 6, random_state=4)
    X = inst.samples(200_000, chunk_rows=50_000).compute(scheduler="sync")
    S = inst.covariance.toarray()
    se = np.sqrt((np.outer(np.diag(S), np.diag(S)) + S**2) / len(X))
    assert (np.abs(X.T @ X / len(X) - S) <= 6 * se).all()


def test_corollary2_right_set_is_respected_and_bad_input_refused():
    right = np.arange(12)
    inst = corollary2(36, 6, right=right, random_state=0)
    np.testing.assert_array_equal(inst.right, right)
    for args, match in [((36, 7), "even"), ((31, 6), "d = 3g"), ((33, 12), "g >= k"), ((36, 4), "k")]:
        with pytest.raises(ValidationError, match=match):
            corollary2(*args)
    with pytest.raises(ValidationError, match="right"):
        corollary2(36, 6, right=np.arange(5))


# --------------------------------------------------------------------------- Lemmas 15-16


def _exact_law(inst):
    """Support points and probabilities of D_{s,G} (each undirected edge, sign g = +-1)."""
    d = inst.n_features
    pts = []
    for u, v in inst.edges:
        for g in (-1.0, 1.0):
            x = np.zeros(d)
            x[u], x[v] = inst.signs[u], inst.signs[v]
            pts.append(g * math.sqrt(d / 2) * x)
    return np.array(pts), np.full(len(pts), 1.0 / len(pts))


@pytest.mark.parametrize("d,k,seed", [(40, 4, 0), (64, 16, 1)])
def test_edge_spike_lemma15_and_exact_moments_of_lemma16(d, k, seed):
    inst = edge_spike(d, k, random_state=seed)
    h = k - 1
    S = inst.covariance.toarray()
    assert (np.count_nonzero(S, axis=1) == k).all()  # h neighbours + the diagonal: k-RCS
    ev, vec = np.linalg.eigh(S)
    assert ev[0] > -1e-9 and ev[-1] == pytest.approx(2.0)
    assert ev[-2] == pytest.approx(inst.graph.lambda2) and ev[-2] <= 1 + 2 * math.sqrt(h - 1) / h + 1e-9
    if h >= 15:
        assert ev[-2] <= 1.5  # Lemma 15 for k large enough
    np.testing.assert_allclose(inst.v1, inst.signs / math.sqrt(d))
    assert abs(vec[:, -1] @ inst.v1) == pytest.approx(1.0, abs=1e-9)
    # Lemma 16, exactly over the finite support: mean 0, second moment Sigma_s, ||x||^2 = d
    pts, prob = _exact_law(inst)
    np.testing.assert_allclose(prob @ pts, 0.0, atol=1e-12)
    np.testing.assert_allclose((pts * prob[:, None]).T @ pts, S, atol=1e-12)
    np.testing.assert_allclose((pts**2).sum(axis=1), d)
    # sub-Gaussian with sigma^2 = d: E exp(u^T x) <= exp(d ||u||^2 / 2), exact MGF; random
    # directions and the worst case of the proof (u aligned with one edge's signed spike)
    rng = np.random.default_rng(seed)
    u0, v0 = inst.edges[0]
    spike = np.zeros(d)
    spike[u0], spike[v0] = inst.signs[u0], inst.signs[v0]
    for t in (0.01, 0.1, 0.5, 1.0, 3.0):
        for u in (t * rng.standard_normal(d) / math.sqrt(d), t * spike / math.sqrt(2)):
            assert inst.mgf(u) <= math.exp(d * (u @ u) / 2) * (1 + 1e-12)
            assert inst.mgf(u) == pytest.approx(prob @ np.exp(pts @ u), rel=1e-10)


def test_edge_spike_neighbouring_signs_are_2_over_d_apart_in_total_variation():
    # Theorem 5's coupling: flipping s_i changes exactly the rows on edges at i: TV = 2/d
    d = 40
    a = edge_spike(d, 5, random_state=3)
    s2 = a.signs.copy()
    s2[7] *= -1
    b = edge_spike(d, 5, signs=s2, random_state=3)  # same seed: same graph
    np.testing.assert_array_equal(a.edges, b.edges)
    pa, _ = _exact_law(a)
    pb, _ = _exact_law(b)
    key = lambda P: {tuple(np.round(p, 9)) for p in P}  # noqa: E731
    differ = len(key(pa) - key(pb)) / len(pa)
    assert differ == pytest.approx(2 / d)


def test_edge_spike_samples_match_the_law_and_chunking():
    inst = edge_spike(20, 4, random_state=5)
    X = inst.samples(60_000, chunk_rows=7_000).compute(scheduler="sync")
    assert (np.count_nonzero(X, axis=1) == 2).all()
    np.testing.assert_allclose((X**2).sum(axis=1), 20.0)
    S = inst.covariance.toarray()
    # entries of x x^T are bounded by d/2 = 10 in magnitude: Hoeffding, 6 sd-equivalents
    assert np.abs(X.T @ X / len(X) - S).max() < 6 * 10 / math.sqrt(len(X))
    again = inst.samples(60_000, chunk_rows=7_000)[:7000].compute(scheduler="threads")
    np.testing.assert_array_equal(again, X[:7000])


def test_edge_spike_bad_input():
    with pytest.raises(ValidationError, match="even"):
        edge_spike(21, 4)
    with pytest.raises(ValidationError, match="signs"):
        edge_spike(20, 4, signs=np.zeros(20))


def test_construction2_is_reexported():
    m = make_construction2(10, 12, k=4, random_state=0)
    assert m.model == "construction2-inverse-wishart" and sp.issparse(m.covariance)


# ------------------------------------------------------------------ Lemma 13 / Theorem 4 codebook


@pytest.mark.parametrize("g,size,seed", [(6, 120, 0), (8, 60, 3)])
def test_theorem4_codebook_is_lemma13s_code(g, size, seed):
    code = theorem4_codebook(g, size, random_state=seed)
    W = code.words.astype(int)
    assert W.shape == (size, 3 * g) and (W.sum(axis=1) == g).all()  # weight-g words of length 3g
    dist = (W[:, None, :] != W[None, :, :]).sum(axis=2)  # all pairs, by brute force
    off = dist[~np.eye(size, dtype=bool)]
    assert off.min() >= g / 2 and off.min() == code.min_distance
    again = theorem4_codebook(g, size, random_state=seed)
    np.testing.assert_array_equal(again.words, code.words)


def test_theorem4_codebook_separates_the_leading_eigenvectors():
    """Theorem 4's proof: distinct words give ||v_x - v_y|| > sqrt(1/50) and <v_x, v_y> > 0, so
    the decoder recovers x from any v_hat with sin^2(v_hat, v_x) <= 1/400, sign flips included."""
    code = theorem4_codebook(6, 80, random_state=1)
    V = code.leading_vectors()
    np.testing.assert_allclose(np.linalg.norm(V, axis=1), 1.0)
    G = V @ V.T
    D2 = 2.0 - 2.0 * G
    np.fill_diagonal(D2, 1.0)
    assert (G > 0).all() and np.sqrt(D2.min()) > math.sqrt(1 / 50)
    rng = np.random.default_rng(0)
    for x in rng.choice(code.size, 10, replace=False):
        w = rng.standard_normal(code.n_features)
        w -= (w @ V[x]) * V[x]
        w /= np.linalg.norm(w)
        v_hat = -(math.sqrt(1 - 1 / 400) * V[x] + math.sqrt(1 / 400) * w)  # sin^2 = 1/400, sign flipped
        assert code.decode(3.0 * v_hat) == x


def test_theorem4_codebook_instance_is_corollary2_on_the_word():
    code = theorem4_codebook(6, 20, random_state=2)
    inst = code.instance(7, 6, random_state=5)
    np.testing.assert_array_equal(inst.right, np.flatnonzero(code.words[7]))
    np.testing.assert_allclose(inst.v1, code.leading_vectors()[7])
    ev = np.linalg.eigvalsh(inst.covariance.toarray())
    assert ev[-1] == pytest.approx(1.0)  # N(0, Sigma_x / 2): sigma^2 = lambda_1 / 2 = 1
    assert (np.count_nonzero(inst.covariance.toarray(), axis=1) <= 6).all()


def test_theorem4_codebook_bad_input():
    with pytest.raises(ValidationError, match="found only"):
        theorem4_codebook(2, 50)  # weight-2 words of length 6 at distance >= 1: only 15 exist
    with pytest.raises(ValidationError, match="size"):
        theorem4_codebook(6, 1)
    code = theorem4_codebook(6, 10)
    with pytest.raises(ValidationError, match="entries"):
        code.decode(np.ones(5))
    with pytest.raises(ValidationError, match="below the codebook size"):
        code.instance(10, 6)
    assert code.decode(np.zeros(18)) == 0
