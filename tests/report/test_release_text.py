"""The release summary a person reads first: no paper line numbers, lattice exponents or
sampler residuals; those notes stay in the metadata and the summary says how many."""

from __future__ import annotations

import re
import warnings

import pytest

from dpdist.report.text import format_release, is_technical_note
from tests.estimator_zoo import FITS, release_of

REVIEWER_WORDS = re.compile(r"\bline \d+|2\*\*-\d+|\bresidual\b|\blattice\b|\bGAP \d+")


def _meta(name: str) -> dict:
    fit, data = FITS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return release_of(fit(data(), 0, "synchronous")).metadata()


@pytest.mark.parametrize("name", ["SparseCovariance", "SecondMoment", "SparsePCA"])
def test_summary_keeps_reviewer_detail_in_the_metadata(name):
    meta = _meta(name)
    text = format_release(meta)
    technical = [n for n in meta["notes"] if REVIEWER_WORDS.search(n)]
    assert technical  # the metadata keeps them
    assert not REVIEWER_WORDS.search(text), text
    counted = sum(map(is_technical_note, meta["notes"]))
    assert counted >= len(technical)
    assert f"details   : {counted} technical note" in text


def test_notes_for_people_are_printed_and_carry_no_review_labels():
    meta = _meta("SecondMoment")
    text = format_release(meta)
    assert not any(re.match(r"GAP \d+", n) for n in meta["notes"])  # the decision, not a label
    assert "uncentred second moment (1/n) sum x x^T; no private mean step" in meta["notes"]
    assert "note      : uncentred second moment (1/n) sum x x^T; no private mean step" in text
    assert "VACUOUS release" in text


@pytest.mark.parametrize(("note", "technical"), [
    ("Laplace scale: paper (Algorithm 1 line 4, with k+1)", True),
    ("float-safe noise: laplace law on the lattice 2**-24; sampler exhaustion residual below 2.8e-300", True),
    ("rows holding NaN or inf are replaced by zero rows before any statistic", False),
    ("VACUOUS release: predicted error 25 >= scale 1 (sigma**2)", False),
    ("components are post-processing of the released covariance", False),
])
def test_which_notes_are_technical(note, technical):
    assert is_technical_note(note) is technical
