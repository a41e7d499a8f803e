"""``dpdist`` command line: parses, calls the library, prints. Computes nothing itself.

Each sub-command lives in its own module under ``dpdist.cli`` exposing ``register(sub)``,
which adds its parser and sets ``func``; :data:`COMMANDS` lists the modules.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from dpdist._version import __version__

COMMANDS = ("demo", "generate", "covariance", "second_moment", "pca", "norm", "audit", "experiment")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dpdist",
        description="Differentially private covariance, sparse covariance, PCA and second "
        "moments of chunked Zarr data on Dask.",
    )
    parser.add_argument("--version", action="version", version=f"dpdist {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        importlib.import_module(f"dpdist.cli.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    from dpdist.exceptions import EXIT_INTERRUPTED, DpdistError

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except DpdistError as exc:  # exit codes: see dpdist.exceptions
        print(f"dpdist {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except FileNotFoundError as exc:
        print(f"dpdist {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"dpdist {args.command}: interrupted; nothing was written", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
