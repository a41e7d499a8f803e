"""privacy/ holds only what a privacy reviewer must read.

What a release is worth (error bounds, the least sample size that meets a target, the plans
that quote them) is utility: it never enters a noise scale, so it lives beside the estimators
in ``dpdist/algorithms``. A privacy condition that happens to be a sample size
(``baseline_privacy_min_samples``, the subsample baseline's condition for its guarantee) stays.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import dpdist.privacy

PRIVACY = Path(dpdist.privacy.__file__).resolve().parent

#: Names that say "utility": an error bound, a least-n search, a plan.
UTILITY_NAME = re.compile(r"error_bound|min_samples|Plan\b|^plan_|_plan$")
#: Sample sizes that are conditions of a privacy guarantee, not of utility.
PRIVACY_CONDITIONS = {"baseline_privacy_min_samples"}


def _definitions() -> list[tuple[str, int, str]]:
    """(module, line, name) of every module-level function, class and constant of privacy/."""
    found = []
    for path in sorted(PRIVACY.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                found.append((path.relative_to(PRIVACY).as_posix(), node.lineno, node.name))
            elif isinstance(node, ast.Assign):
                found += [(path.relative_to(PRIVACY).as_posix(), node.lineno, t.id)
                          for t in node.targets if isinstance(t, ast.Name)]
    return found


def test_privacy_defines_no_error_bound_min_samples_or_plan():
    bad = [f"{mod}:{line} {name}" for mod, line, name in _definitions()
           if UTILITY_NAME.search(name) and name not in PRIVACY_CONDITIONS]
    assert not bad, "utility code in privacy/ (move it beside its estimator): " + ", ".join(bad)


def test_privacy_imports_no_plan():
    bad = []
    for path in sorted(PRIVACY.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and (
                    node.module.endswith(".plan") or any(a.name == "Plan" for a in node.names)):
                bad.append(f"{path.relative_to(PRIVACY).as_posix()}:{node.lineno}")
    assert not bad, "privacy/ imports a plan: " + ", ".join(bad)
    assert not (PRIVACY / "plan.py").exists()


def test_the_scan_sees_the_privacy_condition_it_keeps():
    """The rule is not vacuous: the scan finds privacy/'s definitions, among them the one
    sample-size condition that is a privacy condition and stays."""
    names = {name for _, _, name in _definitions()}
    assert "baseline_privacy_min_samples" in names
    assert "privcov_calibration" in names
