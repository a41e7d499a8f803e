"""The command line's banners come from the category of a warning, never from its wording.

Each banner is checked both ways: a warning of the banner's category with wording the banner
never had still raises it, and a warning of another category with the wording that used to
raise it does not. The library's own warnings are checked to carry the categories.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dpdist
from dpdist.algorithms.baselines import ThresholdedCovariance
from dpdist.cli._banners import privacy_banners, privacy_warnings
from dpdist.exceptions import (
    NotPrivateWarning,
    PrivacyWarning,
    SeededReleaseWarning,
    UtilityWarning,
    VacuousReleaseWarning,
)
from dpdist.privacy.release import SEEDED_REASON
from tests.estimator_zoo import FITS, gauss

SEEDED_META = {"mechanism": "M", "seeding": {"mode": "seeded"}, "private": False,
               "not_private_reasons": [SEEDED_REASON]}


def banners(*raised: tuple[type[Warning], str], metas=()) -> list[str]:
    """The banners for the warnings ``raised`` (category, message) inside a command."""
    with privacy_warnings() as warned:
        for category, text in raised:
            warnings.warn(text, category)
    return privacy_banners(*metas, warned=warned)


# ---------------------------------------------------------------------------------------
# seeded
# ---------------------------------------------------------------------------------------


def test_a_seeded_release_warning_is_the_seeded_banner_whatever_it_says():
    # worded without "seed": still the seeded kind, said once beside the metadata's banner
    assert banners((SeededReleaseWarning, "reproducible noise: anyone can subtract it")) == [
        "reproducible noise: anyone can subtract it"]
    assert banners((SeededReleaseWarning, "reproducible noise"), metas=[SEEDED_META]) == [
        "SEEDED noise (--random-state): reproducible, so NOT a private release; for tests only"]


def test_a_plain_privacy_warning_that_mentions_a_seed_is_not_the_seeded_banner():
    assert banners((PrivacyWarning, "the noise is seeded: this release is not private")) == [
        "WARNING: the noise is seeded: this release is not private"]


# ---------------------------------------------------------------------------------------
# NOT PRIVATE / unsafe_no_privacy
# ---------------------------------------------------------------------------------------


def test_a_not_private_warning_is_the_unsafe_banner_whatever_it_says():
    assert banners((NotPrivateWarning, "no guarantee at all")) == ["no guarantee at all"]
    meta = {"mechanism": "M", "private": False, "not_private_reasons": ["x"]}
    assert banners((NotPrivateWarning, "no guarantee at all"), metas=[meta]) == [
        "NOT PRIVATE: M gives no differential-privacy guarantee"]


def test_a_plain_privacy_warning_saying_not_private_is_not_the_unsafe_banner():
    assert banners((PrivacyWarning, "M: NOT PRIVATE: unsafe_no_privacy=True")) == [
        "WARNING: M: NOT PRIVATE: unsafe_no_privacy=True"]


# ---------------------------------------------------------------------------------------
# vacuous
# ---------------------------------------------------------------------------------------


def test_a_vacuous_release_warning_is_the_vacuous_banner_whatever_it_says():
    # said after the privacy banners, and not again when the metadata says it
    assert banners((VacuousReleaseWarning, "the bound exceeds the scale"), (NotPrivateWarning, "n")) == [
        "n", "the bound exceeds the scale"]
    meta = {"mechanism": "M", "parameters": {"utility": {"vacuous": True, "vacuous_reason": "r"}}}
    assert banners((VacuousReleaseWarning, "the bound exceeds the scale"), metas=[meta]) == [
        "VACUOUS release of M: r; at this size its guarantee says nothing about the released values (see --plan)"]


def test_a_plain_utility_warning_worded_vacuous_is_not_the_vacuous_banner():
    meta = {"mechanism": "M", "parameters": {"utility": {"vacuous": True, "vacuous_reason": "r"}}}
    # the metadata's vacuous banner does not swallow it: it is another kind, shown as is
    assert banners((UtilityWarning, "VACUOUS release of M: r"), metas=[meta]) == [
        "WARNING: VACUOUS release of M: r",
        "VACUOUS release of M: r; at this size its guarantee says nothing about the released values (see --plan)"]


def test_other_warnings_pass_through_and_are_no_banner():
    with pytest.warns(RuntimeWarning, match="unrelated"):
        assert banners((RuntimeWarning, "unrelated: seeded, NOT PRIVATE, VACUOUS")) == []


# ---------------------------------------------------------------------------------------
# the library raises the categories the banners read
# ---------------------------------------------------------------------------------------


def _caught(fn) -> list[warnings.WarningMessage]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return [w for w in caught if issubclass(w.category, (PrivacyWarning, UtilityWarning))]


def test_a_seeded_fit_warns_seeded_release():
    fit, data = FITS["GaussianCovariance"]
    X = data()
    assert [w.category for w in _caught(lambda: fit(X, 3, "synchronous")) if issubclass(w.category, PrivacyWarning)] \
        == [SeededReleaseWarning]


def test_a_not_private_baseline_warns_not_private():
    X = gauss()
    caught = _caught(lambda: ThresholdedCovariance(threshold=0.1, scheduler="synchronous").fit(X))
    assert [w.category for w in caught if issubclass(w.category, PrivacyWarning)] == [NotPrivateWarning]


def test_a_vacuous_fit_warns_vacuous_release():
    X = np.random.default_rng(0).standard_normal((10, 4))  # PrivCov on 10 rows: its bound says nothing
    caught = _caught(lambda: dpdist.SparseCovariance(2, 1.0, 1e-5, clip=2.0, scheduler="synchronous").fit(X))
    assert [w.category for w in caught if issubclass(w.category, UtilityWarning)] == [VacuousReleaseWarning]
