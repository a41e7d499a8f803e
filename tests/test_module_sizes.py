"""Module size: a module a reader can take in at once answers one question.

Every module of ``dpdist`` is under :data:`LIMIT` lines (docstring, imports and blank lines
included).
"""

from __future__ import annotations

import pathlib

PKG = pathlib.Path(__file__).resolve().parents[1] / "dpdist"

LIMIT = 600


def long_modules(package: pathlib.Path, limit: int) -> dict[str, int]:
    """``{path: lines}`` for every module under ``package`` with ``limit`` lines or more."""
    sizes = {str(p.relative_to(package.parent)): len(p.read_text().splitlines()) for p in sorted(package.rglob("*.py"))}
    return {path: n for path, n in sizes.items() if n >= limit}


def test_no_module_of_the_package_reaches_the_limit():
    found = long_modules(PKG, LIMIT)
    assert not found, f"modules of {LIMIT} lines or more: {found}"


def test_long_modules_counts_every_line(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "short.py").write_text("x = 1\n" * 3)
    (pkg / "sub" / "long.py").write_text('"""doc"""\n\n' + "y = 2\n" * 2)
    assert long_modules(pkg, 4) == {"pkg/sub/long.py": 4}
    assert long_modules(pkg, 3) == {"pkg/short.py": 3, "pkg/sub/long.py": 4}
