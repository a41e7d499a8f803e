"""The package's layers, checked on the import statements of every module.

Every package and top-level module of ``dpdist`` has an entry in :data:`ALLOWED`: the other
parts of ``dpdist`` it may import. Every import counts: at module level or inside a function,
absolute or relative, under ``TYPE_CHECKING`` or not. An import of an entry's own subpackages
is not an edge. Lower layers never import higher ones:

- the base (``exceptions``, ``_version``, ``_validation``) imports no other part;
- ``privacy`` (calibrations, noise, accounting: what a privacy reviewer reads), ``engine``
  (exact chunked statistics, no privacy formula) and ``data`` (reading, writing and generating
  data) import only the base;
- ``algorithms`` (the estimators) combine privacy, engine and data;
- ``baselines`` and the top-level ``dpdist`` namespace re-export estimators;
- ``report``, ``simulate``, ``testing``, ``experiments`` and ``ops`` sit on the estimators;
- ``cli`` is the top: nothing imports it.

Two further rules: ``privacy`` imports neither dask, distributed nor zarr (pure numpy/scipy),
and ``_validation`` (the one parameter rule, used by every layer) imports only the standard
library, numpy and ``dpdist.exceptions``. A second test finds import circles between modules.
"""

from __future__ import annotations

import ast
import functools
import pathlib
import sys

import numpy as np
from scipy.sparse import coo_array
from scipy.sparse.csgraph import breadth_first_order, connected_components

PKG = pathlib.Path(__file__).resolve().parents[1] / "dpdist"

BASE = {"exceptions", "_version", "_validation"}

#: Entry -> the entries of ``dpdist`` it may import (an entry is a package or a top-level module;
#: ``__init__`` is the ``dpdist`` namespace itself).
ALLOWED: dict[str, set[str]] = {
    "_version": set(),
    "exceptions": set(),
    "_validation": {"exceptions"},
    "privacy": BASE,
    "engine": BASE,
    "data": BASE,
    "algorithms": BASE | {"privacy", "engine", "data"},
    "baselines": {"algorithms"},
    "__init__": BASE | {"algorithms", "baselines", "data", "privacy"},
    "report": BASE | {"privacy", "data"},
    "simulate": BASE | {"__init__", "baselines", "algorithms", "privacy", "engine", "data"},
    "testing": BASE | {"__init__", "baselines", "algorithms", "privacy", "engine", "data"},
    "experiments": BASE | {"__init__", "baselines", "algorithms", "privacy", "engine", "data", "report", "simulate"},
    "ops": BASE | {"algorithms", "privacy", "engine", "data"},
    "cli": BASE | {"__init__", "baselines", "algorithms", "privacy", "engine", "data", "report", "simulate",
                   "testing", "experiments", "ops"},
}


def module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PKG.rglob("*.py"))}


