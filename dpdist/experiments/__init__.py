"""Experiments: the papers' claims as measured curves (on top of the public estimators, the
generators of :mod:`dpdist.data` and the simulation mode of :mod:`dpdist.simulate`).

- :mod:`~dpdist.experiments.sample_complexity`: n*(d) sweeps, fitted exponents, the
  PrivCov / Wang-Xu crossover (``dpdist experiment sample-complexity``);
- :mod:`~dpdist.experiments.validation`: the simulation against the real pipeline;
- :mod:`~dpdist.experiments.second_moment_curves`: the NeurIPS 2025 curves;
- :mod:`~dpdist.experiments.peers`: side by side with OpenDP's and diffprivlib's PCA;
- :mod:`~dpdist.experiments.empirical`: the measured n* as planning data;
- :mod:`~dpdist.experiments.fingerprint`: what each result depends on, so that a stale one is
  found (``dpdist experiment fingerprint --check``).
- :mod:`~dpdist.experiments.lower_bounds`: every estimator on the lower-bound instances
  beside the bounds, ExpMech's n*(k) and PrivNorm alone (``dpdist experiment lower-bounds``).
"""
