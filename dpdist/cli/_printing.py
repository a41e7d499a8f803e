"""What a command prints on stdout: JSON documents, aligned ``key : value`` lines and plans."""

from __future__ import annotations

import json
import sys
from typing import Iterable

from dpdist.cli._banners import banner

__all__ = ["print_json", "print_mapping", "print_plan"]


def print_json(obj) -> None:
    json.dump(obj, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def print_mapping(mapping: dict, as_json: bool, *, skip: Iterable[str] = ("calibration",), width: int = 22) -> None:
    """Print a plan-like mapping as JSON or as aligned ``key : value`` lines."""
    if as_json:
        print_json(mapping)
        return
    for key, value in mapping.items():
        if key not in skip:
            print(f"{key:>{width}} : {value}")


def print_plan(args, plan, extra: dict | None = None, *, width: int = 22) -> int:
    """Print what ``--plan`` computed: the :class:`~dpdist.algorithms.plan.Plan`'s fields (and
    ``extra`` ones) as aligned lines, or one JSON document with ``--json``. A vacuous plan (the
    predicted error is at least the scale of the quantity) also gets a ``!!`` banner on stderr.
    Returns the exit code (0)."""
    mapping = {**plan.to_dict(), **(extra or {})}
    if not args.json:  # one readable line per measurement instead of a dict
        found = mapping.pop("empirical", ())
        if not found:
            mapping["empirical"] = "never measured at this n_features"
        for e in found:
            mapping[f"empirical n* ({e['mode']})"] = (
                f"{e['n_star']:.3g} for {e['target']} on {e['instance_family']} at (epsilon={e['epsilon']:g}, "
                f"delta={e['delta']:g}), {1 - e['beta']:g} of runs [{e['source']}, {e['date']}]")
    print_mapping(mapping, args.json, skip=("calibration", "schedule"), width=width)
    if plan.vacuous:
        banner(args, [f"VACUOUS plan: {plan.vacuous_reason}"])
    return 0
