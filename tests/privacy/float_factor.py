"""The float factor kappa(n) of a computed Gram matrix, typed from its definition (not from the code under test).

kappa(n) = 1 + 2 n gamma_D, gamma_D = D u / (1 - D u), u = 2**-53, D = 4096 + 8 ceil(log2 n) + 4
(dpdist.privacy.float_rounding.gram_rounding_factor's docstring).
"""

from __future__ import annotations

import math

U = 2.0**-53


def kappa(n: int) -> float:
    D = 4096 + 8 * math.ceil(math.log2(max(n, 2))) + 4
    return 1.0 + 2.0 * n * (D * U / (1.0 - D * U))
