"""Human-readable summaries of releases."""

from __future__ import annotations

import re

__all__ = ["format_release", "is_technical_note"]

#: What marks a release note as written for a reviewer rather than for the person reading the
#: summary: pointers into the papers (line, lemma and fact numbers, deviations from them),
#: lattice exponents, sampler residuals, float-error constants and calibration rule names.
_TECHNICAL = re.compile(
    r"\bline \d+|\blines? \d+-\d+|\bLemma \d+|\bFact \d+|\bdeviation\b|\blattice\b|\bresidual\b"
    r"|2\*\*-?\d+|\bkappa\(n\)|\bfloat_\w+|\bARPACK\b|\bthe paper's formula\b|\bscale: paper\b|\bscale rule\b"
    r"|\bFeistel\b|\bshrink S\(y\)|\bfloating point\b|\bfloat-safe noise\b"
)


def is_technical_note(note: str) -> bool:
    """Whether a release note is a reviewer's detail (kept in the metadata, counted but not
    printed by :func:`format_release`)."""
    return bool(_TECHNICAL.search(note))


def format_release(meta: dict, *, report_delta: float | None = None) -> str:
    """A few lines saying what was released and what it cost (from ``Release.metadata()``).

    A zCDP guarantee is also stated in (epsilon, delta) at ``report_delta`` when given
    (Bun-Steinke and the tight CKS20 conversion).
    """
    lines = [f"mechanism : {meta['mechanism']}"]
    private = meta.get("private", True)
    if not private:
        lines.append("privacy   : NOT PRIVATE (no differential-privacy guarantee)")
        for reason in meta.get("not_private_reasons") or []:
            lines.append(f"            because {reason}")
    p = meta.get("privacy") or {}
    if p or private:
        head = "privacy   :" if private else "budget    :"
        tail = "spent (replace-one neighbours)" if private else "charged, but the release is NOT PRIVATE"
        if p.get("type") == "approx-dp":
            lines.append(f"{head} ({p['epsilon']:g}, {p['delta']:g})-DP {tail}")
        elif p.get("type") == "zcdp":
            line = f"{head} rho = {p['rho']:g} zCDP {tail}"
            if report_delta is not None:
                from dpdist.privacy.zcdp import ZCDP

                z = ZCDP(p["rho"])
                line += (f"; = ({z.to_approx_dp(report_delta):.4g}, {report_delta:g})-DP (Bun-Steinke), "
                         f"({z.to_approx_dp(report_delta, method='cks20'):.4g}, {report_delta:g})-DP (CKS20)")
            lines.append(line)
        else:
            lines.append(f"{head} {p}")
    for name, scale in (meta.get("noise_scales") or {}).items():
        if isinstance(scale, (int, float)):
            lines.append(f"noise     : {name} scale {scale:.4g}")
        else:
            lines.append(f"noise     : {name} {scale}")
    seeding = meta.get("seeding") or {}
    if seeding:
        mode = seeding.get("mode")
        warn = "  (SEEDED: reproducible noise, NOT PRIVATE, for tests only)" if mode == "seeded" else ""
        lines.append(f"seeding   : {mode}{warn}")
    lines.append(f"status    : {meta.get('status', 'released')}; dpdist {meta.get('version')}")
    notes = list(meta.get("notes", []))
    for note in notes:
        if not is_technical_note(note):
            lines.append(f"note      : {note}")
    technical = sum(map(is_technical_note, notes))
    if technical:
        lines.append(f"details   : {technical} technical note{'s' if technical > 1 else ''} (calibration rules, "
                     "float-safe noise, deviations from the papers) in the release metadata (--json, or the "
                     "written result's metadata)")
    return "\n".join(lines)
