"""The lower-bound instances of the COLT 2026 paper, as generators for experiments.

Each generator returns its covariance, the structure its lemma talks about (the graph, the
blocks, the leading eigenvector) and :meth:`parameters`: the model parameters the instance
satisfies, ``k`` (row-column sparsity), ``sigma2`` (sub-Gaussian variance proxy) and ``gap``
(relative eigengap ``1 - lambda_2 / lambda_1``), computed from the instance drawn, next to the
values the lemma promises.

One module per theorem's instance:

- :mod:`~dpdist.data.hard_instances.theorem2`, ``construction1``: Construction 1 (Section
  3.2), block-diagonal inverse-Wishart blocks on a union of ``d/k`` cliques. Gaussian rows; an
  instance of Model 1 with ``sigma^2 = ||Sigma||_op`` (the paper, after Construction 1).
- :mod:`~dpdist.data.hard_instances.theorem4`, ``corollary2``: Corollary 2 (Section 5.1),
  ``Sigma = I + A / (sqrt(2) h)`` with ``A`` the adjacency matrix of an ``(h, 2h)``-biregular
  bipartite graph with a small second eigenvalue. Gaussian rows ``N(0, Sigma / 2)`` as in the
  proof of Theorem 4 (Model 1 with ``sigma^2 = 1``). And ``theorem4_codebook``: Lemma 13's
  code (weight-g words of length 3g, pairwise Hamming distance >= g/2) that indexes Theorem
  4's packing: one Corollary 2 instance per codeword, ``R = supp(x)`` (``Codebook.instance``),
  with the decoder of the proof (``Codebook.decode``).
- :mod:`~dpdist.data.hard_instances.theorem5`, ``edge_spike``: Lemmas 15-16 (Section 5.2),
  ``Sigma_s = I + D_s A D_s / h`` with ``A`` an ``h``-regular bipartite graph, and the signed
  edge-spike distribution ``D_{s,G}`` whose rows have exactly two non-zeros (sub-Gaussian with
  ``sigma^2 = d``).
- Construction 2 (Appendix E, spiked inverse-Wishart) is :func:`dpdist.data.model2.make_construction2`.

The graphs of Corollary 2 and Lemma 15 come from Proposition 3 (Gribinski-Marcus 2021: a
biregular bipartite graph whose second eigenvalue meets the Ramanujan bound
``sqrt(h - 1) + sqrt(t h - 1)``). We draw them as random biregular graphs: the configuration
model (a uniform random matching of the edge stubs), with repeated edges removed by
degree-preserving double-edge switches (rejecting every multigraph is hopeless for h >= 5:
a draw is simple with probability about ``exp(-(h-1)(th-1)/2)``), and the whole graph rejected
and redrawn until its second eigenvalue meets the bound (random biregular graphs approach it
as the size grows, Brito-Dumitriu-Harris 2022), in :mod:`~dpdist.data.hard_instances.graphs`.
The number of draws and the second eigenvalue reached are recorded.

Rows are generated chunk by chunk, each chunk from its own stream spawned from the root seed
(``spawn_key=(1, chunk)``; the graph uses ``(0,)``, the random signs or vertex set ``(2,)``)
(the streams of :mod:`dpdist.data.synthetic`), so the data do not depend on the scheduler.
These seeds drive data generation only, never privacy noise.
"""

from __future__ import annotations
