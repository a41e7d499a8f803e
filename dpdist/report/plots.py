"""PNG reports of results and of the privacy-budget ledger (matplotlib, Agg backend).

- :func:`plot_result`: a released matrix's support as a heatmap (cells coloured by
  ``|M_ij|``, zeros blank) beside its spectrum with the error band the plan predicted;
  a released vector as a bar chart.
- :func:`plot_budget`: per dataset, the share of its budget spent over time (step lines,
  refusals marked), from the series :func:`dpdist.report.budget.spending_series` builds.

Everything plotted is released output or ledger data; nothing here reads the private input.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any, Sequence

import numpy as np
import scipy.sparse as sp

__all__ = ["eigen_band", "plot_budget", "plot_result", "result_summary"]

#: Largest d whose spectrum is computed in full (dense); above it, the top eigenvalues only.
DENSE_SPECTRUM_MAX_D = 2000
#: Largest heatmap side in cells: bigger matrices are binned (each cell shows its largest |M_ij|).
HEATMAP_MAX_CELLS = 600


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def _matrix(values: dict) -> tuple[str, Any] | None:
    for name in ("covariance", "second_moment", "matrix"):
        if name in values and getattr(values[name], "ndim", 0) == 2:
            return name, values[name]
    for name, v in values.items():
        if getattr(v, "ndim", 0) == 2 and v.shape[0] == v.shape[1] and v.shape[0] > 1:
            return name, v
    return None


def _spectrum(M) -> np.ndarray:
    """Eigenvalues of the symmetric part of ``M``, largest first (top 50 when d is large)."""
    d = M.shape[0]
    if d <= DENSE_SPECTRUM_MAX_D:
        A = M.toarray() if sp.issparse(M) else np.asarray(M, dtype=float)
        return np.linalg.eigvalsh((A + A.T) / 2)[::-1]
    from scipy.sparse.linalg import eigsh

    A = sp.csr_array(M)
    vals = eigsh((A + A.T) / 2, k=min(50, d - 2), which="LA", return_eigenvectors=False)
    return np.sort(vals)[::-1]


def eigen_band(eigs: np.ndarray, predicted: dict | None) -> tuple[np.ndarray, np.ndarray, str] | None:
    """Where the true eigenvalues lie when the plan's error statement holds.

    - an operator-norm bound ``b`` on ``||M - Sigma||_op`` (PrivCov): Weyl's inequality gives
      ``|lambda_i(M) - lambda_i(Sigma)| <= b``, so ``lambda_i(Sigma)`` is in ``lambda_i(M) +- b``;
    - a relative ``gamma`` with ``(1 - gamma) Sigma <= M <= (1 + gamma) Sigma`` (second
      moment): ``lambda_i(Sigma)`` is in ``[lambda_i(M) / (1 + gamma), lambda_i(M) / (1 - gamma)]``.
    """
    if not predicted or predicted.get("value") is None:
        return None
    value = float(predicted["value"])
    key = predicted.get("plan_key")
    # every plan names its error "error_bound" and says what it measures in "metric" (results
    # of earlier versions said "predicted_gamma" for the second moment's relative band)
    metric = str(predicted.get("metric") or "")
    if key == "predicted_gamma" or metric.startswith("gamma"):
        if not 0 <= value < 1:
            return None
        return eigs / (1 + value), eigs / (1 - value), f"(1 +- gamma) band, gamma = {value:.3g}"
    if key == "error_bound" and (not metric or metric.startswith("||M - Sigma||_op")):
        return eigs - value, eigs + value, f"+- predicted ||M - Sigma||_op bound {value:.3g}"
    return None


def _heatmap_grid(M) -> tuple[np.ndarray, int]:
    """|M| on a grid of at most HEATMAP_MAX_CELLS per side (each cell: the largest |M_ij|)."""
    A = sp.coo_array(M) if sp.issparse(M) else sp.coo_array(np.asarray(M))
    d = A.shape[0]
    cells = min(d, HEATMAP_MAX_CELLS)
    grid = np.zeros((cells, cells))
    r = (A.row.astype(np.int64) * cells) // d
    c = (A.col.astype(np.int64) * cells) // d
    np.maximum.at(grid, (r, c), np.abs(A.data))
    return grid, cells


def result_summary(metadata: dict, values: dict, *, eigs: np.ndarray | None = None) -> dict:
    """What :func:`plot_result` shows, as numbers (for the printed summary and --json)."""
    out: dict = {"mechanism": metadata.get("mechanism"), "privacy": metadata.get("privacy"),
                 "status": metadata.get("status"), "private": metadata.get("private", True)}
    job = metadata.get("job") or {}
    if job:
        out["job"] = {k: job.get(k) for k in ("name", "run", "dataset", "reservation")}
    predicted = job.get("predicted_error") or predicted_error(metadata)
    out["predicted_error"] = predicted
    found = _matrix(values)
    if found is not None:
        name, M = found
        d = M.shape[0]
        nnz = int(M.nnz) if sp.issparse(M) else int(np.count_nonzero(M))
        eigs = _spectrum(M) if eigs is None else eigs
        out.update({"matrix": name, "shape": list(M.shape), "nnz": nnz, "density": nnz / (d * d),
                    "top_eigenvalues": [float(x) for x in eigs[:5]],
                    "min_eigenvalue": float(eigs[-1])})
    return out


def predicted_error(metadata: dict) -> dict | None:
    """The predicted error of a PrivCov result written without a job: the error bound its
    release recorded from its own plan (``parameters["utility"]``, public parameters only).
    None for other mechanisms (their bounds are not operator-norm bands) and for a release
    that recorded none."""
    if not str(metadata.get("mechanism", "")).startswith("PrivCov"):
        return None
    utility = (metadata.get("parameters") or {}).get("utility") or {}
    if utility.get("error_bound") is None:
        return None
    return {"value": utility["error_bound"], "metric": utility["error_metric"], "plan_key": "error_bound"}


def _title(metadata: dict) -> str:
    p = metadata.get("privacy") or {}
    if p.get("type") == "approx-dp":
        cost = f"({p['epsilon']:g}, {p['delta']:.2g})-DP"
    elif p.get("type") == "zcdp":
        cost = f"rho = {p['rho']:g} zCDP"
    else:
        cost = "NOT PRIVATE" if not metadata.get("private", True) else "privacy: ?"
    params = metadata.get("parameters") or {}
    n, d = params.get("n_samples"), params.get("n_features")
    size = f", n = {n:,}, d = {d}" if isinstance(n, int) and isinstance(d, int) else ""
    return f"{metadata.get('mechanism', 'dpdist result')}: {cost}{size}"


def plot_result(metadata: dict, values: dict, path: str, *, title: str | None = None) -> dict:
    """Write the PNG report of one result to ``path``; returns :func:`result_summary`."""
    plt = _pyplot()
    found = _matrix(values)
    eigs = _spectrum(found[1]) if found is not None else None
    summary = result_summary(metadata, values, eigs=eigs)
    if found is None:
        fig, ax = plt.subplots(figsize=(9, 4.5), dpi=120, layout="constrained")
        vec = next((np.ravel(v) for v in values.values() if getattr(v, "ndim", 0) in (1, 2)), None)
        if vec is not None:
            ax.bar(np.arange(vec.size), vec, color="#3a6ea5")
            ax.axhline(0, color="0.3", lw=0.8)
            ax.set_xlabel("feature")
            ax.set_ylabel("released value")
        else:
            scalars = {k: v for k, v in values.items() if isinstance(v, (int, float))}
            ax.axis("off")
            ax.text(0.02, 0.9, "\n".join(f"{k} = {v:.6g}" for k, v in scalars.items()), va="top",
                    fontsize=13, family="monospace")
        fig.suptitle(title or _title(metadata), fontsize=12)
        fig.savefig(path)
        plt.close(fig)
        return summary

    name, M = found
    d = M.shape[0]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 5.6), dpi=120, layout="constrained",
                                   gridspec_kw={"width_ratios": [1, 1.25]})
    fig.get_layout_engine().set(w_pad=0.15)
    grid, cells = _heatmap_grid(M)
    positive = grid[grid > 0]
    from matplotlib.colors import LogNorm

    shown = np.ma.masked_equal(grid, 0)
    cmap = plt.get_cmap("viridis").with_extremes(bad="white")
    norm = LogNorm(vmin=max(positive.min(), positive.max() * 1e-4), vmax=positive.max()) if positive.size else None
    im = ax1.imshow(shown, cmap=cmap, norm=norm, interpolation="nearest", extent=(0, d, d, 0))
    cb = fig.colorbar(im, ax=ax1, shrink=0.85)
    cb.set_label(f"|{name}_ij|")
    binned = f" (binned {d // cells}x)" if cells < d else ""
    ax1.set_title(f"support of the released {name}: {summary['nnz']:,} of {d * d:,} entries "
                  f"non-zero{binned}", fontsize=11)
    ax1.set_xlabel("feature j")
    ax1.set_ylabel("feature i")
    ax1.set_facecolor("white")
    for spine in ax1.spines.values():
        spine.set_edgecolor("0.5")

    idx = np.arange(1, eigs.size + 1)
    band = eigen_band(eigs, summary.get("predicted_error"))
    ax2.plot(idx, eigs, "o-", ms=4, lw=1.2, color="#1f4e79", label=f"eigenvalues of the released {name}", zorder=3)
    if band is not None:
        lo, hi, label = band
        ax2.fill_between(idx, lo, hi, color="#f4a259", alpha=0.35, step="mid", label=label)
        spread = max(float(eigs.max() - eigs.min()), abs(float(eigs.max())), 1e-12)
        if float(hi.max() - lo.min()) > 6 * spread:  # the band would flatten the spectrum: zoom in
            pad = 0.5 * spread
            ax2.set_ylim(float(eigs.min()) - pad, float(eigs.max()) + pad)
            ax2.text(0.02, 0.03, "the predicted band extends beyond the axes: at this n the plan's\n"
                     "bound is loose next to the eigenvalues (see 'dpdist plan' / min_samples)",
                     transform=ax2.transAxes, fontsize=9, color="#8a4b08")
    ax2.axhline(0, color="0.4", lw=0.8)
    ax2.set_xlabel("index i (largest first)" + ("" if eigs.size == d else f"; top {eigs.size} of {d}"))
    ax2.set_ylabel("eigenvalue")
    ax2.set_title("spectrum against the plan's predicted error band", fontsize=11)
    ax2.grid(alpha=0.3)
    ax2.legend(loc="upper right", fontsize=10, framealpha=0.9)
    if band is None:
        ax2.text(0.02, 0.03, "no predicted error band (the plan gives no eigenvalue bound)",
                 transform=ax2.transAxes, fontsize=9, color="0.35")
    fig.suptitle(title or _title(metadata), fontsize=12)
    fig.savefig(path)
    plt.close(fig)
    return summary


def plot_budget(series: Sequence[dict], path: str, *, title: str = "privacy budget spent over time") -> None:
    """Per dataset, the share of its budget spent over time.

    ``series`` items: ``dataset``, ``label``, ``total`` (text), and ``points``: a list of
    ``(time, fraction_spent, state)`` with ``state`` one of ``committed``, ``reserved``,
    ``refunded``, ``refused`` (:func:`dpdist.report.budget.spending_series`).
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(11, 5.2), dpi=120, layout="constrained")
    colors = plt.get_cmap("tab10").colors
    refused_label = True
    for i, s in enumerate(series):
        color = colors[i % len(colors)]
        pts = s["points"]
        if not pts:
            continue
        times = [_dt.datetime.fromisoformat(t) for t, _, _ in pts]
        frac = [f for _, f, _ in pts]
        ax.step(times, frac, where="post", color=color, lw=2, label=f"{s['label']}  (total {s['total']})")
        for t, f, state in zip(times, frac, (st for _, _, st in pts)):
            if state == "committed":
                ax.plot([t], [f], "o", color=color, ms=6)
            elif state == "reserved":
                ax.plot([t], [f], "o", mfc="white", mec=color, ms=7)
            elif state == "refused":
                ax.plot([t], [f], "x", color="#c0392b", ms=10, mew=2.5,
                        label="refused by the ledger" if refused_label else None)
                refused_label = False
    ax.axhline(1.0, color="#c0392b", ls="--", lw=1.2, label="total budget")
    ax.set_ylim(0, max(1.15, ax.get_ylim()[1]))
    ax.set_ylabel("share of the dataset's budget spent\n(epsilon, or rho for zCDP budgets)")
    ax.set_xlabel("time (UTC)")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=10, framealpha=0.9)
    fig.autofmt_xdate()
    ax.set_title(title, fontsize=12)
    fig.savefig(path)
    plt.close(fig)

