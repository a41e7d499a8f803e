"""PrivCov (COLT 2026, Algorithm 1), the mechanism of ``SparseCovariance``: one mechanism, three
selections, in three modules because together they pass the package's module size.

- :mod:`~dpdist.privacy.mechanisms.privcov.calibration`: clip levels, sensitivities and the
  (epsilon, delta) calibration of the paper's form (``selection="paper"``);
- :mod:`~dpdist.privacy.mechanisms.privcov.zcdp_calibration`: the zCDP calibrations of the
  Laplace (``selection="laplace"``) and Gumbel (``selection="gumbel"``) selections;
- :mod:`~dpdist.privacy.mechanisms.privcov.mechanism`: the mechanism objects that hold the
  noise callables and state the events of all three.

Proofs: docs/privacy/privcov.md.
"""
