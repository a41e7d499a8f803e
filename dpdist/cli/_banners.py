"""The banners a command prints on stderr for seeded, NOT PRIVATE, unsafe and vacuous releases,
from the releases' metadata and the privacy and utility warnings collected while they ran.
"""

from __future__ import annotations

import contextlib
import sys
import warnings
from typing import Iterable, Iterator

__all__ = ["banner", "privacy_banners", "privacy_warnings"]


@contextlib.contextmanager
def privacy_warnings() -> Iterator[list[tuple[type[Warning], str]]]:
    """Collect the :class:`dpdist.PrivacyWarning` and :class:`dpdist.UtilityWarning` raised
    inside, as ``(category, message)`` pairs (they become banners); other warnings pass through
    unchanged."""
    from dpdist.exceptions import PrivacyWarning, UtilityWarning

    warned: list[tuple[type[Warning], str]] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PrivacyWarning)
        warnings.simplefilter("always", UtilityWarning)
        try:
            yield warned
        finally:
            others = []
            for w in caught:
                if issubclass(w.category, (PrivacyWarning, UtilityWarning)):
                    if (w.category, str(w.message)) not in warned:
                        warned.append((w.category, str(w.message)))
                else:
                    others.append(w)
    for w in others:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)


def _banner_kind(category: type[Warning]) -> str | None:
    """The banner a warning category raises: ``"seeded"``, ``"unsafe"``, ``"vacuous"``, or None
    for a warning of another kind (shown as it is)."""
    from dpdist.exceptions import NotPrivateWarning, SeededReleaseWarning, VacuousReleaseWarning

    for cls, kind in ((SeededReleaseWarning, "seeded"), (NotPrivateWarning, "unsafe"),
                      (VacuousReleaseWarning, "vacuous")):
        if issubclass(category, cls):
            return kind
    return None


def privacy_banners(*metas: dict | None, warned: Iterable[tuple[type[Warning], str]] = ()) -> list[str]:
    """Banner lines for the unsafe modes of releases: seeded noise, NOT PRIVATE,
    ``unsafe_no_privacy``, and for vacuous releases; from their metadata and from the warnings
    :func:`privacy_warnings` collected.

    Each kind is said once, whichever of the two flagged it (the library may flag a mode in
    the metadata, with a warning, or both). A warning's kind is its category
    (:class:`~dpdist.exceptions.SeededReleaseWarning`,
    :class:`~dpdist.exceptions.NotPrivateWarning`,
    :class:`~dpdist.exceptions.VacuousReleaseWarning`), never its wording; a warning of another
    category is shown as is.
    """
    kinds: dict[str, str] = {}
    vacuous: dict[str, str] = {}  # said after the privacy banners
    for meta in metas:
        meta = meta or {}
        utility = (meta.get("parameters") or {}).get("utility") or {}
        if utility.get("vacuous"):
            vacuous.setdefault(meta.get("mechanism", ""), f"VACUOUS release of {meta.get('mechanism', 'this result')}: "
                                                          f"{utility.get('vacuous_reason')}; at this size its "
                                                          "guarantee says nothing about the released values (see --plan)")
        seeded = (meta.get("seeding") or {}).get("mode") == "seeded"
        if seeded:
            kinds.setdefault("seeded", "SEEDED noise (--random-state): reproducible, so NOT a private "
                                       "release; for tests only")
        if (meta.get("parameters") or {}).get("unsafe_no_privacy"):
            kinds.setdefault("unsafe", "--unsafe-no-privacy: the mechanism's privacy precondition does not "
                                       "hold; the result is NOT PRIVATE")
        seeded_only = seeded and len(meta.get("not_private_reasons") or ()) <= 1
        if meta.get("private") is False and not seeded_only:  # a seeded release has its own banner
            kinds.setdefault("unsafe", f"NOT PRIVATE: {meta.get('mechanism', 'this result')} gives no "
                                       "differential-privacy guarantee")
    others = []
    said = bool(vacuous)  # the metadata says it; the VacuousReleaseWarnings repeat it
    for category, text in warned:
        kind = _banner_kind(category)
        if kind == "vacuous":
            if not said:
                vacuous.setdefault(text, text)
        elif kind is None:
            others.append(f"WARNING: {text}")
        else:
            kinds.setdefault(kind, text)
    return [*kinds.values(), *others, *vacuous.values()]


def banner(args, lines: Iterable[str]) -> None:
    """Print each line on stderr as ``dpdist COMMAND: !! line``."""
    for line in lines:
        print(f"dpdist {args.command}: !! {line}", file=sys.stderr)
