"""The lower-bound experiment's result drawn and written out: the six-panel figure and the
markdown tables that benchmarks/results/README.md quotes.
"""

from __future__ import annotations

import math

from dpdist.experiments.lower_bound_formulas import (
    theorem2_alpha,
    theorem4_success_bound,
    theorem5_risk_bound,
    theorem6_n,
)
from dpdist.experiments.lower_bound_parts import NON_PRIVATE

__all__ = ["plot_lower_bounds", "readme_tables"]


def _label(method: str) -> str:
    return f"{method} (NOT PRIVATE)" if method in NON_PRIVATE else method


def plot_lower_bounds(result: dict, path: str) -> str:
    """Six panels: one per part run (SIMULATED panels say so)."""
    from dpdist.experiments.plots import _pyplot

    plt = _pyplot()
    fig, axes = plt.subplots(2, 3, figsize=(16, 9))
    axes = axes.ravel()
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]

    def by_method(rows):
        out: dict = {}
        for r in rows:
            out.setdefault(r["method"], []).append(r)
        return out

    def tag(part):
        return "SIMULATED - " if result[part]["mode"] == "simulated" else "REAL PIPELINE - "

    i = 0
    if "theorem2" in result:
        ax = axes[i]; i += 1
        for j, (m, rows) in enumerate(by_method(result["theorem2"]["rows"]).items()):
            ax.loglog([r["n"] for r in rows], [r["error_q2_3"] for r in rows], "o-", color=colors[j], label=_label(m))
        rows = result["theorem2"]["rows"]
        ns = sorted({r["n"] for r in rows})
        ax.loglog(ns, [theorem2_alpha(n, result["theorem2"]["instance"]["n_features"],
                                      result["theorem2"]["instance"]["k"], result["epsilon"]) for n in ns],
                  "k--", label="Thm 2 alpha(n), constants 1")
        ax.set(xlabel="n", ylabel="2/3-quantile of ||M - Sigma||_op / sigma^2",
               title=tag("theorem2") + "Thm 2: Construction 1")
        ax.legend(fontsize=7)
    if "theorem4" in result:
        ax = axes[i]; i += 1
        for j, (m, rows) in enumerate(by_method(result["theorem4"]["rows"]).items()):
            ax.semilogx([r["n"] for r in rows], [r["success_rate"] for r in rows], "o-", color=colors[j], label=_label(m))
        rows = result["theorem4"]["rows"]
        ns = sorted({r["n"] for r in rows})
        ax.semilogx(ns, [theorem4_success_bound(n, result["theorem4"]["codebook"]["size"], result["epsilon"],
                                                result["delta"]) for n in ns], "k--", label="Thm 4 bound (max)")
        ax.set(xlabel="n", ylabel="rate of decoding the codeword", ylim=(-0.02, 1.02),
               title=tag("theorem4") + f"Thm 4: codebook m={result['theorem4']['codebook']['size']}")
        ax.legend(fontsize=7)
    if "theorem5" in result:
        ax = axes[i]; i += 1
        for j, (m, rows) in enumerate(by_method(result["theorem5"]["rows"]).items()):
            ax.semilogx([r["n"] for r in rows], [r["sin2_mean"] for r in rows], "o-", color=colors[j], label=_label(m))
        rows = result["theorem5"]["rows"]
        ns = sorted({r["n"] for r in rows})
        d5 = result["theorem5"]["instance"]["n_features"]
        ax.semilogx(ns, [theorem5_risk_bound(n, d5, result["epsilon"], result["delta"]) for n in ns], "k--",
                    label="Thm 5 bound (min)")
        ax.set(xlabel="n", ylabel="mean sin^2", ylim=(-0.02, 1.02), title=tag("theorem5") + "Thm 5: edge spike")
        ax.legend(fontsize=7)
    if "theorem6" in result:
        ax = axes[i]; i += 1
        for j, (m, rows) in enumerate(by_method(result["theorem6"]["n_at_target"]).items()):
            pts = [(r["d"], r["n_at_target"]) for r in rows if r["n_at_target"]]
            if pts:
                ax.loglog(*zip(*pts), "o-", color=colors[j], label=f"{_label(m)}: n at sin^2 q2/3 <= target")
        ds = sorted({r["d"] for r in result["theorem6"]["n_at_target"]})
        ax.loglog(ds, [theorem6_n(d, result["epsilon"]) for d in ds], "k--", label="Thm 6: d / eps (constant 1)")
        ax.set(xlabel="d", ylabel="n", title=tag("theorem6") + "Thm 6: Construction 2 (dense)")
        ax.legend(fontsize=7)
    if "expmech" in result:
        ax = axes[i]; i += 1
        rows = [r for r in result["expmech"]["rows"] if r["reached"]]
        if rows:
            fit = result["expmech"].get("fit")
            lab = "ExpMech n*" + (f": slope {fit['exponent']:.2f} [{fit['ci95'][0]:.2f}, {fit['ci95'][1]:.2f}]"
                                  if fit else "")
            ax.loglog([r["k"] for r in rows], [r["n_star"] for r in rows], "o-", label=lab)
            ax.loglog([r["k"] for r in rows], [r["theory_n"] for r in rows], "s--", label="Thm 7 planning n")
        ax.set(xlabel="k", ylabel="n*", title=tag("expmech") + f"ExpMech n*(k), d={result['expmech']['d']}")
        ax.legend(fontsize=7)
    if "privnorm" in result:
        ax = axes[i]; i += 1
        rows = result["privnorm"]["rows"]
        ax.semilogx([r["n"] for r in rows], [r["pass_rate"] for r in rows], "o-", label="pass rate")
        ax.semilogx([r["n"] for r in rows], [r["plan_release_probability"] for r in rows], "--",
                    label="plan: release probability")
        ax2 = ax.twinx()
        pts = [(r["n"], r["rel_error_median"]) for r in rows if r["rel_error_median"]]
        if pts:
            ax2.loglog(*zip(*pts), "s-", color=colors[2], label="median relative error")
        ax2.loglog([r["n"] for r in rows], [r["plan_relative_error_bound"] for r in rows], ":", color=colors[2],
                   label="Lemma 21 bound / lambda_1")
        ax.set(xlabel="n", ylabel="pass rate", title=tag("privnorm") + f"PrivNorm alone, d={result['privnorm']['d']}")
        ax2.set_ylabel("relative error")
        ax.legend(fontsize=7, loc="center left")
        ax2.legend(fontsize=7, loc="center right")
    for ax in axes[i:]:
        ax.axis("off")
    fig.suptitle(f"COLT 2026 lower bounds measured (eps={result['epsilon']:g}, delta={result['delta']:g})")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _g(x, digits: int = 3) -> str:
    if x is None:
        return "-"
    if isinstance(x, float) and not math.isfinite(x):
        return "inf"
    return f"{x:.{digits}g}"


