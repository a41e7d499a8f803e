"""Human-readable summaries of releases."""

from __future__ import annotations

__all__ = ["format_release"]


def format_release(meta: dict) -> str:
    """A few lines saying what was released and what it cost (from ``Release.metadata()``)."""
    lines = [f"mechanism : {meta['mechanism']}"]
    if not meta.get("private", True):
        lines.append("privacy   : NOT PRIVATE (no differential-privacy guarantee)")
    else:
        p = meta.get("privacy") or {}
        if p.get("type") == "approx-dp":
            lines.append(f"privacy   : ({p['epsilon']:g}, {p['delta']:g})-DP spent (replace-one neighbours)")
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
