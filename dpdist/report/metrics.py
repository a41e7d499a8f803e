"""Accuracy metrics against a known truth (synthetic data only: the truth is not private)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse import linalg as splinalg

__all__ = ["operator_norm", "support_metrics"]


def operator_norm(A) -> float:
    """Spectral norm of a symmetric matrix (dense or sparse); dense below d = 2000."""
    d = A.shape[0]
    if d <= 2000:
        dense = A.toarray() if sp.issparse(A) else np.asarray(A)
        return float(np.max(np.abs(np.linalg.eigvalsh(dense))))
    return float(abs(splinalg.eigsh(sp.csr_array(A), k=1, which="LM", return_eigenvectors=False)[0]))


def support_metrics(estimate, truth) -> dict:
    """Off-diagonal support recovery: true/false positives, recall and precision."""
    E = sp.csr_array(estimate)
    T = sp.csr_array(truth)
    def pattern(M):
        M = sp.coo_array(M)
        keep = (M.row != M.col) & (M.data != 0)
        return set(zip(M.row[keep].tolist(), M.col[keep].tolist()))

    pe, pt = pattern(E), pattern(T)
    tp = len(pe & pt)
    return {
        "true_positives": tp,
        "false_positives": len(pe - pt),
        "false_negatives": len(pt - pe),
        "recall": tp / len(pt) if pt else 1.0,
        "precision": tp / len(pe) if pe else 1.0,
    }
