"""PrivPCA and its first stage PrivNorm (COLT 2026, Algorithms 2 and 3), the mechanisms of
``SparsePCA`` and ``SpectralNorm``: FriendlyCore's two private tests, then a Gaussian release.
PrivNorm is PrivPCA's first stage and shares its tests and calibration, so both live here,
in two modules because together they pass the package's module size.

- :mod:`~dpdist.privacy.mechanisms.privpca.calibration`: the tests' thresholds, the releases'
  sensitivities and noise scales, the float bounds, the budget split between the stages;
- :mod:`~dpdist.privacy.mechanisms.privpca.mechanism`: the mechanism objects that hold the
  noise callables and state the events.

Proofs: docs/privacy/privpca.md.
"""
