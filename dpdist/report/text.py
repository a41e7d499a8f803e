"""Human-readable summaries of releases."""

from __future__ import annotations

__all__ = ["format_release"]


def format_release(meta: dict, *, report_delta: float | None = None) -> str:
    """A few lines saying what was released and what it cost (from ``Release.metadata()``).

    A zCDP guarantee is also stated in (epsilon, delta) at ``report_delta`` when given
    (Bun-Steinke and the tight CKS20 conversion).
    """
    lines = [f"mechanism : {meta['mechanism']}"]
    if not meta.get("private", True):
        lines.append("privacy   : NOT PRIVATE (no differential-privacy guarantee)")
    else:
        p = meta.get("privacy") or {}
        if p.get("type") == "approx-dp":
            lines.append(f"privacy   : ({p['epsilon']:g}, {p['delta']:g})-DP spent (replace-one neighbours)")
        elif p.get("type") == "zcdp":
            line = f"privacy   : rho = {p['rho']:g} zCDP spent (replace-one neighbours)"
            if report_delta is not None:
                from dpdist.privacy.zcdp import ZCDP

                z = ZCDP(p["rho"])
                line += (f"; = ({z.to_approx_dp(report_delta):.4g}, {report_delta:g})-DP (Bun-Steinke), "
                         f"({z.to_approx_dp(report_delta, method='cks20'):.4g}, {report_delta:g})-DP (CKS20)")
            lines.append(line)
        else:
            lines.append(f"privacy   : {p}")
    for name, scale in (meta.get("noise_scales") or {}).items():
        if isinstance(scale, (int, float)):
            lines.append(f"noise     : {name} scale {scale:.4g}")
        else:
            lines.append(f"noise     : {name} {scale}")
    seeding = meta.get("seeding") or {}
    if seeding:
        mode = seeding.get("mode")
        warn = "  (SEEDED: reproducible noise, for tests only)" if mode == "seeded" else ""
        lines.append(f"seeding   : {mode}{warn}")
    lines.append(f"status    : {meta.get('status', 'released')}; dpdist {meta.get('version')}")
    for note in meta.get("notes", []):
        lines.append(f"note      : {note}")
    return "\n".join(lines)
