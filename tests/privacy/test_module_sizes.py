"""Every module a privacy reviewer reads stays short enough to read in one sitting.

A module of ``dpdist/privacy/`` answers one question (one mechanism's calibration, the events,
the accountant, one noise primitive); a module that grows past ``MAX_LINES`` has started to
answer two and should be split along that line. ``PACKAGES`` lists the folders the limit covers.
"""

from __future__ import annotations

import pathlib

import pytest

PKG = pathlib.Path(__file__).resolve().parents[2] / "dpdist"

#: Most lines a module may have.
MAX_LINES = 600
#: Folders of ``dpdist/`` under the limit (with their subfolders).
PACKAGES = ("privacy",)

MODULES = sorted(p for package in PACKAGES for p in (PKG / package).rglob("*.py"))


def test_the_limit_covers_modules():
    assert len(MODULES) > 10


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PKG)))
def test_module_is_under_the_line_limit(path):
    n_lines = len(path.read_text().splitlines())
    where = path.relative_to(PKG.parent)
    assert n_lines < MAX_LINES, f"{where} has {n_lines} lines (limit {MAX_LINES}): split it by question"
