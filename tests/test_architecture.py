"""The layer rules of STYLE.md, checked on the import statements of every module.

- dpdist.privacy imports neither dask, distributed nor zarr (pure numpy/scipy);
- dpdist.engine imports nothing from dpdist.privacy, dpdist.algorithms or dpdist.cli
  (it decides no noise scale);
- dpdist.data imports nothing from dpdist.privacy or dpdist.algorithms;
- nothing but dpdist.cli imports dpdist.cli;
- dpdist.ops (ledger, job files, runner) sits above algorithms and data: only dpdist.cli
  imports it, and it imports nothing from dpdist.cli;
- dpdist._validation (the one parameter rule, used by every layer, privacy included) imports
  only the standard library, numpy and dpdist.exceptions.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

PKG = pathlib.Path(__file__).resolve().parents[1] / "dpdist"

FORBIDDEN = {
    "privacy": ("dask", "distributed", "zarr", "dpdist.engine", "dpdist.data", "dpdist.algorithms", "dpdist.cli"),
    "engine": ("dpdist.privacy", "dpdist.algorithms", "dpdist.cli"),
    "data": ("dpdist.privacy", "dpdist.algorithms", "dpdist.cli"),
    "algorithms": ("dpdist.cli",),
    "report": ("dpdist.cli",),
    "ops": ("dpdist.cli",),
}


def imported_modules(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
    return out


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layer_does_not_import_what_it_must_not(layer):
    bad = []
    for path in sorted((PKG / layer).rglob("*.py")):
        for mod in imported_modules(path):
            if any(mod == f or mod.startswith(f + ".") for f in FORBIDDEN[layer]):
                bad.append(f"{path.relative_to(PKG.parent)} imports {mod}")
    assert not bad, "\n".join(bad)


def test_only_cli_imports_ops():
    bad = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG)
        if rel.parts[0] in ("cli", "ops"):
            continue
        for mod in imported_modules(path):
            if mod == "dpdist.ops" or mod.startswith("dpdist.ops."):
                bad.append(f"{path.relative_to(PKG.parent)} imports {mod}")
    assert not bad, "\n".join(bad)


def test_the_validation_module_is_importable_by_every_layer():
    import sys

    allowed = ("numpy", "dpdist.exceptions", "__future__")
    mods = imported_modules(PKG / "_validation.py")
    bad = [m for m in mods if not (m in sys.stdlib_module_names or m.split(".")[0] in sys.stdlib_module_names
                                   or any(m == a or m.startswith(a + ".") for a in allowed))]
    assert not bad, bad
