"""Flags and printing shared by the sub-commands."""

from __future__ import annotations

import argparse
import json
import sys

__all__ = ["add_output_args", "add_runtime_args", "print_json"]


def add_runtime_args(p: argparse.ArgumentParser) -> None:
    """--random-state, --scheduler, --progress/--no-progress (mirroring the Python API)."""
    p.add_argument("--random-state", type=int, default=None,
                   help="seed the noise (reproducible; tests only). Default: OS entropy")
    p.add_argument("--scheduler", default=None,
                   help="'synchronous', 'threads', 'processes', or a cluster address "
                        "tcp://HOST:PORT. Default: a local Dask cluster sized to this machine")
    p.add_argument("--progress", dest="progress", action="store_true", default=None,
                   help="show a progress bar (default: only on a terminal)")
    p.add_argument("--no-progress", dest="progress", action="store_false")


def add_output_args(p: argparse.ArgumentParser, required: bool = True) -> None:
    p.add_argument("--output", "-o", required=required, help="result Zarr group to write (atomically)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output")
    p.add_argument("--json", action="store_true", help="print the release metadata as JSON")


def print_json(obj) -> None:
    json.dump(obj, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")
