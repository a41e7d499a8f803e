"""PNG plots of the experiments. A simulated result is labelled SIMULATED in its title and
legend (the project rule: every plot of simulated data says so)."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["plot_curves", "plot_sample_complexity"]


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_sample_complexity(result: dict, path: str, *, title: str) -> str:
    """log-log n*(d) per method, with the papers' slopes drawn beside (dashed, through the
    method's geometric-mean point)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 5))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (name, res) in enumerate(result["methods"].items()):
        rows = [r for r in res["rows"] if r["reached"]]
        if not rows:
            continue
        d = np.array([r["d"] for r in rows], float)
        n = np.array([r["n_star"] for r in rows], float)
        mode = res.get("mode", "simulated")
        fit = res.get("fit")
        lab = f"{name} [{mode.upper()}]"
        if fit:
            lab += f": slope {fit['exponent']:.2f} [{fit['ci95'][0]:.2f}, {fit['ci95'][1]:.2f}]"
        c = colors[i % len(colors)]
        ax.loglog(d, n, "o-", color=c, label=lab)
        p = res.get("paper_exponent")
        if p is not None:
            gd, gn = math.exp(np.mean(np.log(d))), math.exp(np.mean(np.log(n)))
            ax.loglog(d, gn * (d / gd) ** p, "--", color=c, alpha=0.6, label=f"{name}: paper slope {p:g}")
    simulated = any(res.get("mode", "simulated") == "simulated" for res in result["methods"].values())
    ax.set_xlabel("d (dimension)")
    ax.set_ylabel("n*(d): least n with error <= target w.p. >= 1 - beta")
    ax.set_title(("SIMULATED - " if simulated else "") + title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_curves(series: list[dict], path: str, *, title: str, xlabel: str, ylabel: str, simulated: bool = False,
                logy: bool = True) -> str:
    """Error curves: each series ``{"label", "x", "y", optional "lo", "hi", "marker"}``."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 5))
    for s in series:
        x, y = np.asarray(s["x"], float), np.asarray(s["y"], float)
        ax.plot(x, y, s.get("marker", "o-"), label=s["label"])
        if "lo" in s and "hi" in s:
            ax.fill_between(x, s["lo"], s["hi"], alpha=0.15)
    ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(("SIMULATED - " if simulated else "") + title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
