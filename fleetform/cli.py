"""The `fleetform` command: one small module per subcommand under fleetform/commands/.

Exit codes: 0 success, 1 the blueprint or a check failed, 2 usage error (bad arguments, a file
that cannot be read), 3 an internal error (a bug in fleetform: please report it).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Sequence

from . import __version__
from .commands import catalog, diff, plan, render, rules, schema, validate

COMMANDS = (validate, render, plan, diff, schema, catalog, rules)

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3


class UsageError(Exception):
    """A problem with how fleetform was called; exit 2."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fleetform",
        description="Validate GPU fleet blueprints and render them into Slurm, NCCL, Kubernetes and Pulumi.",
    )
    parser.add_argument("--version", action="version", version=f"fleetform {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in COMMANDS:
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except UsageError as err:
        print(f"fleetform: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # `fleetform schema | head`
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except KeyboardInterrupt:
        return 130
    except Exception as err:  # a bug, never a blueprint problem: those are findings
        if os.environ.get("FLEETFORM_DEBUG"):
            raise
        print(f"fleetform: internal error: {type(err).__name__}: {err}\n"
              "This is a bug in fleetform, not in your blueprint. Run again with FLEETFORM_DEBUG=1 "
              "for the traceback and report it.", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
