"""Fingerprints recorded in results files, and the check that a results file still describes the code.

A results file (``benchmarks/results/*.json``) holds numbers measured with the noise scales,
thresholds, clip levels and selection shares of the code that produced it; the fingerprint of
each method (:func:`~dpdist.algorithms.fingerprint.method_fingerprint`) records them at fixed
reference points.

Every experiment that writes a results file records :func:`provenance` (the commit and the
fingerprints of its methods). :func:`check_result` recomputes the fingerprints from the current code
and says, per method, whether the file is *fresh* (same digest), *stale* (the fields that
differ) or *unfingerprinted*; ``dpdist experiment fingerprint --check`` prints that for every
results file, and ``plan()`` refuses to quote a stale measured n*
(:mod:`dpdist.algorithms.measured`).
"""

from __future__ import annotations

import json
import os
import subprocess

import dpdist  # noqa: F401  (defines every estimator, whose plans the fingerprints evaluate)
from dpdist.algorithms.fingerprint import (
    FINGERPRINTED,
    SECOND_MOMENT_METHODS,
    SIGNIFICANT,
    current_fingerprint,
    diff,
    method_fingerprint,
)
from dpdist.exceptions import ValidationError

__all__ = ["FINGERPRINTED", "SIGNIFICANT", "check_result", "code_revision", "current_fingerprint", "diff",
           "method_fingerprint", "methods_of", "provenance", "stamp"]


def code_revision() -> str | None:
    """The commit of the checkout this package runs from (None outside a git checkout); with
    ``+uncommitted`` when tracked files differ from it."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        head = subprocess.run(["git", "-C", root, "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True, timeout=30).stdout.strip()
        dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("+uncommitted" if dirty else "")


def provenance(methods) -> dict:
    """What a results file records about the code that produced it: ``code_revision`` and
    ``fingerprints`` (one per method, in the order given, without repeats)."""
    return {"code_revision": code_revision(),
            "fingerprints": {m: method_fingerprint(m) for m in dict.fromkeys(methods)}}


def methods_of(result: dict) -> list[str]:
    """The methods whose numbers a results file holds, read from its content (its recorded
    fingerprints, the sample-complexity ``methods``, the validation ``points``, the peer
    comparison's ``rows``, the second-moment curves, the friendly forecast)."""
    found = list(result.get("fingerprints", {}))
    if isinstance(result.get("methods"), dict):
        found += list(result["methods"])
    for key in ("points", "rows"):
        for row in result.get(key, []) if isinstance(result.get(key), list) else []:
            if isinstance(row, dict) and "method" in row:
                found.append(row["method"])
            if isinstance(row, dict) and isinstance(row.get("methods"), dict):
                found += list(row["methods"])
    if "ellipsoid" in result or "outliers" in result:
        found += list(SECOND_MOMENT_METHODS)
    if "friendly_forecast" in str(result.get("produced_by", "")):
        found.append("privpca")
    return [m for m in dict.fromkeys(found)]


def check_result(result: dict) -> dict:
    """Per method of a results file: ``{"status": "fresh" | "stale" | "unfingerprinted",
    "differences": [...]}`` against the fingerprints the current code gives."""
    recorded = result.get("fingerprints", {})
    out = {}
    for method in methods_of(result):
        if method not in recorded:
            out[method] = {"status": "unfingerprinted", "differences": []}
            continue
        try:
            current = method_fingerprint(method)
        except ValidationError as exc:
            out[method] = {"status": "stale", "differences": [str(exc)]}
            continue
        same = current["digest"] == recorded[method].get("digest")
        out[method] = {"status": "fresh" if same else "stale",
                       "differences": [] if same else diff(recorded[method], current) or ["digest differs"]}
    return out


def stamp(paths) -> dict:
    """Record the current fingerprints in each results file of ``paths`` (files just produced by
    code with the same calibrations); returns ``{path: what was recorded}``. A file that records
    the commit that produced it (``code_revision``) keeps it, and the stamping commit goes to
    ``fingerprints_revision``; one that records none gets the current commit as ``code_revision``. Every file
    is read and checked before any is written: when one is not a results file, nothing is
    written."""
    loaded = {}
    for path in paths:
        with open(path) as fh:
            try:
                result = json.load(fh)
            except json.JSONDecodeError as exc:
                raise ValidationError(f"{path} is not JSON: {exc}") from None
        if not isinstance(result, dict) or not methods_of(result):
            raise ValidationError(f"{path}: no method results found in the file: nothing to fingerprint; "
                                  "nothing was written")
        loaded[path] = result
    records = {}
    for path, result in loaded.items():
        record = provenance(methods_of(result))
        if result.get("code_revision"):
            record["fingerprints_revision"] = record.pop("code_revision")
        records[path] = record
    for path, result in loaded.items():
        result.update(records[path])
        tmp = path + ".tmp"
        with open(tmp, "w") as fh:
            json.dump(result, fh, indent=1)
        os.replace(tmp, path)
    return records