@functools.cache
def imported_modules(path: pathlib.Path) -> frozenset[str]:
    """Every module ``path`` imports, anywhere in it, relative imports resolved; ``from a import
    b`` names ``a`` and, when ``a.b`` is a module of the package, ``a.b`` too."""
    tree = ast.parse(path.read_text(), filename=str(path))
    here = module_name(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module
            out.add(source)
            out.update(f"{source}.{a.name}" for a in node.names if f"{source}.{a.name}" in MODULES)
    return frozenset(out)


def entry_of(module: str) -> str:
    """The entry of :data:`ALLOWED` a ``dpdist`` module belongs to."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_every_package_and_module_has_an_entry():
    found = {entry_of(m) for m in MODULES}
    assert found == set(ALLOWED), (f"not in ALLOWED: {sorted(found - set(ALLOWED))}; "
                                   f"in ALLOWED but gone: {sorted(set(ALLOWED) - found)}")


def test_the_allowed_table_is_layered():
    """The table itself has no circle: no two entries may import each other, at any distance."""
    names = sorted(ALLOWED)
    index = {n: i for i, n in enumerate(names)}
    edges = [(index[a], index[b]) for a, deps in ALLOWED.items() for b in deps]
    graph = coo_array((np.ones(len(edges)), tuple(np.array(edges).T)), shape=(len(names),) * 2)
    count, labels = connected_components(graph, directed=True, connection="strong")
    assert count == len(names), [sorted(n for n in names if labels[index[n]] == lab)
                                 for lab in set(labels.tolist()) if (labels == lab).sum() > 1]


def imports_outside_the_table() -> set[tuple[str, str]]:
    """(module, imported module) for every import that :data:`ALLOWED` does not allow."""
    found = set()
    for module, path in MODULES.items():
        mine = entry_of(module)
        for target in imported_modules(path):
            if target != "dpdist" and not target.startswith("dpdist."):
                continue
            theirs = entry_of(target)
            if theirs != mine and theirs not in ALLOWED[mine]:
                found.add((module, target))
    return found


def test_no_part_imports_what_its_entry_does_not_allow():
    bad = sorted(imports_outside_the_table())
    assert not bad, "\n".join(f"{m} imports {t} ({entry_of(m)} -> {entry_of(t)} is not in ALLOWED)" for m, t in bad)


def module_graph() -> dict[str, set[str]]:
    """Module -> the modules of ``dpdist`` it imports (anywhere in it)."""
    return {m: {t for t in imported_modules(p) if t in MODULES and t != m} for m, p in MODULES.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One import circle per strongly connected set of modules, as ``[a, b, ..., a]``."""
    names = sorted(graph)
    index = {n: i for i, n in enumerate(names)}
    edges = [(index[a], index[b]) for a in names for b in graph[a]]
    rows, cols = (np.array(e, dtype=np.int64) for e in zip(*edges)) if edges else (np.array([], int),) * 2
    adjacency = coo_array((np.ones(rows.size), (rows, cols)), shape=(len(names),) * 2).tocsr()
    count, labels = connected_components(adjacency, directed=True, connection="strong")
    out = []
    for lab in range(count):
        members = np.flatnonzero(labels == lab)
        if members.size < 2:
            continue
        sub = adjacency[members][:, members]
        start = 0
        # the shortest way back to the start: breadth first from each successor of the start
        order, parent = breadth_first_order(sub, start, directed=True, return_predecessors=True)
        back = next(i for i in order if sub[i, start])
        path = [back]
        while path[-1] != start:
            path.append(parent[path[-1]])
        out.append([names[members[i]] for i in [start, *reversed(path[:-1])]] + [names[members[start]]])
    return out


def test_no_import_circles_between_modules():
    found = circles(module_graph())
    assert not found, "import circles:\n" + "\n".join(" -> ".join(c) for c in found)


def test_the_circle_finder_reports_a_circle_of_any_length():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"d"}, "d": {"a", "e"}, "e": set(), "f": {"f"}}
    assert circles(graph) == [["a", "b", "c", "d", "a"]]


def test_privacy_imports_no_dask_distributed_or_zarr():
    bad = [f"{path.relative_to(PKG.parent)} imports {mod}"
           for path in sorted((PKG / "privacy").rglob("*.py")) for mod in sorted(imported_modules(path))
           if mod.split(".")[0] in ("dask", "distributed", "zarr")]
    assert not bad, "\n".join(bad)


def test_the_validation_module_is_importable_by_every_layer():
    allowed = ("numpy", "dpdist.exceptions", "__future__")
    mods = imported_modules(PKG / "_validation.py")
    bad = [m for m in mods if not (m.split(".")[0] in sys.stdlib_module_names
                                   or any(m == a or m.startswith(a + ".") for a in allowed))]
    assert not bad, bad


def test_relative_and_function_local_imports_are_counted(tmp_path, monkeypatch):
    pkg = tmp_path / "dpdist"
    (pkg / "data").mkdir(parents=True)
    (pkg / "data" / "x.py").write_text("def f():\n    from ..algorithms import y\n    from . import z\n")
    monkeypatch.setattr(sys.modules[__name__], "PKG", pkg)
    monkeypatch.setitem(MODULES, "dpdist.data.z", pkg / "data" / "z.py")
    assert imported_modules(pkg / "data" / "x.py") == {"dpdist.algorithms", "dpdist.data", "dpdist.data.z"}


def test_the_documented_table_is_the_tested_one():
    """docs/architecture.md shows the same table as :data:`ALLOWED`."""
    import re

    text = (PKG.parent / "docs" / "architecture.md").read_text()
    documented = {}
    for line in text.splitlines():
        if not line.startswith("| `"):
            continue
        part, deps = (re.sub(r"\([^)]*\)", "", cell) for cell in line.strip("|").split("|")[:2])
        names = set(re.findall(r"`([^`]+)`", deps))
        if "the base" in deps:
            names |= BASE
        if "everything" in deps:
            names = set(ALLOWED)
        for name in re.findall(r"`([^`]+)`", part):
            documented[name] = names - {name}
    assert documented == ALLOWED
