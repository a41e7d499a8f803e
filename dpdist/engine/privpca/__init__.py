"""FriendlyCore front end of PrivNorm and PrivPCA (COLT 2026, Algorithms 2 and 3, Lines 1-16).

Exact statistics only: this module computes, from the rows of X split into m batches,

* per batch i: whether its second moment ``Sigma_i`` is finite, whether ``T_tau(Sigma_i)`` is
  k-RCS, and the two largest eigenvalues of ``T_tau(Sigma_i)`` (the ingredients of the good
  set C, Definition 4);
* the friend counts ``f_i = #{j : ||Sigma_j - Sigma_i||_max <= 2 tau}`` and the FriendlyCore
  weights ``p_i = clip((f_i - m/2) / (m/6), 0, 1)`` and ``Z = sum p_i`` (Lines 7-11);
* in a second pass, ``T_threshold(Sigma_bar)`` (hard thresholding) with ``Sigma_bar = sum p_i Sigma_i / Z`` (Line 16),
  as a sparse matrix, and its spectrum by connected components.

It contains no privacy formula and draws no noise: the private tests and releases are
functions supplied by :mod:`dpdist.algorithms.sparse_pca`, run where the statistics live
through a :class:`~dpdist.engine.session.Session`.

What reaches the client
-----------------------
Nothing computed here is returned to the caller's process when the scheduler is a
``distributed`` cluster: :meth:`~dpdist.engine.session.Session.persist` keeps each result as a future on the
cluster, :meth:`~dpdist.engine.session.Session.apply` runs the caller's (noising) function there, and only what the
caller explicitly :meth:`~dpdist.engine.session.Session.fetch`-es (the noised test outcomes and the released value)
travels back. With a local scheduler ("synchronous", "threads", "processes") the graph runs
in the caller's process and the statistics exist there in memory, but they are never
attached to an estimator or a release.

Cost
----
Pass 1 works column tile by column tile: for a tile (I, J) (I <= J) it forms the m batch tiles
``Sigma_i[I, J]`` (m x t x t values, never m x d x d; ``t`` from ``tile_bytes``), counts
per-row entries above tau, keeps the thresholded entries of batches that can still be k-RCS,
and updates the m x m "separated" relation. Tiles are computed in groups of at most
``group_bytes`` of batch tiles, one group after the other (:func:`pass1_tile_groups`,
:func:`persist_pass1`): memory is bounded by the group budget plus the row chunks in flight,
and X is read once per group (once for d = 1,000, m = 200 with the defaults). The friend
relation needs all m batch values of an entry at once, so a single read with less memory than
``m d^2 / 2`` values is impossible; more groups trade reads for memory.

Within a group, one task per row chunk (:func:`chunk_group_moments`) checks the chunk for
non-finite rows and clips it once, then forms every batch's moments over the group's columns:
when the group covers the upper triangle of its columns (a one-group pass), one BLAS ``syrk``
per batch over all of them (the shape BLAS runs fastest; upper triangle only, each batch
matrix being defined by its upper triangle), sliced into the tiles; otherwise one product per
tile. :func:`tile_pass1` reads each tile batch by batch (one t x t slice in cache at a time:
finiteness, the entries above tau and their row counts, the running maximum and minimum over
the batches). The friend relation uses the span fast path: an entry whose values across the
(finite) batches span at most 2 tau separates no pair; only wider entries are compared
pairwise (``scipy.spatial.distance.cdist(..., "chebyshev")`` on blocks of wide entries), and
among batches that still have an unseparated partner only: a batch already separated from
every other one (an outlier batch) drops out, so its wide entries cost nothing after the first
block. (A sort-and-sweep per wide entry finds the same pairs, but the union over entries
still has to be written into the m x m relation; the blocked Chebyshev distance does that in
compiled code.)

Pass 2: when pass 1 is one group, its normalised batch tiles are kept where they were
computed (at most ``group_bytes``, the memory pass 1 needs anyway) and ``Sigma_bar`` is their
weighted sum (:func:`tile_weighted_moment`, m t^2 operations a tile): X is read once in all.
Otherwise pass 2 reads X again: one weighted Gram per tile (``syrk`` on the diagonal tiles),
summed over row chunks in a tree (:func:`friendly_pass2`).

Non-finite values and magnitudes: both passes first replace every row holding a
NaN or an infinity by a zero row (the row rule of every estimator: a per-row map, uncounted)
and clip every entry to the caller's public ``clip`` (:func:`chunk_rows`), so each product
``x_a x_b`` is at most ``clip^2`` and the rounding of every batch moment and of Sigma_bar is
bounded by public values (``dpdist.privacy.mechanisms.privpca.calibration.friendly_float_bounds``). A batch
whose second moment is still non-finite (possible only with ``clip = inf``) is not good, has
no friends (not even itself: ``NaN <= 2 tau`` is false), weighs 0, and its rows (or its kept
tiles) are skipped (not multiplied by 0) in pass 2.

Modules
-------
:mod:`~dpdist.engine.privpca.kernels`
    what one task computes (plain NumPy on one row chunk or one tile);
:mod:`~dpdist.engine.privpca.graph`
    the two passes as dask graphs over the row chunks of X (batches, tiles, groups);
:mod:`dpdist.engine.sparse_spectrum` and :mod:`dpdist.engine.session`
    the spectra of the thresholded matrices, and where the results of a fit live.
"""
