"""Human-readable summaries of releases."""

from __future__ import annotations

__all__ = ["format_release"]


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
    for note in meta.get("notes", []):
        lines.append(f"note      : {note}")
    return "\n".join(lines)
