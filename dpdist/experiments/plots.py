"""PNG plots of the experiments. A simulated result is labelled SIMULATED in its title and
legend (the project rule: every plot of simulated data says so)."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["plot_sample_complexity", "write_json"]


def write_json(obj: dict, out_dir: str, filename: str) -> str:
    """Write ``obj`` as indented JSON to ``out_dir/filename`` (the directory is created)."""
    import json
    import os

    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, filename)
    with open(path, "w") as fh:
        json.dump(obj, fh, indent=1, default=float)
    return path


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_sample_complexity(result: dict, path: str, *, title: str, variable: str = "d") -> str:
    """log-log n* against the swept ``variable`` (d, k or epsilon) per method, with the papers'
    slopes drawn beside (dashed, through the method's geometric-mean point) and the
    estimators' own ``plan()`` bound where the rows carry it (``theory_n``, dotted)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 5))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (name, res) in enumerate(result["methods"].items()):
        rows = [r for r in res["rows"] if r["reached"]]
        if not rows:
            continue
        d = np.array([r[variable] for r in rows], float)
        n = np.array([r["n_star"] for r in rows], float)
        mode = res.get("mode", "simulated")
        fit = res.get("fit")
        lab = f"{name} [{mode.upper()}]"
        if variable != "d":
            lab += f" d={res['d']}" + (f", k={res['k']}" if variable == "epsilon" else "")
        if fit:
            lab += f": slope {fit['exponent']:.2f} [{fit['ci95'][0]:.2f}, {fit['ci95'][1]:.2f}]"
        c = colors[i % len(colors)]
        ax.loglog(d, n, "o-", color=c, label=lab)
        p = res.get("paper_exponent")
        if p is not None:
            gd, gn = math.exp(np.mean(np.log(d))), math.exp(np.mean(np.log(n)))
            ax.loglog(d, gn * (d / gd) ** p, "--", color=c, alpha=0.6, label=f"{name}: paper slope {p:g}")
        th = [(x, r["theory_n"]) for x, r in zip(d, rows) if r.get("theory_n")] if variable != "d" else []
        if th:
            ft = res.get("fit_theory")
            ax.loglog(*zip(*th), ":", color=c, alpha=0.8, label=f"{name}: plan() bound" +
                      (f", slope {ft['exponent']:.2f}" if ft else ""))
    simulated = any(res.get("mode", "simulated") == "simulated" for res in result["methods"].values())
    ax.set_xlabel({"d": "d (dimension)", "k": "k (sparsity)", "epsilon": "epsilon"}[variable])
    ax.set_ylabel(f"n*({variable}): least n with error <= target w.p. >= 1 - beta")
    ax.set_title(("SIMULATED - " if simulated else "") + title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
