"""Every docstring, comment, message and document in the repository stands on its own.

A reader of the package, its documentation or a release's metadata must be able to follow every
reference: no issue numbers, no review labels ("GAP 3"), no planning-wave names and no pointers
to design notes that are not in the repository. The scan covers ``dpdist/`` (so also every
notes string a release writes to disk), ``docs/`` and ``README.md``, and fails listing
``file:line`` for each hit. The same scan covers what a contributor reads next to them: every
text file under ``tests/``, ``benchmarks/`` (less the ``*.json`` results, which are generated
data) and ``deploy/``, and the CI script ``.ci/run``; this file is left out, as it holds the
patterns as examples. Proofs live in ``docs/privacy/``; every proof file there is linked from
``docs/privacy.md`` and every ``docs/...md`` path the package, the tests or the benchmarks name
exists.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: References a reader cannot follow. "issue" is matched in any case ("Issue 10", "issues 9",
#: "issue-11"), "GAP N" only in capitals so that the eigengap parameter ``gap`` stays allowed.
UNFOLLOWABLE = re.compile(
    r"(?i:\bissues?[ -]#?[0-9])|\bGAP [0-9]|(?i:\bwave-[0-9a-z])|STYLE\.md|ALGORITHMS\.md|SECOND_MOMENT\.md"
)

TEXT_SUFFIXES = {".py", ".md", ".txt", ".rst", ".json", ".toml", ".cfg", ".yaml", ".yml"}


def _scanned_files() -> list[Path]:
    files = [ROOT / "README.md"]
    for folder in ("dpdist", "docs"):
        files += sorted(p for p in (ROOT / folder).rglob("*") if p.is_file() and p.suffix in TEXT_SUFFIXES)
    return files


def _is_text(path: Path) -> bool:
    data = path.read_bytes()
    if b"\0" in data:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _scanned_files_outside_the_package() -> list[Path]:
    """Text files of ``tests/``, ``benchmarks/`` and ``deploy/``, and ``.ci/run``; not the
    benchmarks' JSON results (generated data) and not this file (its examples are hits)."""
    files = [ROOT / ".ci" / "run"]
    for folder in ("tests", "benchmarks", "deploy"):
        files += sorted(p for p in (ROOT / folder).rglob("*")
                        if p.is_file() and "__pycache__" not in p.parts
                        and not (folder == "benchmarks" and p.suffix == ".json"))
    here = Path(__file__).resolve()
    return [p for p in files if p.resolve() != here and _is_text(p)]


def _hits(text: str) -> list[tuple[int, str]]:
    return [(i, line.strip()) for i, line in enumerate(text.splitlines(), 1) if UNFOLLOWABLE.search(line)]


@pytest.mark.parametrize("line", [
    "Deviation 2 (issue 9): the float factor",
    "until typed privacy events land (Issue 10); then",
    "see issues #14 and #15",
    'tempfile.mkdtemp(prefix="issue-11-pg-")',
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


@pytest.mark.parametrize("scanned", [_scanned_files, _scanned_files_outside_the_package],
                         ids=["package-docs-readme", "tests-benchmarks-deploy-ci"])
def test_no_unfollowable_references(scanned):
    found = [f"{p.relative_to(ROOT).as_posix()}:{i}: {line}"
             for p in scanned() for i, line in _hits(p.read_text(encoding="utf-8"))]
    assert not found, "references a reader cannot follow:\n" + "\n".join(found)


def test_the_wider_scan_reaches_each_place_and_skips_results_data():
    scanned = {p.relative_to(ROOT).as_posix() for p in _scanned_files_outside_the_package()}
    assert {".ci/run", "tests/conftest.py", "benchmarks/run_all.py", "deploy/etl-job.sh",
            "benchmarks/results/scaling/README.md"} <= scanned
    assert not any(s.endswith(".json") and s.startswith("benchmarks/") for s in scanned)
    assert not any(s.endswith(".png") for s in scanned)
    assert "tests/test_docs_references.py" not in scanned


def test_every_proof_file_is_linked_from_the_privacy_page():
    index = (ROOT / "docs" / "privacy.md").read_text(encoding="utf-8")
    proofs = sorted((ROOT / "docs" / "privacy").glob("*.md"))
    assert len(proofs) >= 2
    missing = [p.name for p in proofs if f"(privacy/{p.name})" not in index]
    assert not missing, f"docs/privacy.md does not link {missing}"


def test_every_docs_file_the_package_the_tests_or_the_benchmarks_name_exists():
    named = set()
    for p in _scanned_files() + _scanned_files_outside_the_package():
        named |= set(re.findall(r"\bdocs/[\w/.-]+?\.md\b", p.read_text(encoding="utf-8")))
    assert any(n.startswith("docs/privacy/") for n in named)
    missing = sorted(n for n in named if not (ROOT / n).is_file())
    assert not missing, f"named but not in the repository: {missing}"
