"""What a privacy reviewer reads names code that exists: every dotted ``dpdist.`` reference in
privacy/ and in the proofs (docs/privacy.md, docs/privacy/) imports and resolves, so a module
that moves takes its references along."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: A dotted path into the package: ``dpdist.privacy.noise.lattice.LatticeField``.
REFERENCE = re.compile(r"\bdpdist(?:\.[A-Za-z_]\w*)+")


def resolves(reference: str) -> bool:
    """Whether ``reference`` is a module of the package, or an attribute path inside one."""
    parts = reference.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError:
            continue
        for name in parts[i:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


def _files() -> list[Path]:
    return ([ROOT / "docs" / "privacy.md"] + sorted((ROOT / "docs" / "privacy").glob("*.md"))
            + sorted((ROOT / "dpdist" / "privacy").rglob("*.py")))


def test_every_reference_in_privacy_and_its_proofs_resolves():
    bad = [f"{path.relative_to(ROOT)}:{n} {ref}"
           for path in _files() for n, line in enumerate(path.read_text().splitlines(), 1)
           for ref in REFERENCE.findall(line) if not resolves(ref)]
    assert not bad, "references to code that does not exist: " + ", ".join(bad)


def test_the_scan_reads_references_and_refuses_a_stale_one():
    refs = {ref for path in _files() for ref in REFERENCE.findall(path.read_text())}
    assert "dpdist.privacy.noise.lattice" in refs
    assert resolves("dpdist.privacy.noise.lattice.LatticeField")
    assert resolves("dpdist.privacy.mechanisms.privcov.calibration.privcov_calibration")
    for stale in ("dpdist.privacy.lattice", "dpdist.privacy.pca_calibration.privpca_calibration",
                  "dpdist.privacy.noise.lattice.NoSuchSampler"):
        assert not resolves(stale), stale

