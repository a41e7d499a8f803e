"""Every docstring, comment, message and document in the repository stands on its own.

A reader of the package, its documentation or a release's metadata must be able to follow every
reference: no issue numbers, no review labels ("GAP 3"), no planning-wave names and no pointers
to design notes that are not in the repository. The scan covers ``dpdist/`` (so also every
notes string a release writes to disk), ``docs/`` and ``README.md``, and fails listing
``file:line`` for each hit. Proofs live in ``docs/privacy/``; every proof file there is linked
from ``docs/privacy.md`` and every ``docs/...md`` path the package names exists.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: References a reader cannot follow. "issue" is matched in any case ("Issue 10", "issues 9"),
#: "GAP N" only in capitals so that the eigengap parameter ``gap`` stays allowed.
UNFOLLOWABLE = re.compile(
    r"(?i:\bissues? #?[0-9])|\bGAP [0-9]|(?i:\bwave-[0-9a-z])|STYLE\.md|ALGORITHMS\.md|SECOND_MOMENT\.md"
)

TEXT_SUFFIXES = {".py", ".md", ".txt", ".rst", ".json", ".toml", ".cfg", ".yaml", ".yml"}


def _scanned_files() -> list[Path]:
    files = [ROOT / "README.md"]
    for folder in ("dpdist", "docs"):
        files += sorted(p for p in (ROOT / folder).rglob("*") if p.is_file() and p.suffix in TEXT_SUFFIXES)
    return files


def _hits(text: str) -> list[tuple[int, str]]:
    return [(i, line.strip()) for i, line in enumerate(text.splitlines(), 1) if UNFOLLOWABLE.search(line)]


@pytest.mark.parametrize("line", [
    "Deviation 2 (issue 9): the float factor",
    "until typed privacy events land (Issue 10); then",
    "see issues #14 and #15",
    "GAP 12: only the explicit n-condition is enforced",
    "Design note for the wave-2 mechanism objects",
    "ALGORITHMS.md section 6's closed form",
    "(STYLE.md principle 3)",
    "SECOND_MOMENT.md section 4.1",
])
def test_the_scan_flags_each_kind_of_unfollowable_reference(line):
    assert _hits(f"ok\n{line}\n") == [(2, line)]


@pytest.mark.parametrize("line", [
    "relative eigengap gamma (gap 0.5, lambda1 2)",
    "gap = float(1 - top[1] / top[0])",
    "The gap between the two eigenvalues, see docs/privacy/privcov.md",
    "a tissue 3 mm thick",
])
def test_the_scan_leaves_ordinary_text_alone(line):
    assert _hits(line) == []


def test_no_unfollowable_references_in_package_docs_or_readme():
    found = [f"{p.relative_to(ROOT).as_posix()}:{i}: {line}"
             for p in _scanned_files() for i, line in _hits(p.read_text(encoding="utf-8"))]
    assert not found, "references a reader cannot follow:\n" + "\n".join(found)


def test_every_proof_file_is_linked_from_the_privacy_page():
    index = (ROOT / "docs" / "privacy.md").read_text(encoding="utf-8")
    proofs = sorted((ROOT / "docs" / "privacy").glob("*.md"))
    assert len(proofs) >= 2
    missing = [p.name for p in proofs if f"(privacy/{p.name})" not in index]
    assert not missing, f"docs/privacy.md does not link {missing}"


def test_every_docs_file_the_package_names_exists():
    named = set()
    for p in _scanned_files():
        named |= set(re.findall(r"\bdocs/[\w/.-]+?\.md\b", p.read_text(encoding="utf-8")))
    assert any(n.startswith("docs/privacy/") for n in named)
    missing = sorted(n for n in named if not (ROOT / n).is_file())
    assert not missing, f"named but not in the repository: {missing}"
