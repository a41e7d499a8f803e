"""Short form of the by-hand validation (dpdist experiment validate-simulation): the
simulated error distributions agree with the real pipeline's (two-sample KS and Mann-Whitney,
Bonferroni over the points; the long form runs d in {50, 200} and n up to 1e7)."""

from __future__ import annotations

import pytest

from tests.conftest import LONG


@pytest.mark.statistical
def test_simulation_matches_the_real_pipeline():
    from dpdist.experiments.validation import FULL_POINTS, run_validation

    res = run_validation(FULL_POINTS if LONG else None, smoke=not LONG, reps_sim=300 if LONG else 150,
                         log=lambda s: None)
    bad = [(p["method"], p["d"], p["n"], p["ks_pvalue"], p["mannwhitney_pvalue"]) for p in res["points"]
           if not p["passes"]]
    assert res["all_pass"], bad