def readme_tables(result: dict) -> str:
    """The markdown tables of benchmarks/results/README.md's lower-bound section, rendered from
    a full result (the README quotes them verbatim; a test compares the two)."""
    out = []
    if "theorem2" in result:
        t = result["theorem2"]
        ns = sorted({r["n"] for r in t["rows"]})
        out.append(f"Theorem 2, Construction 1 (d = {t['instance']['n_features']}, k = {t['instance']['k']}, "
                   "SIMULATED): 2/3-quantile of `||M - Sigma||_op / sigma^2` / the bound's alpha(n) (constants 1)\n")
        out.append("| method | " + " | ".join(f"n = {_g(n, 2)}" for n in ns) + " |")
        out.append("|---|" + "---|" * len(ns))
        for m in dict.fromkeys(r["method"] for r in t["rows"]):
            cells = {r["n"]: r["ratio"] for r in t["rows"] if r["method"] == m}
            out.append(f"| {_label(m)} | " + " | ".join(_g(cells[n]) for n in ns) + " |")
        out.append("| bound alpha(n) | " + " | ".join(
            _g(next(r["bound_alpha"] for r in t["rows"] if r["n"] == n)) for n in ns) + " |")
        out.append("")
    if "theorem4" in result:
        t = result["theorem4"]
        ns = sorted({r["n"] for r in t["rows"]})
        out.append(f"Theorem 4, codebook of m = {t['codebook']['size']} Corollary 2 instances (d = {t['n_features']}, "
                   f"k = {t['k']}, minimum distance {t['codebook']['min_distance']}): codewords decoded / reps "
                   "(bound: the most any (eps, delta)-DP algorithm can reach)\n")
        out.append("| method | " + " | ".join(f"n = {n}" for n in ns) + " |")
        out.append("|---|" + "---|" * len(ns))
        for m in dict.fromkeys(r["method"] for r in t["rows"]):
            cells = {r["n"]: r for r in t["rows"] if r["method"] == m}
            out.append(f"| {_label(m)} | " + " | ".join(f"{cells[n]['decoded']}/{cells[n]['reps']}" for n in ns)
                       + " |")
        out.append("| bound (rate) | " + " | ".join(
            _g(next(r["bound_success"] for r in t["rows"] if r["n"] == n)) for n in ns) + " |")
        out.append("")
    if "theorem5" in result:
        t = result["theorem5"]
        ns = sorted({r["n"] for r in t["rows"]})
        out.append(f"Theorem 5, edge-spike family (d = {t['instance']['n_features']}, k = {t['instance']['k']}): "
                   "mean sin^2 over uniform members (bound: the least any (eps, delta)-DP algorithm can reach)\n")
        out.append("| method | " + " | ".join(f"n = {n}" for n in ns) + " |")
        out.append("|---|" + "---|" * len(ns))
        for m in dict.fromkeys(r["method"] for r in t["rows"]):
            cells = {r["n"]: r["sin2_mean"] for r in t["rows"] if r["method"] == m}
            out.append(f"| {_label(m)} | " + " | ".join(_g(cells[n]) for n in ns) + " |")
        out.append("| bound (mean sin^2) | " + " | ".join(
            _g(next(r["bound_sin2"] for r in t["rows"] if r["n"] == n)) for n in ns) + " |")
        out.append("")
    if "theorem6" in result:
        t = result["theorem6"]
        ds = sorted({r["d"] for r in t["n_at_target"]})
        out.append(f"Theorem 6, Construction 2 dense (gamma = {t['gamma']}, SIMULATED): n at which the 2/3-quantile "
                   f"of sin^2 reaches {t['target']}, / (d / eps), and the fitted exponent of d (paper: >= 1)\n")
        out.append("| method | " + " | ".join(f"d = {d}" for d in ds) + " | exponent of d [95% CI] |")
        out.append("|---|" + "---|" * len(ds) + "---|")
        for m in dict.fromkeys(r["method"] for r in t["n_at_target"]):
            cells = {r["d"]: r for r in t["n_at_target"] if r["method"] == m}
            fit = t["fit_n_at_target_vs_d"].get(m)
            ftxt = "-" if fit is None else f"{fit['exponent']:.2f} [{fit['ci95'][0]:.2f}, {fit['ci95'][1]:.2f}]"
            out.append(f"| {_label(m)} | " + " | ".join(
                "not reached" if cells[d]["n_at_target"] is None else
                f"{_g(cells[d]['n_at_target'])} ({_g(cells[d]['ratio'])}x)" for d in ds) + f" | {ftxt} |")
        out.append("")
    if "expmech" in result:
        t = result["expmech"]
        out.append(f"ExpMech, Model 2 (d = {t['d']}, gap 0.5, sin^2 <= {t['target']} w.p. >= {1 - t['beta']:g}, "
                   f"{t['reps']} reps): n*(k)\n")
        out.append("| k | " + " | ".join(str(r["k"]) for r in t["rows"]) + " | exponent of k [95% CI] |")
        out.append("|---|" + "---|" * len(t["rows"]) + "---|")
        fit, fth = t.get("fit"), t.get("fit_theory")

        def ftxt(f):
            return "-" if f is None else f"{f['exponent']:.2f} [{f['ci95'][0]:.2f}, {f['ci95'][1]:.2f}]"

        out.append("| measured n* | " + " | ".join(_g(r["n_star"]) for r in t["rows"]) + f" | {ftxt(fit)} |")
        out.append("| Theorem 7 planning n | " + " | ".join(_g(r["theory_n"]) for r in t["rows"])
                   + f" | {ftxt(fth)} |")
        out.append("")
    if "privnorm" in result:
        t = result["privnorm"]
        out.append(f"PrivNorm alone, Model 2 (d = {t['d']}, k = {t['k']}, lambda_1 = 2, SIMULATED, "
                   f"{t['rows'][0]['reps']} reps)\n")
        out.append("| n | pass rate | plan's release probability | median relative error | Lemma 21 bound / lambda_1 |")
        out.append("|---|---|---|---|---|")
        for r in t["rows"]:
            out.append(f"| {_g(r['n'], 2)} | {_g(r['pass_rate'])} | {_g(r['plan_release_probability'])} | "
                       f"{_g(r['rel_error_median'])} | {_g(r['plan_relative_error_bound'])} |")
        f = t.get("fit_error_vs_n")
        if f:
            out.append(f"\nFitted exponent of n of the median relative error: {f['exponent']:.2f} "
                       f"[{f['ci95'][0]:.2f}, {f['ci95'][1]:.2f}] (paper: {t['paper_exponent_of_n']}).")
        out.append("")
    return "\n".join(out)
