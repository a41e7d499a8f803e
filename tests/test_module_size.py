"""Every module of the packages below stays under :data:`MAX_LINES` lines, so that each answers
one question a reader can take in at once. A module that grows past the limit is split by
concern (as ``cli/_args``, ``cli/_flags``, ``cli/_banners``, ``cli/_printing`` and ``cli/_run``
are), not allowed an exception here."""

from __future__ import annotations

import pathlib

import pytest

PKG = pathlib.Path(__file__).resolve().parents[1] / "dpdist"

MAX_LINES = 600

#: The packages whose every module is held under the limit.
PACKAGES = ("cli", "data", "engine", "experiments", "ops", "report", "simulate", "testing")


def _lines(path: pathlib.Path) -> int:
    return len(path.read_text().splitlines())


@pytest.mark.parametrize("package", PACKAGES)
def test_every_module_of_the_package_is_under_the_line_limit(package):
    modules = sorted((PKG / package).rglob("*.py"))
    assert modules, f"dpdist/{package} has no module"
    too_long = {str(p.relative_to(PKG.parent)): n for p in modules if (n := _lines(p)) >= MAX_LINES}
    assert not too_long, f"modules of {MAX_LINES} lines or more (split them by concern): {too_long}"
