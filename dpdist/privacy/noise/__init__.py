"""Noise primitives: every random number of a release is drawn here, nowhere else in privacy/.

- :mod:`~dpdist.privacy.noise.streams`: the keyed ChaCha20 streams (:class:`NoiseSeed`, one key
  per purpose, one stretch per index) and the float samplers of the simulator;
- :mod:`~dpdist.privacy.noise.lattice`: exact Laplace, Gaussian and bounded-Laplace laws on a
  public lattice, the float-safe noise of every release;
- :mod:`~dpdist.privacy.noise.gumbel`: exact Gumbel-max and Gumbel top-k selection;
- :mod:`~dpdist.privacy.noise.lazy_selection` (with its interval arithmetic,
  :mod:`~dpdist.privacy.noise.lazy_selection_intervals`): noisy row-wise top-k that draws
  O(d k) noises per row;
- :mod:`~dpdist.privacy.noise.topk_sampler`: the exact top-k^2 of a noisy matrix by order
  statistics;
- :mod:`~dpdist.privacy.noise.masking`: the masked Gram release on a 30-bit grid;
- :mod:`~dpdist.privacy.noise.partition`: the keyed permutation that splits rows into groups.

None of them knows a mechanism: the mechanisms of :mod:`dpdist.privacy.mechanisms` choose the
laws, scales and purposes, and call these samplers.
"""
